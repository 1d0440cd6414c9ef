// HashGate: the one object a service opens. It owns the worker pool, the shared Bloom filter,
// the dedup service and (when configured) the tiered lookup cache, and routes each call to the
// cheapest place that can answer it.
import { availableParallelism } from 'node:os';
import { Redis, Cluster } from 'ioredis';
import { ErrorCodes, HashGateError, HashGateTypeError, checkInt, invalidType, withOptionPath } from './errors.js';
import { hashBatch, bucketsOf, digestSize, type HashAlgorithm, type PackedKeys, checkPackedKeys } from './hash/index.js';
import { BloomFilter, type BloomFilterOptions } from './bloom/index.js';
import { DedupService, type DedupServiceOptions, type DedupStats, type RecoverReport } from './dedup/service.js';
import type { DedupOptions, RedisConfig } from './dedup/options.js';
import { TieredCache, type TieredCacheOptions } from './cache/index.js';
import type { CacheValue } from './cache/index.js';
import { FingerprintIndex, type FingerprintIndexOptions } from './fingerprint/index.js';
import { IdRegistry, type IdRegistryOptions } from './ids/index.js';
import { resolveMetrics, type Metrics, type MetricsOptions } from './metrics/index.js';
import { cacheTierTotals, journalDirStats } from './metrics/adapters.js';
import type { RemoteTierSnapshot } from './cache/index.js';
import { KernelPool, type PoolStats } from './pool/pool.js';
import type { KeyInput } from './pool/slots.js';
import { COALESCE_DEFAULTS, parseCoalesceOptions, type CoalesceOptions, type ResolvedCoalesce } from './util/coalescer.js';

export type Keys = ReadonlyArray<string | Uint8Array> | PackedKeys;

export interface HashGateOptions {
  /** Worker threads. Default: availableParallelism() - 1, at least 1. 0 = no pool, all inline. */
  threads?: number;
  /**
   * Most chunks (of `chunkKeys` keys) that may wait for a worker at once. A call that would
   * exceed it rejects with HG_ERR_QUEUE_FULL instead of queueing without bound. Default 1024.
   */
  maxQueue?: number;
  /** Batches with at most this many keys run on the calling thread. Default 4096. */
  inlineThreshold?: number;
  /** Keys per worker task. Default 8192. */
  chunkKeys?: number;
  /** Key bytes per worker task (a longer key runs inline). Default 1 MiB. */
  chunkBytes?: number;
  /** Shared slots (bounds memory and in-flight tasks). Default 2 * threads + 2. */
  slots?: number;
  /** A worker idle this long exits; piscina starts a new one on demand. Default 30_000. */
  idleTimeoutMs?: number;
  /**
   * The gate's Bloom filter in shared memory (bloomAdd/bloomCheck, e.g. a blacklist), sized like
   * Guava's BloomFilter.create(n, p). firstSeen never reads or writes it.
   */
  bloom?: BloomFilterOptions | BloomFilter | false;
  /**
   * A second, separate filter that firstSeen fills with every key it answers, to measure its false
   * positive rate against the exact answers (stats().firstSeenBloom.measuredFpp). Exact answers
   * never depend on it. Default off.
   */
  firstSeenBloom?: BloomFilterOptions | BloomFilter | false;
  /** Redis for dedup (and the lookup cache's hot tier when `cache.redis` is not given). */
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
   * Merge concurrent small calls that reach a store (firstSeen, lookup) into one batch per
   * event-loop turn; each caller still gets exactly the answer it would get alone, in call order.
   * `{ maxKeys, maxDelayMs }` (defaults 128 keys, 0 ms) or false to send every call on its own.
   * Change maxKeys to bound how long one merged Redis script may run; maxDelayMs > 0 trades
   * latency for fewer round trips when calls arrive slower than the store answers.
   */
  coalesce?: CoalesceOptions | false;
  /** Clock for windows and TTLs (tests inject a fake one). */
  now?: () => number;
  /** Lets tests make a worker throw or die. Never set in production. */
  testHooks?: boolean;
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
  slots: number;
  idleTimeoutMs: number;
  coalesce: ResolvedCoalesce | false;
}

const KNOWN = new Set([
  'threads', 'maxQueue', 'inlineThreshold', 'chunkKeys', 'chunkBytes', 'slots', 'idleTimeoutMs', 'bloom', 'firstSeenBloom', 'redis',
  'dedup', 'cache', 'index', 'ids', 'metrics', 'now', 'testHooks', 'coalesce',
]);

function resolve(o: HashGateOptions): Resolved {
  if (o === null || typeof o !== 'object') throw invalidType('options', 'an object', o);
  for (const k of Object.keys(o)) {
    if (!KNOWN.has(k)) {
      throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `options.${k} is not a HashGate option`, { name: `options.${k}` });
    }
  }
  const threads = checkInt('options.threads', o.threads ?? DEFAULTS.threads, 0, 256);
  return {
    threads,
    maxQueue: checkInt('options.maxQueue', o.maxQueue ?? DEFAULTS.maxQueue, 1),
    inlineThreshold: checkInt('options.inlineThreshold', o.inlineThreshold ?? DEFAULTS.inlineThreshold, 0),
    chunkKeys: checkInt('options.chunkKeys', o.chunkKeys ?? DEFAULTS.chunkKeys, 1, 1 << 20),
    chunkBytes: checkInt('options.chunkBytes', o.chunkBytes ?? DEFAULTS.chunkBytes, 1024, 1 << 30),
    slots: checkInt('options.slots', o.slots ?? 2 * threads + 2, 1, 4096),
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
  pool: PoolStats | undefined;
  /** The gate's filter (bloomAdd/bloomCheck). */
  bloom: GateBloomStats | undefined;
  /** The filter firstSeen samples its false positive rate with. */
  firstSeenBloom: GateBloomStats | undefined;
  dedup: GateDedupCounters;
}

/** up: answering normally; degraded: answering, but not from where it should (fail-open journal,
 * a cache tier skipped, a connection still being made); down: calls to it fail. */
export type HealthStatus = 'up' | 'degraded' | 'down';

export interface TierHealth {
  status: HealthStatus;
  /** Why it is not up (connection state, breaker open, journal backlog, ...). */
  reason?: string;
}

export interface GateHealth {
  /** The worst status of any tier. */
  status: HealthStatus;
  /** False when the gate is closed or first-seen answers cannot be given (a readiness probe). */
  ready: boolean;
  tiers: {
    dedup: TierHealth & {
      store: 'memory' | 'redis';
      /** Standalone Redis with replicas: how many are online, and the largest lag INFO reports. */
      replicas?: number;
      replicaLagSeconds?: number;
    };
    cacheRedis?: TierHealth;
    cacheCold?: TierHealth;
  };
  /** Fail-open journal waiting to be replayed into Redis (only with a Redis dedup store). */
  journal?: { dir: string; backlogBytes: number; segments: number; oldestAgeSeconds: number };
  pool?: { threads: number; queued: number };
}

const RANK: Record<HealthStatus, number> = { up: 0, degraded: 1, down: 2 };

/** Online replicas and their largest lag from INFO replication (master side); {} when none. */
function replication(info: string): { replicas?: number; replicaLagSeconds?: number } {
  let replicas = 0;
  let lag = 0;
  for (const m of info.matchAll(/^slave\d+:.*?state=(\w+).*?lag=(\d+)/gm)) {
    if (m[1] !== 'online') continue;
    replicas++;
    lag = Math.max(lag, Number(m[2]));
  }
  return replicas === 0 ? {} : { replicas, replicaLagSeconds: lag };
}

function remoteTierHealth(t: RemoteTierSnapshot): TierHealth {
  if (t.breakerOpen) return { status: 'down', reason: `breaker open${t.lastError ? ` after ${t.lastError.code}` : ''}` };
  if (!t.healthy) return { status: 'degraded', reason: `last call failed${t.lastError ? `: ${t.lastError.code}` : ''}` };
  return { status: 'up' };
}

function bloomOption(name: string, b: unknown): BloomFilter | undefined {
  if (b === undefined || b === false) return undefined;
  if (b instanceof BloomFilter) return b;
  if (typeof b === 'object' && b !== null) return withOptionPath(name, () => BloomFilter.create(b as BloomFilterOptions));
  throw invalidType(name, 'false, a BloomFilter or { expectedItems, fpp }', b);
}

function bloomStats(b: BloomFilter | undefined, measuredFpp: number | undefined): GateBloomStats | undefined {
  if (b === undefined) return undefined;
  return {
    bitSize: b.bitSize,
    hashFunctions: b.hashFunctions,
    bitCount: b.bitCount(),
    expectedFpp: b.expectedFpp(),
    measuredFpp,
    approximateElements: b.approximateElementCount(),
  };
}

function keyCount(keys: Keys, name: string): number {
  if (Array.isArray(keys)) return keys.length;
  return checkPackedKeys(keys, name).count;
}

export class HashGate {
  readonly options: Resolved;
  readonly bloom: BloomFilter | undefined;
  readonly firstSeenBloom: BloomFilter | undefined;
  readonly dedup: DedupService;
  readonly cache: TieredCache | undefined;
  readonly index: FingerprintIndex | undefined;
  readonly ids: IdRegistry | undefined;
  readonly metrics: Metrics;
  private readonly pool: KernelPool | undefined;
  private readonly unregister: Array<() => void> = [];
  private readonly counters: GateDedupCounters = { bloomFalsePositives: 0, bloomTrueNegatives: 0 };
  private closed = false;

  private constructor(options: HashGateOptions) {
    this.options = resolve(options);
    this.metrics = withOptionPath('options.metrics', () => resolveMetrics(options.metrics, 'options.metrics'));
    this.bloom = bloomOption('options.bloom', options.bloom);
    this.firstSeenBloom = bloomOption('options.firstSeenBloom', options.firstSeenBloom);

    const dedupOptions: DedupServiceOptions = {};
    if (options.redis !== undefined) dedupOptions.redis = options.redis;
    if (options.dedup !== undefined) dedupOptions.dedup = options.dedup;
    if (options.now !== undefined) dedupOptions.now = options.now;
    dedupOptions.metrics = this.metrics;
    dedupOptions.coalesce = this.options.coalesce;
    this.dedup = withOptionPath('options', () => new DedupService(dedupOptions));

    if (options.cache !== undefined) {
      const c: TieredCacheOptions = { ...options.cache };
      if (c.now === undefined && options.now !== undefined) c.now = options.now;
      if (c.coalesce === undefined) c.coalesce = this.options.coalesce;
      try {
        this.cache = withOptionPath('options.cache', () => new TieredCache(c));
      } catch (err) {
        // Bad cache options must not leave the dedup store's Redis connection open.
        void this.dedup.close().catch(() => undefined);
        throw err;
      }
    }

    try {
      const ix = options.index;
      this.index =
        ix === undefined
          ? undefined
          : withOptionPath('options.index', () => {
              if (ix !== true && (ix === null || typeof ix !== 'object')) return new FingerprintIndex(ix); // its own type error
              const io: FingerprintIndexOptions = ix === true ? {} : { ...ix };
              if (io.coalesce === undefined) io.coalesce = this.options.coalesce;
              return new FingerprintIndex(io);
            });
      const ids = options.ids;
      this.ids = ids === undefined ? undefined : withOptionPath('options.ids', () => {
        const io: IdRegistryOptions = ids === true ? {} : { now: options.now ?? Date.now, ...ids };
        if (io.coalesce === undefined) io.coalesce = this.options.coalesce;
        return new IdRegistry(io);
      });
    } catch (err) {
      void this.dedup.close().catch(() => undefined);
      void this.cache?.close().catch(() => undefined);
      throw err;
    }
    const ids = this.ids;
    if (ids !== undefined) ids.on('collision', () => this.metrics.collision(ids.activeAlgorithm));

    const o = this.options;
    if (o.threads > 0) {
      this.pool = new KernelPool({
        threads: o.threads,
        maxQueue: o.maxQueue,
        layout: { chunkKeys: o.chunkKeys, bytesCap: o.chunkBytes },
        slots: o.slots,
        idleTimeoutMs: o.idleTimeoutMs,
        ...(this.bloom === undefined ? {} : { bloom: this.bloom.toShared() }),
        ...(options.testHooks === true ? { testHooks: true } : {}),
      });
    }
    if (this.metrics.enabled) this.registerGauges();
  }

  /** Validates options, starts the pool and connects stores. Rejects on bad options. */
  static async open(options: HashGateOptions = {}): Promise<HashGate> {
    const gate = new HashGate(options);
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
    // first misses count as Redis errors and can open its breaker.
    if (gate.cache !== undefined && options.cache?.redis !== undefined) await gate.cache.ready().catch(() => undefined);
    return gate;
  }

  private registerGauges(): void {
    for (const [label, bloom] of [['gate', this.bloom], ['first_seen', this.firstSeenBloom]] as const) {
      if (bloom === undefined) continue;
      this.unregister.push(
        this.metrics.bloomSource(label, () => ({
          bitSize: bloom.bitSize,
          bitsSet: bloom.bitCount(),
          hashFunctions: bloom.hashFunctions,
          expectedFpp: bloom.expectedFpp(),
          approximateElements: bloom.approximateElementCount(),
        })),
      );
    }
    const pool = this.pool;
    if (pool !== undefined) {
      this.unregister.push(
        this.metrics.poolSource('kernel', () => {
          const s = pool.stats();
          return { threads: s.threads, queueDepth: s.queued, utilization: s.utilization, completedTasks: s.tasks };
        }),
      );
    }
    this.unregister.push(this.metrics.dedupSource('gate', () => this.dedup.counters));
    const cache = this.cache;
    if (cache !== undefined) this.unregister.push(this.metrics.cacheSource('gate', () => cacheTierTotals(cache.stats())));
    const bus = cache?.bus;
    if (bus !== undefined) this.unregister.push(this.metrics.busSource('gate', () => bus.stats()));
    if (this.dedup.redis !== undefined) {
      const dir = this.dedup.options.journalDir;
      this.unregister.push(this.metrics.journalSource('gate', () => journalDirStats(dir)));
    }
  }

  private check(): void {
    if (this.closed) throw new HashGateError(ErrorCodes.CLOSED, 'HashGate is closed');
  }

  private usePool(n: number): boolean {
    return this.pool !== undefined && n > this.options.inlineThreshold;
  }

  /** Digests back to back, identical to hashBatch() from the package root. */
  async hashBatch(keys: Keys, options: { algorithm?: HashAlgorithm; seed?: number } = {}): Promise<Uint8Array> {
    this.check();
    const n = keyCount(keys, 'keys');
    const start = this.metrics.batchStart('hash', n);
    try {
      if (!this.usePool(n)) {
        const out = hashBatch(keys, options);
        this.metrics.batchEnd('hash', n, start);
        return out;
      }
      // Validate options up front (same errors as the inline path) by hashing zero keys.
      hashBatch([], options);
      const algorithm = options.algorithm ?? 'murmur3_128';
      const seed = options.seed ?? 0;
      const size = digestSize(algorithm);
      const out = new Uint8Array(n * size);
      await this.pool!.run(
        keys as KeyInput,
        n,
        { op: 'hash', algorithm, seed },
        (slot, from, count) => out.set(slot.views.out.subarray(0, count * size), from * size),
        (from, to) => out.set(hashBatch(sliceKeys(keys, from, to), options), from * size),
      );
      this.metrics.batchEnd('hash', n, start);
      return out;
    } catch (err) {
      this.metrics.batchEnd('hash', n, start, err);
      throw err;
    }
  }

  /** Java-compatible buckets (Guava murmur3_128 asLong() mod buckets) for every key. */
  async bucketsOf(keys: Keys, buckets: number): Promise<Uint32Array> {
    this.check();
    const n = keyCount(keys, 'keys');
    if (!this.usePool(n)) return bucketsOf(keys, buckets);
    bucketsOf([], buckets);
    const out = new Uint32Array(n);
    await this.pool!.run(
      keys as KeyInput,
      n,
      { op: 'buckets', buckets },
      (slot, from, count) => out.set(new Uint32Array(slot.views.out.buffer, slot.views.out.byteOffset, count), from),
      (from, to) => out.set(bucketsOf(sliceKeys(keys, from, to), buckets), from),
    );
    return out;
  }

  private requireBloom(method: string): BloomFilter {
    if (this.bloom === undefined) {
      throw new HashGateError(ErrorCodes.INVALID_OPTION, `${method} needs a Bloom filter: open the gate with options.bloom`);
    }
    return this.bloom;
  }

  /** Adds keys to the shared filter; resolves to how many keys changed at least one bit. */
  async bloomAdd(keys: Keys): Promise<number> {
    this.check();
    const bloom = this.requireBloom('bloomAdd');
    const n = keyCount(keys, 'keys');
    const start = this.metrics.batchStart('bloom_add', n);
    let changed = 0;
    if (!this.usePool(n)) {
      changed = bloom.addAll(keys);
    } else {
      await this.pool!.run(
        keys as KeyInput,
        n,
        { op: 'bloomAdd' },
        (_slot, _from, _count, result) => {
          changed += result;
        },
        (from, to) => {
          changed += bloom.addAll(sliceKeys(keys, from, to));
        },
      );
    }
    this.metrics.batchEnd('bloom_add', n, start);
    return changed;
  }

  /** 1 = maybe present, 0 = definitely absent, per key. */
  async bloomCheck(keys: Keys): Promise<Uint8Array> {
    this.check();
    const bloom = this.requireBloom('bloomCheck');
    const n = keyCount(keys, 'keys');
    const start = this.metrics.batchStart('bloom_check', n);
    let out: Uint8Array;
    if (!this.usePool(n)) {
      out = bloom.mightContainAll(keys);
    } else {
      const res = new Uint8Array(n);
      out = res;
      await this.pool!.run(
        keys as KeyInput,
        n,
        { op: 'bloomCheck' },
        (slot, from, count) => res.set(slot.views.out.subarray(0, count), from),
        (from, to) => res.set(bloom.mightContainAll(sliceKeys(keys, from, to)), from),
      );
    }
    this.metrics.batchEnd('bloom_check', n, start);
    return out;
  }

  /**
   * Exact first-seen per window: 1 = first time in the key's window, 0 = seen before. The
   * firstSeenBloom filter, when configured, is only consulted for statistics and filled afterwards:
   * an exact answer never depends on it, so it can never turn a new key into a duplicate. The
   * gate's own `bloom` filter is never touched here.
   */
  firstSeen(keys: Keys, options?: { at?: Date }): Promise<Uint8Array> {
    if (this.closed) return Promise.reject(new HashGateError(ErrorCodes.CLOSED, 'HashGate is closed'));
    // Plain service calls go straight to the (coalescing) dedup service: no wrapper promise.
    if (this.bloom === undefined && !this.metrics.enabled) return this.dedup.firstSeen(keys, options);
    return this.firstSeenObserved(keys, options);
  }

  private async firstSeenObserved(keys: Keys, options: { at?: Date } | undefined): Promise<Uint8Array> {
    const n = keyCount(keys, 'keys');
    const start = this.metrics.batchStart('dedup', n);
    try {
      const fsb = this.firstSeenBloom;
      const before = fsb === undefined ? undefined : fsb.mightContainAll(keys);
      const answers = await this.dedup.firstSeen(keys, options);
      if (before !== undefined) {
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
        fsb!.addAll(keys);
      }
      // Dedup counts reach the metrics through dedupSource (read on scrape), not per batch here.
      this.metrics.batchEnd('dedup', n, start);
      return answers;
    } catch (err) {
      this.metrics.batchEnd('dedup', n, start, err);
      throw err;
    }
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

  /** Batch lookup through Bloom gate -> local LRU -> Redis -> cold store. */
  lookup(table: string, keys: readonly string[]): Promise<(CacheValue | undefined)[]> {
    if (this.closed) return Promise.reject(new HashGateError(ErrorCodes.CLOSED, 'HashGate is closed'));
    if (this.cache === undefined) {
      return Promise.reject(new HashGateError(ErrorCodes.INVALID_OPTION, 'lookup needs a cache: open the gate with options.cache'));
    }
    if (!this.metrics.enabled) return this.cache.lookup(table, keys);
    return this.lookupObserved(this.cache, table, keys);
  }

  private async lookupObserved(cache: TieredCache, table: string, keys: readonly string[]): Promise<(CacheValue | undefined)[]> {
    const start = this.metrics.batchStart('lookup', keys.length);
    try {
      const out = await cache.lookup(table, keys);
      this.metrics.batchEnd('lookup', keys.length, start);
      return out;
    } catch (err) {
      this.metrics.batchEnd('lookup', keys.length, start, err);
      throw err;
    }
  }

  stats(): GateStats {
    const c = this.counters;
    const sampled = c.bloomFalsePositives + c.bloomTrueNegatives;
    return {
      pool: this.pool?.stats(),
      bloom: bloomStats(this.bloom, undefined),
      firstSeenBloom: bloomStats(this.firstSeenBloom, sampled === 0 ? undefined : c.bloomFalsePositives / sampled),
      dedup: { ...c },
    };
  }

  /**
   * Health of every tier for probes and dashboards. Never rejects: a tier that cannot be reached
   * is reported, not thrown. With a Redis dedup store it sends one PING (bounded by timeoutMs).
   */
  async health(options: { timeoutMs?: number } = {}): Promise<GateHealth> {
    const timeoutMs = options.timeoutMs ?? 1000;
    const dedup = await this.dedupHealth(timeoutMs);
    const tiers: GateHealth['tiers'] = { dedup };
    let journal: GateHealth['journal'];
    if (this.dedup.redis !== undefined) {
      const dir = this.dedup.options.journalDir;
      const j = journalDirStats(dir);
      journal = { dir, backlogBytes: j.bytes, segments: j.segments ?? 0, oldestAgeSeconds: j.oldestAgeSeconds ?? 0 };
      if (j.bytes > 0 && dedup.status === 'up') {
        // keys answered by fail-open are not in Redis yet: other instances can answer them 1 again
        tiers.dedup = { ...dedup, status: 'degraded', reason: `${j.bytes} B of fail-open journal not replayed yet` };
      }
    }
    const c = this.cache?.stats();
    if (c?.redis !== undefined) tiers.cacheRedis = remoteTierHealth(c.redis);
    if (c?.cold !== undefined) tiers.cacheCold = remoteTierHealth(c.cold);
    if (this.closed) tiers.dedup = { ...tiers.dedup, status: 'down', reason: 'gate closed' };
    const worst = Object.values(tiers).reduce<HealthStatus>((w, t) => (RANK[t.status] > RANK[w] ? t.status : w), 'up');
    const p = this.pool?.stats();
    return {
      status: worst,
      ready: !this.closed && tiers.dedup.status !== 'down',
      tiers,
      ...(journal === undefined ? {} : { journal }),
      ...(p === undefined ? {} : { pool: { threads: p.threads, queued: p.queued } }),
    };
  }

  private async dedupHealth(timeoutMs: number): Promise<GateHealth['tiers']['dedup']> {
    const redis = this.dedup.redis;
    if (redis === undefined) return { store: 'memory', status: 'up' };
    const failOpen = this.dedup.options.onStoreError === 'fail-open';
    // while Redis cannot answer, fail-open still answers (journaled): degraded; fail-closed rejects: down
    const notUp = (reason: string): TierHealth & { store: 'redis' } => ({ store: 'redis', status: failOpen ? 'degraded' : 'down', reason });
    if (redis.status !== 'ready') return notUp(`redis connection is ${redis.status}`);
    let timer: NodeJS.Timeout | undefined;
    try {
      // a Cluster client sends INFO to one arbitrary node, so replication is reported for standalone only
      const standalone = redis instanceof Redis;
      const [, info] = await Promise.race([
        Promise.all([redis.ping(), standalone ? redis.info('replication') : Promise.resolve(undefined)]),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no PONG within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
      return { store: 'redis', status: 'up', ...(info === undefined ? {} : replication(info)) };
    } catch (err) {
      return notUp(`redis PING failed: ${(err as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Test-only access to the pool (crash tests). */
  get _pool(): KernelPool | undefined {
    return this.pool;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const u of this.unregister) u();
    await Promise.all([this.pool?.close(), this.dedup.close(), this.cache?.close(), this.index?.close(), this.ids?.close()]);
  }
}

/** keys[from..to) without copying key bytes. */
function sliceKeys(keys: Keys, from: number, to: number): Keys {
  if (Array.isArray(keys)) return (keys as ReadonlyArray<string | Uint8Array>).slice(from, to);
  const pk = keys as PackedKeys;
  return { bytes: pk.bytes, offsets: pk.offsets.subarray(from, to + 1), count: to - from };
}

