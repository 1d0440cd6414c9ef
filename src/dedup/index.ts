export { DedupService, type DedupServiceOptions, type FirstSeenOptions, type DedupStats, type DedupCounters, type RecoverReport } from './service.js';
export { DEFAULTS, parseDedupOptions, type DedupOptions, type ResolvedDedupOptions, type Layout, type OnStoreError, type RedisConfig } from './options.js';
export { windowId, WindowClock, type WindowSpec, type WindowKind, type WindowFn } from './window.js';
export * as layout from './layout.js';
export { Journal } from './journal.js';
export { StoreBatchError, MemoryStore, type DedupStore } from './store.js';
export { RedisStore } from './redis-store.js';
export { createRedisClient } from '../redis/client.js';
export { LmdbStore } from './lmdb-store.js';
