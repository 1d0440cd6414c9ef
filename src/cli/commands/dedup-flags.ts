// Flags shared by `hashgate recover` and `hashgate stats`: the same names as the dedup options
// (--redis URL | --cluster HOST:PORT,..., --layout, --prefix, --buckets, --journal-dir, ...).
import { ErrorCodes, HashGateRangeError, HashGateTypeError } from '../../errors.js';
import { DEFAULTS, type DedupOptions } from '../../dedup/options.js';
import { connectCliRedis, type RedisClient } from '../../redis/client.js';
import { CONNECT_TIMEOUT_FLAG, CONNECT_TIMEOUT_HELP, REDIS_HELP, connectTimeoutMs, defaultRedisUrl } from '../redis-url.js';

/** The flags of `recover` (Redis only: the embedded store has no journal to replay). */
export const REDIS_STORE_FLAGS = {
  redis: { type: 'string' },
  cluster: { type: 'string' },
  layout: { type: 'string' },
  prefix: { type: 'string' },
  buckets: { type: 'string' },
  'journal-dir': { type: 'string' },
  'time-zone': { type: 'string' },
  'window-unit': { type: 'string' },
  'command-timeout-ms': { type: 'string' },
  ...CONNECT_TIMEOUT_FLAG,
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The flags of `stats`: Redis, or the embedded store with --store. */
export const STORE_FLAGS = { store: { type: 'string' }, ...REDIS_STORE_FLAGS } as const;

/** recover only: the replay lock. */
export const LOCK_FLAGS = { 'lock-ttl-ms': { type: 'string' } } as const;
export const LOCK_HELP = `  --lock-ttl-ms MS          recover lock TTL (default ${DEFAULTS.lockTtlMs})`;

export const REDIS_STORE_HELP = `Store
${REDIS_HELP}
  --cluster HOST:PORT,...   Redis Cluster startup nodes instead of --redis
  --layout compact|sets     dedup layout (default ${DEFAULTS.layout})
  --prefix P                key prefix (default ${DEFAULTS.prefix})
  --buckets N               bucket count when the window has none recorded yet
                            (default ${DEFAULTS.compactBuckets} compact / ${DEFAULTS.setsBuckets} sets)
  --journal-dir DIR         fail-open journal directory (default ${DEFAULTS.journalDir})
  --time-zone TZ            IANA zone of windows (default ${DEFAULTS.timeZone})
  --window-unit U           year (default) | month | day
  --command-timeout-ms MS   Redis command timeout (default ${DEFAULTS.commandTimeoutMs})
${CONNECT_TIMEOUT_HELP}
  --json                    machine-readable output`;

export const STORE_HELP = REDIS_STORE_HELP.replace(
  'Store\n',
  'Store\n  --store PATH              the durable embedded store (LMDB directory, dedup.path) instead of Redis\n',
);

export const usageError = (msg: string): HashGateTypeError => new HashGateTypeError(ErrorCodes.INVALID_OPTION, msg);

function int(flag: string, v: string | boolean | undefined, min: number): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^\d+$/.test(v.trim())) throw usageError(`${flag} must be an integer, got ${JSON.stringify(v)}`);
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min) throw new HashGateRangeError(ErrorCodes.INVALID_OPTION, `${flag} must be >= ${min}, got ${v}`, { name: flag });
  return n;
}

/** Where a command's dedup store is: Redis (standalone or Cluster), or the embedded store (`dedup.path`). */
export interface StoreTarget {
  url?: string;
  cluster?: string;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
}

export function storeOptions(values: Record<string, string | boolean | undefined>): { redis: StoreTarget | undefined; dedup: DedupOptions } {
  const str = (k: string): string | undefined => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  let redis: StoreTarget | undefined;
  const timeouts = (): { connectTimeoutMs: number; commandTimeoutMs: number } => ({
    connectTimeoutMs: connectTimeoutMs(values['connect-timeout-ms']),
    commandTimeoutMs: int('--command-timeout-ms', values['command-timeout-ms'], 1) ?? DEFAULTS.commandTimeoutMs,
  });
  if (str('store') !== undefined) {
    if (str('redis') !== undefined || str('cluster') !== undefined) throw usageError('give either --store or --redis/--cluster, not both');
    if (str('store') === '') throw usageError('--store must be a directory path');
    redis = undefined;
  } else if (str('cluster') !== undefined) {
    if (str('redis') !== undefined) throw usageError('give either --redis or --cluster, not both');
    for (const hp of str('cluster')!.split(',')) {
      if (!/^\s*([^:\s]+):(\d+)\s*$/.test(hp)) throw usageError(`--cluster expects HOST:PORT,..., got ${JSON.stringify(hp)}`);
    }
    redis = { cluster: str('cluster')!, ...timeouts() };
  } else {
    redis = { url: str('redis') ?? defaultRedisUrl(), ...timeouts() };
  }
  const dedup: DedupOptions = { replayIntervalMs: 0 };
  if (str('store') !== undefined) dedup.path = str('store')!;
  const layout = str('layout');
  if (layout !== undefined) {
    if (layout !== 'compact' && layout !== 'sets') throw usageError(`--layout must be compact or sets, got ${JSON.stringify(layout)}`);
    dedup.layout = layout;
  }
  if (str('prefix') !== undefined) dedup.prefix = str('prefix')!;
  const buckets = int('--buckets', values.buckets, 1);
  if (buckets !== undefined) dedup.buckets = buckets;
  if (str('journal-dir') !== undefined) dedup.journalDir = str('journal-dir')!;
  if (str('time-zone') !== undefined) dedup.timeZone = str('time-zone')!;
  const unit = str('window-unit');
  if (unit !== undefined) {
    if (unit !== 'year' && unit !== 'month' && unit !== 'day') throw usageError(`--window-unit must be year, month or day, got ${JSON.stringify(unit)}`);
    dedup.window = unit;
  }
  const ttl = int('--lock-ttl-ms', values['lock-ttl-ms'], 1000);
  if (ttl !== undefined) dedup.lockTtlMs = ttl;
  if (redis !== undefined) dedup.commandTimeoutMs = redis.commandTimeoutMs;
  return { redis, dedup };
}

/** The connected client of a Redis target (see connectCliRedis: one behaviour for a dead Redis). */
export function connectStore(t: StoreTarget): Promise<RedisClient> {
  return connectCliRedis({ ...(t.cluster !== undefined ? { cluster: t.cluster } : { url: t.url! }), commandTimeoutMs: t.commandTimeoutMs, connectTimeoutMs: t.connectTimeoutMs });
}
