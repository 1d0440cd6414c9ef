// `hashgate bloom rebuild`: builds a new generation of a shared Redis-held Bloom filter (Redisson
// layout) from export files or Redis sets, and swaps it in atomically under the same name. A lock
// lets one rebuild run; a second one exits 3.
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { ErrorCodes, HashGateError, checkInt, checkNumber } from '../../errors.js';
import { rebuildRedisBloom } from '../../bloom/redis-rebuild.js';
import { parseDuration } from './migrate.js';
import { HBaseStore } from '../../stores/hbase.js';

export const EXIT = { ok: 0, error: 1, usage: 2, locked: 3 } as const;

const USAGE = `usage: hashgate bloom rebuild --redis URL --name NAME (--file F | --set KEY | --hbase-table T)...
                             [--expected-items N --fpp P] [--hbase Q] [--hbase-column fam:qual]
                             [--cluster] [--lock-ttl 60s] [--batch 8192] [--json]
  --redis URL         Redis (default env HASHGATE_REDIS_URL); with --cluster, any node of the cluster
  --name NAME         the filter's name, as given to Redisson's getBloomFilter(name)
  --file F            keys, one per line (UTF-8; a trailing empty line is ignored); repeatable
  --set KEY           every member of this Redis set (SSCAN), e.g. one set per day of a window; repeatable
  --hbase-table T     every row key of this HBase table (a full scan); repeatable
  --hbase Q           ZooKeeper quorum for --hbase-table (default env HBASE_ZK)
  --hbase-column C    scan only this column (e.g. base:status): rows without it are skipped
  --expected-items N  sizing of the new generation (default: the current config's)
  --fpp P             false-positive rate of the new generation (default: the current config's)
  --lock-ttl D        lock lease, refreshed while running (ms, or 30s/5m)
exit: 0 swapped in, 1 error (nothing swapped), 2 usage, 3 another rebuild holds the lock`;

async function* fileKeys(file: string): AsyncGenerator<string> {
  const rl = createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity });
  for await (const line of rl) yield line;
}

async function* setKeys(redis: Redis | Cluster, key: string): AsyncGenerator<Buffer> {
  let cursor = '0';
  do {
    const [c, members] = await redis.sscanBuffer(key, cursor, 'COUNT', 5000);
    cursor = String(c);
    yield* members;
  } while (cursor !== '0');
}

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === '--help' || sub === '-h') {
    console.log(USAGE);
    return EXIT.ok;
  }
  if (sub !== 'rebuild') {
    console.error(`hashgate bloom: unknown subcommand ${sub === undefined ? '(none)' : `'${sub}'`}\n${USAGE}`);
    return EXIT.usage;
  }
  let values;
  try {
    ({ values } = parseArgs({
      args: rest,
      options: {
        redis: { type: 'string' },
        name: { type: 'string' },
        file: { type: 'string', multiple: true },
        set: { type: 'string', multiple: true },
        'hbase-table': { type: 'string', multiple: true },
        hbase: { type: 'string' },
        'hbase-column': { type: 'string' },
        'expected-items': { type: 'string' },
        fpp: { type: 'string' },
        cluster: { type: 'boolean' },
        'lock-ttl': { type: 'string' },
        batch: { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    console.error(`hashgate bloom rebuild: ${(err as Error).message}\n${USAGE}`);
    return EXIT.usage;
  }
  if (values.help) {
    console.log(USAGE);
    return EXIT.ok;
  }
  const url = values.redis ?? process.env.HASHGATE_REDIS_URL;
  const files = values.file ?? [];
  const sets = values.set ?? [];
  const tables = values['hbase-table'] ?? [];
  const zk = values.hbase ?? process.env.HBASE_ZK;
  let opts: { expectedItems?: number; fpp?: number; lockTtlMs?: number; batch?: number };
  try {
    if (!url) throw new TypeError('--redis (or HASHGATE_REDIS_URL) is required');
    if (!values.name) throw new TypeError('--name is required');
    if (files.length + sets.length + tables.length === 0) throw new TypeError('at least one --file, --set or --hbase-table is required');
    if (tables.length > 0 && !zk) throw new TypeError('--hbase-table needs --hbase (or HBASE_ZK)');
    opts = {};
    if (values['expected-items'] !== undefined) opts.expectedItems = checkInt('--expected-items', Number(values['expected-items']), 1);
    if (values.fpp !== undefined) opts.fpp = checkNumber('--fpp', Number(values.fpp), 0, 1, true);
    if (values['lock-ttl'] !== undefined) opts.lockTtlMs = parseDuration('--lock-ttl', values['lock-ttl']);
    if (values.batch !== undefined) opts.batch = checkInt('--batch', Number(values.batch), 1, 100_000);
  } catch (err) {
    console.error(`hashgate bloom rebuild: ${(err as Error).message}\n${USAGE}`);
    return EXIT.usage;
  }
  const redis = values.cluster
    ? new Cluster([url])
    : new Redis(url, { maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined); // failures surface per command
  const hbase = tables.length > 0 ? new HBaseStore({ zookeeper: zk! }) : undefined;
  const column = values['hbase-column'];
  try {
    async function* keys(): AsyncGenerator<string | Buffer> {
      for (const f of files) yield* fileKeys(f);
      for (const s of sets) yield* setKeys(redis, s);
      for (const t of tables) {
        for await (const row of hbase!.scanIterator(t, { batchSize: 1000, ...(column ? { columns: [column] } : {}) })) yield row.key;
      }
    }
    const r = await rebuildRedisBloom({ redis, name: values.name!, keys: keys(), ...opts });
    if (values.json) console.log(JSON.stringify(r));
    else console.log(`swapped in a new generation of ${values.name}: ${r.keys} keys, size ${r.size}, k ${r.hashIterations}, ${r.replayed} concurrent adds replayed, ${r.durationMs} ms`);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof HashGateError && err.code === ErrorCodes.LOCK_HELD) {
      console.error(`hashgate bloom rebuild: ${err.message}`);
      return EXIT.locked;
    }
    console.error(`hashgate bloom rebuild: ${(err as Error).message}${(err as { code?: string }).code ? ` [${(err as { code: string }).code}]` : ''}`);
    return EXIT.error;
  } finally {
    redis.disconnect();
    await hbase?.close();
  }
}
