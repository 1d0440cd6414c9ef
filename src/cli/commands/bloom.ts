// `hashgate bloom rebuild|status`: build a new generation of a shared Redis-held Bloom filter
// (Redisson layout) from export files, Redis sets or an HBase scan and swap it in atomically under
// the same name; show the last swap. Safe from cron on several hosts: one run holds the lock, the
// others exit 3.
import { parseArgs } from 'node:util';
import { ErrorCodes, HashGateError, HashGateTypeError, checkInt, checkNumber } from '../../errors.js';
import { REBUILD_EXIT, REDIS_REBUILD_DEFAULTS, readRebuildStatus, rebuildKeys, rebuildRedisBloom } from '../../bloom/redis-rebuild.js';
import { ExportFileKeys, HBaseScanKeys, RedisSetWindowKeys } from '../../bloom/rebuild-sources.js';
import { redissonConfigKey } from '../../bloom/redisson.js';
import { parseDuration } from './migrate.js';
import { abortOnSignals, connectCliRedis } from '../redis-client.js';
import { CONNECT_TIMEOUT_FLAG, connectTimeoutMs, defaultRedisUrl } from '../redis-url.js';
import { delimiterByte, fieldList } from '../line-flags.js';
import { flagError } from '../flags.js';
import { fail, wantsJson } from '../output.js';
import { DEFAULTS as DEDUP_DEFAULTS } from '../../dedup/options.js';
import { CLI_CONNECT_TIMEOUT_MS, type RedisClient } from '../../redis/client.js';
import type { HBaseStore } from '../../hbase/client.js';

export const EXIT = { ok: 0, error: 1, usage: 2, locked: 3, rejected: 4, interrupted: 130 } as const satisfies Record<string, (typeof REBUILD_EXIT)[keyof typeof REBUILD_EXIT]>;

const HELP = `usage: hashgate bloom <subcommand> [flags]
  rebuild   build a new generation of a shared filter from a source and swap it in atomically
  status    print the live config and the last swap of a shared filter
hashgate bloom <subcommand> --help for its flags`;

const USAGE = `usage: hashgate bloom rebuild --redis URL --name NAME (--file F | --set KEY | --sets-window W | --hbase-table T)...
                             [--expected-items N --fpp P [--reshape]] [--min-keys 1] [--cluster]
                             [--drop-spare] [--lock-ttl 60s] [--batch 8192] [--json] [--quiet]
  --redis URL         Redis (default env HASHGATE_REDIS_URL); with --cluster, any node of the cluster
  --connect-timeout-ms MS  wait at most MS for Redis to answer the first connection, then exit 1
                      (default ${CLI_CONNECT_TIMEOUT_MS})
  --name NAME         the filter's name, as given to Redisson's getBloomFilter(name)
Sources (any mix, repeatable; the new generation holds the keys of all of them)
  --file F            export files, directories or globs, parsed as 'hashgate load' parses them
                      (one key per line; rejected lines are listed as file:line reason and exit 4)
    --delimiter C       field delimiter, one byte (default '|'; 'tab' for TAB)
    --fields 0,1        fields forming the key, in order (default: all fields concatenated)
    --field-count N     expected fields per line (default: from the first good line)
    --max-line-bytes N  longer lines are rejected
  --set KEY           every member of this Redis set (SSCAN), e.g. one set per day of a window
  --sets-window W     members of a dedup window stored in the 'sets' layout (--sets-prefix P, default ${DEDUP_DEFAULTS.prefix},
                      the dedup store's)
  --hbase-table T     every row key of this HBase table (a full scan)
    --hbase Q           ZooKeeper quorum (default env HBASE_ZK)
    --hbase-column C    only rows holding this column (e.g. base:status)
    --hbase-prefix P    only rows starting with P
Shape and safety
  --expected-items N  sizing of the new generation (default: the live filter's; required, with
                      --fpp, when the filter does not exist yet)
  --fpp P             false-positive rate of the new generation (default: the live filter's)
  --reshape           allow a size/hash count different from the live filter's (Redisson readers
                      answer "absent" until they re-read the config: schedule with their owners)
  --min-keys N        refuse to swap in fewer keys (default ${REDIS_REBUILD_DEFAULTS.minKeys}: an empty export never wipes a filter)
  --drop-spare        delete the replaced bitmap at the swap instead of keeping it as NAME's spare
                      (a later rebuild then allocates its bitmap anew: on a large filter one command
                      of that keeps Redis busy for as long as zero-filling and copying it takes)
  --lock-ttl D        lock lease, refreshed while running (ms, or 30s/5m; default ${REDIS_REBUILD_DEFAULTS.lockTtlMs / 1000}s)
exit: 0 swapped in, 1 error (nothing swapped), 2 usage, 3 another rebuild holds the lock (nothing
done), 4 swapped in but some input lines were rejected, 130 interrupted (nothing swapped)`;

const STATUS_USAGE = `usage: hashgate bloom status --redis URL --name NAME [--cluster] [--connect-timeout-ms MS] [--json]
Prints the live config, the last swap (generation, time, keys, source) and the size of the spare
bitmap the swap kept for the next rebuild.
exit: 0, 1 when the filter does not exist, 2 usage`;

const optInt = (flag: string, v: string | undefined, min: number, max?: number): number | undefined =>
  v === undefined ? undefined : checkInt(flag, /^\s*-?\d+\s*$/.test(v) ? Number(v) : NaN, min, max);

const REBUILD_FLAGS = {
  redis: { type: 'string' },
  ...CONNECT_TIMEOUT_FLAG,
  name: { type: 'string' },
  file: { type: 'string', multiple: true },
  delimiter: { type: 'string' },
  fields: { type: 'string' },
  'field-count': { type: 'string' },
  'max-line-bytes': { type: 'string' },
  set: { type: 'string', multiple: true },
  'sets-window': { type: 'string', multiple: true },
  'sets-prefix': { type: 'string' },
  'hbase-table': { type: 'string', multiple: true },
  hbase: { type: 'string' },
  'hbase-column': { type: 'string' },
  'hbase-prefix': { type: 'string' },
  'expected-items': { type: 'string' },
  fpp: { type: 'string' },
  reshape: { type: 'boolean' },
  'drop-spare': { type: 'boolean' },
  'min-keys': { type: 'string' },
  cluster: { type: 'boolean' },
  'lock-ttl': { type: 'string' },
  batch: { type: 'string' },
  json: { type: 'boolean' },
  quiet: { type: 'boolean', short: 'q' },
  help: { type: 'boolean', short: 'h' },
} as const;

const usageError = (msg: string, name: string): HashGateTypeError => new HashGateTypeError(ErrorCodes.INVALID_OPTION, msg, { name });

/** The connected client of a bloom subcommand; with --cluster the URL is any node of the cluster. */
function connect(url: string, cluster: boolean | undefined, connectMs: number): Promise<RedisClient> {
  return connectCliRedis({ ...(cluster ? { cluster: url } : { url }), commandTimeoutMs: 30_000, connectTimeoutMs: connectMs });
}

async function rebuild(argv: string[]): Promise<number> {
  const json = wantsJson(argv);
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: REBUILD_FLAGS, strict: true, allowPositionals: false }));
  } catch (err) {
    return fail('bloom rebuild', flagError(err, REBUILD_FLAGS), EXIT.usage, { json, help: USAGE });
  }
  if (values.help) {
    console.log(USAGE);
    return EXIT.ok;
  }
  let url: string;
  const files = values.file ?? [];
  const sets = values.set ?? [];
  const windows = values['sets-window'] ?? [];
  const tables = values['hbase-table'] ?? [];
  const zk = values.hbase ?? process.env.HBASE_ZK;
  let opts: { expectedItems?: number; fpp?: number; lockTtlMs?: number; batch?: number; minKeys?: number; reshape?: boolean; keepSpare?: boolean };
  let fileSource: ExportFileKeys | undefined;
  let connectMs: number;
  try {
    url = values.redis ?? defaultRedisUrl();
    connectMs = connectTimeoutMs(values['connect-timeout-ms']);
    if (!values.name) throw usageError('--name is required', '--name');
    if (files.length + sets.length + windows.length + tables.length === 0) throw usageError('at least one --file, --set, --sets-window or --hbase-table is required', '--file');
    if (tables.length > 0 && !zk) throw usageError('--hbase-table needs --hbase (or HBASE_ZK)', '--hbase');
    opts = {};
    if (values['expected-items'] !== undefined) opts.expectedItems = checkInt('--expected-items', Number(values['expected-items']), 1);
    if (values.fpp !== undefined) opts.fpp = checkNumber('--fpp', Number(values.fpp), 0, 1, true);
    if (values['lock-ttl'] !== undefined) opts.lockTtlMs = parseDuration('--lock-ttl', values['lock-ttl']);
    if (values.batch !== undefined) opts.batch = checkInt('--batch', Number(values.batch), 1, 100_000);
    const minKeys = optInt('--min-keys', values['min-keys'], 0);
    if (minKeys !== undefined) opts.minKeys = minKeys;
    if (values.reshape) opts.reshape = true;
    if (values['drop-spare']) opts.keepSpare = false;
    if (files.length > 0) {
      const delimiter = delimiterByte(values.delimiter);
      const fieldCount = optInt('--field-count', values['field-count'], 1, 256);
      const maxLineBytes = optInt('--max-line-bytes', values['max-line-bytes'], 1, 1 << 24);
      fileSource = new ExportFileKeys({
        inputs: files,
        fields: fieldList(values.fields),
        ...(delimiter !== undefined ? { delimiter } : {}),
        ...(fieldCount !== undefined ? { fieldCount } : {}),
        ...(maxLineBytes !== undefined ? { maxLineBytes } : {}),
      });
    }
  } catch (err) {
    return fail('bloom rebuild', err, EXIT.usage, { json, help: USAGE });
  }
  let redis: RedisClient;
  try {
    redis = await connect(url, values.cluster, connectMs);
  } catch (err) {
    return fail('bloom rebuild', err, EXIT.error, { json });
  }
  if (opts.expectedItems === undefined || opts.fpp === undefined) {
    // a new filter has no sizing to copy: that is a missing flag, not a failure of the run
    let live: Record<string, string>;
    try {
      live = await redis.hgetall(redissonConfigKey(values.name!));
    } catch (err) {
      // a config we could not read is not a filter that does not exist
      redis.disconnect();
      return fail('bloom rebuild', err, EXIT.error, { json });
    }
    if (live.size === undefined) {
      redis.disconnect();
      const missing = [opts.expectedItems === undefined ? '--expected-items' : undefined, opts.fpp === undefined ? '--fpp' : undefined].filter((f) => f !== undefined);
      const err = usageError(`${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} required: filter ${values.name} does not exist yet, so there is no sizing to copy`, missing[0]!);
      return fail('bloom rebuild', err, EXIT.usage, { json, help: USAGE });
    }
  }
  let hbase: HBaseStore | undefined;
  if (tables.length > 0) {
    const { HBaseStore } = await import('../../hbase/client.js');
    hbase = new HBaseStore({ zookeeper: zk! });
  }
  const setsPrefix = values['sets-prefix'] ?? DEDUP_DEFAULTS.prefix;
  const hbaseColumn = values['hbase-column'];
  const hbasePrefix = values['hbase-prefix'];
  const parts: string[] = [];
  if (files.length > 0) parts.push(fileSource!.description);
  if (sets.length > 0) parts.push(`set:${sets.length}`);
  for (const w of windows) parts.push(`sets:${setsPrefix}:${w}`);
  for (const t of tables) parts.push(`hbase:${t}`);
  async function* keys(): AsyncGenerator<Uint8Array[]> {
    if (fileSource) yield* fileSource;
    for (const s of sets) {
      let cursor = '0';
      do {
        const [c, members] = await redis.sscanBuffer(s, cursor, 'COUNT', 5000);
        cursor = String(c);
        if (members.length > 0) yield members;
      } while (cursor !== '0');
    }
    if (windows.length > 0) yield* new RedisSetWindowKeys({ redis, windows, prefix: setsPrefix });
    for (const table of tables) {
      yield* new HBaseScanKeys({
        store: hbase!,
        table,
        ...(hbaseColumn !== undefined ? { column: hbaseColumn } : {}),
        ...(hbasePrefix !== undefined ? { prefix: hbasePrefix } : {}),
      });
    }
  }
  const stop = abortOnSignals();
  const progress = values.quiet || values.json ? undefined : (n: number) => process.stderr.write(`\r  ${n} keys`);
  try {
    const r = await rebuildRedisBloom({
      redis,
      name: values.name!,
      keys: keys(),
      sourceDescription: parts.join(','),
      signal: stop.signal,
      ...opts,
      ...(progress ? { onProgress: progress } : {}),
    });
    if (progress && r.keys > 0) process.stderr.write('\n');
    const rejected = fileSource?.rejected ?? 0;
    if (values.json) {
      console.log(JSON.stringify({ name: values.name, ...r, rejected, ...(fileSource ? { rejectedByReason: fileSource.rejectedByReason, rejects: fileSource.rejects } : {}) }));
    } else if (!values.quiet) {
      console.log(
        `swapped in generation ${r.generation} of ${values.name}: ${r.keys} keys, size ${r.size}, k ${r.hashIterations}, ${r.replayed} concurrent adds replayed, ${Math.round(r.durationMs)} ms` +
          (r.cleanedStale ? '; discarded a generation left by a crashed run' : ''),
      );
    }
    if (rejected > 0) {
      // file:line and reason only: the lines may hold personal data
      console.error(`hashgate bloom rebuild: ${rejected} input lines rejected (${Object.entries(fileSource!.rejectedByReason).map(([k, v]) => `${k} ${v}`).join(', ')})`);
      for (const x of fileSource!.rejects) console.error(`  ${x.file}:${x.line} ${x.reason}`);
      return EXIT.rejected;
    }
    return EXIT.ok;
  } catch (err) {
    if (stop.signal.aborted) {
      const stopped = Object.assign(new Error(`interrupted; the live filter ${values.name} is unchanged`), { code: 'ABORT_ERR' });
      return fail('bloom rebuild', stopped, EXIT.interrupted, { json });
    }
    const e = err as HashGateError;
    if (e instanceof HashGateError && e.code === ErrorCodes.LOCK_HELD) return fail('bloom rebuild', e, EXIT.locked, { json });
    return fail('bloom rebuild', e, EXIT.error, { json });
  } finally {
    stop.dispose();
    redis.disconnect();
    await hbase?.close();
  }
}

const STATUS_FLAGS = {
  redis: { type: 'string' },
  ...CONNECT_TIMEOUT_FLAG,
  name: { type: 'string' },
  cluster: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

async function status(argv: string[]): Promise<number> {
  const json = wantsJson(argv);
  let values;
  let url: string;
  let connectMs: number;
  try {
    try {
      ({ values } = parseArgs({ args: argv, options: STATUS_FLAGS, strict: true }));
    } catch (err) {
      throw flagError(err, STATUS_FLAGS);
    }
    if (values.help) {
      console.log(STATUS_USAGE);
      return EXIT.ok;
    }
    url = values.redis ?? defaultRedisUrl();
    connectMs = connectTimeoutMs(values['connect-timeout-ms']);
    if (!values.name) throw usageError('--name is required', '--name');
  } catch (err) {
    return fail('bloom status', err, EXIT.usage, { json, help: STATUS_USAGE });
  }
  let redis: RedisClient;
  try {
    redis = await connect(url, values.cluster, connectMs);
  } catch (err) {
    return fail('bloom status', err, EXIT.error, { json });
  }
  try {
    const config = await redis.hgetall(redissonConfigKey(values.name));
    const last = await readRebuildStatus(redis, values.name);
    // the bitmap the last swap kept for the next rebuild: Redis memory the filter holds besides its own
    const spareBytes = await redis.strlen(rebuildKeys(values.name).spare);
    const exists = config.size !== undefined;
    if (values.json) console.log(JSON.stringify({ name: values.name, exists, config, last, spareBytes }));
    else {
      console.log(
        exists
          ? `${values.name}: size ${config.size}, hashIterations ${config.hashIterations}, expectedInsertions ${config.expectedInsertions}, falseProbability ${config.falseProbability}`
          : `${values.name}: no filter`,
      );
      console.log(last ? `last rebuild: generation ${last.generation} at ${new Date(last.at).toISOString()}, ${last.keys} keys from ${last.source}, ${(last.durationMs / 1000).toFixed(2)} s` : 'never rebuilt');
      if (spareBytes > 0) console.log(`spare bitmap kept for the next rebuild: ${spareBytes} bytes`);
    }
    return exists ? EXIT.ok : EXIT.error;
  } catch (err) {
    return fail('bloom status', err, EXIT.error, { json });
  } finally {
    redis.disconnect();
  }
}

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === 'rebuild') return rebuild(rest);
  if (sub === 'status') return status(rest);
  if (sub === '--help' || sub === '-h' || sub === 'help') {
    console.log(HELP);
    return EXIT.ok;
  }
  const err = usageError(`unknown subcommand ${sub === undefined ? '(none)' : `'${sub}'`}`, 'subcommand');
  return fail('bloom', err, EXIT.usage, { json: wantsJson(rest), help: HELP });
}
