// Turns suite results (bench/results/*.json) into bench/REPORT.md and SVG charts (bench/charts/).
// Pure functions + one writer so tests can feed synthetic results and parse the output.

import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { computeRatios, machineInfo, repoRoot, resultsDir } from './common.js';
import type { BenchRow, MachineInfo, Role, SuiteResult, Sweep, TargetResult } from './common.js';
import { barChart, formatSi, lineChart } from './svg.js';
import type { BarGroup } from './svg.js';

export const SUMMARY_START = '<!-- hashgate-bench-summary:start -->';
export const SUMMARY_END = '<!-- hashgate-bench-summary:end -->';

export function slug(s: string): string {
  return s.toLowerCase().replace(/[^a-z0-9_-]+/g, '-').replace(/^-+|-+$/g, '') || 'x';
}

/** 'FAILED' when the implementation threw (could not be run or checked), else 'WRONG' (bad answers). */
export function failLabel(r: BenchRow): 'WRONG' | 'FAILED' {
  return /^(check )?threw/.test(r.error ?? '') ? 'FAILED' : 'WRONG';
}

function roleOf(r: BenchRow): Role {
  return r.role ?? (r.impl.toLowerCase().startsWith('hashgate') ? 'hashgate' : 'peer');
}

/** Rows grouped by measure name, in first-seen order. */
export function groupRows(rows: readonly BenchRow[]): Map<string, BenchRow[]> {
  const g = new Map<string, BenchRow[]>();
  for (const r of rows) {
    const list = g.get(r.name);
    if (list) list.push(r);
    else g.set(r.name, [r]);
  }
  return g;
}

/** Ratios are recomputed so that hand-written suite JSON (without them) still reports correctly. */
export function normalize(result: SuiteResult): SuiteResult {
  const rows = (Array.isArray(result.rows) ? result.rows : []).map((r) => ({ ...r }));
  computeRatios(rows);
  return { ...result, rows, targets: Array.isArray(result.targets) ? result.targets : [] };
}

/**
 * A memory measure: every row of the group carries extra.bytesPerKey. Its opsPerSec is only the
 * rate at which the keys were loaded; the measure is the footprint, so the chart draws bytes/key.
 */
function bytesPerKeyOf(list: readonly BenchRow[]): number[] | undefined {
  const out: number[] = [];
  for (const r of list) {
    const b = r.extra?.['bytesPerKey'];
    if (typeof b !== 'number' || !Number.isFinite(b)) return undefined;
    out.push(b);
  }
  return out;
}

export function suiteChart(result: SuiteResult): string | undefined {
  const rows = result.rows;
  if (!rows.length) return undefined;
  const groups: BarGroup[] = [];
  for (const [name, list] of groupRows(rows)) {
    const bpk = bytesPerKeyOf(list);
    if (bpk !== undefined) {
      const bars = list.map((r, i) =>
        r.ok === false
          ? { label: r.impl, value: bpk[i]!, kind: 'wrong' as const, note: `${failLabel(r)}: ${r.error ?? 'check failed'}` }
          : { label: r.impl, value: bpk[i]!, kind: roleOf(r) },
      );
      // smallest footprint first; wrong rows last
      bars.sort((a, b) => (a.kind === 'wrong' ? 1 : 0) - (b.kind === 'wrong' ? 1 : 0) || a.value - b.value);
      groups.push({ label: `${name} (bytes/key, lower is better)`, unit: 'B/key', bars });
      continue;
    }
    const sorted = [...list].sort((a, b) => (a.ok === false ? 1 : 0) - (b.ok === false ? 1 : 0) || b.opsPerSec - a.opsPerSec);
    const units = [...new Set(list.map((r) => r.unit ?? 'ops/s'))];
    groups.push({
      label: name,
      unit: units.length === 1 ? (units[0] as string) : '',
      bars: sorted.map((r) => {
        const kind = r.ok === false ? 'wrong' : roleOf(r);
        const note = r.ok === false ? `${failLabel(r)}: ${r.error ?? 'check failed'}` : r.ratioToBestPeer !== undefined ? `${r.ratioToBestPeer.toFixed(2)}x best peer` : undefined;
        return note === undefined ? { label: r.impl, value: r.opsPerSec, kind } : { label: r.impl, value: r.opsPerSec, kind, note };
      }),
    });
  }
  const m = result.machine;
  return barChart({
    title: `hashgate bench: ${result.suite}`,
    subtitle: `throughput per implementation (higher is better; each measure scaled to its own maximum) - ${m.cores} cores, Node ${m.node}${result.quick ? ', quick run' : ''}`,
    groups,
  });
}

export function sweepChart(suite: string, s: Sweep): string {
  return lineChart({
    title: `hashgate bench: ${suite} - ${s.name}`,
    xLabel: s.xLabel,
    yLabel: s.yLabel,
    series: s.series,
    ...(s.logX !== undefined ? { logX: s.logX } : {}),
    ...(s.logY !== undefined ? { logY: s.logY } : {}),
  });
}

function fmtNum(v: number | undefined): string {
  return v === undefined || !Number.isFinite(v) ? '' : formatSi(v);
}

function cell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

function fmtActual(t: TargetResult): string {
  if (t.actual === null) return 'not measured';
  if (typeof t.actual === 'number') return `${Number(t.actual.toPrecision(4))}${t.unit ?? ''}`;
  return t.actual;
}

function fmtWanted(t: TargetResult): string {
  return typeof t.target === 'number' ? `${t.comparator ?? '>='} ${t.target}${t.unit ?? ''}` : t.target;
}

function fmtMet(t: TargetResult): string {
  return t.met === null ? 'not measured' : t.met ? 'met' : '**MISSED**';
}

export interface ReportOptions {
  generatedAt?: string;
  command?: string;
  /** Chart paths relative to the report, by suite: bars first, then sweeps. */
  charts?: Map<string, string[]>;
  machine?: MachineInfo | { cores: number; node: string };
}

function machineLine(m: MachineInfo | { cores: number; node: string }, withCpu = true): string {
  const full = m as Partial<MachineInfo>;
  const bits = [`${m.cores} cores`];
  if (withCpu && full.cpuModel) bits.push(full.cpuModel);
  if (full.totalMemBytes) bits.push(`${(full.totalMemBytes / 2 ** 30).toFixed(1)} GiB RAM`);
  bits.push(`Node ${m.node}`);
  if (full.platform) bits.push(`${full.platform}/${full.arch ?? ''}`);
  return bits.join(', ');
}

/**
 * The machine line of a report made of suites measured apart (--keep-old keeps earlier runs'):
 * the first suite's machine, and the CPU models when the suites ran on more than one, so a
 * summary never names one CPU for numbers measured on another.
 */
function machinesLine(results: readonly SuiteResult[], fallback: MachineInfo | { cores: number; node: string }): string {
  const cpuOf = (r: SuiteResult): string | undefined => (r.machine as Partial<MachineInfo> | undefined)?.cpuModel;
  const models = [...new Set(results.map(cpuOf).filter((m) => m !== undefined))];
  const first = results.find((r) => r.machine)?.machine ?? fallback;
  if (models.length <= 1) return machineLine(first);
  const by = models.map((m) => `${m}: ${results.filter((r) => cpuOf(r) === m).map((r) => r.suite).join(', ')}`);
  return `${machineLine(first, false)} (suites measured on different CPUs; ${by.join('; ')})`;
}

/** The table the README embeds: per measure with a peer, hashgate's best variant vs the best peer; then every target. */
export function renderSummary(input: readonly SuiteResult[]): string {
  const results = input.map(normalize);
  const out: string[] = [];
  out.push('| Suite | Measure | hashgate | ops/s | Best peer | ops/s | Ratio |', '|---|---|---|---:|---|---:|---:|');
  let any = false;
  let withoutPeer = 0;
  for (const r of results) {
    for (const [name, list] of groupRows(r.rows)) {
      const best = list.find((x) => x.bestPeer !== undefined && x.impl === x.bestPeer);
      const ours = list.filter((x) => roleOf(x) === 'hashgate');
      if (!ours.length) continue;
      if (!best) {
        withoutPeer++;
        continue;
      }
      // One line per measure: hashgate's fastest correct variant (all variants are in the suite section).
      const okOurs = ours.filter((x) => x.ok !== false).sort((a, b) => b.opsPerSec - a.opsPerSec);
      for (const h of okOurs.length ? okOurs.slice(0, 1) : ours.slice(0, 1)) {
        any = true;
        const ours = h.ok === false ? `${failLabel(h)} (${h.error ?? 'check failed'})` : fmtNum(h.opsPerSec);
        const ratio = h.ratioToBestPeer !== undefined ? `**${h.ratioToBestPeer.toFixed(2)}x**` : '';
        out.push(`| ${cell(r.suite)} | ${cell(name)} | ${cell(h.impl)} | ${cell(ours)} | ${cell(best?.impl ?? '-')} | ${fmtNum(best?.opsPerSec)} | ${ratio} |`);
      }
    }
  }
  if (!any) out.push('| - | no hashgate row measured against a peer | | | | | |');
  if (withoutPeer) out.push('', `${withoutPeer} more measure(s) without a peer (sweeps, memory, variants) are in the suite sections of the report.`);
  const targets = results.flatMap((r) => r.targets.map((t) => ({ suite: r.suite, t })));
  out.push('', '| Suite | Target | Wanted | Actual | Status |', '|---|---|---|---|---|');
  if (!targets.length) out.push('| - | no targets reported | | | |');
  for (const { suite, t } of targets) {
    out.push(`| ${cell(suite)} | ${cell(t.name)} | ${cell(fmtWanted(t))} | ${cell(fmtActual(t))} | ${fmtMet(t)}${t.note ? ' - ' + cell(t.note) : ''} |`);
  }
  const met = targets.filter((x) => x.t.met === true).length;
  const missed = targets.filter((x) => x.t.met === false).length;
  const unmeasured = targets.length - met - missed;
  out.push('', `Targets: ${met} met, ${missed} missed, ${unmeasured} not measured.`);
  return out.join('\n');
}

/**
 * The README's short form: one line per suite, the spread of hashgate-to-best-peer ratios over its
 * measures (each measure counted once, by hashgate's fastest correct variant) and its targets.
 */
export function renderDigest(input: readonly SuiteResult[]): string {
  const results = input.map(normalize);
  const out: string[] = ['| Suite | Measures vs a peer | Median ratio | Lowest | Highest | Targets met |', '|---|---:|---:|---:|---:|---:|'];
  for (const r of results) {
    const ratios: number[] = [];
    for (const list of groupRows(r.rows).values()) {
      const best = list
        .filter((x) => roleOf(x) === 'hashgate' && x.ok !== false && x.ratioToBestPeer !== undefined)
        .sort((a, b) => b.opsPerSec - a.opsPerSec)[0];
      if (best?.ratioToBestPeer !== undefined) ratios.push(best.ratioToBestPeer);
    }
    ratios.sort((a, b) => a - b);
    const met = r.targets.filter((t) => t.met === true).length;
    const x = (v: number | undefined): string => (v === undefined ? '-' : `${v.toFixed(2)}x`);
    const mid = ratios.length >> 1;
    const median = ratios.length === 0 ? undefined : ratios.length % 2 === 1 ? ratios[mid] : (ratios[mid - 1]! + ratios[mid]!) / 2;
    out.push(`| ${cell(r.suite)} | ${ratios.length} | ${x(median)} | ${x(ratios[0])} | ${x(ratios[ratios.length - 1])} | ${r.targets.length ? `${met} of ${r.targets.length}` : '-'} |`);
  }
  const all = results.flatMap((r) => r.targets);
  const missed = all.filter((t) => t.met === false).length;
  const met = all.filter((t) => t.met === true).length;
  out.push('', `Targets: ${met} met, ${missed} missed, ${all.length - met - missed} not measured.`);
  return out.join('\n');
}

export function renderSuite(r: SuiteResult, charts: readonly string[] = []): string {
  const out: string[] = [`## ${r.suite}`, ''];
  if (r.skipped) out.push(`Skipped: ${r.skipped}`, '');
  if (r.error) out.push('**This suite failed:**', '', '```', r.error.trim(), '```', '');
  const meta: string[] = [];
  if (r.machine) meta.push(machineLine(r.machine));
  if (r.quick) meta.push('quick run (tiny sizes; do not quote these numbers)');
  if (r.durationMs !== undefined) meta.push(`took ${(r.durationMs / 1000).toFixed(1)} s`);
  if (meta.length) out.push(`_${meta.join('; ')}_`, '');
  const bars = charts[0];
  if (bars) out.push(`![${r.suite} throughput](${bars})`, '');
  if (r.rows.length) {
    const extraKeys = [...new Set(r.rows.flatMap((x) => Object.keys(x.extra ?? {})))];
    out.push(
      `| Measure | Implementation | Role | ops/s | vs best peer | min / median / max | Samples |${extraKeys.map((k) => ` ${cell(k)} |`).join('')}`,
      `|---|---|---|---:|---:|---|---:|${extraKeys.map(() => '---:|').join('')}`,
    );
    for (const [name, list] of groupRows(r.rows)) {
      const sorted = [...list].sort((a, b) => (a.ok === false ? 1 : 0) - (b.ok === false ? 1 : 0) || b.opsPerSec - a.opsPerSec);
      for (const x of sorted) {
        const wrong = x.ok === false;
        const role = roleOf(x);
        const impl = role === 'hashgate' ? `**${cell(x.impl)}**` : cell(x.impl);
        const ops = wrong ? `${failLabel(x)}: ${cell(x.error ?? 'check failed')} (not ranked)` : `${fmtNum(x.opsPerSec)}${x.unit ? ' ' + cell(x.unit) : ''}`;
        const ratio = !wrong && x.ratioToBestPeer !== undefined ? `${x.ratioToBestPeer.toFixed(2)}x` : '';
        const spread = !wrong && x.min !== undefined ? `${fmtNum(x.min)} / ${fmtNum(x.median)} / ${fmtNum(x.max)}` : '';
        const n = x.sampleCount ?? x.samples?.length;
        const extras = extraKeys.map((k) => {
          const v = x.extra?.[k];
          return ` ${v === undefined ? '' : typeof v === 'number' ? fmtNum(v) : cell(v)} |`;
        });
        out.push(`| ${cell(name)} | ${impl} | ${role} | ${ops} | ${ratio} | ${spread} | ${n ?? ''} |${extras.join('')}`);
      }
    }
    out.push('');
  } else if (!r.error && !r.skipped) out.push('No rows reported.', '');
  if (r.targets.length) {
    out.push('| Target | Wanted | Actual | Status |', '|---|---|---|---|');
    for (const t of r.targets) out.push(`| ${cell(t.name)} | ${cell(fmtWanted(t))} | ${cell(fmtActual(t))} | ${fmtMet(t)}${t.note ? ' - ' + cell(t.note) : ''} |`);
    out.push('');
  }
  for (const c of charts.slice(1)) out.push(`![${r.suite} sweep](${c})`, '');
  for (const n of r.notes ?? []) out.push(`- ${n}`);
  if (r.notes?.length) out.push('');
  return out.join('\n');
}

export function renderReport(results: readonly SuiteResult[], o: ReportOptions = {}): string {
  const norm = results.map(normalize);
  const line = o.machine !== undefined ? machineLine(o.machine) : machinesLine(norm, machineInfo());
  const out: string[] = [
    '# hashgate performance report',
    '',
    `Generated ${o.generatedAt ?? new Date().toISOString()} by \`${o.command ?? 'npm run bench'}\` on ${line}.`,
    '',
    'Every implementation answers a correctness check on the same input before it is timed; one that',
    'answers wrongly is marked WRONG (FAILED if it threw) and never ranked. "vs best peer" divides by the fastest correct',
    'non-hashgate implementation of the same measure (baselines such as one awaited call per key are',
    'shown but are not the bar). min / median / max are per-sample throughputs.',
    '',
    SUMMARY_START,
    '## Summary',
    '',
    renderSummary(norm),
    SUMMARY_END,
    '',
  ];
  for (const r of norm) out.push(renderSuite(r, o.charts?.get(r.suite) ?? []));
  return out.join('\n').replace(/\n{3,}/g, '\n\n') + (out.length ? '\n' : '');
}

/** Every bench/results/*.json that parses as a suite result, sorted by suite order then name. */
export function loadResults(dir = resultsDir(), order: readonly string[] = []): SuiteResult[] {
  if (!existsSync(dir)) return [];
  const out: SuiteResult[] = [];
  for (const f of readdirSync(dir)) {
    if (!f.endsWith('.json')) continue;
    try {
      const r = JSON.parse(readFileSync(join(dir, f), 'utf8')) as SuiteResult;
      if (r && typeof r.suite === 'string' && Array.isArray(r.rows)) out.push(r);
    } catch {
      // a half-written or foreign file is not a result
    }
  }
  return sortSuites(out, order);
}

export function sortSuites(results: SuiteResult[], order: readonly string[]): SuiteResult[] {
  const rank = (s: string) => {
    const i = order.indexOf(s);
    return i < 0 ? order.length : i;
  };
  return results.sort((a, b) => rank(a.suite) - rank(b.suite) || a.suite.localeCompare(b.suite));
}

export interface WriteReportOptions {
  /** Directory holding REPORT.md and charts/ (default <repo>/bench). */
  outDir?: string;
  command?: string;
  generatedAt?: string;
  /** README to splice the summary into (only where it has the markers); undefined = leave alone. */
  readme?: string;
}

export const README_PLACEHOLDER = '<!-- PERF-TABLE -->';

/**
 * Replaces the block between SUMMARY_START and SUMMARY_END (or a bare `<!-- PERF-TABLE -->` line)
 * in `readme` with `block`. Returns the new text, or undefined when the README has no marker.
 */
export function spliceReadme(readme: string, block: string): string | undefined {
  const wrapped = `${SUMMARY_START}\n${block.trim()}\n${SUMMARY_END}`;
  const a = readme.indexOf(SUMMARY_START);
  const b = readme.indexOf(SUMMARY_END);
  if (a >= 0 && b > a) return readme.slice(0, a) + wrapped + readme.slice(b + SUMMARY_END.length);
  const p = readme.indexOf(README_PLACEHOLDER);
  if (p >= 0) return readme.slice(0, p) + wrapped + readme.slice(p + README_PLACEHOLDER.length);
  return undefined;
}

/** The README's performance block: one line per suite, then the link to the full report. */
export function readmeBlock(results: readonly SuiteResult[], reportLink: string, machine?: MachineInfo | { cores: number; node: string }): string {
  const norm = results.map(normalize);
  const m = machine !== undefined ? machineLine(machine) : norm.some((r) => r.machine) ? machinesLine(norm, { cores: 0, node: '' }) : undefined;
  const quick = norm.some((r) => r.quick);
  return [
    `Measured ${new Date().toISOString().slice(0, 10)}${m ? ` on ${m}` : ''}${quick ? ' (quick run: tiny sizes)' : ''}. Every measure, target and chart: [${reportLink}](${reportLink}).`,
    '',
    renderDigest(norm),
  ].join('\n');
}

/** Writes charts/<suite>.svg, charts/<suite>-<sweep>.svg and REPORT.md; returns the paths written. */
export function writeReport(results: readonly SuiteResult[], o: WriteReportOptions = {}): { report: string; charts: string[]; readmeUpdated: boolean } {
  const outDir = o.outDir ?? join(repoRoot(), 'bench');
  const chartsDir = join(outDir, 'charts');
  mkdirSync(chartsDir, { recursive: true });
  const written: string[] = [];
  const charts = new Map<string, string[]>();
  const norm = results.map(normalize);
  for (const r of norm) {
    const list: string[] = [];
    const svg = suiteChart(r);
    if (svg) {
      const file = join(chartsDir, `${slug(r.suite)}.svg`);
      writeFileSync(file, svg);
      written.push(file);
      list.push(relative(outDir, file).split('\\').join('/'));
    } else list.push('');
    for (const s of r.sweeps ?? []) {
      const file = join(chartsDir, `${slug(r.suite)}-${slug(s.name)}.svg`);
      writeFileSync(file, sweepChart(r.suite, s));
      written.push(file);
      list.push(relative(outDir, file).split('\\').join('/'));
    }
    charts.set(r.suite, list);
  }
  const report = join(outDir, 'REPORT.md');
  const ro: ReportOptions = { charts };
  if (o.command !== undefined) ro.command = o.command;
  if (o.generatedAt !== undefined) ro.generatedAt = o.generatedAt;
  writeFileSync(report, renderReport(norm, ro));
  let readmeUpdated = false;
  if (o.readme !== undefined && existsSync(o.readme)) {
    const base = dirname(o.readme);
    const rel = (f: string) => relative(base, f).split('\\').join('/');
    const next = spliceReadme(readFileSync(o.readme, 'utf8'), readmeBlock(norm, rel(report)));
    if (next !== undefined) {
      writeFileSync(o.readme, next);
      readmeUpdated = true;
    }
  }
  return { report, charts: written, readmeUpdated };
}
