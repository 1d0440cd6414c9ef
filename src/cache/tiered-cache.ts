// Multi-level lookup: Bloom gate -> local LRU -> Redis (hot) -> cold store (HBase). Lower-tier hits
// are copied upwards, definite misses are cached negatively for a short TTL, and concurrent lookups
// of the same missing key share one load. A failing remote tier is counted, surfaced in stats()
// and lookupDetailed(), and bypassed for the keys another tier can still answer.
//
// Unknown is not absent: a key whose load skipped (open breaker) or failed on a tier that could hold
// it, and that no other tier found, could not be checked. lookup() rejects with
// HG_ERR_TIER_UNAVAILABLE (naming the tier and the indexes of those keys) unless grace serves the
// last known value; lookupDetailed() answers undefined for it and lists it in `unknown`. Nothing
// learnt from a degraded load is cached locally (neither a negative entry, which would read as
// "absent" for negativeTtlMs, nor a lower tier's possibly older copy, which would hide a newer hot
// value after the tier recovers).
import { LRUCache } from 'lru-cache';
import { InFlightKeys, keyHash } from './inflight-keys.js';
import { createFailFastRedis } from '../redis/client.js';
import { ErrorCodes, HashGateError, invalidType, outOfRange } from '../errors.js';
import { FLAG_ARCHIVED, ENVELOPE_HEADER_BYTES, decodeEnvelopeValue, decodeValue, wrapEnvelope } from './codec.js';
import { RemoteTierStats, type CacheStats, type TierError } from './stats.js';
import type { BloomLike, CacheValue, ColdCell, ColdStore } from './types.js';
import { Coalescer, type ResolvedCoalesce } from '../util/coalescer.js';
import { MgetPipe, isCluster, mgetBuffers, setMany, type MgetResult, type RedisClient } from './redis-tier.js';
import { resolveBus, type BusListener, type InvalidationBus } from './bus.js';
import { PersistentLocalTier } from './persistent-local.js';
import { resolveCacheOptions, type BloomOption, type TieredCacheOptions } from './options.js';
import { TierBreaker, withTimeout } from './breaker.js';

// the cache's own fail-fast client; built in the Redis layer, exported from here as before
export { createFailFastRedis } from '../redis/client.js';

export interface LookupResult {
  /** Per key: its value, or undefined for absent -- or unknown when its index is in `unknown`. */
  values: (CacheValue | undefined)[];
  /**
   * Tier failures (and breaker skips, `skipped: true`) behind this call's answers, including those
   * met by a load it shared with a concurrent lookup.
   */
  errors: TierError[];
  /** True when any answer depended on a tier that was skipped or failed: it may be wrong. */
  degraded: boolean;
  /**
   * Indexes (ascending) of keys that could not be checked: a tier that could hold them failed or
   * was skipped and no tier found them. Their `values` entry is undefined but means "unknown",
   * never "absent". lookup() rejects with HG_ERR_TIER_UNAVAILABLE instead when this is not empty.
   */
  unknown: number[];
  /** Keys answered from the grace period (`graceMs`) because the tiers below failed. */
  stale: StaleAnswer[];
}

/** A value served past its local TTL because the tiers that could refresh it did not answer. */
export interface StaleAnswer {
  index: number;
  /** How long ago the value was loaded into the local tier (ms). */
  ageMs: number;
}

const NEGATIVE: object = Object.freeze({ negative: true });
const ENTRY_OVERHEAD = 64;
const BLOOM_BATCH_MIN = 8;
const noop = (): void => undefined;

/** One key's answer: its value, or undefined for absent (or unknown). */
type Answer = CacheValue | undefined;
/** Per-key load outcome: not found (yet) or found. */
const MISSING = 0;
const FOUND = 1;

/** Gap bits: the tier that could hold a key and did not answer (skipped, failed, unreadable). */
const GAP_REDIS = 1;
const GAP_COLD = 2;

/** What one batch load answered: values, and per key its gap bits (0 = every tier answered). */
interface Loaded {
  vals: Answer[];
  gap: Uint8Array | undefined;
  errors: TierError[];
}

/**
 * One batch load below the local tier; every key it covers points at it with its index. A merged
 * load answers several flights at once: a flight's keys start at `off` in that load's answers.
 */
interface Flight {
  p: Promise<Loaded>;
  off: number;
}

/** Per-call collector of what lookupDetailed() reports. */
interface CallReport {
  errors: TierError[];
  degraded: boolean;
  unknown: number[];
  stale: StaleAnswer[];
}

/** Local values past their fresh TTL seen by one lookup, kept in case the tiers below cannot answer. */
interface StaleSeen {
  /** By index in the lookup's keys: the value and how long ago it was loaded (ms). */
  vals: Map<number, CacheValue>;
  ages: Map<number, number>;
  /** The table's invalidation generation when they were read: a write since voids them. */
  gen: number;
}
/**
 * Per-table state. One LRU per table keeps the hot path free of composite-key strings (a concat
 * per key would be flattened and rehashed on every get); the limits therefore apply per table and
 * `local.maxTables` bounds how many tables there can be.
 */
interface TableState {
  lru: LRUCache<string, object>;
  inflight: InFlightKeys<Flight>;
  /** Bumped by invalidate(): a load that started before must not store what it read. */
  gen: number;
  /** `${redis.prefix}${table}:`, built once. */
  redisPrefix: string;
  /** The same as UTF-8 bytes after the client's keyPrefix, for the MGET pipe (made at its first use). */
  redisPrefixBytes: Buffer | undefined;
  /** Merges the loads of concurrent lookups (undefined when coalescing is off). */
  co: Coalescer<LoadRequest> | undefined;
}

/** The keys one lookup must load below the local tier, waiting to be merged with others. */
interface LoadRequest {
  keys: string[];
  flight: Flight;
  resolve: (loaded: Loaded) => void;
  reject: (err: unknown) => void;
}

// One shared executor instead of a closure per queued load: new Promise() runs it synchronously,
// so the functions it captures are read back before any other call can overwrite them.
const captured: { resolve?: (l: Loaded) => void; reject?: (e: unknown) => void } = {};
const capture = (resolve: (l: Loaded) => void, reject: (e: unknown) => void): void => {
  captured.resolve = resolve;
  captured.reject = reject;
};

/** The report of a lookup() call, made once a load brings it a tier error or gap (lookupDetailed() brings its own). */
const newReport = (): CallReport => ({ errors: [], degraded: false, unknown: [], stale: [] });

/** The rejection of a lookup() some of whose keys could not be checked; never names a key. */
function tierUnavailable(indexes: number[], n: number, bits: number, errors: TierError[]): HashGateError {
  const tiers: ('redis' | 'cold')[] = [];
  if (bits & GAP_REDIS) tiers.push('redis');
  if (bits & GAP_COLD) tiers.push('cold');
  const tier = tiers[0]!;
  const first = errors.find((e) => e.tier === tier) ?? errors[0];
  return new HashGateError(
    ErrorCodes.TIER_UNAVAILABLE,
    `lookup could not check ${indexes.length} of ${n} keys: the ${tiers.join(' and ')} tier${tiers.length > 1 ? 's' : ''} did not answer${first ? ` (${first.code})` : ''}`,
    { details: { tier, tiers, indexes, errors: errors.slice() } },
  );
}

function pushOnce(list: TierError[], e: TierError): void {
  if (!list.includes(e)) list.push(e);
}

function addReport(report: CallReport, errors: readonly TierError[]): void {
  report.degraded = true;
  for (const e of errors) pushOnce(report.errors, e);
}

const TABLE_RE = /^[A-Za-z0-9_.-]{1,128}$/;

function checkKey(key: unknown, i: number): void {
  if (typeof key === 'string' && key.length > 0) return;
  throw key === '' ? new HashGateError(ErrorCodes.EMPTY_KEY, `keys[${i}] is empty`) : invalidType(`keys[${i}]`, 'a string', key);
}

export function checkTable(table: unknown, name = 'table'): string {
  if (typeof table !== 'string') throw invalidType(name, 'a string', table);
  if (!TABLE_RE.test(table)) throw outOfRange(name, 'a name of 1-128 chars from [A-Za-z0-9_.-]', table);
  return table;
}

export class TieredCache {
  readonly #tables = new Map<string, TableState>();
  readonly #lruOptions: LRUCache.Options<string, object, unknown>;
  readonly #maxTables: number;
  readonly #negativeTtlMs: number;
  readonly #graceMs: number;
  readonly #redis: RedisClient | undefined;
  readonly #ownsRedis: boolean;
  readonly #prefix: string;
  readonly #redisTtlMs: number;
  readonly #redisTimeoutMs: number;
  readonly #redisBatch: number;
  /**
   * Whether MGET needs our own timer: not when the client's commandTimeout already bounds every
   * command by at most redis.timeoutMs (a second timer per load costs CPU on every small call).
   */
  readonly #mgetTimer: boolean;
  /** A standalone Redis' MGETs, over a connection of the tier's own (undefined on a Cluster or Sentinel set). */
  readonly #mgetPipe: MgetPipe | undefined;
  readonly #cold: ColdStore | undefined;
  readonly #coldTimeoutMs: number;
  readonly #coldBatch: number;
  readonly #bloom: BloomOption;
  readonly #breaker: TierBreaker;
  readonly #maxKeys: number;
  readonly #now: () => number;
  readonly #coalesce: ResolvedCoalesce | false;
  readonly #redisStats = new RemoteTierStats();
  readonly #coldStats = new RemoteTierStats();
  /** Optional persistent local tier under the LRU (`local.path`). */
  readonly #l2: PersistentLocalTier | undefined;
  #closed = false;
  /**
   * Until the Redis client has been ready once: resolves on its first 'ready'. A client that is
   * still connecting fails commands at once ("Stream isn't writeable"); loads wait on this instead
   * (bounded by redis.timeoutMs) so a cache used right after construction does not answer "absent".
   */
  #connecting: Promise<void> | undefined;
  readonly #bus: InvalidationBus | undefined;
  readonly #ownsBus: boolean = false;
  readonly #busListener: BusListener = {
    keys: (table, keys) => this.#dropLocal(table, keys),
    resync: () => this.#dropAllLocal(),
  };
  #busOff: () => void = noop;
  #gateBuf = new Uint8Array(0);
  // lru-cache writes a `status` back into set()'s options; cleared per call so none is shared
  readonly #setPos: { size: number; status?: undefined } = { size: 0, status: undefined };
  readonly #setNeg: { size: number; ttl: number; status?: undefined } = { size: 0, ttl: 0, status: undefined };
  #lookups = 0;
  #keys = 0;
  #bloomRejected = 0;
  #localHits = 0;
  #localMisses = 0;
  #negativeHits = 0;
  #shared = 0;
  #loads = 0;

  constructor(opts: TieredCacheOptions = {}) {
    const o = resolveCacheOptions(opts);
    this.#lruOptions = o.lru;
    this.#maxTables = o.maxTables;
    this.#negativeTtlMs = o.negativeTtlMs;
    this.#graceMs = o.graceMs;
    this.#now = o.now;
    this.#prefix = o.prefix;
    this.#redisTtlMs = o.redisTtlMs;
    this.#redisTimeoutMs = o.redisTimeoutMs;
    this.#redisBatch = o.redisBatch;
    this.#cold = o.cold;
    this.#coldTimeoutMs = o.coldTimeoutMs;
    this.#coldBatch = o.coldBatch;
    this.#bloom = o.bloom;
    this.#maxKeys = o.maxKeys;
    this.#coalesce = o.coalesce;
    this.#breaker = new TierBreaker({
      failures: o.breakerFailures,
      cooldownMs: o.breakerCooldownMs,
      now: o.now,
      onTierError: o.onTierError,
      coldKind: () => this.#cold?.kind ?? 'cold',
    });

    if (o.redis === undefined) {
      this.#redis = undefined;
      this.#ownsRedis = false;
      this.#mgetTimer = false;
      this.#mgetPipe = undefined;
    } else {
      if (o.redis.client !== undefined) {
        this.#redis = o.redis.client;
        this.#ownsRedis = false;
      } else {
        this.#redis = createFailFastRedis(o.redis.url, this.#redisTimeoutMs);
        this.#redis.on('error', noop); // connection errors surface through the command failures
        this.#ownsRedis = true;
      }
      this.#connecting = this.#firstConnect(this.#redis);
      const ct = (this.#redis.options as { commandTimeout?: number } | undefined)?.commandTimeout;
      this.#mgetTimer = !(typeof ct === 'number' && ct > 0 && ct <= this.#redisTimeoutMs);
      // a connect may take longer than one lookup's timeout: that lookup is degraded, the next uses it
      this.#mgetPipe = MgetPipe.serves(this.#redis) ? new MgetPipe(this.#redis, Math.min(5_000, Math.max(1_000, this.#redisTimeoutMs))) : undefined;
    }

    // options are all valid by now: open the bus and the persistent tier last, and leave no client
    // behind if either fails
    try {
      if (o.bus !== undefined) {
        const { bus, owned } = resolveBus(o.bus, this.#redis);
        this.#bus = bus;
        this.#ownsBus = owned;
        this.#busOff = bus.subscribe(this.#busListener);
      }
      this.#l2 = o.persistent === undefined ? undefined : new PersistentLocalTier(o.persistent);
    } catch (err) {
      this.#busOff();
      if (this.#ownsBus) void this.#bus?.close().catch(noop);
      if (this.#ownsRedis) this.#redis?.disconnect();
      this.#mgetPipe?.close();
      throw err;
    }
  }

  /** The invalidation bus in use (undefined without one). */
  get bus(): InvalidationBus | undefined {
    return this.#bus;
  }

  /** The persistent local tier (`local.path`), for its stats. */
  get persistentLocal(): PersistentLocalTier | undefined {
    return this.#l2;
  }

  /** The Redis client in use (undefined without a hot tier). */
  get redis(): RedisClient | undefined {
    return this.#redis;
  }

  /** Resolves once the Redis client and the cache's own MGET connection are up; rejects after timeoutMs. */
  async ready(timeoutMs = 5_000): Promise<void> {
    if (this.#bus) await this.#bus.ready(timeoutMs);
    const r = this.#redis;
    if (!r) return;
    if (r.status !== 'ready') {
      await withTimeout(
        new Promise<void>((resolve) => r.once('ready', () => resolve())),
        timeoutMs,
        'redis connect',
      );
    }
    if (this.#mgetPipe !== undefined) await withTimeout(this.#mgetPipe.connect(), timeoutMs, 'redis connect');
  }

  /**
   * Values in key order; undefined = absent (Bloom gate, local negative entry, or every tier that
   * could hold the key answered). Rejects with HG_ERR_TIER_UNAVAILABLE when a key could not be
   * checked (see lookupDetailed() for a per-key answer instead).
   */
  lookup(table: string, keys: readonly string[]): Promise<(CacheValue | undefined)[]> {
    // Not async: a lookup answered wholly by the local tier resolves at once, without the
    // async machinery a function with awaits costs on every call (most service lookups are hits).
    let r: Answer[] | Promise<Answer[]>;
    try {
      r = this.#lookup(table, keys, undefined);
    } catch (err) {
      return Promise.reject(err);
    }
    return Array.isArray(r) ? Promise.resolve(r) : r;
  }

  async lookupDetailed(table: string, keys: readonly string[]): Promise<LookupResult> {
    const report: CallReport = { errors: [], degraded: false, unknown: [], stale: [] };
    const values = await this.#lookup(table, keys, report);
    return { values, errors: report.errors, degraded: report.degraded, unknown: report.unknown, stale: report.stale };
  }

  /**
   * Drop local copies (positive and negative), e.g. after a write. Remote tiers are untouched.
   * With a bus, every other instance drops them too.
   */
  invalidate(table: string, keys: readonly string[]): void {
    this.#dropLocal(table, keys);
    this.#bus?.publish(table, keys, this.#busListener);
  }

  #dropLocal(table: string, keys: readonly string[]): void {
    const t = this.#tables.get(table);
    if (t) {
      t.gen++;
      for (const k of keys) t.lru.delete(k);
    }
    this.#l2?.remove(table, keys);
  }

  /** Bus resync: loads under way must not store what they read either. */
  #dropAllLocal(): void {
    for (const t of this.#tables.values()) {
      t.gen++;
      t.lru.clear();
    }
  }

  clearLocal(): void {
    for (const t of this.#tables.values()) t.lru.clear();
  }

  stats(): CacheStats {
    const now = this.#now();
    // a client that lost its connection is down even while local hits spare it every call
    const r = this.#redis;
    const redis = r ? this.#redisStats.snapshot(now, r.status === 'ready' || r.status === 'wait' || this.#mgetPipe?.isReady === true) : undefined;
    const cold = this.#cold ? this.#coldStats.snapshot(now) : undefined;
    let entries = 0;
    let bytes = 0;
    for (const t of this.#tables.values()) {
      entries += t.lru.size;
      bytes += t.lru.calculatedSize;
    }
    return {
      lookups: this.#lookups,
      keys: this.#keys,
      bloom: { rejected: this.#bloomRejected, passed: this.#keys - this.#bloomRejected },
      local: {
        hits: this.#localHits,
        misses: this.#localMisses,
        negativeHits: this.#negativeHits,
        entries,
        bytes,
      },
      singleFlight: { shared: this.#shared, loads: this.#loads },
      redis,
      cold,
      degraded: !!(redis && (!redis.healthy || redis.breakerOpen)) || !!(cold && (!cold.healthy || cold.breakerOpen)),
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // lookups queued for a merged load were accepted before close: send them while Redis is open
    for (const t of this.#tables.values()) await t.co?.drain();
    this.clearLocal();
    this.#busOff();
    if (this.#ownsBus) await this.#bus?.close();
    await this.#l2?.close();
    this.#mgetPipe?.close();
    if (this.#ownsRedis && this.#redis) {
      try {
        await this.#redis.quit();
      } catch {
        this.#redis.disconnect();
      }
    }
  }

  #tableState(table: string): TableState {
    let t = this.#tables.get(table);
    if (t === undefined) {
      if (this.#tables.size >= this.#maxTables) {
        throw new HashGateError(ErrorCodes.CAPACITY, `more than local.maxTables (${this.#maxTables}) tables looked up`);
      }
      t = { lru: new LRUCache<string, object>(this.#lruOptions), inflight: new InFlightKeys<Flight>(), gen: 0, redisPrefix: this.#prefix + table + ':', redisPrefixBytes: undefined, co: undefined };
      const state = t;
      if (this.#coalesce !== false) state.co = new Coalescer<LoadRequest>(this.#coalesce, (reqs) => this.#loadMerged(table, state, reqs));
      this.#tables.set(table, t);
    }
    return t;
  }

  /** Reused result buffer of the batch gate: it is read before this lookup's first await. */
  #gateScratch(n: number): Uint8Array {
    if (this.#gateBuf.length < n) this.#gateBuf = new Uint8Array(Math.max(n, 1024));
    return this.#gateBuf;
  }

  #bloomFor(table: string): BloomLike | undefined {
    const b = this.#bloom;
    if (b === false) return undefined;
    if (typeof b === 'function') return b(table);
    return b;
  }

  /** The answer, when the local tier (and Bloom gate) answered every key; else the pending load. Throws on bad input. */
  #lookup(table: string, keys: readonly string[], report: CallReport | undefined): Answer[] | Promise<Answer[]> {
    if (this.#closed) throw new HashGateError(ErrorCodes.CLOSED, 'TieredCache is closed');
    let ts = this.#tables.get(table);
    if (ts === undefined) {
      checkTable(table);
      ts = this.#tableState(table);
    }
    if (!Array.isArray(keys)) throw invalidType('keys', 'an array of strings', keys);
    const n = keys.length;
    if (n > this.#maxKeys) throw outOfRange('keys.length', `at most maxKeysPerLookup (${this.#maxKeys})`, n);
    this.#lookups++;
    this.#keys += n;
    const out: Answer[] = new Array<Answer>(n);
    const bloom = this.#bloomFor(table);
    const lru = ts.lru;
    // one kernel call for the whole batch when the filter offers it (keys checked first)
    let gate: Uint8Array | undefined;
    if (bloom !== undefined && n >= BLOOM_BATCH_MIN && typeof bloom.mightContainAll === 'function') {
      for (let i = 0; i < n; i++) checkKey(keys[i], i);
      gate = bloom.mightContainAll(keys as string[], this.#gateScratch(n));
    }
    let missIdx: number[] | undefined;
    let stale: StaleSeen | undefined;
    const grace = this.#graceMs;
    let rejected = 0;
    let hits = 0;
    let negHits = 0;
    for (let i = 0; i < n; i++) {
      const key = keys[i]!;
      if (typeof key !== 'string' || key.length === 0) checkKey(key, i); // throws
      out[i] = undefined;
      if (gate !== undefined ? gate[i] === 0 : bloom !== undefined && !bloom.mightContain(key)) {
        rejected++;
        continue;
      }
      const v = lru.get(key);
      if (v !== undefined) {
        if (v === NEGATIVE) {
          negHits++;
          continue;
        }
        // with grace, a value in the last graceMs of its LRU life is stale: ask the tiers again
        // and keep it only in case they cannot answer
        const rem = grace === 0 ? Infinity : lru.getRemainingTTL(key);
        if (rem > grace) {
          hits++;
          out[i] = v as CacheValue;
          continue;
        }
        stale ??= { vals: new Map(), ages: new Map(), gen: ts.gen };
        stale.vals.set(i, v as CacheValue);
        stale.ages.set(i, Math.max(0, (lru.ttl as number) - rem));
      }
      const w = this.#l2?.get(table, key);
      if (w !== undefined) {
        // a local hit (also counted in the persistent tier's stats), copied up into the LRU
        this.#setPos.size = this.#l2!.lastBytes + key.length * 2 + ENTRY_OVERHEAD;
        this.#setPos.status = undefined;
        lru.set(key, w as object, this.#setPos);
        out[i] = w;
        hits++;
        continue;
      }
      (missIdx ??= []).push(i);
    }
    this.#bloomRejected += rejected;
    this.#localHits += hits;
    this.#negativeHits += negHits;
    this.#localMisses += n - rejected - hits - negHits;
    if (missIdx === undefined) return out;
    return this.#lookupMisses(table, ts, keys, out, missIdx, report, stale);
  }

  /** Loads the keys the local tier did not answer (claims, merged loads, followers). */
  async #lookupMisses(
    table: string,
    ts: TableState,
    keys: readonly string[],
    out: Answer[],
    missIdx: number[],
    detailed: CallReport | undefined,
    stale: StaleSeen | undefined,
  ): Promise<Answer[]> {
    // lookup() needs the tier errors too when it has to reject; made when a load brings any
    let report: CallReport | undefined = detailed;
    // per index of `out`: the gap bits of a key no tier found while one could not answer
    let unknown: Uint8Array | undefined;
    // Claim every key nobody is loading yet before the first await, so lookups that start while
    // this one is in flight (or duplicates later in this batch) wait on this load instead of
    // starting their own.
    const inflight = ts.inflight;
    // followers: index in `out`, the load they follow and their key's index in it
    let follow: number[] | undefined;
    let followLoads: Flight[] | undefined;
    let followAt: number[] | undefined;
    const flight: Flight = { p: undefined as unknown as Promise<Loaded>, off: 0 };
    const leadIdx: number[] = [];
    const leadKeys: string[] = [];
    // each claimed key's hash, for its release
    const leadHashes: number[] = [];
    for (const i of missIdx) {
      const key = keys[i]!;
      const h = keyHash(key);
      const slot = inflight.find(key, h);
      if (slot >= 0) {
        this.#shared++;
        (follow ??= []).push(i);
        (followLoads ??= []).push(inflight.loadAt(slot));
        (followAt ??= []).push(inflight.indexAt(slot));
        continue;
      }
      leadHashes.push(h);
      inflight.add(key, h, flight, leadKeys.length);
      leadIdx.push(i);
      leadKeys.push(key);
    }

    let waits: Promise<void> | undefined;
    if (leadKeys.length > 0) {
      this.#loads++;
      const co = ts.co;
      flight.p =
        co !== undefined && co.accepts(leadKeys.length)
          ? this.#queueLoad(co, leadKeys, flight)
          : this.#load(table, ts, leadKeys);
      // no catch of its own: this call awaits it below, before anything else can run
    }
    if (follow !== undefined) {
      const fi = follow;
      const fa = followAt!;
      const fl = followLoads!;
      waits = Promise.all(fl.map((f) => f.p)).then((loaded) => {
        for (let q = 0; q < fi.length; q++) {
          const l = loaded[q]!;
          const j = fl[q]!.off + fa[q]!;
          const v = l.vals[j];
          out[fi[q]!] = v;
          // a shared load's gap is this caller's gap too: its answer came from the same tiers
          const g = l.gap === undefined ? 0 : l.gap[j]!;
          if (g !== 0) {
            addReport((report ??= newReport()), l.errors);
            if (v === undefined) (unknown ??= new Uint8Array(keys.length))[fi[q]!] = g;
          }
        }
      });
    }
    if (leadKeys.length > 0) {
      try {
        const l = await flight.p;
        const vals = l.vals;
        const off = flight.off;
        for (let j = 0; j < leadKeys.length; j++) out[leadIdx[j]!] = vals[off + j];
        if (l.errors.length > 0) {
          report ??= newReport();
          for (const e of l.errors) pushOnce(report.errors, e);
        }
        // only this call's part of a merged load's gaps is its own
        const gap = l.gap;
        if (gap !== undefined) {
          for (let j = 0; j < leadKeys.length; j++) {
            const g = gap[off + j]!;
            if (g === 0) continue;
            (report ??= newReport()).degraded = true;
            if (vals[off + j] === undefined) (unknown ??= new Uint8Array(keys.length))[leadIdx[j]!] = g;
          }
        }
      } catch (err) {
        // this call rejects with its own load's error; a failure of the loads it also followed
        // must not surface later as an unhandled rejection
        waits?.catch(noop);
        throw err;
      } finally {
        // nobody can replace a claim while it is registered, so these entries are still ours
        for (let j = 0; j < leadKeys.length; j++) inflight.delete(leadKeys[j]!, leadHashes[j]!);
      }
    }
    if (waits !== undefined) await waits;
    if (unknown === undefined) return out;
    return this.#unknown(ts, out, unknown, report ?? newReport(), detailed !== undefined, stale);
  }

  /**
   * Keys no tier could check: served from grace when a stale local value is at hand, else listed
   * in the report (lookupDetailed) or the reason lookup() rejects.
   */
  #unknown(ts: TableState, out: Answer[], unknown: Uint8Array, report: CallReport, detailed: boolean, stale: StaleSeen | undefined): Answer[] {
    // a write since the stale values were read voids them
    const grace = stale !== undefined && stale.gen === ts.gen ? stale : undefined;
    const left: number[] = [];
    let bits = 0;
    for (let i = 0; i < unknown.length; i++) {
      const g = unknown[i]!;
      if (g === 0) continue;
      const v = grace?.vals.get(i);
      if (v !== undefined) {
        out[i] = v;
        report.stale.push({ index: i, ageMs: grace!.ages.get(i)! });
        continue;
      }
      left.push(i);
      bits |= g;
    }
    if (left.length === 0) return out;
    if (detailed) {
      report.unknown = left;
      return out;
    }
    throw tierUnavailable(left, out.length, bits, report.errors);
  }
  /** A load queued for merging; the shared executor (see capture) saves a closure per lookup. */
  #queueLoad(co: Coalescer<LoadRequest>, keys: string[], flight: Flight): Promise<Loaded> {
    const p = new Promise<Loaded>(capture);
    co.add({ keys, flight, resolve: captured.resolve!, reject: captured.reject! }, keys.length);
    return p;
  }

  /**
   * One load for the misses of several lookups, keys in call order (each key appears once: the
   * in-flight claims make later lookups of a key follow the first). Every merged caller sees the
   * tier errors of the shared load, since each of its keys went through it.
   */
  #loadMerged(table: string, ts: TableState, reqs: LoadRequest[]): void {
    const co = ts.co!;
    const first = reqs[0]!;
    if (reqs.length === 1) {
      this.#load(table, ts, first.keys).then(
        (l) => {
          co.done();
          first.resolve(l);
        },
        (e: unknown) => {
          co.done();
          first.reject(e);
        },
      );
      return;
    }
    let total = 0;
    for (const r of reqs) total += r.keys.length;
    const keys = new Array<string>(total);
    let j = 0;
    for (const r of reqs) for (const k of r.keys) keys[j++] = k;
    this.#load(table, ts, keys).then(
      (l) => {
        co.done();
        // every caller gets the whole load and reads its own keys from their offset (no copy of
        // its answers); the tier errors are shared by all of them
        let off = 0;
        for (const r of reqs) {
          r.flight.off = off;
          r.resolve(l);
          off += r.keys.length;
        }
      },
      (e: unknown) => {
        co.done();
        for (const r of reqs) r.reject(e);
      },
    );
  }

  /** Loads keys below the local tier, backfills upper tiers and caches definite misses. */
  async #load(table: string, ts: TableState, keys: string[]): Promise<Loaded> {
    const gen = ts.gen;
    const n = keys.length;
    const vals: Answer[] = new Array<Answer>(n).fill(undefined);
    const sizes = new Uint32Array(n);
    const state = new Uint8Array(n); // MISSING
    // 1 = a tier that could hold this key was skipped or failed; allocated on the first gap
    const ld: Loaded = { vals, gap: undefined, errors: [] };
    const errors = ld.errors;
    const redis = this.#redis;

    if (redis !== undefined) {
      const rs = this.#redisStats;
      if (this.#breaker.isOpen(rs)) {
        rs.skipped += n;
        errors.push(this.#breaker.skipped('redis', rs));
        (ld.gap = new Uint8Array(n)).fill(GAP_REDIS);
      } else if (this.#connecting !== undefined && !(await this.#awaitFirstConnect(rs, errors))) {
        (ld.gap = new Uint8Array(n)).fill(GAP_REDIS);
      } else {
        for (let off = 0; off < n; off += this.#redisBatch) {
          const end = Math.min(n, off + this.#redisBatch);
          const t0 = performance.now();
          let bufs: MgetResult['values'];
          let partial: unknown;
          try {
            const mp = this.#mgetPipe;
            if (mp !== undefined) {
              const prefix = (ts.redisPrefixBytes ??= Buffer.from(mp.keyPrefix + ts.redisPrefix, 'utf8'));
              bufs = await mp.mget(prefix, keys, off, end, this.#redisTimeoutMs);
            } else {
              const rkeys: string[] = new Array<string>(end - off);
              const rp = ts.redisPrefix;
              for (let j = off; j < end; j++) rkeys[j - off] = rp + keys[j];
              // a Cluster bounds each slot's MGET itself, so a dead master fails only its keys
              const res = isCluster(redis)
                ? await mgetBuffers(redis, rkeys, this.#redisTimeoutMs)
                : this.#mgetTimer
                  ? await withTimeout(mgetBuffers(redis, rkeys, this.#redisTimeoutMs), this.#redisTimeoutMs, 'redis MGET')
                  : await mgetBuffers(redis, rkeys, this.#redisTimeoutMs);
              bufs = res.values;
              partial = res.error;
            }
          } catch (e) {
            this.#breaker.fail(rs, 'redis', e, errors);
            (ld.gap ??= new Uint8Array(n)).fill(GAP_REDIS, off, end);
            continue;
          }
          rs.latency.record(performance.now() - t0);
          if (partial === undefined) this.#breaker.ok(rs);
          else this.#breaker.fail(rs, 'redis', partial, errors);
          let hits = 0;
          let unanswered = 0;
          for (let j = off; j < end; j++) {
            const buf = bufs[j - off];
            if (buf === undefined) {
              // its node did not answer: unknown (degraded), never a cached "absent"
              unanswered++;
              (ld.gap ??= new Uint8Array(n))[j] = GAP_REDIS;
              continue;
            }
            if (!buf) continue;
            let v: CacheValue | undefined;
            try {
              v = decodeEnvelopeValue(buf);
            } catch (e) {
              // a value is there but unreadable: whatever the cold tier says, Redis did not answer
              this.#breaker.fail(rs, 'redis', e, errors);
              (ld.gap ??= new Uint8Array(n))[j] = GAP_REDIS;
              continue;
            }
            if (v === undefined) continue; // not an envelope of ours: a miss
            vals[j] = v;
            sizes[j] = buf.length - ENVELOPE_HEADER_BYTES;
            state[j] = FOUND;
            hits++;
          }
          rs.hits += hits;
          rs.misses += end - off - hits - unanswered;
        }
      }
    }

    const cold = this.#cold;
    if (cold !== undefined) {
      const miss: number[] = [];
      for (let j = 0; j < n; j++) if (state[j] === MISSING) miss.push(j);
      if (miss.length > 0) await this.#loadCold(cold, table, keys, miss, sizes, state, ld);
    }

    // a write invalidated this table while we were reading: answer, but do not cache stale data
    if (ts.gen !== gen) return ld;
    const gap = ld.gap;
    const lru = ts.lru;
    // set() reads its options synchronously: two reused objects instead of one per key
    const pos = this.#setPos;
    const neg = this.#setNeg;
    neg.ttl = this.#negativeTtlMs;
    for (let j = 0; j < n; j++) {
      if (gap !== undefined && gap[j] !== 0) continue; // unknown or possibly stale: ask again next time
      const k = keys[j]!;
      const s = state[j];
      if (s === FOUND) {
        pos.size = sizes[j]! + k.length * 2 + ENTRY_OVERHEAD;
        pos.status = undefined;
        lru.set(k, vals[j] as object, pos);
        this.#l2?.put(table, k, vals[j]!);
      } else if (s === MISSING) {
        if (neg.ttl > 0) {
          neg.size = k.length * 2 + ENTRY_OVERHEAD;
          neg.status = undefined;
          lru.set(k, NEGATIVE, neg);
        } else if (this.#graceMs > 0) {
          lru.delete(k); // gone from every tier: no stale copy may stand in for it later
        }
      }
    }
    return ld;
  }

  async #loadCold(
    cold: ColdStore,
    table: string,
    keys: string[],
    miss: number[],
    sizes: Uint32Array,
    state: Uint8Array,
    ld: Loaded,
  ): Promise<void> {
    const cs = this.#coldStats;
    const vals = ld.vals;
    const errors = ld.errors;
    const n = keys.length;
    if (this.#breaker.isOpen(cs)) {
      cs.skipped += miss.length;
      errors.push(this.#breaker.skipped('cold', cs));
      const gap = (ld.gap ??= new Uint8Array(n));
      for (const j of miss) gap[j]! |= GAP_COLD;
      return;
    }
    const found: number[] = [];
    const cells: ColdCell[] = [];
    for (let off = 0; off < miss.length; off += this.#coldBatch) {
      const idx = miss.slice(off, off + this.#coldBatch);
      const ck = idx.map((j) => keys[j]!);
      const t0 = performance.now();
      let res: (ColdCell | undefined)[];
      try {
        res = await withTimeout(cold.mget(table, ck), this.#coldTimeoutMs, 'cold store mget');
        if (!Array.isArray(res) || res.length !== ck.length) {
          throw new HashGateError(ErrorCodes.STORE, 'cold store mget returned a result of the wrong length');
        }
      } catch (e) {
        this.#breaker.fail(cs, 'cold', e, errors);
        const gap = (ld.gap ??= new Uint8Array(n));
        for (const j of idx) gap[j]! |= GAP_COLD;
        continue;
      }
      cs.latency.record(performance.now() - t0);
      this.#breaker.ok(cs);
      for (let q = 0; q < idx.length; q++) {
        const j = idx[q]!;
        const cell = res[q];
        if (cell === undefined) {
          cs.misses++;
          continue;
        }
        try {
          vals[j] = decodeValue(cell.value);
        } catch (e) {
          this.#breaker.fail(cs, 'cold', e, errors);
          (ld.gap ??= new Uint8Array(n))[j]! |= GAP_COLD;
          continue;
        }
        sizes[j] = cell.value.byteLength;
        state[j] = FOUND;
        cs.hits++;
        found.push(j);
        cells.push(cell);
      }
    }
    if (found.length > 0) await this.#backfillRedis(table, keys, found, cells);
  }

  /** Copies cold hits into Redis, flagged archived (the cold tier already holds them) and NX so a newer hot write wins. */
  async #backfillRedis(table: string, keys: string[], found: number[], cells: ColdCell[]): Promise<void> {
    const redis = this.#redis;
    const rs = this.#redisStats;
    if (redis === undefined || this.#breaker.isOpen(rs) || redis.status !== 'ready') return;
    const items = found.map((j, q) => {
      const cell = cells[q]!;
      return { key: this.#prefix + table + ':' + keys[j], value: wrapEnvelope(cell.value, cell.ts, FLAG_ARCHIVED), px: this.#redisTtlMs, nx: true };
    });
    try {
      await withTimeout(setMany(redis, items), this.#redisTimeoutMs, 'redis backfill');
      rs.backfills += found.length;
    } catch (e) {
      rs.backfillErrors++;
      this.#breaker.fail(rs, 'redis', e, undefined);
    }
  }

  /**
   * undefined when there is nothing to wait for: ready, lazy ('wait': its first command connects it),
   * or already closed.
   */
  #firstConnect(r: RedisClient): Promise<void> | undefined {
    const st = r.status;
    if (st === 'ready' || st === 'wait' || st === 'end' || st === 'close') return undefined;
    return new Promise<void>((resolve) => {
      const done = (): void => {
        r.off('ready', done);
        r.off('end', done);
        this.#connecting = undefined;
        if (r.status === 'ready') this.#mgetPipe?.warm();
        resolve();
      };
      r.on('ready', done);
      r.on('end', done); // closed before it ever connected: stop waiting, commands fail as usual
    });
  }

  /** False (counted as a Redis failure) when the first connection did not come up within the tier timeout. */
  async #awaitFirstConnect(rs: RemoteTierStats, errors: TierError[]): Promise<boolean> {
    const c = this.#connecting;
    if (c === undefined) return true;
    try {
      await withTimeout(c, this.#redisTimeoutMs, 'redis first connection');
      return true; // connected, or closed instead: then the MGET below fails and is counted as usual
    } catch (e) {
      this.#breaker.fail(rs, 'redis', e, errors);
      return false;
    }
  }

}
