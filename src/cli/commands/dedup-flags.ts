// Flags shared by `hashgate recover` and `hashgate stats`: the same names as the dedup options
// (--redis URL | --cluster HOST:PORT,..., --layout, --prefix, --buckets, --journal-dir, ...).
import { ErrorCodes, HashGateRangeError, HashGateTypeError } from '../../errors.js';
import { DEFAULTS, type DedupOptions, type RedisConfig } from '../../dedup/options.js';
import { REDIS_HELP, defaultRedisUrl } from '../redis-url.js';

export const STORE_FLAGS = {
  store: { type: 'string' },
  redis: { type: 'string' },
  cluster: { type: 'string' },
  layout: { type: 'string' },
  prefix: { type: 'string' },
  buckets: { type: 'string' },
  'journal-dir': { type: 'string' },
  'time-zone': { type: 'string' },
  'window-unit': { type: 'string' },
  'command-timeout-ms': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** recover only: the replay lock. */
export const LOCK_FLAGS = { 'lock-ttl-ms': { type: 'string' } } as const;
export const LOCK_HELP = `  --lock-ttl-ms MS          recover lock TTL (default ${DEFAULTS.lockTtlMs})`;

export const STORE_HELP = `Store
  --store PATH              the durable embedded store (LMDB directory, dedup.path) instead of Redis
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
  --json                    machine-readable output`;

export const usageError = (msg: string): HashGateTypeError => new HashGateTypeError(ErrorCodes.INVALID_OPTION, msg);

function int(flag: string, v: string | boolean | undefined, min: number): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^\d+$/.test(v.trim())) throw usageError(`${flag} must be an integer, got ${JSON.stringify(v)}`);
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min) throw new HashGateRangeError(ErrorCodes.INVALID_OPTION, `${flag} must be >= ${min}, got ${v}`, { name: flag });
  return n;
}

export function storeOptions(values: Record<string, string | boolean | undefined>): { redis: RedisConfig | undefined; dedup: DedupOptions } {
  const str = (k: string): string | undefined => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  let redis: RedisConfig | undefined;
  if (str('store') !== undefined) {
    if (str('redis') !== undefined || str('cluster') !== undefined) throw usageError('give either --store or --redis/--cluster, not both');
    if (str('store') === '') throw usageError('--store must be a directory path');
    redis = undefined;
  } else if (str('cluster') !== undefined) {
    if (str('redis') !== undefined) throw usageError('give either --redis or --cluster, not both');
    const nodes = str('cluster')!.split(',').map((hp) => {
      const m = /^\s*([^:\s]+):(\d+)\s*$/.exec(hp);
      if (!m) throw usageError(`--cluster expects HOST:PORT,..., got ${JSON.stringify(hp)}`);
      return { host: m[1]!, port: Number(m[2]) };
    });
    redis = { cluster: nodes };
  } else {
    redis = str('redis') ?? defaultRedisUrl();
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
  const cto = int('--command-timeout-ms', values['command-timeout-ms'], 1);
  if (cto !== undefined) dedup.commandTimeoutMs = cto;
  return { redis, dedup };
}
