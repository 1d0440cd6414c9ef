// Entry point `hashgate/cache`: the multi-level lookup cache used on its own (TieredCache, its
// cold stores, the invalidation bus, the value codec) and hot -> cold tiering (HotColdStore).
export { TieredCache } from '../cache/tiered-cache.js';
export type { LookupResult } from '../cache/tiered-cache.js';
export { CACHE_DEFAULTS } from '../cache/options.js';
export type { TieredCacheOptions, RedisTierOptions, ColdTierOptions, BloomOption } from '../cache/options.js';
export { InvalidationBus, BUS_DEFAULTS } from '../cache/bus.js';
export type { InvalidationBusOptions, BusListener, BusStats, BusOption } from '../cache/bus.js';
export { MemoryColdStore, MEMORY_COLD_DEFAULTS } from '../cache/memory-cold.js';
export { HBaseColdStore, HBASE_COLD_DEFAULTS, coldTableDdl } from '../cache/hbase-cold.js';
export type { HBaseColdStoreOptions } from '../cache/hbase-cold.js';
export { encodeValue, decodeValue, decodeEnvelopeValue, wrapEnvelope, readEnvelope, FLAG_ARCHIVED, ENVELOPE_HEADER_BYTES } from '../cache/codec.js';
export type { Envelope } from '../cache/codec.js';
export type { CacheStats, RemoteTierSnapshot, LatencySnapshot, TierError } from '../cache/stats.js';
export type { CacheValue, ColdCell, ColdEntry, ColdStore, BloomLike, BloomWritable } from '../cache/types.js';
export { HotColdStore, TIERING_DEFAULTS } from '../tiering/hot-cold.js';
export type { HotColdOptions, MigrateOptions, MigrateResult, TieringMode, WriteEntry, WriteResult } from '../tiering/hot-cold.js';
