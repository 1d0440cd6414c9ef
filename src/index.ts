// Package root: the facade, the hashing API, the data structures and the errors.
export { HashGate, DEFAULTS as GATE_DEFAULTS } from './gate.js';
export type { HashGateOptions, GateStats, GateBloomStats, GateDedupCounters, GateHealth, TierHealth, HealthStatus, Keys } from './gate.js';
export * from './errors.js';
export {
  murmur3_128, murmur3_128Hex, murmur3_32, murmur3_x86_128, murmur3_64, xxh64, hashBatch, bucketsOf, jumpBucketsOf,
  bucketOf, jumpBucket, canonicalJson, packKeys, packLines, packedKey, digestSize, toBytes,
} from './hash/index.js';
export type { PackedKeys, PackLinesOptions, HashAlgorithm, HashBatchOptions, CanonicalJsonOptions } from './hash/index.js';
export * from './bloom/index.js';
export { DedupService } from './dedup/service.js';
export type { DedupServiceOptions, DedupStats, FirstSeenOptions, RecoverReport } from './dedup/service.js';
export { DEFAULTS as DEDUP_DEFAULTS } from './dedup/options.js';
export type { DedupOptions, RedisConfig, Layout, OnStoreError } from './dedup/options.js';
export { windowId } from './dedup/window.js';
export { MAX_KEY_BYTES } from './util/limits.js';
export * from './cache/index.js';
export * from './tiering/index.js';
export * from './risk/index.js';
export * from './fingerprint/index.js';
export * from './ids/index.js';
export {
  createMetrics, resolveMetrics, PromMetrics, NoopMetrics, noopMetrics, metricsHandler, serveMetrics,
  CHANNEL_BATCH_START, CHANNEL_BATCH_END, CHANNEL_STORE_ERROR,
} from './metrics/index.js';
export type { Metrics, MetricsOptions } from './metrics/index.js';
// The HBase client library is an optional peer dependency, loaded only when an HBaseStore is built.
export { HBaseStore, DEFAULTS as HBASE_DEFAULTS } from './hbase/client.js';
export type {
  HBaseStoreOptions, HBaseRow, HBaseCell, HBaseCallCounts, Bytes as HBaseBytes, ReadOptions as HBaseReadOptions,
  WriteOptions as HBaseWriteOptions, PutEntry as HBasePutEntry, ScanOptions as HBaseScanOptions,
} from './hbase/client.js';
