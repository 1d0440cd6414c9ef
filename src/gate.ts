// HashGate: the one object a service opens. It owns the worker pool, the shared Bloom filter,
// the dedup service and (when configured) the tiered lookup cache, and routes each call to the
// cheapest place that can answer it.
import { availableParallelism } from 'node:os';
import { resolve as resolvePath } from 'node:path';
import type { Redis, Cluster } from 'ioredis';
import { ErrorCodes, HashGateError, HashGateTypeError, checkInt, invalidType, withOptionPath } from './errors.js';
import { hashBatch, hashChecked, bucketsOf, bucketsChecked, digests128, digestSize, type HashAlgorithm } from './hash/index.js';
import { checkKeys, type Keys } from './hash/keys.js';
import { BloomFilter, type BloomFilterOptions } from './bloom/index.js';
import { BloomCallQueue } from './bloom/call-queue.js';
import { RedisBloomCalls, isRedisHeldBloom, type GateBloomCalls, type RedisHeldBloom } from './bloom/redis-calls.js';
import type { CheckedKeys, Key } from './hash/keys.js';
import { DedupService, checkDedupKeys, firstSeenHashed, type DedupServiceOptions, type DedupStats, type FirstSeenOptions, type RecoverReport } from './dedup/service.js';
import type { DedupOptions, RedisConfig } from './dedup/options.js';
import { TieredCache, type LookupResult, type TieredCacheOptions } from './cache/index.js';
import type { CacheValue } from './cache/index.js';
import { FingerprintIndex, type FingerprintIndexOptions } from './fingerprint/index.js';
import { IdRegistry, type IdRegistryOptions } from './ids/index.js';
import { resolveMetrics, type Metrics, type MetricsOptions } from './metrics/index.js';
import { bloomStats, cacheTierTotals, journalDirStats } from './metrics/adapters.js';
import { timeBatch } from './metrics/time-batch.js';
import { KernelPool, type KernelPoolStats } from './pool/pool.js';
import { arrayJob, tryCheck } from './pool/jobs.js';
import { Rollback } from './util/rollback.js';
import { gateHealth, type GateHealth } from './gate-health.js';
import { COALESCE_DEFAULTS, parseCoalesceOptions, type CoalesceOptions, type ResolvedCoalesce } from './util/coalescer.js';

export type { Keys } from './hash/keys.js';

export interface HashGateOptions {
  /** Worker threads. Default: availableParallelism() - 1, at least 1. 0 = no pool, all inline. */
  threads?: number;
  /**
   * Most chunks (of `chunkKeys` keys) that may wait for a worker at once. A call that would
   * exceed it rejects with HG_ERR_QUEUE_FULL instead of queueing without bound. Default 1024.
   */
  maxQueue?: number;
  /**
   * Batches with at most this many keys run on the calling thread. Default 4096. Larger ones go
   * to the workers lane by lane; while every lane is busy, the calling thread answers slices of a
   * check or hash batch itself rather than wait.
   */
  inlineThreshold?: number;
  /**
   * Keys per worker task. Default 8192. A batch of more than 4 * threads * chunkKeys keys goes in
   * larger tasks, up to 4 * chunkKeys keys (and chunkBytes bytes) each: fewer round trips.
   */
  chunkKeys?: number;
  /** Key bytes per worker task (a longer key runs inline). Default 1 MiB. */
  chunkBytes?: number;
  /**
   * Shared transfer buffers between the main thread and the workers (bounds memory and in-flight
   * tasks). Default 2 * threads + 2.
   */
  lanes?: number;
  /** A worker idle this long exits; piscina starts a new one on demand. Default 30_000. */
  idleTimeoutMs?: number;
  /**
   * The gate's Bloom filter (bloomAdd/bloomCheck, e.g. a blacklist). `{ expectedItems, fpp }` or a
   * BloomFilter: bits in this process's shared memory, seen by its worker threads only (each
   * instance has its own, lost on restart). A RedisBloom, ShardedRedisBloom or RedisBloomReplica:
   * bits held in Redis, shared by every instance and kept across restarts. firstSeen never reads
   * or writes it.
   */
  bloom?: BloomFilterOptions | BloomFilter | RedisHeldBloom | false;
  /**
   * A second, separate filter that firstSeen fills with every key it answers, to measure its false
   * positive rate against the exact answers (stats().firstSeenBloom.measuredFpp). Exact answers
   * never depend on it (a Redis-held one that fails just skips that batch's sample). Default off.
   */
  firstSeenBloom?: BloomFilterOptions | BloomFilter | RedisHeldBloom | false;
  /** Redis for dedup. The lookup cache's Redis tier is configured separately, as `cache.redis`. */
  redis?: RedisConfig | Redis | Cluster;
  dedup?: DedupOptions;
  /** Multi-level lookup cache (LRU -> Redis -> cold store). */
  cache?: TieredCacheOptions;
  /** Device-fingerprint inverted index (`gate.index`); `true` = embedded defaults. */
  index?: FingerprintIndexOptions | true;
  /** Collision-safe logical ids (`gate.ids`); `true` = embedded defaults. */
  ids?: IdRegistryOptions | true;
  /** Prometheus metrics: true, an options object, or a Metrics instance. Default off. */
  metrics?: boolean | MetricsOptions | Metrics;
  /**
   * Merge concurrent small calls (firstSeen, lookup, bloomAdd, bloomCheck) into one batch per
   * event-loop turn; each caller still gets exactly the answer it would get alone, in call order.
   * `{ maxKeys, maxDelayMs }` (defaults 128 keys, 0 ms) or false to send every call on its own.
   * Change maxKeys to bound how long one merged Redis script may run; maxDelayMs > 0 trades
   * latency for fewer round trips when calls arrive slower than the store answers.
   */
  coalesce?: CoalesceOptions | false;
  /** Clock for windows and TTLs (tests inject a fake one). */
  now?: () => number;
}

/**
 * @internal Crash tests only: the options key (a symbol, so it is no HashGateOptions field and no
 * user can set it by accident) that lets a test make a worker throw or die.
 */
const kTestHooks = Symbol('hashgate.testHooks');

/** @internal Crash tests only: a gate whose workers obey test hooks. Not exported by the package. */
export function openWithTestHooks(options: HashGateOptions): Promise<HashGate> {
  return HashGate.open({ ...options, [kTestHooks]: true } as HashGateOptions);
}

/** @internal Crash tests only: the worker pool of a threaded gate. Not exported by the package. */
export function gatePool(gate: HashGate): KernelPool | undefined {
  const pool = gate['pool'];
  return pool.threaded ? pool : undefined;
}

export const DEFAULTS = {
  threads: Math.max(1, availableParallelism() - 1),
  maxQueue: 1024,
  inlineThreshold: 4096,
  chunkKeys: 8192,
  chunkBytes: 1 << 20,
  idleTimeoutMs: 30_000,
  coalesce: COALESCE_DEFAULTS,
} as const;

interface Resolved {
  threads: number;
  maxQueue: number;
  inlineThreshold: number;
  chunkKeys: number;
  chunkBytes: number;
  lanes: number;
  idleTimeoutMs: number;
  coalesce: ResolvedCoalesce | false;
}

const KNOWN = new Set([
  'threads', 'maxQueue', 'inlineThreshold', 'chunkKeys', 'chunkBytes', 'lanes', 'idleTimeoutMs', 'bloom', 'firstSeenBloom', 'redis',
  'dedup', 'cache', 'index', 'ids', 'metrics', 'now', 'coalesce',
]);

function resolve(o: HashGateOptions): Resolved {
  if (o === null || typeof o !== 'object') throw invalidType('options', 'an object', o);
  for (const k of Object.keys(o)) {
    if (!KNOWN.has(k)) {
      throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `options.${k} is not a HashGate option`, { name: `options.${k}` });
    }
  }
  const threads = checkInt('options.threads', o.threads ?? DEFAULTS.threads, 0, 256);
  const lanes = o.lanes === undefined ? 2 * threads + 2 : checkInt('options.lanes', o.lanes, 1, 4096);
  return {
    threads,
    maxQueue: checkInt('options.maxQueue', o.maxQueue ?? DEFAULTS.maxQueue, 1),
    inlineThreshold: checkInt('options.inlineThreshold', o.inlineThreshold ?? DEFAULTS.inlineThreshold, 0),
    chunkKeys: checkInt('options.chunkKeys', o.chunkKeys ?? DEFAULTS.chunkKeys, 1, 1 << 20),
    chunkBytes: checkInt('options.chunkBytes', o.chunkBytes ?? DEFAULTS.chunkBytes, 1024, 1 << 30),
    lanes,
    idleTimeoutMs: checkInt('options.idleTimeoutMs', o.idleTimeoutMs ?? DEFAULTS.idleTimeoutMs, 0),
    coalesce: parseCoalesceOptions(o.coalesce, 'options.coalesce'),
  };
}

/** What firstSeen learned about the Bloom filter in front of the exact store. */
export interface GateDedupCounters {
  /** Keys answered first-seen while the filter already said "maybe present": false positives. */
  bloomFalsePositives: number;
  /** Keys answered first-seen that the filter said were absent. */
  bloomTrueNegatives: number;
}

export interface GateBloomStats {
  bitSize: number;
  hashFunctions: number;
  bitCount: number;
  expectedFpp: number;
  /** Only for firstSeenBloom: false positives / keys firstSeen answered as new. */
  measuredFpp: number | undefined;
  approximateElements: number;
}

export interface GateStats {
  pool: KernelPoolStats | undefined;
  /** The gate's filter (bloomAdd/bloomCheck). */
  bloom: GateBloomStats | undefined;
  /** The filter firstSeen samples its false positive rate with. */
  firstSeenBloom: GateBloomStats | undefined;
  dedup: GateDedupCounters;
}

// The health report's types are part of the gate's public surface.
export type { GateHealth, TierHealth, HealthStatus } from './gate-health.js';

function bloomOption(name: string, b: unknown): BloomFilter | undefined {
  if (b === undefined || b === false || isRedisHeldBloom(b)) return undefined;
  if (b instanceof BloomFilter) return b;
  if (typeof b === 'object' && b !== null) return withOptionPath(name, () => BloomFilter.create(b as BloomFilterOptions));
  throw invalidType(name, 'false, a BloomFilter, a RedisBloom, a ShardedRedisBloom, a RedisBloomReplica or { expectedItems, fpp }', b);
}

function gateBloomStats(b: BloomFilter | undefined, measuredFpp: number | undefined): GateBloomStats | undefined {
  if (b === undefined) return undefined;
  const s = bloomStats(b);
  return {
    bitSize: s.bitSize,
    hashFunctions: s.hashFunctions,
    bitCount: s.bitsSet,
    expectedFpp: s.expectedFpp,
    measuredFpp,
    approximateElements: s.approximateElements ?? b.approximateElementCount(),
  };
}

export class HashGate {
  readonly options: Resolved;
  /** The in-process filter of bloomAdd/bloomCheck (undefined when options.bloom is held in Redis). */
  readonly bloom: BloomFilter | undefined;
  /** The in-process firstSeen sampling filter (undefined when options.firstSeenBloom is held in Redis). */
  readonly firstSeenBloom: BloomFilter | undefined;
  readonly dedup: DedupService;
  readonly cache: TieredCache | undefined;
  readonly index: FingerprintIndex | undefined;
  readonly ids: IdRegistry | undefined;
  readonly metrics: Metrics;
  private readonly pool: KernelPool;
  private readonly unregister: Array<() => void> = [];
  private readonly counters: GateDedupCounters = { bloomFalsePositives: 0, bloomTrueNegatives: 0 };
  private closed = false;
  // Runs bloomAdd/bloomCheck (in-process: merging concurrent calls); undefined when the gate has no filter.
  private readonly bloomCalls: GateBloomCalls | undefined;
  // A Redis-held firstSeenBloom (then firstSeenBloom is undefined).
  private readonly firstSeenShared: RedisBloomCalls | undefined;

  private constructor(options: HashGateOptions) {
    this.options = resolve(options);
    this.metrics = withOptionPath('options.metrics', () => resolveMetrics(options.metrics, 'options.metrics'));
    this.bloom = bloomOption('options.bloom', options.bloom);
    this.firstSeenBloom = bloomOption('options.firstSeenBloom', options.firstSeenBloom);
    const o = this.options;

    // Bad options for a later part must not leave an earlier part's connections or threads open.
    const rollback = new Rollback();
    try {
      const dedupOptions: DedupServiceOptions = {};
      if (options.redis !== undefined) dedupOptions.redis = options.redis;
      if (options.dedup !== undefined) dedupOptions.dedup = options.dedup;
      if (options.now !== undefined) dedupOptions.now = options.now;
      dedupOptions.metrics = this.metrics;
      dedupOptions.coalesce = o.coalesce;
      this.dedup = rollback.add(withOptionPath('options', () => new DedupService(dedupOptions)));

      if (options.cache !== undefined) {
        const c: TieredCacheOptions = { ...options.cache };
        if (c.now === undefined && options.now !== undefined) c.now = options.now;
        if (c.coalesce === undefined) c.coalesce = o.coalesce;
        this.cache = rollback.add(withOptionPath('options.cache', () => new TieredCache(c)));
      }

      const ix = options.index;
      this.index = rollback.add(
        ix === undefined
          ? undefined
          : withOptionPath('options.index', () => {
              if (ix !== true && (ix === null || typeof ix !== 'object')) return new FingerprintIndex(ix); // its own type error
              const io: FingerprintIndexOptions = ix === true ? {} : { ...ix };
              if (io.coalesce === undefined) io.coalesce = o.coalesce;
              return new FingerprintIndex(io);
            }),
      );
      const ids = options.ids;
      this.ids = rollback.add(
        ids === undefined
          ? undefined
          : withOptionPath('options.ids', () => {
              const io: IdRegistryOptions = ids === true ? {} : { now: options.now ?? Date.now, ...ids };
              if (io.coalesce === undefined) io.coalesce = this.options.coalesce;
              return new IdRegistry(io);
            }),
      );

      this.pool = rollback.add(
        new KernelPool({
          threads: o.threads,
          maxQueue: o.maxQueue,
          inlineThreshold: o.inlineThreshold,
          layout: { chunkKeys: o.chunkKeys, bytesCap: o.chunkBytes },
          lanes: o.lanes,
          idleTimeoutMs: o.idleTimeoutMs,
          ...(this.bloom === undefined ? {} : { bloom: this.bloom.toShared() }),
          ...((options as { [kTestHooks]?: boolean })[kTestHooks] === true ? { testHooks: true } : {}),
        }),
      );
    } catch (err) {
      rollback.undo();
      throw err;
    }
    // the same bound on keys in flight as the worker queue's
    const maxKeys = o.maxQueue * o.chunkKeys;
    this.bloomCalls = isRedisHeldBloom(options.bloom)
      ? new RedisBloomCalls(options.bloom, this.metrics, maxKeys)
      : this.bloom === undefined
        ? undefined
        : new BloomCallQueue(this.bloom, this.pool, this.metrics, o.coalesce, o.inlineThreshold);
    this.firstSeenShared = isRedisHeldBloom(options.firstSeenBloom) ? new RedisBloomCalls(options.firstSeenBloom, this.metrics, maxKeys) : undefined;
    const ids = this.ids;
    if (ids !== undefined) ids.on('collision', () => this.metrics.collision(ids.activeAlgorithm));
    if (this.metrics.enabled) this.registerGauges();
  }

  /**
   * Validates options, starts the pool and connects stores; resolves once the pool's threads are
   * up. Rejects on bad options.
   */
  static async open(options: HashGateOptions = {}): Promise<HashGate> {
    const gate = new HashGate(options);
    // The pool's threads start with the gate; waited for here (while Redis connects), so that a
    // service's first calls do not share the CPU with their start: a worker thread loads its own
    // runtime and module, on a core the first calls would otherwise be sharing with Redis.
    const poolUp = gate.pool.ready();
    // Unless told to start lazily, a gate that cannot reach its Redis says so now instead of
    // answering every call from the fail-open journal.
    if (!gate.dedup.options.lazyConnect) {
      try {
        await gate.dedup.connect();
      } catch (err) {
        await gate.close().catch(() => undefined);
        throw err;
      }
    }
    // A cache that built its own Redis client must be connected before the first lookup, or the
    // first misses count as Redis errors and can open its breaker. A lazy start does not wait: a
    // lookup made before Redis is up rejects (unknown) instead.
    if (gate.cache !== undefined && options.cache?.redis !== undefined && !gate.dedup.options.lazyConnect) await gate.cache.ready().catch(() => undefined);
    await poolUp;
    return gate;
  }

  private registerGauges(): void {
    for (const [label, bloom] of [['gate', this.bloom], ['first_seen', this.firstSeenBloom]] as const) {
      if (bloom === undefined) continue;
      this.unregister.push(this.metrics.bloomSource(label, () => bloomStats(bloom)));
    }
    const pool = this.pool;
    if (pool.threaded) {
      this.unregister.push(
        this.metrics.poolSource('kernel', () => {
          const s = pool.stats()!;
          return { threads: s.threads, queueDepth: s.queued, utilization: s.utilization, completedTasks: s.tasks };
        }),
      );
    }
    this.unregister.push(
      this.metrics.dedupSource('gate', () => {
        this.dedup.refreshBucketFill(); // a sample of table counts a minute at most, in the background
        return this.dedup.counters;
      }),
    );
    const cache = this.cache;
    if (cache !== undefined) this.unregister.push(this.metrics.cacheSource('gate', () => cacheTierTotals(cache.stats())));
    const bus = cache?.bus;
    if (bus !== undefined) this.unregister.push(this.metrics.busSource('gate', () => bus.stats()));
    if (this.dedup.redis !== undefined) {
      const dir = this.dedup.options.journalDir;
      // labelled with the directory's absolute path, as `hashgate metrics --journal-dir` labels it,
      // so one alert rule and one dashboard cover the service and the sidecar
      this.unregister.push(this.metrics.journalSource(resolvePath(dir), () => journalDirStats(dir)));
    }
  }

  private check(): void {
    if (this.closed) throw new HashGateError(ErrorCodes.CLOSED, 'HashGate is closed');
  }

  /** Digests back to back, identical to hashBatch() from the package root. */
  async hashBatch(keys: Keys, options: { algorithm?: HashAlgorithm; seed?: number } = {}): Promise<Uint8Array> {
    this.check();
    // Validated once, here: the pool and the inline path both get the checked batch, so a bad
    // key is the same HashGateTypeError (naming its index) whichever path would have run.
    const c = tryCheck(() => checkKeys(keys), keys);
    const job = arrayJob(
      (b) => hashChecked(b, options),
      () => {
        // the same option errors as the inline path, before any chunk is sent
        hashBatch([], options);
        const algorithm = options.algorithm ?? 'murmur3_128';
        return { op: { op: 'hash', algorithm, seed: options.seed ?? 0 }, width: digestSize(algorithm) };
      },
      (length) => new Uint8Array(length),
      (lane, count, width) => lane.views.out.subarray(0, count * width),
    );
    return timeBatch(this.metrics, 'hash', c.n, () => (c.batch === undefined ? Promise.reject(c.invalid) : this.pool.run(c.batch, job)));
  }

  /** Java-compatible buckets (Guava murmur3_128 asLong() mod buckets) for every key. */
  async bucketsOf(keys: Keys, buckets: number): Promise<Uint32Array> {
    this.check();
    const c = tryCheck(() => checkKeys(keys), keys);
    const job = arrayJob(
      (b) => bucketsChecked(b, buckets),
      () => {
        bucketsOf([], buckets);
        return { op: { op: 'buckets', buckets }, width: 1 };
      },
      (length) => new Uint32Array(length),
      (lane, count) => new Uint32Array(lane.views.out.buffer, lane.views.out.byteOffset, count),
    );
    return timeBatch(this.metrics, 'buckets', c.n, () => (c.batch === undefined ? Promise.reject(c.invalid) : this.pool.run(c.batch, job)));
  }

  // Runs `call` on the gate's Bloom calls; rejects (never throws) when the gate is closed or has no filter.
  private viaBloomQueue<T>(method: string, call: (q: GateBloomCalls) => Promise<T>): Promise<T> {
    try {
      this.check();
      if (this.bloomCalls === undefined) {
        // a missing option, so the documented option error: a TypeError subclass naming it
        throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `${method} needs a Bloom filter: open the gate with options.bloom`, { name: 'options.bloom' });
      }
    } catch (err) {
      return Promise.reject(err);
    }
    return call(this.bloomCalls);
  }

  /**
   * Adds keys to the shared filter; resolves to how many keys changed at least one bit. Concurrent
   * calls are merged (option `coalesce`) and counted exactly as if run one after another.
   */
  bloomAdd(keys: Keys): Promise<number> {
    return this.viaBloomQueue('bloomAdd', (q) => q.add(keys));
  }

  /** 1 = maybe present, 0 = definitely absent, per key. Merged like bloomAdd, in call order. */
  bloomCheck(keys: Keys): Promise<Uint8Array> {
    return this.viaBloomQueue('bloomCheck', (q) => q.check(keys));
  }

  /**
   * Exact first-seen per window: 1 = first time in the key's window, 0 = seen before. The
   * firstSeenBloom filter, when configured, is only consulted for statistics and filled afterwards:
   * an exact answer never depends on it, so it can never turn a new key into a duplicate. The
   * gate's own `bloom` filter is never touched here.
   */
  firstSeen(keys: Keys, options?: FirstSeenOptions): Promise<Uint8Array> {
    if (this.closed) return Promise.reject(new HashGateError(ErrorCodes.CLOSED, 'HashGate is closed'));
    // Plain service calls go straight to the (coalescing) dedup service: no wrapper promise.
    if (this.firstSeenBloom === undefined && this.firstSeenShared === undefined && !this.metrics.enabled) return this.dedup.firstSeen(keys, options);
    return this.firstSeenObserved(keys, options);
  }

  private async firstSeenObserved(keys: Keys, options: FirstSeenOptions | undefined): Promise<Uint8Array> {
    // Each key is checked once (by dedup's rules) and hashed once: the same murmur3_128 digests
    // answer the filter's check and add, and (when seeds agree) the dedup store's lookup.
    const c = tryCheck(() => checkDedupKeys(this.dedup, keys), keys);
    return timeBatch(this.metrics, 'dedup', c.n, async () => {
      if (c.batch === undefined) throw c.invalid;
      const batch = c.batch;
      const fsb = this.firstSeenBloom;
      if (this.firstSeenShared !== undefined) return this.firstSeenSampledInRedis(this.firstSeenShared, batch, options);
      if (fsb === undefined) return firstSeenHashed(this.dedup, batch, undefined, options);
      const digests = digests128(batch, fsb.seed);
      const before = fsb.mightContainDigests(digests);
      const answers = await firstSeenHashed(this.dedup, batch, fsb.seed === 0 ? digests : undefined, options);
      this.recordSample(before, answers);
      fsb.addDigests(digests);
      // Dedup counts reach the metrics through dedupSource (read on scrape), not per batch here.
      return answers;
    });
  }

  // firstSeen with a Redis-held sampling filter: the filter is read while dedup answers and filled
  // after; a filter that fails costs that batch's sample, never the exact answers.
  private async firstSeenSampledInRedis(shared: RedisBloomCalls, batch: CheckedKeys, options: FirstSeenOptions | undefined): Promise<Uint8Array> {
    const list: Key[] = Array.from({ length: batch.count }, (_, i) => batch.at(i));
    const [before, answers] = await Promise.all([
      shared.contains(list).catch(() => undefined),
      firstSeenHashed(this.dedup, batch, undefined, options),
    ]);
    if (before !== undefined) this.recordSample(before, answers);
    await shared.filter.addAllFlags(list).catch(() => undefined);
    return answers;
  }

  // The false-positive sample of firstSeenBloom: keys answered 1 (new) that the filter already held.
  private recordSample(before: Uint8Array, answers: Uint8Array): void {
    let fp = 0;
    let tn = 0;
    for (let i = 0; i < answers.length; i++) {
      if (answers[i] === 1) {
        if (before[i] === 1) fp++;
        else tn++;
      }
    }
    this.counters.bloomFalsePositives += fp;
    this.counters.bloomTrueNegatives += tn;
    this.metrics.bloomSample('first_seen', fp + tn, fp);
  }

  /** Replays the fail-open journal into Redis (one instance at a time, under a Redis lock). */
  async recover(): Promise<RecoverReport> {
    this.check();
    return this.dedup.recover();
  }

  /** Deletes a window's keys (SCAN + UNLINK in batches); resolves to how many keys were removed. */
  async purgeWindow(window: string): Promise<number> {
    this.check();
    return this.dedup.purgeWindow(window);
  }

  async dedupStats(window?: string): Promise<DedupStats> {
    this.check();
    return this.dedup.stats(window);
  }

  /**
   * Batch lookup through Bloom gate -> local LRU -> Redis -> cold store. undefined = absent; a key
   * that could not be checked (a tier down) rejects the call with HG_ERR_TIER_UNAVAILABLE, or is
   * answered from the grace period (`cache.graceMs`) when one is set.
   */
  lookup(table: string, keys: readonly string[]): Promise<(CacheValue | undefined)[]> {
    const cache = this.lookupCache();
    if (cache instanceof Promise) return cache;
    if (!this.metrics.enabled) return cache.lookup(table, keys);
    return timeBatch(this.metrics, 'lookup', keys.length, () => cache.lookup(table, keys));
  }

  /** lookup() that answers per key instead of rejecting: unknown keys, stale answers, tier errors. */
  lookupDetailed(table: string, keys: readonly string[]): Promise<LookupResult> {
    const cache = this.lookupCache();
    if (cache instanceof Promise) return cache;
    if (!this.metrics.enabled) return cache.lookupDetailed(table, keys);
    return timeBatch(this.metrics, 'lookup', keys.length, () => cache.lookupDetailed(table, keys));
  }

  private lookupCache(): TieredCache | Promise<never> {
    if (this.closed) return Promise.reject(new HashGateError(ErrorCodes.CLOSED, 'HashGate is closed'));
    if (this.cache === undefined) {
      return Promise.reject(new HashGateError(ErrorCodes.INVALID_OPTION, 'lookup needs a cache: open the gate with options.cache'));
    }
    return this.cache;
  }

  stats(): GateStats {
    const c = this.counters;
    const sampled = c.bloomFalsePositives + c.bloomTrueNegatives;
    return {
      pool: this.pool.stats(),
      bloom: gateBloomStats(this.bloom, undefined),
      firstSeenBloom: gateBloomStats(this.firstSeenBloom, sampled === 0 ? undefined : c.bloomFalsePositives / sampled),
      dedup: { ...c },
    };
  }

  /**
   * Health of every tier for probes and dashboards. Never rejects: a tier that cannot be reached
   * is reported, not thrown. With a Redis dedup store it sends one PING (bounded by timeoutMs).
   */
  health(options: { timeoutMs?: number } = {}): Promise<GateHealth> {
    const sources = { dedup: this.dedup, cache: this.cache, closed: () => this.closed, pool: () => this.pool.stats() };
    return gateHealth(sources, options.timeoutMs ?? 1000);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const u of this.unregister) u();
    // Calls queued before close() still get their answers (then the pool may go).
    await Promise.all([this.bloomCalls?.close(), this.firstSeenShared?.close()]);
    await Promise.all([this.pool.close(), this.dedup.close(), this.cache?.close(), this.index?.close(), this.ids?.close()]);
  }
}
