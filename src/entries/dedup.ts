// Entry point `hashgate/dedup`: the exact first-seen service without a gate (no worker pool, no
// Bloom filter), e.g. for a job that only deduplicates. A service normally opens a HashGate.
export { DedupService } from '../dedup/service.js';
export type { DedupServiceOptions, DedupStats, DedupCounters, FirstSeenOptions, RecoverReport } from '../dedup/service.js';
export { DEFAULTS as DEDUP_DEFAULTS } from '../dedup/options.js';
export type { DedupOptions, RedisConfig, Layout, OnStoreError, CacheAdmit } from '../dedup/options.js';
export { windowId } from '../dedup/window.js';
export type { WindowSpec, WindowKind, WindowFn } from '../dedup/window.js';
