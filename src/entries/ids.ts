// Entry point `hashgate/ids`: collision-safe logical ids on their own (a gate opened with `ids`
// holds an IdRegistry as `gate.ids`) and their stores.
export { IdRegistry, DEFAULTS as IDS_DEFAULTS } from '../ids/registry.js';
export type { IdRegistryOptions, UpsertResult, RepairReport, IdRegistryStats, IdRegistryEvents } from '../ids/registry.js';
export { logicalId, hashCanonical, ID_ALGORITHMS } from '../ids/logical-id.js';
export type { IdAlgorithm, BuiltinIdAlgorithm, CustomIdHash } from '../ids/logical-id.js';
export { MemoryIdStore } from '../ids/memory-store.js';
export { RedisIdStore } from '../ids/redis-store.js';
export type { RedisIdStoreOptions } from '../ids/redis-store.js';
export type { CollisionRecord, IdPage, IdStore, IdStoreConfig, IdStoreStats, StoredDoc, UpsertOutcome, UpsertPlan, UpsertStatus } from '../ids/types.js';
export { HBaseIdStore, HBASE_IDS_DEFAULTS } from '../ids/hbase-store.js';
export type { HBaseIdStoreOptions } from '../ids/hbase-store.js';
