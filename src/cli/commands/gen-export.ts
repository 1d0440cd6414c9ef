// `hashgate gen-export --dir D --files N --rows M`: synthetic Hive-style name|idNo export files.
import { parseArgs } from 'node:util';
import { flagError } from '../flags.js';
import { fail, wantsJson } from '../output.js';
import { generateExport } from '../../loader/generate.js';

const HELP = `usage: hashgate gen-export --dir DIR [flags]
  --files N            files 000000_0 ... (default 4)
  --rows N             rows per file (default 100000)
  --duplicate-rate R   fraction of rows repeating an earlier key, across files (default 0.2)
  --crlf-ratio R       fraction of rows ending in CRLF (default 0)
  --malformed-every N  one line with a wrong field count every N rows (default 0 = none)
  --invalid-utf8-every N  one invalid UTF-8 line every N rows (default 0)
  --empty-every N      one empty line every N rows (default 0)
  --empty-file         add an empty file at the end
  --date-years Y,Y     append a yyyyMMdd field from these years (a per-row window field for
                       hashgate load)
  --seed N             PRNG seed (default 1)
  --json               print the expected counts as one line of JSON`;

const FLAGS = {
  dir: { type: 'string' },
  files: { type: 'string' },
  rows: { type: 'string' },
  'duplicate-rate': { type: 'string' },
  'crlf-ratio': { type: 'string' },
  'malformed-every': { type: 'string' },
  'invalid-utf8-every': { type: 'string' },
  'empty-every': { type: 'string' },
  'empty-file': { type: 'boolean' },
  'date-years': { type: 'string' },
  seed: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export async function run(argv: string[]): Promise<number> {
  const json = wantsJson(argv);
  let v: Record<string, string | boolean | undefined>;
  try {
    v = parseArgs({ args: argv, strict: true, options: FLAGS }).values as Record<string, string | boolean | undefined>;
  } catch (err) {
    return fail('gen-export', flagError(err, FLAGS), 2, { json });
  }
  if (v.help) {
    console.log(HELP);
    return 0;
  }
  const num = (flag: string, dflt: number, min: number, max: number, integer = true): number => {
    const s = v[flag] as string | undefined;
    if (s === undefined) return dflt;
    const n = Number(s);
    if (!Number.isFinite(n) || (integer && !Number.isInteger(n)) || n < min || n > max) {
      throw new RangeError(`--${flag} must be ${integer ? 'an integer' : 'a number'} in [${min}, ${max}], got ${JSON.stringify(s)}`);
    }
    return n;
  };
  try {
    if (typeof v.dir !== 'string' || v.dir === '') throw new TypeError('--dir is required');
    const years = typeof v['date-years'] === 'string' ? v['date-years'].split(',').map((y) => Number(y)) : undefined;
    if (years?.some((y) => !Number.isInteger(y) || y < 1000 || y > 9999)) throw new RangeError(`--date-years must list 4-digit years, got ${JSON.stringify(v['date-years'])}`);
    const res = generateExport({
      dir: v.dir,
      files: num('files', 4, 1, 100_000),
      rowsPerFile: num('rows', 100_000, 0, 1e10),
      dupRatio: num('duplicate-rate', 0.2, 0, 1, false),
      crlfRatio: num('crlf-ratio', 0, 0, 1, false),
      malformedEvery: num('malformed-every', 0, 0, 1e12),
      invalidUtf8Every: num('invalid-utf8-every', 0, 0, 1e12),
      emptyEvery: num('empty-every', 0, 0, 1e12),
      emptyFile: v['empty-file'] === true,
      seed: num('seed', 1, 0, 2 ** 32 - 1),
      ...(years ? { dateYears: years } : {}),
    });
    const out = { dir: v.dir, files: res.files.length, bytes: res.bytes, rows: res.rows, distinct: res.distinct, distinctByWindow: res.distinctByWindow, rejects: res.rejects.length };
    if (v.json) console.log(JSON.stringify(out));
    else console.log(`wrote ${out.files} files (${out.bytes} bytes) to ${out.dir}: ${out.rows} rows, ${out.distinct} distinct keys, ${out.rejects} bad lines`);
    return 0;
  } catch (err) {
    return fail('gen-export', err, 2, { json });
  }
}
