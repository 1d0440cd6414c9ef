// `hashgate export --store PATH`: moves a durable embedded store's windows to Redis (the same
// bucket keys and members the Redis store writes, so a service switches stores without losing a
// year), or writes a 'sets' window's raw keys as lines `hashgate load` reads back.
import { createWriteStream, existsSync, fchmodSync, openSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CLI_CONNECT_TIMEOUT_MS, connectCliRedis, type RedisClient } from '../../redis/client.js';
import { DEFAULTS, warnHllOnce } from '../../dedup/options.js';
import { LmdbStore } from '../../dedup/lmdb-store.js';
import { RedisLayoutSink, type SinkBatch } from '../../loader/sink.js';
import { ErrorCodes, HashGateError } from '../../errors.js';
import { usageError } from './dedup-flags.js';
import { CONNECT_TIMEOUT_FLAG, connectTimeoutMs } from '../redis-url.js';
import { flagError } from '../flags.js';
import { fail, wantsJson } from '../output.js';

export const HELP = `usage: hashgate export --store PATH (--redis URL | --cluster HOST:PORT,... | --out FILE) [flags]

Exports windows of the durable embedded store (dedup.path).

  --store PATH              the store directory (required)
  --window ID               only this window (default: every window in the store)
  --layout compact|sets     only this layout (default: both)
To Redis (both layouts; what HashGate.open({ redis }) then reads):
  --redis URL               Redis URL
  --cluster HOST:PORT,...   Redis Cluster startup nodes instead of --redis
  --connect-timeout-ms MS   wait at most MS for Redis to answer the first connection, then exit 1
                            (default ${CLI_CONNECT_TIMEOUT_MS})
  --prefix P                key prefix (default ${DEFAULTS.prefix})
  --no-hll                  deprecated, ignored (the window count is always kept)
To a file ('sets' layout only: compact stores digests, never raw keys):
  --out FILE                one raw key per line (created 0600; '-' = stdout); load it back with
                            hashgate load --window ID [--store PATH | --redis URL] FILE
                            Keys holding CR, LF or the delimiter cannot round-trip and are counted
                            as skipped (exit 3), never printed.
  --delimiter C             the delimiter 'hashgate load' will split on (default '|')
  --json                    print the summary as JSON
Exit codes: 0 done, 1 error, 2 usage, 3 some keys skipped.`;

const BATCH = 20_000;

/** A batch of stored members (raw keys, or the compact layout's 8 digest bytes) as a sink batch. */
function packMembers(window: string, rows: readonly { bucket: number; member: Buffer }[]): SinkBatch {
  const n = rows.length;
  const keyOffsets = new Uint32Array(n + 1);
  const rowBuckets = new Uint32Array(n);
  for (let i = 0; i < n; i++) keyOffsets[i + 1] = keyOffsets[i]! + rows[i]!.member.length;
  const keys = Buffer.allocUnsafe(keyOffsets[n]!);
  for (let i = 0; i < n; i++) {
    rows[i]!.member.copy(keys, keyOffsets[i]!);
    rowBuckets[i] = rows[i]!.bucket;
  }
  return { window, bucket: rowBuckets[0] ?? 0, rowBuckets, count: n, keys, keyOffsets };
}

interface Summary {
  windows: Array<{ window: string; layout: string; buckets: number; members: number; added?: number }>;
  exported: number;
  skipped: number;
}

const FLAGS = {
  store: { type: 'string' },
  window: { type: 'string' },
  layout: { type: 'string' },
  redis: { type: 'string' },
  cluster: { type: 'string' },
  ...CONNECT_TIMEOUT_FLAG,
  prefix: { type: 'string' },
  'no-hll': { type: 'boolean' },
  out: { type: 'string' },
  delimiter: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export async function run(argv: string[]): Promise<number> {
  const json = wantsJson(argv);
  // with --out - the keys own stdout, so the summary and errors go to stderr
  const jsonToStderr = argv.some((a, i) => (a === '--out' && argv[i + 1] === '-') || a === '--out=-');
  let values: Record<string, string | boolean | undefined>;
  let connectMs: number;
  try {
    try {
      ({ values } = parseArgs({ args: argv, strict: true, allowPositionals: false, options: FLAGS }));
    } catch (err) {
      throw flagError(err, FLAGS);
    }
    if (values.help) {
      console.log(HELP);
      return 0;
    }
    const targets = ['redis', 'cluster', 'out'].filter((k) => typeof values[k] === 'string');
    if (typeof values.store !== 'string' || values.store === '') throw usageError('--store PATH is required');
    if (targets.length !== 1) throw usageError('give exactly one of --redis, --cluster or --out');
    if (values.layout !== undefined && values.layout !== 'compact' && values.layout !== 'sets') throw usageError(`--layout must be compact or sets, got ${JSON.stringify(values.layout)}`);
    if (values.out !== undefined && values.layout === 'compact') throw usageError("--out needs the 'sets' layout: the compact layout stores 8-byte digests, not keys; export it with --redis");
    if (values.delimiter !== undefined && Buffer.byteLength(values.delimiter as string) !== 1) throw usageError('--delimiter must be one byte');
    connectMs = connectTimeoutMs(values['connect-timeout-ms']);
  } catch (err) {
    return fail('export', err, 2, { json, jsonToStderr, help: HELP });
  }
  const str = (k: string): string | undefined => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  let store: LmdbStore | undefined;
  let redis: RedisClient | undefined;
  let out: WriteStream | undefined;
  const summary: Summary = { windows: [], exported: 0, skipped: 0 };
  try {
    if (!existsSync(join(str('store')!, 'data.mdb'))) throw new HashGateError(ErrorCodes.INVALID_OPTION, `--store: no store at ${str('store')} (no data.mdb)`);
    store = new LmdbStore({ path: str('store')!, sync: false, maxWindows: 500 });
    await store.ready(); // a store an older version wrote is converted before it is read
    let windows = store.windows();
    if (str('window') !== undefined) windows = windows.filter((w) => w.window === str('window'));
    if (str('layout') !== undefined) windows = windows.filter((w) => w.layout === str('layout'));
    if (str('out') !== undefined && windows.some((w) => w.layout === 'compact')) {
      const err = usageError('--out writes raw keys, and compact windows hold only digests: add --layout sets, or export them with --redis');
      return fail('export', err, 2, { json, jsonToStderr });
    }
    if (str('out') === undefined) {
      const cl = str('cluster');
      redis = await connectCliRedis({ ...(cl ? { cluster: cl } : { url: str('redis')! }), commandTimeoutMs: 30_000, connectTimeoutMs: connectMs });
    } else {
      if (str('out') !== '-') {
        const fd = openSync(str('out')!, 'w', 0o600);
        fchmodSync(fd, 0o600); // an existing file keeps its mode on open, and raw keys go in
        out = createWriteStream('', { fd });
      }
    }
    const prefix = str('prefix') ?? DEFAULTS.prefix;
    const delim = Buffer.from(str('delimiter') ?? '|')[0]!;
    for (const w of windows) {
      const row = { window: w.window, layout: w.layout, buckets: w.buckets, members: 0, ...(redis ? { added: 0 } : {}) };
      summary.windows.push(row);
      const sink = redis && new RedisLayoutSink(redis, { layout: w.layout, prefix, buckets: w.buckets, ownsClient: false });
      if (redis !== undefined && values['no-hll'] === true) warnHllOnce('--no-hll');
      try {
        if (sink !== undefined) {
          // a window keeps one bucketing: refuse to merge into a Redis window recorded differently
          try {
            await sink.prepareWindow(w.window);
          } catch (err) {
            const rec = (err as HashGateError).details?.['recorded'];
            if ((err as HashGateError).code !== ErrorCodes.INVALID_OPTION || rec === undefined) throw err;
            throw new HashGateError(ErrorCodes.INVALID_OPTION, `window ${w.window} in Redis (prefix ${prefix}) already uses ${String(rec)} ${w.layout} buckets, the store ${w.buckets}; export to another --prefix`);
          }
        }
        for (const batch of store.members(w.window, w.layout, BATCH)) {
          row.members += batch.length;
          if (sink !== undefined) {
            if (batch.length === 0) continue;
            // the loader's sink writes what a load would: one SADD per (sub-)bucket, same members
            const added = await sink.add(packMembers(w.window, batch));
            row.added! += added;
            summary.exported += batch.length;
          } else {
            const parts: Buffer[] = [];
            for (const { member } of batch) {
              if (member.includes(10) || member.includes(13) || member.includes(delim)) {
                summary.skipped++;
                continue;
              }
              parts.push(member, NL);
              summary.exported++;
            }
            const chunk = Buffer.concat(parts);
            if (out === undefined) await writeOut(process.stdout, chunk);
            else await writeOut(out, chunk);
          }
        }
      } finally {
        await sink?.close();
      }
    }
    if (out !== undefined) await new Promise<void>((res, rej) => out!.end((err?: Error | null) => (err ? rej(err) : res())));
    const text = summary.windows.map((w) => `window ${w.window} (${w.layout}, ${w.buckets} buckets): ${w.members} members${w.added === undefined ? '' : `, ${w.added} new in Redis`}`).join('\n');
    // with --out - the keys own stdout, so the summary goes to stderr
    if (values.json) (str('out') === '-' ? console.error : console.log)(JSON.stringify(summary));
    else console.error(`${text || 'no window matched'}\nexported ${summary.exported}, skipped ${summary.skipped}`);
    return summary.skipped > 0 ? 3 : 0;
  } catch (err) {
    return fail('export', err, 1, { json, jsonToStderr });
  } finally {
    await store?.close().catch(() => undefined);
    if (redis !== undefined) await redis.quit().catch(() => redis!.disconnect());
  }
}

const NL = Buffer.from('\n');

function writeOut(s: NodeJS.WritableStream, chunk: Buffer): Promise<void> {
  return new Promise((res, rej) => {
    if (s.write(chunk, (err) => (err ? rej(err) : undefined))) res();
    else s.once('drain', res);
  });
}
