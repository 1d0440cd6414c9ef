// HashGate: the one object a service opens. It owns the worker pool, the shared Bloom filter,
// the dedup service and (when configured) the tiered lookup cache, and routes each call to the
// cheapest place that can answer it.
import { availableParallelism } from 'node:os';
import type { Redis, Cluster } from 'ioredis';
import { ErrorCodes, HashGateError, HashGateTypeError, checkInt, invalidType, withOptionPath } from './errors.js';
import { hashBatch, hashChecked, bucketsOf, bucketsChecked, digests128, digestSize, type HashAlgorithm } from './hash/index.js';
import { checkKeys, type CheckedKeys, type Key, type Keys } from './hash/keys.js';
import { BloomFilter, type BloomFilterOptions } from './bloom/index.js';
import { addChecked, addFlagsChecked, containsChecked } from './bloom/bloom-filter.js';
import { DedupService, checkDedupKeys, firstSeenHashed, type DedupServiceOptions, type DedupStats, type RecoverReport } from './dedup/service.js';
import type { DedupOptions, RedisConfig } from './dedup/options.js';
import { TieredCache, type TieredCacheOptions } from './cache/index.js';
import type { CacheValue } from './cache/index.js';
import { FingerprintIndex, type FingerprintIndexOptions } from './fingerprint/index.js';
import { IdRegistry, type IdRegistryOptions } from './ids/index.js';
import { resolveMetrics, type Metrics, type MetricsOptions } from './metrics/index.js';
import { bloomStats, cacheTierTotals, journalDirStats } from './metrics/adapters.js';
import { timeBatch } from './metrics/time-batch.js';
import { KernelPool, type KernelJob, type KernelPoolStats } from './pool/pool.js';
import type { ChunkOp } from './pool/messages.js';
import type { Lane } from './pool/lanes.js';
import { Rollback } from './util/rollback.js';
import { gateHealth, type GateHealth } from './gate-health.js';
import { COALESCE_DEFAULTS, Coalescer, parseCoalesceOptions, type CoalesceOptions, type ResolvedCoalesce } from './util/coalescer.js';

export type { Keys } from './hash/keys.js';

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
  /**
   * Shared transfer buffers between the main thread and the workers (bounds memory and in-flight
   * tasks). Default 2 * threads + 2.
   */
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
  if (b === undefined || b === false) return undefined;
  if (b instanceof BloomFilter) return b;
  if (typeof b === 'object' && b !== null) return withOptionPath(name, () => BloomFilter.create(b as BloomFilterOptions));
  throw invalidType(name, 'false, a BloomFilter or { expectedItems, fpp }', b);
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

/**
 * A job whose answer is an array with `width` elements per key, filled in place chunk by chunk.
 * `offload` runs only when the batch goes to the workers: it checks options and picks the task.
 */
/**
 * Checks a batch once. A bad batch is returned as the error to throw inside the batch timer, so
 * it is counted like any failed batch (n is the array length, or 0 when the shape is wrong).
 */
function tryCheck(check: () => CheckedKeys, keys: unknown): { batch: CheckedKeys; n: number } | { batch: undefined; n: number; invalid: unknown } {
  try {
    const batch = check();
    return { batch, n: batch.count };
  } catch (invalid) {
    return { batch: undefined, n: Array.isArray(keys) ? keys.length : 0, invalid };
  }
}

function arrayJob<A extends Uint8Array | Uint32Array>(
  inline: (batch: CheckedKeys) => A,
  offload: () => { op: ChunkOp; width: number },
  make: (length: number) => A,
  laneOut: (lane: Lane, count: number, width: number) => A,
): KernelJob<A> {
  let width = 1;
  return {
    inline,
    offload: (total) => {
      const o = offload();
      width = o.width;
      return { op: o.op, acc: make(total * width) };
    },
    fromLane: (out, lane, from, count) => (out.set(laneOut(lane, count, width), from * width), out),
    fromInline: (out, part, from) => (out.set(part, from * width), out),
  };
}

/** One queued bloomAdd or bloomCheck call (merged Bloom batches keep call order). */
interface BloomCall {
  add: boolean;
  batch: CheckedKeys;
  /** bloomAdd: the count of changed keys; bloomCheck: the caller's own answers. */
  resolve: (v: number | Uint8Array) => void;
  reject: (e: unknown) => void;
}

/** The keys of several checked calls back to back, as one checked batch (no key bytes copied). */
function mergeBatches(calls: readonly BloomCall[], from: number, to: number, n: number): CheckedKeys {
  if (to - from === 1) return calls[from]!.batch;
  const keys = new Array<Key>(n);
  let p = 0;
  for (let i = from; i < to; i++) {
    const b = calls[i]!.batch;
    if (b.packed === undefined) {
      const list = b.keys as ReadonlyArray<Key>;
      for (let j = 0; j < b.count; j++) keys[p++] = list[j]!;
    } else for (let j = 0; j < b.count; j++) keys[p++] = b.at(j);
  }
  return checkKeys(keys);
}

/** Each caller's part of a merged answer: its own checks, or its count of changed keys. */
function answerBloom(calls: readonly BloomCall[], from: number, to: number, add: boolean, out: Uint8Array): void {
  let p = 0;
  for (let i = from; i < to; i++) {
    const c = calls[i]!;
    const m = c.batch.count;
    if (add) {
      let changed = 0;
      for (let j = p; j < p + m; j++) changed += out[j]!;
      c.resolve(changed);
    } else c.resolve(to - from === 1 ? out : out.slice(p, p + m));
    p += m;
  }
}

/** bloomAdd of one call: the count of keys that changed a bit, summed over chunks. */
function bloomAddJob(bloom: BloomFilter): KernelJob<number> {
  return {
    inline: (b) => addChecked(bloom, b),
    offload: () => ({ op: { op: 'bloomAdd' }, acc: 0 }),
    fromLane: (changed, _lane, _from, _count, result) => changed + result,
    fromInline: (changed, part) => changed + part,
  };
}

function rejectBloom(calls: readonly BloomCall[], from: number, to: number, err: unknown): void {
  for (let i = from; i < to; i++) calls[i]!.reject(err);
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
  private readonly pool: KernelPool;
  private readonly unregister: Array<() => void> = [];
  private readonly counters: GateDedupCounters = { bloomFalsePositives: 0, bloomTrueNegatives: 0 };
  private closed = false;
  // Queue merging concurrent bloomAdd/bloomCheck calls, both kinds in one call-ordered queue.
  private readonly bloomCalls: Coalescer<BloomCall> | undefined;
  // Bloom batches on the workers not yet done, and those of them that add (see runBloom).
  private bloomPending = 0;
  private bloomAddsPending = 0;
  // Settle when every Bloom batch started so far is done / when the last add batch is done.
  private bloomAll: Promise<void> | undefined;
  private bloomLastAdd: Promise<void> | undefined;

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
          lanes: o.slots,
          idleTimeoutMs: o.idleTimeoutMs,
          ...(this.bloom === undefined ? {} : { bloom: this.bloom.toShared() }),
          ...(options.testHooks === true ? { testHooks: true } : {}),
        }),
      );
    } catch (err) {
      rollback.undo();
      throw err;
    }
    this.bloomCalls =
      o.coalesce === false || this.bloom === undefined ? undefined : new Coalescer<BloomCall>(o.coalesce, (calls) => this.flushBloom(calls));
    const ids = this.ids;
    if (ids !== undefined) ids.on('collision', () => this.metrics.collision(ids.activeAlgorithm));
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

  private requireBloom(method: string): BloomFilter {
    if (this.bloom === undefined) {
      throw new HashGateError(ErrorCodes.INVALID_OPTION, `${method} needs a Bloom filter: open the gate with options.bloom`);
    }
    return this.bloom;
  }

  /**
   * Adds keys to the shared filter; resolves to how many keys changed at least one bit. Concurrent
   * calls are merged (option `coalesce`) and counted exactly as if run one after another.
   */
  bloomAdd(keys: Keys): Promise<number> {
    if (this.bloomCalls === undefined) return this.bloomAddAlone(keys);
    return this.bloomQueued(true, 'bloomAdd', 'bloom_add', keys) as Promise<number>;
  }

  /** 1 = maybe present, 0 = definitely absent, per key. Merged like bloomAdd, in call order. */
  bloomCheck(keys: Keys): Promise<Uint8Array> {
    if (this.bloomCalls === undefined) return this.bloomCheckAlone(keys);
    return this.bloomQueued(false, 'bloomCheck', 'bloom_check', keys) as Promise<Uint8Array>;
  }

  private async bloomAddAlone(keys: Keys): Promise<number> {
    this.check();
    const bloom = this.requireBloom('bloomAdd');
    const c = tryCheck(() => checkKeys(keys), keys);
    return timeBatch(this.metrics, 'bloom_add', c.n, () =>
      c.batch === undefined ? Promise.reject(c.invalid) : this.pool.run(c.batch, bloomAddJob(bloom)),
    );
  }

  private async bloomCheckAlone(keys: Keys): Promise<Uint8Array> {
    this.check();
    const bloom = this.requireBloom('bloomCheck');
    const c = tryCheck(() => checkKeys(keys), keys);
    const job = arrayJob(
      (b) => containsChecked(bloom, b),
      () => ({ op: { op: 'bloomCheck' }, width: 1 }),
      (length) => new Uint8Array(length),
      (lane, count) => lane.views.out.subarray(0, count),
    );
    return timeBatch(this.metrics, 'bloom_check', c.n, () => (c.batch === undefined ? Promise.reject(c.invalid) : this.pool.run(c.batch, job)));
  }

  // Not async: a merged call resolves straight from its batch, without a wrapper promise per call.
  private bloomQueued(add: boolean, method: string, op: 'bloom_add' | 'bloom_check', keys: Keys): Promise<number | Uint8Array> {
    let c: ReturnType<typeof tryCheck>;
    try {
      this.check();
      this.requireBloom(method);
      // Checked before queueing, so a bad key rejects only its own call.
      c = tryCheck(() => checkKeys(keys), keys);
    } catch (err) {
      return Promise.reject(err);
    }
    if (!this.metrics.enabled) return c.batch === undefined ? Promise.reject(c.invalid) : this.enqueueBloom(add, c.batch);
    return timeBatch(this.metrics, op, c.n, () => (c.batch === undefined ? Promise.reject(c.invalid) : this.enqueueBloom(add, c.batch)));
  }

  private enqueueBloom(add: boolean, batch: CheckedKeys): Promise<number | Uint8Array> {
    const n = batch.count;
    if (n === 0) return Promise.resolve(add ? 0 : new Uint8Array(0));
    const co = this.bloomCalls!;
    return new Promise((resolve, reject) => {
      const call: BloomCall = { add, batch, resolve, reject };
      if (co.accepts(n)) co.add(call, n);
      else {
        // A big call is a batch of its own, after what is queued (call order decides answers).
        co.flush();
        co.begin();
        this.flushBloom([call]);
      }
    });
  }

  // Coalescer flush: runs of same-kind calls, each one kernel batch, started in call order.
  private flushBloom(calls: BloomCall[]): void {
    const co = this.bloomCalls!;
    let runs = 0;
    for (let i = 0; i < calls.length; i++) if (i === 0 || calls[i]!.add !== calls[i - 1]!.add) runs++;
    let left = runs;
    const runDone = (): void => {
      if (--left === 0) co.done();
    };
    for (let i = 0; i < calls.length; ) {
      const add = calls[i]!.add;
      let j = i;
      let n = 0;
      while (j < calls.length && calls[j]!.add === add) n += calls[j++]!.batch.count;
      this.runBloom(calls, i, j, n, add, runDone);
      i = j;
    }
  }

  // Runs calls[from..to) (all adds or all checks, n keys) as one batch once it may: an add after
  // every earlier batch is done, a check after the last earlier add. Only batches that go to the
  // workers (or wait for one that did) are asynchronous; an inline batch with nothing to wait for
  // runs right here, so the usual small-call path never waits a tick.
  private runBloom(calls: BloomCall[], from: number, to: number, n: number, add: boolean, done: () => void): void {
    const wait = add ? this.bloomAll : this.bloomLastAdd;
    const inline = !this.pool.threaded || n <= this.options.inlineThreshold;
    if (wait === undefined && inline) {
      this.execBloom(calls, from, to, n, add);
      done();
      return;
    }
    this.bloomPending++;
    if (add) this.bloomAddsPending++;
    const run = (): Promise<void> | undefined => this.execBloom(calls, from, to, n, add);
    const settled = (wait === undefined ? Promise.resolve(run()) : wait.then(run)).then(() => {
      done();
      if (add && --this.bloomAddsPending === 0) this.bloomLastAdd = undefined;
      if (--this.bloomPending === 0) {
        this.bloomAll = undefined;
        this.bloomLastAdd = undefined;
      }
    });
    if (add) {
      // It waited for every earlier batch, so its end is the end of all of them.
      this.bloomAll = settled;
      this.bloomLastAdd = settled;
    } else {
      const all = this.bloomAll;
      this.bloomAll = all === undefined ? settled : Promise.all([all, settled]).then(() => undefined);
    }
  }

  // One kernel batch for the calls; answers (or rejects) each caller. Never rejects itself.
  private execBloom(calls: BloomCall[], from: number, to: number, n: number, add: boolean): Promise<void> | undefined {
    const bloom = this.bloom!;
    try {
      const batch = mergeBatches(calls, from, to, n);
      if (add && to - from === 1) {
        // One caller needs only its count: no flags, and its chunks may run side by side as today.
        const c = calls[from]!;
        const counted = this.pool.run(batch, bloomAddJob(bloom));
        return counted.then((changed) => c.resolve(changed), (err: unknown) => c.reject(err));
      }
      if (!this.pool.threaded || n <= this.options.inlineThreshold) {
        let out: Uint8Array;
        if (add) addFlagsChecked(bloom, batch, (out = new Uint8Array(n)));
        else out = containsChecked(bloom, batch);
        answerBloom(calls, from, to, add, out);
        return undefined;
      }
      const job = arrayJob(
        (b) => {
          if (!add) return containsChecked(bloom, b);
          const flags = new Uint8Array(b.count);
          addFlagsChecked(bloom, b, flags);
          return flags;
        },
        () => ({ op: { op: add ? 'bloomAddFlags' : 'bloomCheck' }, width: 1 }),
        (length) => new Uint8Array(length),
        (lane, count) => lane.views.out.subarray(0, count),
      );
      // Adds run chunk after chunk: each key's "changed" answer then sees every earlier key.
      return this.pool.run(batch, { ...job, ordered: add }).then(
        (out) => answerBloom(calls, from, to, add, out),
        (err: unknown) => rejectBloom(calls, from, to, err),
      );
    } catch (err) {
      rejectBloom(calls, from, to, err);
      return undefined;
    }
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
    if (this.firstSeenBloom === undefined && !this.metrics.enabled) return this.dedup.firstSeen(keys, options);
    return this.firstSeenObserved(keys, options);
  }

  private async firstSeenObserved(keys: Keys, options: { at?: Date } | undefined): Promise<Uint8Array> {
    // Each key is checked once (by dedup's rules) and hashed once: the same murmur3_128 digests
    // answer the filter's check and add, and (when seeds agree) the dedup store's lookup.
    const c = tryCheck(() => checkDedupKeys(this.dedup, keys), keys);
    return timeBatch(this.metrics, 'dedup', c.n, async () => {
      if (c.batch === undefined) throw c.invalid;
      const batch = c.batch;
      const fsb = this.firstSeenBloom;
      if (fsb === undefined) return firstSeenHashed(this.dedup, batch, undefined, options);
      const digests = digests128(batch, fsb.seed);
      const before = fsb.mightContainDigests(digests);
      const answers = await firstSeenHashed(this.dedup, batch, fsb.seed === 0 ? digests : undefined, options);
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
      fsb.addDigests(digests);
      // Dedup counts reach the metrics through dedupSource (read on scrape), not per batch here.
      return answers;
    });
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
    const cache = this.cache;
    return timeBatch(this.metrics, 'lookup', keys.length, () => cache.lookup(table, keys));
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

  /** Test-only access to the pool (crash tests). */
  get _pool(): KernelPool | undefined {
    return this.pool.threaded ? this.pool : undefined;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const u of this.unregister) u();
    // Calls queued before close() still get their answers (then the pool may go).
    await this.bloomCalls?.drain();
    await Promise.all([this.pool.close(), this.dedup.close(), this.cache?.close(), this.index?.close(), this.ids?.close()]);
  }
}
