export { IdRegistry, DEFAULTS as IDS_DEFAULTS } from './registry.js';
export type { IdRegistryOptions, UpsertResult, RepairReport, IdRegistryStats, IdRegistryEvents } from './registry.js';
export { logicalId, hashCanonical, ID_ALGORITHMS } from './logical-id.js';
export type { IdAlgorithm, BuiltinIdAlgorithm, CustomIdHash } from './logical-id.js';
export { MemoryIdStore } from './memory-store.js';
export { RedisIdStore } from './redis-store.js';
export type { RedisIdStoreOptions } from './redis-store.js';
export type { CollisionRecord, IdStore, IdStoreConfig, IdStoreStats, StoredDoc, UpsertOutcome, UpsertPlan, UpsertStatus } from './types.js';
