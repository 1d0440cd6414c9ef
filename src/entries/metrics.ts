// Entry point `hashgate/metrics`: the metrics parts beyond the root's createMetrics/serveMetrics:
// the Metrics implementations, the source adapters for your own components (bloomStats,
// piscinaStats, journalDirStats, cacheTierTotals) and the diagnostics channel names.
export {
  createMetrics, resolveMetrics, PromMetrics, METRICS_DEFAULTS, NoopMetrics, noopMetrics, metricsHandler, serveMetrics,
  bloomStats, piscinaStats, journalDirStats, cacheTierTotals, CHANNEL_BATCH_START, CHANNEL_BATCH_END, CHANNEL_STORE_ERROR,
} from '../metrics/index.js';
export type {
  Metrics, MetricsOptions, Tier, BusStatsView, BloomStats, PoolStats, JournalStats, DedupCountersView, TierTotals, CacheTierTotals,
  BloomStatsSource, PiscinaLike, CacheStatsLike, MetricsServer, ServeOptions, MetricsSource, BatchOp, BatchStartMessage,
  BatchEndMessage, StoreErrorMessage,
} from '../metrics/index.js';
export type { RegistryLike } from '../metrics/registry.js';
