// TieredCache's options: their defaults, their types, and the checks that turn what a caller passed
// into resolved values (every error names the option path). Opening clients is left to the cache.
import type { LRUCache } from 'lru-cache';
import type { Redis, Cluster } from 'ioredis';
import { checkInt, checkKnownKeys, invalidType } from '../errors.js';
import type { BloomLike, ColdStore } from './types.js';
import type { TierError } from './stats.js';
import { parseCoalesceOptions, type CoalesceOptions, type ResolvedCoalesce } from '../util/coalescer.js';
import type { BusOption } from './bus.js';
import { parsePersistentLocal, type PersistentLocalOptions } from './persistent-local.js';

export const CACHE_DEFAULTS = {
  local: { maxEntries: 100_000, maxBytes: 64 * 1024 * 1024, ttlMs: 60_000, maxTables: 64 },
  negativeTtlMs: 5_000,
  graceMs: 0,
  redis: {
    /** TTL of values copied up from the cold tier (the writer's 7-day TTL lives in src/tiering). */
    ttlSeconds: 3_600,
    prefix: 'hg:v:',
    timeoutMs: 250,
    batchSize: 500,
  },
  cold: { timeoutMs: 2_000, batchSize: 100 },
  breaker: { failures: 5, cooldownMs: 1_000 },
  maxKeysPerLookup: 100_000,
} as const;

export interface RedisTierOptions {
  /**
   * An ioredis client or Cluster you own (not closed by close()), or `url` to let the cache create
   * one. On a standalone Redis the MGETs go over a connection of the cache's own, made from this
   * client's options (address, TLS, credentials, db, keyPrefix). On a Cluster each batch is split
   * per slot (see redis-tier.ts). Leave ioredis's enableAutoPipelining off on a Cluster: it
   * re-sends whole pipelines on MOVED and keeps failing after a master restart.
   */
  client?: Redis | Cluster;
  url?: string;
  /** TTL of backfilled copies of cold values. Default 3600. */
  ttlSeconds?: number;
  /** Key prefix; a key is stored at `${prefix}${table}:${key}`. Default 'hg:v:'. */
  prefix?: string;
  /** Per-call timeout; a slow Redis counts as an error and the lookup goes on to the cold tier. */
  timeoutMs?: number;
  /** Keys per MGET. */
  batchSize?: number;
}

export interface ColdTierOptions {
  timeoutMs?: number;
  /** Keys per cold mget call. */
  batchSize?: number;
}

export type BloomOption = BloomLike | false | ((table: string) => BloomLike | undefined);

export interface TieredCacheOptions {
  /**
   * Limits are per table (see TableState); maxTables (default 64) bounds the number of tables.
   * `path`: a persistent second local tier on the host (LMDB, see persistent-local.ts) so a
   * restarted instance is not cold; entries live `persistTtlMs` (default 1 h), at most
   * `persistMaxEntries` (default 1M).
   */
  local?: { maxEntries?: number; maxBytes?: number; ttlMs?: number; maxTables?: number; path?: string; persistTtlMs?: number; persistMaxEntries?: number };
  negativeTtlMs?: number;
  /**
   * Grace period (opt-in, default 0 = off). A local value past `local.ttlMs` is kept up to this
   * much longer; it is never answered while the tiers below can be asked, but when they fail or
   * are skipped it is served instead of "unknown", reported stale with its age by lookupDetailed().
   * Absences are never served from grace.
   */
  graceMs?: number;
  redis?: RedisTierOptions;
  cold?: ColdStore;
  coldOptions?: ColdTierOptions;
  /** Gate: a key the filter says is absent is answered undefined with no I/O at all. */
  bloom?: BloomOption;
  /** After `failures` consecutive errors a tier is skipped for `cooldownMs`, then retried. */
  breaker?: { failures?: number; cooldownMs?: number };
  maxKeysPerLookup?: number;
  /** Called for every tier failure (also published on diagnostics_channel 'hashgate:store:error'). */
  onTierError?: (err: TierError, cause: unknown) => void;
  now?: () => number;
  /**
   * Merge the local-tier misses of concurrent lookups of one table into one load (one MGET per
   * event-loop turn instead of one per call). Default on; false = one load per call.
   */
  coalesce?: CoalesceOptions | false;
  /**
   * Fleet-wide L1 invalidation (src/cache/bus.ts): invalidate() (and so HotColdStore writes through
   * this cache) is published on Redis pub/sub and other instances drop their local entries; after a
   * bus outage the local tier is cleared. true = a bus on copies of the redis tier's connection.
   */
  bus?: BusOption | false;
}

/** Every option checked and defaulted; clients (Redis, bus, persistent tier) are not open yet. */
export interface ResolvedCacheOptions {
  lru: LRUCache.Options<string, object, unknown>;
  maxTables: number;
  negativeTtlMs: number;
  /** 0 = off; else local values live ttlMs + graceMs in the LRU, the last graceMs of it stale. */
  graceMs: number;
  now: () => number;
  /** The persistent local tier to open (`local.path`), if any. */
  persistent: PersistentLocalOptions | undefined;
  redis:
    | { client: Redis | Cluster; url?: undefined }
    | { client?: undefined; url: string }
    | undefined;
  prefix: string;
  redisTtlMs: number;
  redisTimeoutMs: number;
  redisBatch: number;
  cold: ColdStore | undefined;
  coldTimeoutMs: number;
  coldBatch: number;
  bloom: BloomOption;
  breakerFailures: number;
  breakerCooldownMs: number;
  maxKeys: number;
  onTierError: TieredCacheOptions['onTierError'];
  coalesce: ResolvedCoalesce | false;
  bus: BusOption | undefined;
}

/** Checks `opts` in a fixed order (the first bad option is the one reported). */
export function resolveCacheOptions(opts: TieredCacheOptions): ResolvedCacheOptions {
  if (opts === null || typeof opts !== 'object') throw invalidType('options', 'an object', opts);
  // every key of TieredCacheOptions (and of its nested objects) must be listed here
  checkKnownKeys('options', opts, ['local', 'negativeTtlMs', 'graceMs', 'redis', 'cold', 'coldOptions', 'bloom', 'breaker', 'maxKeysPerLookup', 'onTierError', 'now', 'coalesce', 'bus']);
  checkKnownKeys('local', opts.local, ['maxEntries', 'maxBytes', 'ttlMs', 'maxTables', 'path', 'persistTtlMs', 'persistMaxEntries']);
  checkKnownKeys('redis', opts.redis, ['client', 'url', 'ttlSeconds', 'prefix', 'timeoutMs', 'batchSize']);
  checkKnownKeys('coldOptions', opts.coldOptions, ['timeoutMs', 'batchSize']);
  checkKnownKeys('breaker', opts.breaker, ['failures', 'cooldownMs']);
  const D = CACHE_DEFAULTS;
  const l = opts.local ?? {};
  const maxEntries = checkInt('local.maxEntries', l.maxEntries ?? D.local.maxEntries, 1);
  const maxBytes = checkInt('local.maxBytes', l.maxBytes ?? D.local.maxBytes, 1024);
  const ttlMs = checkInt('local.ttlMs', l.ttlMs ?? D.local.ttlMs, 1);
  const negativeTtlMs = checkInt('negativeTtlMs', opts.negativeTtlMs ?? D.negativeTtlMs, 0);
  const graceMs = checkInt('graceMs', opts.graceMs ?? D.graceMs, 0);
  const now = opts.now ?? Date.now;
  if (typeof now !== 'function') throw invalidType('now', 'a function', opts.now);
  const maxTables = checkInt('local.maxTables', l.maxTables ?? D.local.maxTables, 1);
  const persistent = parsePersistentLocal(l as Record<string, unknown>, now);
  const lru: LRUCache.Options<string, object, unknown> = {
    max: maxEntries,
    maxSize: maxBytes,
    // values stay their grace period longer; the cache tells fresh from stale by their age
    ttl: ttlMs + graceMs,
    // lru-cache memoises "now" for ttlResolution ms of real time; an injected clock must be exact
    ...(opts.now ? { perf: { now: opts.now }, ttlResolution: 0 } : {}),
  };

  const r = opts.redis;
  let redis: ResolvedCacheOptions['redis'];
  let prefix: string = D.redis.prefix;
  let redisTtlMs = D.redis.ttlSeconds * 1000;
  let redisTimeoutMs: number = D.redis.timeoutMs;
  let redisBatch: number = D.redis.batchSize;
  if (r !== undefined) {
    if (r === null || typeof r !== 'object') throw invalidType('redis', 'an object', r);
    prefix = r.prefix ?? D.redis.prefix;
    if (typeof prefix !== 'string') throw invalidType('redis.prefix', 'a string', r.prefix);
    redisTtlMs = checkInt('redis.ttlSeconds', r.ttlSeconds ?? D.redis.ttlSeconds, 1) * 1000;
    redisTimeoutMs = checkInt('redis.timeoutMs', r.timeoutMs ?? D.redis.timeoutMs, 1);
    redisBatch = checkInt('redis.batchSize', r.batchSize ?? D.redis.batchSize, 1, 100_000);
    if (r.client) redis = { client: r.client };
    else if (typeof r.url === 'string') redis = { url: r.url };
    else throw invalidType('redis.client', 'an ioredis client (or redis.url a string)', r.client);
  }

  if (opts.cold !== undefined && (typeof opts.cold?.mget !== 'function' || typeof opts.cold?.mput !== 'function')) {
    throw invalidType('cold', 'a ColdStore (mget, mput)', opts.cold);
  }
  const c = opts.coldOptions ?? {};
  const coldTimeoutMs = checkInt('coldOptions.timeoutMs', c.timeoutMs ?? D.cold.timeoutMs, 1);
  const coldBatch = checkInt('coldOptions.batchSize', c.batchSize ?? D.cold.batchSize, 1, 100_000);

  const bloom = opts.bloom ?? false;
  if (bloom !== false && typeof bloom !== 'function' && typeof (bloom as BloomLike).mightContain !== 'function') {
    throw invalidType('bloom', 'a Bloom filter, a function or false', bloom);
  }
  const br = opts.breaker ?? {};
  const breakerFailures = checkInt('breaker.failures', br.failures ?? D.breaker.failures, 1);
  const breakerCooldownMs = checkInt('breaker.cooldownMs', br.cooldownMs ?? D.breaker.cooldownMs, 0);
  const maxKeys = checkInt('maxKeysPerLookup', opts.maxKeysPerLookup ?? D.maxKeysPerLookup, 1);
  if (opts.onTierError !== undefined && typeof opts.onTierError !== 'function') {
    throw invalidType('onTierError', 'a function', opts.onTierError);
  }
  const coalesce = parseCoalesceOptions(opts.coalesce, 'coalesce');
  return {
    lru,
    maxTables,
    negativeTtlMs,
    graceMs,
    now,
    persistent,
    redis,
    prefix,
    redisTtlMs,
    redisTimeoutMs,
    redisBatch,
    cold: opts.cold,
    coldTimeoutMs,
    coldBatch,
    bloom,
    breakerFailures,
    breakerCooldownMs,
    maxKeys,
    onTierError: opts.onTierError,
    coalesce,
    bus: opts.bus === undefined || opts.bus === false ? undefined : opts.bus,
  };
}
