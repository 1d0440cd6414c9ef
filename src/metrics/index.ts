// hashgate metrics: Prometheus (prom-client) + node:diagnostics_channel.
//
// Components report per BATCH, never per key; gauges that cost something (Bloom bit counts, pool
// queue depth, journal backlog) are callbacks read only when someone scrapes. With metrics off,
// components hold `noopMetrics` and pay an empty call per batch.
//
// Metric names (default prefix `hashgate_`; change with `prefix`):
//   batch_duration_seconds{op}            histogram  one batch: hash, bloom_add, bloom_check, dedup, lookup, load, ...
//   batch_keys_total{op}                  counter    keys processed in batches
//   batch_errors_total{op}                counter    failed batches
//   dedup_keys_checked_total              counter    keys checked by firstSeen
//   dedup_first_seen_total                counter    answered first-seen
//   duplicates_skipped_total              counter    answered already-seen (same name as the Java services' counter)
//   dedup_rate                            gauge      duplicates / checked since start
//   dedup_fail_open_total                 counter    answered first-seen because the store failed (journaled)
//   dedup_store_errors_total              counter    failed dedup store calls (from DedupService.counters)
//   id_upserts_total{status}              counter    logical-id upserts: new | duplicate | collision
//   documents_hashed_total{hash_function} counter    documents given a logical id
//   hash_collisions_total{hash_function}  counter    collisions (same name as the Java services' counter)
//   collision_rate{hash_function}         gauge      collisions / documents (healthy < 1e-6 = 0.0001%)
//   cache_hits_total{tier}                counter    per tier: bloom, lru, redis, hbase
//   cache_misses_total{tier}              counter
//   cache_errors_total{tier}              counter
//   cache_batch_duration_seconds{tier}    histogram  one lookup batch against one tier
//   cache_tier_up{tier}                   gauge      0 while a remote tier fails or its breaker is open
//   store_errors_total{store,kind}        counter    kind: timeout, connection, oom, failover, cluster, io, other
//   journal_appended_records_total        counter    fail-open journal appends
//   journal_appended_bytes_total          counter
//   journal_replayed_records_total        counter    replayed and acknowledged by the store
//   journal_replayed_bytes_total          counter
//   journal_last_replay_timestamp_seconds gauge
//   journal_backlog_records{journal}      gauge      not yet replayed (alert: > 0 for 1 h)
//   journal_backlog_bytes{journal}        gauge
//   journal_backlog_segments{journal}     gauge
//   journal_oldest_record_age_seconds{journal} gauge
//   loader_rows_total{outcome}            counter    loaded | rejected | failed; rows/s = rate()
//   loader_bytes_total                    counter
//   bloom_bits{filter}, bloom_bits_set{filter}, bloom_fill_ratio{filter}, bloom_hash_functions{filter},
//   bloom_expected_fpp{filter}, bloom_approximate_elements{filter}           gauges read on scrape
//   bloom_confirmed_absent_total{filter}  counter    FPP sample: keys the exact store confirmed absent
//   bloom_false_positives_total{filter}   counter    ... of which the filter said "might contain"
//   bloom_measured_fpp{filter}            gauge      false positives / confirmed absent (alert: > 2x expected)
//   bus_messages_sent_total{bus}          counter    invalidation messages published (src/cache/bus.ts)
//   bus_messages_received_total{bus}      counter    messages from other instances applied locally
//   bus_messages_dropped_total{bus,reason} counter   reason: send (publish failed / queue full), malformed
//   bus_local_clears_total{bus}           counter    local tiers cleared after a re-subscription
//   bus_replays_total{bus}                counter    re-subscriptions answered from the replay log
//   bus_connected{bus}, bus_pending_messages{bus}                            gauges
//   bus_delivery_lag_seconds{bus,quantile} gauge     publish-to-receipt delay, quantile 0.5 | 0.99 | 1
//   pool_threads{pool}, pool_queue_depth{pool}, pool_utilization{pool}, pool_completed_tasks{pool}  gauges
//
// Diagnostics channels (published only when subscribed): hashgate:batch:start {op, keys, start},
// hashgate:batch:end {op, keys, start, durationMs, error?}, hashgate:store:error {store, kind, error?}.

import { invalidType } from '../errors.js';
import { createPromMetrics, PromMetrics } from './prom.js';
import type { MetricsOptions } from './prom.js';
import { noopMetrics } from './noop.js';
import type { Metrics } from './types.js';

export type { Metrics, Tier, BusStatsView, BloomStats, PoolStats, JournalStats, DedupCountersView, TierTotals, CacheTierTotals } from './types.js';
export type { MetricsOptions } from './prom.js';
export { PromMetrics, DEFAULTS as METRICS_DEFAULTS } from './prom.js';
export { NoopMetrics, noopMetrics } from './noop.js';
export { metricsHandler, serveMetrics } from './http.js';
export { bloomStats, piscinaStats, journalDirStats, cacheTierTotals } from './adapters.js';
export type { BloomStatsSource, PiscinaLike, CacheStatsLike } from './adapters.js';
export type { MetricsServer, ServeOptions, MetricsSource } from './http.js';
export {
  CHANNEL_BATCH_START,
  CHANNEL_BATCH_END,
  CHANNEL_STORE_ERROR,
  batchStartChannel,
  batchEndChannel,
  storeErrorChannel,
  errorKind,
} from './channels.js';
export type { BatchOp, BatchStartMessage, BatchEndMessage, StoreErrorMessage } from './channels.js';

/** Prometheus-backed metrics; one instance per (registry, prefix). */
export function createMetrics(options: MetricsOptions = {}): PromMetrics {
  return createPromMetrics(options);
}

/**
 * Normalises the `metrics` option of HashGate.open and the components:
 * undefined/false -> noop; true -> a new private registry; a Metrics -> itself;
 * { registry?, prefix?, ... } -> createMetrics(options).
 */
export function resolveMetrics(option: unknown, name = 'metrics'): Metrics {
  if (option === undefined || option === false || option === null) return noopMetrics;
  if (option === true) return createPromMetrics();
  if (typeof option === 'object' && option !== null) {
    if (isMetrics(option)) return option;
    return createPromMetrics(option as MetricsOptions);
  }
  throw invalidType(name, 'a boolean, a Metrics instance or { registry?, prefix? }', option);
}

function isMetrics(v: object): v is Metrics {
  const m = v as Partial<Metrics>;
  return typeof m.batchStart === 'function' && typeof m.batchEnd === 'function' && typeof m.dedup === 'function';
}
