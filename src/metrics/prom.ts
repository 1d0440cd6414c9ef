// prom-client implementation of Metrics. Names (default prefix `hashgate_`) are listed in
// src/metrics/index.ts and docs/OPERATIONS.md; renaming one breaks users' dashboards and alerts.

import { performance } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Metric } from 'prom-client';
import { publishBatchEnd, publishBatchStart, publishStoreError } from './channels.js';
import type { BatchOp } from './channels.js';
import type { BloomStats, BusStatsView, CacheTierTotals, DedupCountersView, JournalStats, Metrics, PoolStats, Tier, TierTotals } from './types.js';
import { checkKnownKeys, invalidType } from '../errors.js';
import { asRegistry, isRegistry, type RegistryLike } from './registry.js';

export const DEFAULTS = {
  prefix: 'hashgate_',
  /** Batch latencies: 25 µs .. 5 s; a 2 ms p99 hashing target falls mid-range. */
  batchBuckets: [0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  collectDefaultMetrics: false,
} as const;

export interface MetricsOptions {
  /**
   * Your prom-client Registry (from your own prom-client install); default: a new private
   * Registry (never prom-client's global one).
   */
  registry?: RegistryLike;
  /** Name prefix, default `hashgate_`. */
  prefix?: string;
  /** Also register prom-client's process metrics (CPU, heap, event loop lag) under the prefix. */
  collectDefaultMetrics?: boolean;
  /** Histogram buckets (seconds) for batch and tier latencies. */
  buckets?: readonly number[];
}

type Sources<T> = Map<string, () => T>;

/** One instance per (registry, prefix): a second gate on the same registry shares the metrics. */
const instances = new WeakMap<Registry, Map<string, PromMetrics>>();

export function createPromMetrics(options: MetricsOptions = {}): PromMetrics {
  if (options === null || typeof options !== 'object') throw invalidType('metrics', 'an options object', options);
  checkKnownKeys('metrics', options, ['registry', 'prefix', 'collectDefaultMetrics', 'buckets']);
  const given: unknown = options.registry ?? new Registry();
  if (!isRegistry(given)) throw invalidType('metrics.registry', 'a prom-client Registry', given);
  const registry = asRegistry(given);
  const prefix = options.prefix ?? DEFAULTS.prefix;
  if (typeof prefix !== 'string' || !/^[a-zA-Z_:]?[a-zA-Z0-9_:]*$/.test(prefix)) {
    throw invalidType('metrics.prefix', 'a Prometheus name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*)', prefix);
  }
  let byPrefix = instances.get(registry);
  if (!byPrefix) instances.set(registry, (byPrefix = new Map()));
  const existing = byPrefix.get(prefix);
  if (existing) return existing;
  const m = new PromMetrics(registry, prefix, options);
  byPrefix.set(prefix, m);
  return m;
}

export class PromMetrics implements Metrics {
  readonly enabled = true;
  readonly registry: Registry;
  readonly prefix: string;

  private readonly batchDuration: Histogram<'op'>;
  private readonly batchKeys: Counter<'op'>;
  private readonly batchErrors: Counter<'op'>;
  private readonly idUpserts: Counter<'status'>;
  private readonly docsHashed: Counter<'hash_function'>;
  private readonly collisions: Counter<'hash_function'>;
  private readonly tierDuration: Histogram<'tier'>;
  private readonly storeErrors: Counter<'store' | 'kind'>;
  private readonly journalAppendRecords: Counter;
  private readonly journalAppendBytes: Counter;
  private readonly journalReplayRecords: Counter;
  private readonly journalReplayBytes: Counter;
  private readonly journalLastReplay: Gauge;
  private readonly loaderRows: Counter<'outcome'>;
  private readonly loaderBytes: Counter;
  private readonly bloomAbsent: Counter<'filter'>;
  private readonly bloomFalsePos: Counter<'filter'>;

  // Plain numbers beside the counters so ratio gauges are computed on scrape, not per batch.
  // Dedup totals pushed by dedup()/dedupFailOpen() plus what closed sources last reported.
  private readonly dedupBase = { keys: 0, firstSeen: 0, failOpen: 0, storeErrors: 0 };
  private readonly docsBy = new Map<string, number>();
  private readonly collisionsBy = new Map<string, number>();
  private readonly bloomSampleBy = new Map<string, { absent: number; fp: number }>();
  private readonly directBacklog = { set: false, records: 0, bytes: 0 };

  private readonly blooms: Sources<BloomStats> = new Map();
  private readonly pools: Sources<PoolStats> = new Map();
  private readonly journals: Sources<JournalStats> = new Map();
  private readonly dedups: Sources<DedupCountersView> = new Map();
  private readonly caches: Sources<CacheTierTotals> = new Map();
  private readonly buses: Sources<BusStatsView> = new Map();
  // Bus counters of closed sources, so the totals never go backwards.
  private readonly busBase = new Map<string, BusTotals>();
  // Tier totals pushed by tier() plus the last reading of closed cache sources.
  private readonly tierBase = new Map<string, { hits: number; misses: number; errors: number }>();

  // Cached label children: per-batch calls then cost a Map lookup, not a label-object hash.
  private readonly opChildren = new Map<string, { d: { observe(v: number): void }; k: { inc(v: number): void } }>();

  constructor(registry: Registry, prefix: string, options: MetricsOptions) {
    this.registry = registry;
    this.prefix = prefix;
    const p = prefix;
    const reg = [registry];
    const buckets = options.buckets ? [...options.buckets] : [...DEFAULTS.batchBuckets];
    const self = this;

    const counter = <L extends string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> =>
      reuse(registry, p + name, () => new Counter<L>({ name: p + name, help, labelNames, registers: reg }));
    const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[]): Histogram<L> =>
      reuse(registry, p + name, () => new Histogram<L>({ name: p + name, help, labelNames, buckets, registers: reg }));
    const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[], collect?: (g: Gauge<L>) => void): Gauge<L> =>
      reuse(registry, p + name, () =>
        new Gauge<L>({
          name: p + name,
          help,
          labelNames,
          registers: reg,
          ...(collect ? { collect(this: Gauge<L>) { collect(this); } } : {}),
        }),
      );

    this.batchDuration = histogram('batch_duration_seconds', 'Duration of one batch (hash, bloom_add, bloom_check, dedup, lookup, load, ...) in seconds', ['op']);
    this.batchKeys = counter('batch_keys_total', 'Keys processed in batches, by operation', ['op']);
    this.batchErrors = counter('batch_errors_total', 'Batches that failed, by operation', ['op']);

    // Dedup counters are totals computed on scrape (pushed + sources), so the per-batch call is
    // three additions and a service's own counters can be wired with no per-batch call at all.
    const dedupCounter = (name: string, help: string, pick: (t: DedupTotals) => number) =>
      reuse(registry, p + name, () =>
        new Counter({
          name: p + name,
          help,
          registers: reg,
          collect(this: Counter) {
            this.reset();
            // A counter may not go negative: a misbehaving source must not fail the scrape.
            const v = pick(self.dedupTotals());
            if (v > 0) this.inc(v);
          },
        }),
      );
    dedupCounter('dedup_keys_checked_total', 'Keys checked by firstSeen', (t) => t.keys);
    dedupCounter('dedup_first_seen_total', 'Keys answered first-seen in their window', (t) => t.firstSeen);
    dedupCounter('duplicates_skipped_total', 'Keys answered already-seen (duplicates skipped)', (t) => t.keys - t.firstSeen);
    dedupCounter('dedup_fail_open_total', 'Keys answered first-seen because the store failed (fail-open) and journaled', (t) => t.failOpen);
    dedupCounter('dedup_store_errors_total', 'Dedup store calls that failed (any kind; see store_errors_total for kinds)', (t) => t.storeErrors);
    gauge('dedup_rate', 'Duplicates / keys checked since start (dedup efficiency)', [], (g) => {
      const t = self.dedupTotals();
      g.set(t.keys > 0 ? (t.keys - t.firstSeen) / t.keys : 0);
    });

    gauge(
      'dedup_bucket_fill_ratio',
      "Predicted largest bucket of the current window / Redis's set-max-intset-entries (compact layout); alert well before 1, where buckets turn into hashtables at about 8x the memory",
      ['name'],
      (g) => {
        g.reset();
        for (const [name, read] of self.dedups) {
          const r = safeRead(read)?.bucketFillRatio;
          if (r !== undefined) g.set({ name }, r);
        }
      },
    );

    this.idUpserts = counter('id_upserts_total', 'Logical-id upserts by status (new, duplicate, collision)', ['status']);
    this.docsHashed = counter('documents_hashed_total', 'Documents given a logical id, by hash function', ['hash_function']);
    this.collisions = counter('hash_collisions_total', 'Hash collisions (same logical id, different canonical raw value), by hash function', ['hash_function']);
    gauge('collision_rate', 'Collisions / documents hashed since start, by hash function (healthy < 1e-6)', ['hash_function'], (g) => {
      g.reset();
      for (const [h, docs] of self.docsBy) g.set({ hash_function: h }, docs > 0 ? (self.collisionsBy.get(h) ?? 0) / docs : 0);
    });

    const tierCounter = (name: string, help: string, field: 'hits' | 'misses' | 'errors') =>
      reuse(registry, p + name, () =>
        new Counter<'tier'>({
          name: p + name,
          help,
          labelNames: ['tier'],
          registers: reg,
          collect(this: Counter<'tier'>) {
            this.reset();
            for (const [tier, t] of self.tierTotals()) if (t[field] > 0) this.inc({ tier }, t[field]);
          },
        }),
      );
    tierCounter('cache_hits_total', 'Lookup hits per tier (bloom: answered absent without I/O)', 'hits');
    tierCounter('cache_misses_total', 'Lookup misses per tier', 'misses');
    tierCounter('cache_errors_total', 'Lookup errors per tier', 'errors');
    gauge('cache_tier_up', 'Whether a cache tier is healthy (0 while failing or its breaker is open)', ['tier'], (g) => {
      g.reset();
      for (const read of self.caches.values()) {
        const s = safeRead(read);
        if (!s) continue;
        for (const [tier, t] of Object.entries(s)) if (t && t.up !== undefined) g.set({ tier }, t.up ? 1 : 0);
      }
    });
    this.tierDuration = histogram('cache_batch_duration_seconds', 'Duration of one lookup batch against one tier', ['tier']);
    this.storeErrors = counter('store_errors_total', 'Store failures by store (redis, hbase, journal) and kind (timeout, connection, oom, failover, cluster, io, other)', ['store', 'kind']);

    this.journalAppendRecords = counter('journal_appended_records_total', 'Records appended to the fail-open journal');
    this.journalAppendBytes = counter('journal_appended_bytes_total', 'Bytes appended to the fail-open journal');
    this.journalReplayRecords = counter('journal_replayed_records_total', 'Journal records replayed into the store and acknowledged');
    this.journalReplayBytes = counter('journal_replayed_bytes_total', 'Journal bytes replayed into the store and acknowledged');
    this.journalLastReplay = gauge('journal_last_replay_timestamp_seconds', 'Unix time of the last replay batch acknowledged', []);
    const backlog = (field: 'records' | 'bytes') => (g: Gauge<'journal'>) => {
      g.reset();
      if (self.directBacklog.set) g.set({ journal: 'default' }, self.directBacklog[field]);
      for (const [name, read] of self.journals) {
        const s = safeRead(read);
        const v = s?.[field];
        if (v !== undefined) g.set({ journal: name }, v);
      }
    };
    gauge('journal_backlog_records', 'Journaled records not yet replayed (alert: > 0 for more than 1 h)', ['journal'], backlog('records'));
    gauge('journal_backlog_bytes', 'Journaled bytes not yet replayed', ['journal'], backlog('bytes'));
    gauge('journal_backlog_segments', 'Journal segment files not yet replayed', ['journal'], (g) => {
      g.reset();
      for (const [name, read] of self.journals) {
        const s = safeRead(read);
        if (s && s.segments !== undefined) g.set({ journal: name }, s.segments);
      }
    });
    gauge('journal_oldest_record_age_seconds', 'Age of the oldest unreplayed journal record', ['journal'], (g) => {
      g.reset();
      for (const [name, read] of self.journals) {
        const s = safeRead(read);
        if (s && s.oldestAgeSeconds !== undefined) g.set({ journal: name }, s.oldestAgeSeconds);
      }
    });

    this.loaderRows = counter('loader_rows_total', 'Loader rows by outcome (loaded, rejected, failed)', ['outcome']);
    this.loaderBytes = counter('loader_bytes_total', 'Input bytes consumed by the loader');

    this.bloomAbsent = counter('bloom_confirmed_absent_total', 'Keys the exact store confirmed absent, by filter (FPP sample)', ['filter']);
    this.bloomFalsePos = counter('bloom_false_positives_total', 'Confirmed-absent keys the Bloom filter said might be present', ['filter']);
    const bloomGauge = (name: string, help: string, pick: (s: BloomStats) => number | undefined) =>
      gauge(name, help, ['filter'], (g) => {
        g.reset();
        for (const [f, read] of self.blooms) {
          const s = safeRead(read);
          const v = s ? pick(s) : undefined;
          if (v !== undefined && Number.isFinite(v)) g.set({ filter: f }, v);
        }
      });
    bloomGauge('bloom_bits', 'Bloom filter size in bits', (s) => s.bitSize);
    bloomGauge('bloom_bits_set', 'Bloom filter bits set to 1', (s) => s.bitsSet);
    bloomGauge('bloom_fill_ratio', 'Bloom filter bits set / bits', (s) => (s.bitSize > 0 ? s.bitsSet / s.bitSize : 0));
    bloomGauge('bloom_hash_functions', 'Bloom filter hash functions (k)', (s) => s.hashFunctions);
    bloomGauge('bloom_expected_fpp', 'Expected false-positive probability at the current fill: (bits set / bits)^k', (s) => s.expectedFpp);
    bloomGauge('bloom_approximate_elements', 'Approximate distinct elements added', (s) => s.approximateElements);
    gauge('bloom_measured_fpp', 'False positives / confirmed-absent keys sampled (alert: > 2x expected)', ['filter'], (g) => {
      g.reset();
      const seen = new Set<string>();
      for (const [f, read] of self.blooms) {
        const s = safeRead(read);
        if (s?.measuredFpp !== undefined) {
          g.set({ filter: f }, s.measuredFpp);
          seen.add(f);
        }
      }
      for (const [f, c] of self.bloomSampleBy) if (!seen.has(f) && c.absent > 0) g.set({ filter: f }, c.fp / c.absent);
    });

    const poolGauge = (name: string, help: string, pick: (s: PoolStats) => number | undefined) =>
      gauge(name, help, ['pool'], (g) => {
        g.reset();
        for (const [n, read] of self.pools) {
          const s = safeRead(read);
          const v = s ? pick(s) : undefined;
          if (v !== undefined && Number.isFinite(v)) g.set({ pool: n }, v);
        }
      });
    poolGauge('pool_threads', 'Worker threads in the pool', (s) => s.threads);
    poolGauge('pool_queue_depth', 'Tasks waiting for a worker', (s) => s.queueDepth);
    poolGauge('pool_utilization', 'Pool utilisation 0..1', (s) => s.utilization);
    poolGauge('pool_completed_tasks', 'Tasks completed by the pool since start', (s) => s.completedTasks);

    // Invalidation bus: counters are totals computed on scrape (per bus name) like the dedup ones.
    const busCounter = (name: string, help: string, labels: readonly ('bus' | 'reason')[], fill: (c: Counter<'bus' | 'reason'>, bus: string, t: BusTotals) => void) =>
      reuse(registry, p + name, () =>
        new Counter<'bus' | 'reason'>({
          name: p + name,
          help,
          labelNames: labels,
          registers: reg,
          collect(this: Counter<'bus' | 'reason'>) {
            this.reset();
            for (const [bus, t] of self.busTotals()) fill(this, bus, t);
          },
        }),
      );
    const pos = (c: Counter<'bus' | 'reason'>, l: Partial<Record<'bus' | 'reason', string>>, v: number): void => {
      if (v > 0) c.inc(l, v);
    };
    busCounter('bus_messages_sent_total', 'Invalidation messages published (acknowledged by Redis)', ['bus'], (c, bus, t) => pos(c, { bus }, t.sent));
    busCounter('bus_messages_received_total', 'Invalidation messages from other instances applied locally', ['bus'], (c, bus, t) => pos(c, { bus }, t.received));
    busCounter('bus_messages_dropped_total', 'Invalidation messages lost: send (publish failed or pending queue full), malformed (unreadable on receipt)', ['bus', 'reason'], (c, bus, t) => {
      pos(c, { bus, reason: 'send' }, t.droppedSend);
      pos(c, { bus, reason: 'malformed' }, t.droppedMalformed);
    });
    busCounter('bus_local_clears_total', 'Local tiers cleared after the bus re-subscribed (messages may have been missed)', ['bus'], (c, bus, t) => pos(c, { bus }, t.localClears));
    busCounter('bus_replays_total', 'Re-subscriptions answered by replaying the missed messages from the log (no clear)', ['bus'], (c, bus, t) => pos(c, { bus }, t.replays));
    const busGauge = (name: string, help: string, pick: (s: BusStatsView) => number) =>
      gauge(name, help, ['bus'], (g) => {
        g.reset();
        for (const [bus, read] of self.buses) {
          const s = safeRead(read);
          if (s) g.set({ bus }, pick(s));
        }
      });
    busGauge('bus_connected', 'Whether the invalidation bus is subscribed and can publish', (s) => (s.connected ? 1 : 0));
    busGauge('bus_pending_messages', 'Invalidation messages waiting for the publisher connection', (s) => s.pending);
    gauge('bus_delivery_lag_seconds', 'Publish-to-receipt delay of invalidation messages since start (quantile 0.5, 0.99, 1)', ['bus', 'quantile'], (g) => {
      g.reset();
      for (const [bus, read] of self.buses) {
        const s = safeRead(read);
        if (!s || s.lagMs.count === 0) continue;
        g.set({ bus, quantile: '0.5' }, s.lagMs.p50 / 1000);
        g.set({ bus, quantile: '0.99' }, s.lagMs.p99 / 1000);
        g.set({ bus, quantile: '1' }, s.lagMs.max / 1000);
      }
    });

    if (options.collectDefaultMetrics ?? DEFAULTS.collectDefaultMetrics) {
      if (!registry.getSingleMetric(`${p}process_cpu_user_seconds_total`)) collectDefaultMetrics({ register: registry, prefix: p });
    }
  }

  private op(op: string) {
    let c = this.opChildren.get(op);
    if (!c) {
      c = { d: this.batchDuration.labels(op), k: this.batchKeys.labels(op) };
      this.opChildren.set(op, c);
    }
    return c;
  }

  batchStart(op: BatchOp, keys: number): number {
    const start = performance.now();
    publishBatchStart(op, keys, start);
    return start;
  }

  batchEnd(op: BatchOp, keys: number, start: number, error?: unknown): void {
    const end = performance.now();
    const c = this.op(op);
    c.d.observe((end - start) / 1000);
    c.k.inc(keys);
    if (error !== undefined) this.batchErrors.inc({ op }, 1);
    publishBatchEnd(op, keys, start, end, error);
  }

  observeBatch(op: BatchOp, keys: number, seconds: number): void {
    const c = this.op(op);
    c.d.observe(seconds);
    c.k.inc(keys);
  }

  dedup(firstSeen: number, duplicates: number): void {
    this.dedupBase.keys += firstSeen + duplicates;
    this.dedupBase.firstSeen += firstSeen;
  }

  dedupFailOpen(keys: number): void {
    this.dedupBase.failOpen += keys;
  }

  private dedupTotals(): DedupTotals {
    const t = { ...this.dedupBase };
    for (const read of this.dedups.values()) {
      const s = safeRead(read);
      if (s) addView(t, s);
    }
    return t;
  }

  private tierTotals(): Map<string, { hits: number; misses: number; errors: number }> {
    const t = new Map<string, { hits: number; misses: number; errors: number }>();
    for (const [tier, v] of this.tierBase) t.set(tier, { ...v });
    for (const read of this.caches.values()) {
      const s = safeRead(read);
      if (s) for (const [tier, v] of Object.entries(s)) if (v) addTier(t, tier, v);
    }
    return t;
  }

  cacheSource(name: string, read: () => CacheTierTotals): () => void {
    return addSource(this.caches, 'name', name, read, () => {
      const s = safeRead(read);
      if (s) for (const [tier, v] of Object.entries(s)) if (v) addTier(this.tierBase, tier, v);
    });
  }

  busSource(name: string, read: () => BusStatsView): () => void {
    return addSource(this.buses, 'name', name, read, () => {
      const s = safeRead(read);
      if (s) addBus(this.busBase, name, s);
    });
  }

  private busTotals(): Map<string, BusTotals> {
    const t = new Map<string, BusTotals>();
    for (const [bus, v] of this.busBase) t.set(bus, { ...v });
    for (const [bus, read] of this.buses) {
      const s = safeRead(read);
      if (s) addBus(t, bus, s);
    }
    return t;
  }

  dedupSource(name: string, read: () => DedupCountersView): () => void {
    // On close the final reading is folded into the base so the counters never go backwards.
    return addSource(this.dedups, 'name', name, read, () => {
      const s = safeRead(read);
      if (s) addView(this.dedupBase, s);
    });
  }

  ids(hashFunction: string, created: number, duplicates: number, collisions: number): void {
    const total = created + duplicates + collisions;
    if (created) this.idUpserts.inc({ status: 'new' }, created);
    if (duplicates) this.idUpserts.inc({ status: 'duplicate' }, duplicates);
    if (collisions) this.idUpserts.inc({ status: 'collision' }, collisions);
    this.docsHashed.inc({ hash_function: hashFunction }, total);
    this.docsBy.set(hashFunction, (this.docsBy.get(hashFunction) ?? 0) + total);
    if (collisions) this.collision(hashFunction, collisions);
  }

  collision(hashFunction: string, n = 1): void {
    this.collisions.inc({ hash_function: hashFunction }, n);
    this.collisionsBy.set(hashFunction, (this.collisionsBy.get(hashFunction) ?? 0) + n);
    if (!this.docsBy.has(hashFunction)) this.docsBy.set(hashFunction, 0);
  }

  tier(tier: Tier, hits: number, misses: number, errors: number, seconds: number): void {
    addTier(this.tierBase, tier, { hits, misses, errors });
    this.tierDuration.observe({ tier }, seconds);
  }

  storeError(store: string, kind: string, n = 1, error?: unknown): void {
    this.storeErrors.inc({ store, kind }, n);
    publishStoreError(store, kind, error);
  }

  journalAppended(records: number, bytes: number): void {
    this.journalAppendRecords.inc(records);
    this.journalAppendBytes.inc(bytes);
  }

  journalReplayed(records: number, bytes: number): void {
    this.journalReplayRecords.inc(records);
    this.journalReplayBytes.inc(bytes);
    this.journalLastReplay.set(Date.now() / 1000);
  }

  journalBacklog(records: number, bytes: number): void {
    this.directBacklog.set = true;
    this.directBacklog.records = records;
    this.directBacklog.bytes = bytes;
  }

  loader(rows: number, bytes: number, rejected = 0, failed = 0): void {
    if (rows) this.loaderRows.inc({ outcome: 'loaded' }, rows);
    if (rejected) this.loaderRows.inc({ outcome: 'rejected' }, rejected);
    if (failed) this.loaderRows.inc({ outcome: 'failed' }, failed);
    if (bytes) this.loaderBytes.inc(bytes);
  }

  bloomSample(filter: string, confirmedAbsent: number, falsePositives: number): void {
    const l = { filter };
    this.bloomAbsent.inc(l, confirmedAbsent);
    if (falsePositives) this.bloomFalsePos.inc(l, falsePositives);
    const c = this.bloomSampleBy.get(filter);
    if (c) {
      c.absent += confirmedAbsent;
      c.fp += falsePositives;
    } else this.bloomSampleBy.set(filter, { absent: confirmedAbsent, fp: falsePositives });
  }

  bloomSource(filter: string, read: () => BloomStats): () => void {
    return addSource(this.blooms, 'filter', filter, read);
  }

  poolSource(pool: string, read: () => PoolStats): () => void {
    return addSource(this.pools, 'pool', pool, read);
  }

  journalSource(journal: string, read: () => JournalStats): () => void {
    return addSource(this.journals, 'journal', journal, read);
  }

  /** The Prometheus text exposition of the whole registry (yours included, if you passed one). */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

interface DedupTotals {
  keys: number;
  firstSeen: number;
  failOpen: number;
  storeErrors: number;
}

function addTier(m: Map<string, { hits: number; misses: number; errors: number }>, tier: string, v: TierTotals | { hits: number; misses: number; errors: number }): void {
  const t = m.get(tier);
  if (t) {
    t.hits += v.hits;
    t.misses += v.misses;
    t.errors += v.errors;
  } else m.set(tier, { hits: v.hits, misses: v.misses, errors: v.errors });
}

interface BusTotals {
  sent: number;
  received: number;
  droppedSend: number;
  droppedMalformed: number;
  localClears: number;
  replays: number;
}

function addBus(m: Map<string, BusTotals>, bus: string, s: BusTotals): void {
  const t = m.get(bus) ?? { sent: 0, received: 0, droppedSend: 0, droppedMalformed: 0, localClears: 0, replays: 0 };
  t.sent += s.sent;
  t.received += s.received;
  t.droppedSend += s.droppedSend;
  t.droppedMalformed += s.droppedMalformed;
  t.localClears += s.localClears;
  t.replays += s.replays;
  m.set(bus, t);
}

function addView(t: DedupTotals, s: DedupCountersView): void {
  t.keys += s.keys;
  t.firstSeen += s.firstSeen;
  t.failOpen += s.journaledKeys ?? 0;
  t.storeErrors += s.storeErrors ?? 0;
}

/**
 * Registers `read` under `name`, or `name-2`, `name-3`, ... when another live source holds the
 * name (two gates sharing one metrics instance must not hide each other). The returned function
 * runs `onClose` once and unregisters; calling it again does nothing.
 */
function addSource<T>(map: Sources<T>, what: string, name: string, read: () => T, onClose?: () => void): () => void {
  if (typeof name !== 'string' || name === '') throw invalidType(what, 'a non-empty string', name);
  if (typeof read !== 'function') throw invalidType('read', 'a function', read);
  let key = name;
  for (let i = 2; map.has(key); i++) key = `${name}-${i}`;
  map.set(key, read);
  return () => {
    if (map.get(key) !== read) return;
    onClose?.();
    map.delete(key);
  };
}

/** A source that throws on scrape must not break the whole scrape: skip it. */
function safeRead<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}

function reuse<M extends Metric<string>>(registry: Registry, name: string, make: () => M): M {
  const m = registry.getSingleMetric(name);
  return (m as M | undefined) ?? make();
}

