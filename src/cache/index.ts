// Multi-level lookup cache: Bloom gate, local LRU, Redis (hot, TTL), cold store (HBase).
//
//   const cache = new TieredCache({
//     local: { maxEntries: 100_000, maxBytes: 64 MiB, ttlMs: 60_000, maxTables: 64 },  // per table
//     negativeTtlMs: 5_000,
//     redis: { url | client, ttlSeconds: 3600 (backfill TTL), prefix: 'hg:v:', timeoutMs: 250, batchSize: 500 },
//     cold: new HBaseColdStore({ store: new HBaseStore({ zookeeper }) }),   // or MemoryColdStore
//     coldOptions: { timeoutMs: 2_000, batchSize: 100 },
//     bloom: filter | ((table) => filter | undefined) | false,
//     breaker: { failures: 5, cooldownMs: 1_000 },
//     maxKeysPerLookup: 100_000,
//     onTierError: (err, cause) => void,   // also published on diagnostics_channel 'hashgate:store:error'
//     graceMs: 0,                          // opt-in: serve a value past its local TTL when a tier fails
//     now: () => number,
//   });
//   const values = await cache.lookup('blacklist', keys);      // undefined = absent; rejects if unknown
//   const { values, errors, degraded, unknown, stale } = await cache.lookupDetailed(table, keys);
//   cache.stats(); cache.invalidate(table, keys); await cache.close();
//
// Order per key: Bloom gate (no I/O for definite absents) -> local LRU (positive and negative
// entries) -> Redis MGET (hot) -> cold mget (HBase). Lower-tier hits are copied up: into Redis as
// archived copies (SET NX PX, a newer hot write wins) and into the LRU. Only keys every tier
// answered for are cached locally: absent ones negatively for negativeTtlMs. A key a tier could
// not answer (failed, timed out, or skipped by its open breaker) is answered from the tiers that
// did, marks the lookup degraded, and is not cached, so it is asked again; when no tier found it,
// it is unknown: lookup() rejects with HG_ERR_TIER_UNAVAILABLE (details.tier, details.indexes),
// lookupDetailed() lists it in `unknown`, and with graceMs a stale local value is served instead
// (lookupDetailed().stale, with its age). Misses under way are shared (single flight per table
// and key); a lookup sharing a degraded load is degraded too.
// A tier that errors or times out is counted (stats().redis/cold.errors, lastError, healthy) and
// reported in lookupDetailed().errors (breaker skips too, flagged `skipped`); after
// `breaker.failures` consecutive errors it is skipped for `breaker.cooldownMs`. A Redis client
// that lost its connection reports the tier unhealthy even while local hits spare it every call.
// Until a Redis client has connected once, loads wait for it up to redis.timeoutMs.
//
// Values: a Uint8Array or a plain object, msgpack-encoded (msgpackr, no records extension) in
// Redis and HBase. Redis value = 10-byte envelope [version][flags: archived][ts f64 BE] + payload,
// so the write time travels with the value to HBase, where it becomes the cell timestamp and the
// family TTL (90 days, coldTableDdl()) expires it. Writes and hot -> cold migration: src/tiering.
export { TieredCache, createFailFastRedis, checkTable } from './tiered-cache.js';
export { CACHE_DEFAULTS } from './options.js';
export { InvalidationBus, BUS_DEFAULTS } from './bus.js';
export type { InvalidationBusOptions, BusListener, BusStats, BusOption } from './bus.js';
export type { LookupResult, StaleAnswer } from './tiered-cache.js';
export type { TieredCacheOptions, RedisTierOptions, ColdTierOptions, BloomOption } from './options.js';
export { MemoryColdStore, MEMORY_COLD_DEFAULTS } from './memory-cold.js';
export { encodeValue, decodeValue, decodeEnvelopeValue, wrapEnvelope, readEnvelope, FLAG_ARCHIVED, ENVELOPE_HEADER_BYTES } from './codec.js';
export type { Envelope } from './codec.js';
export type { CacheStats, RemoteTierSnapshot, LatencySnapshot, TierError } from './stats.js';
export type { CacheValue, ColdCell, ColdEntry, ColdStore, BloomLike, BloomWritable } from './types.js';
export { HBaseColdStore, HBASE_COLD_DEFAULTS, coldTableDdl } from './hbase-cold.js';
export type { HBaseColdStoreOptions } from './hbase-cold.js';
