// The metrics API components call. Everything is per BATCH (or per scrape, for gauges backed by
// callbacks): a hot loop over keys never touches a metric. `NoopMetrics` implements it with empty
// bodies so a gate opened without metrics pays one virtual call per batch and nothing else.

import type { BatchOp } from './channels.js';

export type { BatchOp } from './channels.js';

/** Cache tiers of the lookup path, top to bottom. */
export type Tier = 'bloom' | 'lru' | 'redis' | 'hbase' | (string & {});

/** Read on scrape from a live Bloom filter (cheap fields only; bitCount may be cached by the filter). */
export interface BloomStats {
  bitSize: number;
  bitsSet: number;
  hashFunctions: number;
  expectedFpp: number;
  approximateElements?: number;
  /** If the filter samples its own FPP; otherwise it comes from `bloomSample` counters. */
  measuredFpp?: number;
}

export interface PoolStats {
  threads: number;
  queueDepth: number;
  /** 0..1, e.g. piscina's `pool.utilization`. */
  utilization: number;
  completedTasks?: number;
}

export interface JournalStats {
  /** Records (keys) journaled and not yet acknowledged by the store, if the journal knows. */
  records?: number;
  bytes: number;
  segments?: number;
  /** Age of the oldest unreplayed record; alert when > 3600 for long. */
  oldestAgeSeconds?: number;
}

/**
 * Cumulative dedup counters a service already keeps (DedupService.counters has this shape):
 * read on scrape and added to what `dedup()` pushed, so wiring costs nothing per batch.
 */
export interface DedupCountersView {
  /** Keys checked. */
  keys: number;
  /** Keys answered first-seen. */
  firstSeen: number;
  /** Keys answered first-seen because the store failed (fail-open, journaled). */
  journaledKeys?: number;
  /** Failed store calls (batches), whatever the kind. */
  storeErrors?: number;
  /** Predicted largest bucket of the current window / the intset limit (compact layout on Redis). */
  bucketFillRatio?: number;
}

/** Cumulative per-tier counters a cache keeps itself, read on scrape. */
export interface TierTotals {
  hits: number;
  misses: number;
  errors: number;
  /** false while the tier is failing or its breaker is open. */
  up?: boolean;
}

export type CacheTierTotals = Partial<Record<Tier, TierTotals>>;

/** What InvalidationBus.stats() (src/cache/bus.ts) returns, structurally; read on scrape. */
export interface BusStatsView {
  connected: boolean;
  sent: number;
  received: number;
  droppedSend: number;
  droppedMalformed: number;
  pending: number;
  resyncs: number;
  /** Re-subscriptions that cleared local tiers, and those answered by replaying the log. */
  localClears: number;
  replays: number;
  lagMs: { count: number; p50: number; p99: number; max: number };
}

export interface Metrics {
  /** false for NoopMetrics: callers may skip building optional arguments. */
  readonly enabled: boolean;

  /**
   * Marks a batch start: publishes `hashgate:batch:start` if subscribed and returns the start
   * time (performance.now()) to hand to `batchEnd`.
   */
  batchStart(op: BatchOp, keys: number): number;
  /** Observes the batch latency and key count; publishes `hashgate:batch:end` if subscribed. */
  batchEnd(op: BatchOp, keys: number, start: number, error?: unknown): void;
  /** Same as batchEnd for callers that timed the batch themselves (no channel event). */
  observeBatch(op: BatchOp, keys: number, seconds: number): void;

  /** One dedup batch: how many keys were first-seen and how many were duplicates. */
  dedup(firstSeen: number, duplicates: number): void;
  /** Keys answered first-seen because the store failed (fail-open) and journaled. */
  dedupFailOpen(keys: number): void;

  /** A batch of logical-id upserts: statuses by count, per hash function. */
  ids(hashFunction: string, created: number, duplicates: number, collisions: number): void;
  /** Collisions found outside upsert (e.g. the repair job). */
  collision(hashFunction: string, n?: number): void;

  /** One lookup batch against one tier. */
  tier(tier: Tier, hits: number, misses: number, errors: number, seconds: number): void;
  /** A store failure (also published on `hashgate:store:error` if subscribed). */
  storeError(store: string, kind: string, n?: number, error?: unknown): void;

  /** Records appended to the fail-open journal in one batch. */
  journalAppended(records: number, bytes: number): void;
  /** Records replayed into the store and acknowledged. */
  journalReplayed(records: number, bytes: number): void;
  /** Sets the backlog gauges directly (alternative to `journalSource`). */
  journalBacklog(records: number, bytes: number): void;

  /** One loader flush: rows stored, rejected (unparseable), failed (store gave up), input bytes. */
  loader(rows: number, bytes: number, rejected?: number, failed?: number): void;

  /** Bloom pre-check outcomes among keys the exact store confirmed absent: feeds measured FPP. */
  bloomSample(filter: string, confirmedAbsent: number, falsePositives: number): void;

  /** Gauges read on scrape. Each returns an unregister function; call it on close. */
  bloomSource(filter: string, read: () => BloomStats): () => void;
  poolSource(pool: string, read: () => PoolStats): () => void;
  journalSource(journal: string, read: () => JournalStats): () => void;
  /** Dedup counters read on scrape (alternative to calling `dedup()` per batch). */
  dedupSource(name: string, read: () => DedupCountersView): () => void;
  /** Per-tier cache counters read on scrape (alternative to calling `tier()` per batch). */
  cacheSource(name: string, read: () => CacheTierTotals): () => void;
  /** An invalidation bus's counters, read on scrape. */
  busSource(name: string, read: () => BusStatsView): () => void;
}
