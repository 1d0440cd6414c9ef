// A strict-enough parser of the Prometheus text exposition format (0.0.4), written for the tests:
// it throws on anything a Prometheus server would reject, so "parses" means "scrapeable".

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: string;
  help: string;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseValue(s: string, line: number): number {
  // Prometheus parses values with Go's ParseFloat: NaN/Inf are case-insensitive.
  const l = s.toLowerCase();
  if (l === 'nan') return NaN;
  if (l === '+inf' || l === 'inf') return Infinity;
  if (l === '-inf') return -Infinity;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) throw new Error(`line ${line}: bad value ${JSON.stringify(s)}`);
  return Number(s);
}

function parseLabels(s: string, line: number): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < s.length) {
    const eq = s.indexOf('=', i);
    if (eq < 0) throw new Error(`line ${line}: label without '='`);
    const name = s.slice(i, eq).trim();
    if (!LABEL.test(name)) throw new Error(`line ${line}: bad label name ${JSON.stringify(name)}`);
    if (s[eq + 1] !== '"') throw new Error(`line ${line}: label value must be quoted`);
    let j = eq + 2;
    let v = '';
    for (;;) {
      const c = s[j];
      if (c === undefined) throw new Error(`line ${line}: unterminated label value`);
      if (c === '\\') {
        const n = s[j + 1];
        if (n === 'n') v += '\n';
        else if (n === '\\' || n === '"') v += n;
        else throw new Error(`line ${line}: bad escape \\${n}`);
        j += 2;
        continue;
      }
      if (c === '"') break;
      v += c;
      j++;
    }
    if (name in out) throw new Error(`line ${line}: duplicate label ${name}`);
    out[name] = v;
    j++;
    if (s[j] === ',') j++;
    i = j;
  }
  return out;
}

function familyOf(sampleName: string, families: Map<string, Family>): Family | undefined {
  const direct = families.get(sampleName);
  if (direct) return direct;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (sampleName.endsWith(suffix)) {
      const f = families.get(sampleName.slice(0, -suffix.length));
      if (f && (f.type === 'histogram' || f.type === 'summary')) return f;
    }
  }
  return undefined;
}

export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const lines = text.split('\n');
  if (text.length > 0 && !text.endsWith('\n')) throw new Error('exposition must end with a newline');
  lines.forEach((raw, idx) => {
    const line = idx + 1;
    if (raw === '') return;
    if (raw.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(raw);
      if (!m) return; // plain comment
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!NAME.test(name)) throw new Error(`line ${line}: bad metric name ${name}`);
      let f = families.get(name);
      if (!f) families.set(name, (f = { name, type: 'untyped', help: '', samples: [] }));
      if (kind === 'TYPE') {
        if (!TYPES.has(rest)) throw new Error(`line ${line}: bad type ${rest}`);
        if (f.samples.length) throw new Error(`line ${line}: TYPE after samples of ${name}`);
        f.type = rest;
      } else f.help = rest;
      return;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$/.exec(raw);
    if (!m) throw new Error(`line ${line}: bad sample ${JSON.stringify(raw)}`);
    const name = m[1] as string;
    const labels = m[3] !== undefined ? parseLabels(m[3], line) : {};
    const value = parseValue(m[4] as string, line);
    const f = familyOf(name, families);
    if (!f) throw new Error(`line ${line}: sample ${name} has no TYPE/HELP family`);
    f.samples.push({ name, labels, value });
  });
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}

function key(labels: Record<string, string>, drop: string): string {
  return JSON.stringify(Object.entries(labels).filter(([k]) => k !== drop).sort());
}

function checkHistogram(f: Family): void {
  const series = new Map<string, { buckets: [number, number][]; count?: number }>();
  for (const s of f.samples) {
    const k = key(s.labels, 'le');
    let e = series.get(k);
    if (!e) series.set(k, (e = { buckets: [] }));
    if (s.name === `${f.name}_bucket`) {
      const le = s.labels.le;
      if (le === undefined) throw new Error(`${f.name}: bucket without le`);
      e.buckets.push([parseValue(le, 0), s.value]);
    } else if (s.name === `${f.name}_count`) e.count = s.value;
  }
  for (const [k, e] of series) {
    for (let i = 1; i < e.buckets.length; i++) {
      const prev = e.buckets[i - 1] as [number, number];
      const cur = e.buckets[i] as [number, number];
      if (cur[0] <= prev[0] || cur[1] < prev[1]) throw new Error(`${f.name}${k}: buckets not cumulative`);
    }
    const last = e.buckets[e.buckets.length - 1];
    if (!last || last[0] !== Infinity) throw new Error(`${f.name}${k}: no +Inf bucket`);
    if (e.count !== last[1]) throw new Error(`${f.name}${k}: _count ${e.count} != +Inf bucket ${last[1]}`);
  }
}

/** Value of one sample (labels must match exactly), or undefined. */
export function sampleValue(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const f of families.values()) {
    for (const s of f.samples) {
      if (s.name !== name) continue;
      const a = Object.entries(s.labels).sort();
      const b = Object.entries(labels).sort();
      if (JSON.stringify(a) === JSON.stringify(b)) return s.value;
    }
  }
  return undefined;
}
