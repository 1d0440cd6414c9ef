// Package root (`hashgate`): what a service needs — the gate, the Java-compatible hashes, the
// errors and the metrics endpoint. Components used on their own live in subpath exports
// (`hashgate/bloom`, `hashgate/cache`, `hashgate/hbase`, `hashgate/dedup`, `hashgate/ids`,
// `hashgate/fingerprint`, `hashgate/metrics`). Adding a run-time name here is an API decision.
export { HashGate, DEFAULTS as GATE_DEFAULTS } from './gate.js';
export type { HashGateOptions, GateStats, GateBloomStats, GateDedupCounters, GateHealth, TierHealth, HealthStatus, Keys } from './gate.js';

export { HashGateError, HashGateTypeError, HashGateRangeError, ErrorCodes } from './errors.js';
export type { ErrorCode, HashGateErrorOptions } from './errors.js';

export {
  murmur3_128, murmur3_128Hex, murmur3_32, murmur3_x86_128, murmur3_64, xxh64, hashBatch, bucketOf, bucketsOf,
  jumpBucket, jumpBucketsOf, canonicalJson, packKeys, packLines,
} from './hash/index.js';
export type { Key, PackedKeys, PackLinesOptions, HashAlgorithm, HashBatchOptions, CanonicalJsonOptions } from './hash/index.js';

// The option and result types of the gate's parts (their classes are in the subpaths).
export { DEFAULTS as DEDUP_DEFAULTS } from './dedup/options.js';
export type { DedupOptions, RedisConfig, Layout, OnStoreError, CacheAdmit } from './dedup/options.js';
export type { DedupStats, FirstSeenOptions, RecoverReport } from './dedup/service.js';
export { windowId } from './dedup/window.js';
export type { WindowSpec, WindowKind, WindowFn } from './dedup/window.js';
export type { BloomFilterOptions } from './bloom/bloom-filter.js';
export type { TieredCacheOptions, RedisTierOptions, ColdTierOptions, BloomOption } from './cache/options.js';
export type { LookupResult } from './cache/tiered-cache.js';
export type { CacheValue, ColdStore } from './cache/types.js';
export type { CacheStats, TierError } from './cache/stats.js';
export type { FingerprintIndexOptions } from './fingerprint/fingerprint-index.js';
export type { IdRegistryOptions } from './ids/registry.js';
export type { CoalesceOptions } from './util/coalescer.js';

export { createMetrics, metricsHandler, serveMetrics } from './metrics/index.js';
export type { Metrics, MetricsOptions, MetricsServer, MetricsSource, ServeOptions } from './metrics/index.js';
export type { RegistryLike } from './metrics/registry.js';
