export { BloomFilter, DEFAULTS as BLOOM_DEFAULTS, parseGuavaHeader } from './bloom-filter.js';
export type { BloomFilterOptions, BloomSharedDescriptor, GuavaHeader } from './bloom-filter.js';
export { bloomShape, optimalNumOfBits, optimalNumOfHashFunctions, MAX_BIT_SIZE } from './sizing.js';
export type { BloomShape, BloomSizeOptions } from './sizing.js';
export type { Key, KeyBatch } from './keys.js';
export { CountingBloomFilter } from './counting.js';
export type { CountingBloomFilterOptions, CountingSharedDescriptor } from './counting.js';
export {
  writeSnapshot,
  readSnapshot,
  readCountingSnapshot,
  readSnapshotInfo,
  SNAPSHOT_MAGIC,
  SNAPSHOT_VERSION,
  SNAPSHOT_HEADER_BYTES,
} from './snapshot.js';
export type { SnapshotFormat, SnapshotExpect, SnapshotInfo } from './snapshot.js';
export { SwappableBloom, rebuild, buildBloom, REBUILD_DEFAULTS } from './rebuild.js';
export type { RebuildOptions, RebuildSource } from './rebuild.js';
export { ReplicatedGate, isSharedGate } from './shared-gate.js';
export type { SharedGate, ReplicatedGateOptions } from './shared-gate.js';
export { RedisBloom, REDIS_BLOOM_DEFAULTS } from './redis-bloom.js';
export type { RedisBloomOptions, RedisBloomConfig, RedisBloomKey, RedisBloomLayout } from './redis-bloom.js';
export { redissonShape, redissonConfigKey, javaDoubleToString, encodeRedissonString, REDISSON_MAX_BITS } from './redisson.js';
export type { RedissonShape } from './redisson.js';
export { RedisBloomReplica, REDIS_BLOOM_REPLICA_DEFAULTS } from './redis-replica.js';
export { ShardedRedisBloom, SHARDED_REDIS_BLOOM_DEFAULTS, shardedShape, sliceName } from './redis-sharded.js';
export type { ShardedRedisBloomOptions } from './redis-sharded.js';
export type { RedisHeldBloom } from './redis-calls.js';
export type { RedisBloomReplicaOptions, RedisBloomReplicaStats } from './redis-replica.js';
export { rebuildRedisBloom, readRebuildStatus, rebuildKeys, REDIS_REBUILD_DEFAULTS, REBUILD_EXIT } from './redis-rebuild.js';
export type { RedisBloomRebuildOptions, RedisBloomRebuildResult, RedisBloomRebuildStatus } from './redis-rebuild.js';
export { ExportFileKeys, RedisSetWindowKeys, HBaseScanKeys, SOURCE_BATCH_KEYS } from './rebuild-sources.js';
export type { KeySource, ExportFileOptions, RedisSetWindowOptions, HBaseScanOptions as HBaseScanKeysOptions, RejectedLine } from './rebuild-sources.js';
export { redisBloomMetrics } from './redis-bloom-metrics.js';
export type { RedisBloomMetrics } from './redis-bloom-metrics.js';
