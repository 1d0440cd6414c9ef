export { TieredCache, CACHE_DEFAULTS, createFailFastRedis, checkTable } from './tiered-cache.js';
export type { TieredCacheOptions, RedisTierOptions, ColdTierOptions, BloomOption, LookupResult } from './tiered-cache.js';
export { MemoryColdStore, MEMORY_COLD_DEFAULTS } from './memory-cold.js';
export { encodeValue, decodeValue, wrapEnvelope, readEnvelope, FLAG_ARCHIVED, HEADER_BYTES } from './codec.js';
export type { Envelope } from './codec.js';
export type { CacheStats, RemoteTierSnapshot, LatencySnapshot, TierError } from './stats.js';
export type { CacheValue, ColdCell, ColdEntry, ColdStore, BloomLike, BloomWritable } from './types.js';
export { HBaseColdStore, HBASE_COLD_DEFAULTS, coldTableDdl } from './hbase-cold.js';
export type { HBaseColdStoreOptions } from './hbase-cold.js';
