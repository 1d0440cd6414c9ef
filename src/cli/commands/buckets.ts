// `hashgate buckets`: bucket balance of murmur mod N vs jump hash vs a hash ring: mean and
// standard deviation plus min/max, max/mean, chi-square p-value and the share
// of keys that move when the bucket count changes.
import { parseArgs } from 'node:util';
import { flagError } from '../flags.js';
import { fail, wantsJson } from '../output.js';
import { analyseFiles, analyseSynthetic, DEFAULTS, type BalanceReport } from '../../analysis/balance.js';

const HELP = `usage: hashgate buckets (--synthetic N | <file|dir|glob>...) [flags]
  --synthetic N     analyse N synthetic name+ID keys instead of files
  --buckets N       bucket count (default ${DEFAULTS.buckets})
  --to M            second bucket count for "keys moved" (default 2 x buckets)
  --vnodes V        virtual nodes per bucket on the hash ring (default ${DEFAULTS.vnodes})
  --delimiter C     field delimiter of the files (default '|')
  --fields 0,1      fields forming the key (default: all, concatenated)
  --max-memory-mb M memory for the distinct-key set (default 1024); larger exports are
                    de-duplicated through temporary files in the OS temp directory
  --json            print the report as one line of JSON
Every figure counts distinct keys: a repeated row is one member of its bucket's set.`;

function intFlag(flag: string, v: string | undefined, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new RangeError(`${flag} must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
  return n;
}

export function formatReport(r: BalanceReport): string {
  const rows = r.methods.map((m) => {
    const s = m.stats;
    return [
      m.method.padEnd(5),
      s.mean.toFixed(1).padStart(9),
      s.stddev.toFixed(2).padStart(9),
      String(s.min).padStart(7),
      String(s.max).padStart(7),
      s.maxOverMean.toFixed(3).padStart(8),
      s.chiSquare.toFixed(1).padStart(10),
      s.pValue.toExponential(2).padStart(9),
      `${(m.resize.fraction * 100).toFixed(1)}%`.padStart(9),
      `${(m.addOne.fraction * 100).toFixed(1)}%`.padStart(9),
    ].join(' ');
  });
  const head = ['method', '    mean', '   stddev', '    min', '    max', 'max/mean', ' chi-square', ' p-value', `moved->${r.methods[0]?.resize.to}`, `moved->${r.buckets + 1}`].join(' ');
  return [
    `${r.rows} rows, ${r.keys} distinct keys into ${r.buckets} buckets (ring: ${r.vnodes} virtual nodes per bucket)`,
    head,
    ...rows,
    `minimum possible moves: ${((r.methods[0]?.resize.minimumFraction ?? 0) * 100).toFixed(1)}% (${r.buckets} -> ${r.methods[0]?.resize.to}), ${((r.methods[0]?.addOne.minimumFraction ?? 0) * 100).toFixed(2)}% (${r.buckets} -> ${r.buckets + 1})`,
    ...r.skipped.map((k) => `${k.method}: left out: ${k.reason}`),
    'p-value: chance of an imbalance at least this large under a perfectly uniform hash; tiny = not uniform.',
  ].join('\n');
}

const FLAGS = {
  synthetic: { type: 'string' },
  buckets: { type: 'string' },
  to: { type: 'string' },
  vnodes: { type: 'string' },
  'max-memory-mb': { type: 'string' },
  delimiter: { type: 'string' },
  fields: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export async function run(argv: string[]): Promise<number> {
  const json = wantsJson(argv);
  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  try {
    try {
      ({ values, positionals } = parseArgs({ args: argv, allowPositionals: true, strict: true, options: FLAGS }) as {
        values: Record<string, string | boolean | undefined>;
        positionals: string[];
      });
    } catch (err) {
      throw flagError(err, FLAGS);
    }
  } catch (err) {
    return fail('buckets', err, 2, { json, help: HELP });
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  try {
    const str = (k: string): string | undefined => values[k] as string | undefined;
    const synthetic = intFlag('--synthetic', str('synthetic'), 1, 1e10);
    if (synthetic === undefined && positionals.length === 0) throw new TypeError('give --synthetic N or input files (hashgate buckets --help)');
    if (synthetic !== undefined && positionals.length > 0) throw new TypeError('--synthetic and input files are mutually exclusive');
    const buckets = intFlag('--buckets', str('buckets'), 1, 1 << 23);
    const to = intFlag('--to', str('to'), 1, 1 << 24);
    const maxMemoryMB = intFlag('--max-memory-mb', str('max-memory-mb'), 1, 1 << 20);
    const vnodes = intFlag('--vnodes', str('vnodes'), 1, 10_000);
    let delimiter: number | undefined;
    if (str('delimiter') !== undefined) {
      const d = Buffer.from(str('delimiter') === 'tab' ? '\t' : str('delimiter')!);
      if (d.length !== 1) throw new TypeError(`--delimiter must be one byte, got ${JSON.stringify(str('delimiter'))}`);
      delimiter = d[0];
    }
    const fields = str('fields') === undefined ? null : str('fields')!.split(',').map((f) => intFlag('--fields', f.trim(), 0, 255)!);
    const opts = { buckets, resizeTo: to, vnodes, delimiter, fields, maxMemoryMB };
    const report = synthetic !== undefined ? analyseSynthetic(synthetic, opts) : await analyseFiles(positionals, opts);
    if (values.json) console.log(JSON.stringify(report));
    else console.log(formatReport(report));
    return 0;
  } catch (err) {
    return fail('buckets', err, err instanceof TypeError || err instanceof RangeError ? 2 : 1, { json });
  }
}
