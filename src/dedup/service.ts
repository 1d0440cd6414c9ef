// Exact first-seen dedup per window. HashGate.open() builds one DedupService and delegates
// firstSeen / recover / purgeWindow / stats / close to it.
//
// Answers: 1 = first time in the key's window, 0 = seen before (or earlier in the same batch).
// Order of checks per key: duplicate inside the batch -> local seen-cache (only ever holds keys
// the store confirmed or journaled, and "seen" never becomes "unseen" inside a window) -> store
// (standalone Redis: one atomic script per batch under fail-closed, per 2500-key chunk under
// fail-open so Redis works on one chunk while the next is hashed; Cluster: one per bucket).
//
// Store failures:
//   fail-open   answer 1 for every key whose write was not acknowledged, append those keys to the
//               journal (fsync'd) before answering; recover() replays them. If the journal
//               itself cannot be written the call rejects with HG_ERR_JOURNAL.
//   fail-closed reject with HG_ERR_STORE_UNAVAILABLE. Standalone: the batch is one script, which
//               Redis runs entirely or not at all (OOM is refused before it starts), so a
//               rejected batch wrote nothing -- except when the reply was lost after Redis ran
//               it (timeout/connection drop mid-reply); then the keys may be in Redis and a retry
//               answers them 0. Cluster: atomic per bucket; buckets that were acknowledged before
//               the failure stay written, and error.details.answers (per input index: 0/1, or 255
//               = unknown) tells the caller which answers are known. Nothing is rolled back,
//               because an undo could turn another process's concurrent duplicate into a lost
//               first-seen.
//   Bad input (type, empty, too long, bad PackedKeys) is rejected before anything is hashed or
//   written, with details.index naming the key.
import { Redis, Cluster } from 'ioredis';
import { ErrorCodes, HashGateError, HashGateRangeError, HashGateTypeError, describe, invalidType } from '../errors.js';
import type { PackedKeys } from '../hash/index.js';
import { DigestSet, SeenCache } from './cache.js';
import { Journal } from './journal.js';
import {
  bucketKey, bucketsOfDigests, compactMember, digestKeys, hllKey, metaField, metaKey, orderByBucket, setsMember,
  type Member, type RedisClient,
} from './layout.js';
import { parseDedupOptions, type DedupOptions, type RedisConfig, type ResolvedDedupOptions } from './options.js';
import { emptyReport, replayJournal, type RecoverReport } from './recover.js';
import { createRedisClient, RedisStore } from './redis-store.js';
import { LmdbStore } from './lmdb-store.js';
import { MemoryStore, StoreBatchError, type DedupStore, type StoreBatch } from './store.js';
import { WindowClock, windowId } from './window.js';

export type { RecoverReport } from './recover.js';

export interface DedupServiceOptions {
  /** URL, ioredis options, `{ cluster: nodes }`, or an existing ioredis client (not closed by us). */
  redis?: RedisConfig | Redis | Cluster;
  dedup?: DedupOptions;
  now?: () => number;
}

export interface FirstSeenOptions {
  at?: Date;
}

export interface DedupStats {
  window: string;
  layout: 'compact' | 'sets';
  store: DedupStore['kind'];
  buckets: number;
  /** Exact member count (sum of SCARD over the window's buckets). */
  exact: number;
  /** HyperLogLog estimate (PFCOUNT); equals exact for the embedded store. */
  approximate: number;
  cacheEntries: number;
  journalBytes: number;
  counters: DedupCounters;
}

export interface DedupCounters {
  calls: number;
  keys: number;
  firstSeen: number;
  batchDuplicates: number;
  cacheHits: number;
  storeKeys: number;
  storeErrors: number;
  journaledKeys: number;
}


/** Keys per script call when fail-open batches are pipelined (see firstSeen). */
const PIPELINE_CHUNK = 2500;

function sliceKeys(keys: ReadonlyArray<string | Uint8Array> | PackedKeys, s: number, e: number): ReadonlyArray<string | Uint8Array> | PackedKeys {
  if (Array.isArray(keys)) return (keys as ReadonlyArray<string | Uint8Array>).slice(s, e);
  const pk = keys as PackedKeys;
  // offsets index `bytes` absolutely, so a window of them is a valid PackedKeys
  return { bytes: pk.bytes, offsets: pk.offsets.subarray(s, e + 1), count: e - s };
}

export class DedupService {
  readonly options: ResolvedDedupOptions;
  private readonly store: DedupStore;
  private readonly journal: Journal | undefined;
  private readonly clock: WindowClock;
  private readonly now: () => number;
  private readonly cache: SeenCache | undefined;
  private cacheWindow: string | undefined;
  private cacheMs = -Infinity;
  private readonly bucketsByWindow = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private recovering: Promise<RecoverReport> | undefined;
  private closed = false;
  readonly counters: DedupCounters = {
    calls: 0, keys: 0, firstSeen: 0, batchDuplicates: 0, cacheHits: 0, storeKeys: 0, storeErrors: 0, journaledKeys: 0,
  };

  constructor(options: DedupServiceOptions = {}) {
    if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options);
    this.options = parseDedupOptions(options.dedup, 'dedup');
    if (options.now !== undefined && typeof options.now !== 'function') throw invalidType('now', 'a function returning epoch ms', options.now);
    this.now = options.now ?? Date.now;
    this.clock = new WindowClock(this.options.window, this.options.timeZone);
    const o = this.options;
    const r = options.redis;
    if (o.path !== undefined) {
      if (r !== undefined && r !== null) {
        throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, 'dedup.path (the durable embedded store) and redis are exclusive: give one', { name: 'dedup.path' });
      }
      this.store = new LmdbStore({ path: o.path, sync: o.sync, maxWindows: o.maxWindows });
    } else if (r === undefined || r === null) {
      this.store = new MemoryStore(o.memoryMaxKeys);
    } else if (r instanceof Redis || r instanceof Cluster) {
      this.store = new RedisStore(r, o.prefix, o.hll, false);
    } else if (typeof r === 'string' || typeof r === 'object') {
      this.store = new RedisStore(createRedisClient(r, o.commandTimeoutMs), o.prefix, o.hll, true);
    } else {
      throw invalidType('redis', "a redis:// URL, ioredis options or { cluster: nodes }", r);
    }
    // Two tables of 2 slots per entry at 17 B per slot: ~68 B per cached entry.
    const maxEntries = Math.min(o.cacheMaxEntries, Math.floor(o.cacheMaxBytes / 68));
    this.cache = maxEntries > 0 ? new SeenCache(maxEntries) : undefined;
    if (this.store.kind === 'redis') {
      this.journal = new Journal(o.journalDir, o.journalSegmentBytes, o.journalMaxBytes);
      if (o.replayIntervalMs > 0) {
        this.timer = setInterval(() => {
          if (this.recovering === undefined && this.journal!.pendingBytes() > 0) this.recover().catch(() => undefined);
        }, o.replayIntervalMs);
        this.timer.unref();
      }
    }
  }

  /** The ioredis client, when the store is Redis (for the bulk loader's addMembers). */
  get redis(): RedisClient | undefined {
    return this.store instanceof RedisStore ? this.store.redis : undefined;
  }

  /** Window id of `at` (default: the injected clock's now). */
  windowOf(at?: Date | number): string {
    return at === undefined ? this.clock.idAt(this.now()) : windowId(at, this.options.window, this.options.timeZone);
  }

  /** 1 = first seen in its window, 0 = seen before. See the file header for failure semantics. */
  async firstSeen(keys: ReadonlyArray<string | Uint8Array> | PackedKeys, opts: FirstSeenOptions = {}): Promise<Uint8Array> {
    if (this.closed) throw new HashGateError(ErrorCodes.CLOSED, 'dedup service is closed');
    const n = this.validate(keys);
    let ms: number;
    if (opts?.at === undefined) ms = this.now();
    else if (opts.at instanceof Date && Number.isFinite(opts.at.getTime())) ms = opts.at.getTime();
    else throw invalidType('options.at', 'a valid Date', opts.at);
    const window = this.clock.idAt(ms);
    const o = this.options;
    this.counters.calls++;
    this.counters.keys += n;
    const out = new Uint8Array(n);
    if (n === 0) return out;

    const cache = this.cacheFor(window, ms);
    const inBatch = new DigestSet(n);
    const buckets = await this.bucketsFor(window);
    // fail-open batches go out in chunks so Redis runs chunk k while we hash chunk k+1; under
    // fail-closed the whole batch stays ONE script call (all-or-nothing, see the header).
    const chunk = o.onStoreError === 'fail-open' && this.store.kind === 'redis' ? PIPELINE_CHUNK : n;
    const tasks: Promise<void>[] = [];
    for (let s = 0; s < n; s += chunk) {
      const e = Math.min(n, s + chunk);
      const part = s === 0 && e === n ? keys : sliceKeys(keys, s, e);
      const t = this.submit(part, e - s, s, window, buckets, cache, inBatch, out);
      if (t !== undefined) tasks.push(t);
    }
    if (tasks.length === 1) await tasks[0];
    else if (tasks.length > 1) await Promise.all(tasks);
    return out;
  }

  /** Hashes `part` (keys base..base+m of the call), answers what it can locally, sends the rest. */
  private submit(
    part: ReadonlyArray<string | Uint8Array> | PackedKeys, m: number, base: number, window: string, buckets: number,
    cache: SeenCache | undefined, inBatch: DigestSet, out: Uint8Array,
  ): Promise<void> | undefined {
    const o = this.options;
    let digests = digestKeys(part, o.layout === 'compact' ? o.secret : undefined);
    if (digests.byteOffset % 4 !== 0) digests = digests.slice();
    const d32 = new Uint32Array(digests.buffer, digests.byteOffset, m * 4);
    const pend = new Uint32Array(m);
    let p = 0;
    for (let i = 0; i < m; i++) {
      if (cache !== undefined && cache.has(d32, i)) {
        this.counters.cacheHits++;
        continue;
      }
      // Only cache misses can repeat unseen inside the batch (hits are answered 0 anyway).
      if (!inBatch.add(d32, i)) {
        this.counters.batchDuplicates++;
        continue;
      }
      pend[p++] = i;
    }
    if (p === 0) return undefined;

    const all = bucketsOfDigests(digests, o.layout, buckets);
    const pb = new Uint32Array(p);
    for (let j = 0; j < p; j++) pb[j] = all[pend[j]!]!;
    const order = orderByBucket(pb, p);
    const groupKeys: string[] = [];
    const groupBuckets: number[] = [];
    const starts: number[] = [];
    const idx = new Uint32Array(p);
    let cur = -1;
    for (let j = 0; j < p; j++) {
      const k = pend[order[j]!]!;
      const b = pb[order[j]!]!;
      idx[j] = k;
      if (b !== cur) {
        cur = b;
        groupBuckets.push(b);
        groupKeys.push(bucketKey(o, window, b));
        starts.push(j);
      }
    }
    starts.push(p);
    const dv = new DataView(digests.buffer, digests.byteOffset, digests.byteLength);
    const batch: StoreBatch =
      o.layout === 'compact'
        ? { window, layout: o.layout, buckets, groupBuckets, groupKeys, starts: Uint32Array.from(starts), count: p, member: (j) => compactMember(digests, idx[j]!, dv), compact: { dv, idx } }
        : { window, layout: o.layout, buckets, groupBuckets, groupKeys, starts: Uint32Array.from(starts), count: p, member: (j) => setsMember(part, idx[j]!) };
    const answers = new Uint8Array(p);
    this.counters.storeKeys += p;
    const finish = (): void => {
      for (let j = 0; j < p; j++) {
        const a = answers[j]!;
        out[base + pend[order[j]!]!] = a;
        this.counters.firstSeen += a;
      }
      if (cache !== undefined) for (let j = 0; j < p; j++) cache.add(d32, pend[j]!);
    };
    return this.store.addBatch(batch, answers).then(finish, (err: unknown) => {
      if (!(err instanceof StoreBatchError)) throw err;
      this.counters.storeErrors++;
      // fail-closed never chunks, so base is 0 and `out` covers exactly this batch there
      this.onStoreFailure(err, batch, answers, order, pend, d32, out, cache, m);
      finish();
    });
  }

  private onStoreFailure(
    err: StoreBatchError, batch: StoreBatch, answers: Uint8Array, order: Uint32Array, pend: Uint32Array, d32: Uint32Array,
    out: Uint8Array, cache: SeenCache | undefined, n: number,
  ): void {
    const G = batch.groupKeys.length;
    if (this.options.onStoreError === 'fail-closed') {
      const known = new Uint8Array(n).fill(255);
      // Keys answered 0 locally (batch duplicate / cache) are known too.
      const isPending = new Uint8Array(n);
      for (let j = 0; j < pend.length && j < answers.length; j++) isPending[pend[j]!] = 1;
      for (let i = 0; i < n; i++) if (!isPending[i]) known[i] = out[i]!;
      for (let g = 0; g < G; g++) {
        if (!err.done[g]) continue;
        for (let j = batch.starts[g]!; j < batch.starts[g + 1]!; j++) {
          known[pend[order[j]!]!] = answers[j]!;
          cache?.add(d32, pend[order[j]!]!);
        }
      }
      throw new HashGateError(ErrorCodes.STORE_UNAVAILABLE, `dedup store failed and dedup.onStoreError is 'fail-closed': ${err.message}`, {
        cause: err.cause,
        details: { answers: known, partial: err.done.some((d) => d === 1) },
      });
    }
    const groups: Array<[string, Member[]]> = [];
    let journaled = 0;
    for (let g = 0; g < G; g++) {
      if (err.done[g]) continue;
      const s = batch.starts[g]!;
      const e = batch.starts[g + 1]!;
      const members: Member[] = new Array(e - s);
      for (let j = s; j < e; j++) {
        members[j - s] = batch.member(j);
        answers[j] = 1;
      }
      groups.push([batch.groupKeys[g]!, members]);
      journaled += e - s;
    }
    const o = this.options;
    this.journal!.append({
      v: 1,
      t: this.now(),
      w: batch.window,
      mk: metaKey(o.prefix, batch.window),
      mf: metaField(o.layout),
      b: batch.buckets,
      hk: o.hll ? hllKey(o.prefix, batch.window, o.layout) : '',
      g: groups,
    });
    this.counters.journaledKeys += journaled;
  }

  private validate(keys: unknown): number {
    const max = this.options.maxKeyBytes;
    if (Array.isArray(keys)) {
      if (keys.length > this.options.maxBatchKeys) {
        throw new HashGateRangeError(ErrorCodes.INVALID_ARG, `keys has ${keys.length} entries; dedup.maxBatchKeys is ${this.options.maxBatchKeys}`, { name: 'keys' });
      }
      for (let i = 0; i < keys.length; i++) {
        const k: unknown = keys[i];
        let len: number;
        if (typeof k === 'string') {
          len = k.length;
          if (len * 3 > max) len = Buffer.byteLength(k, 'utf8');
        } else if (k instanceof Uint8Array) len = k.byteLength;
        else throw new HashGateTypeError(ErrorCodes.INVALID_ARG, `keys[${i}] must be a string or Uint8Array, got ${describe(k)}`, { name: 'keys', index: i });
        if (len === 0) throw new HashGateRangeError(ErrorCodes.EMPTY_KEY, `keys[${i}] is empty`, { name: 'keys', index: i });
        if (len > max) {
          throw new HashGateRangeError(ErrorCodes.KEY_TOO_LONG, `keys[${i}] is ${len} bytes; dedup.maxKeyBytes is ${max}`, { name: 'keys', index: i, bytes: len });
        }
      }
      return keys.length;
    }
    const pk = keys as PackedKeys;
    if (pk === null || typeof pk !== 'object' || !(pk.bytes instanceof Uint8Array) || !(pk.offsets instanceof Uint32Array) || !Number.isInteger(pk.count)) {
      throw invalidType('keys', 'an array of strings/Uint8Arrays or PackedKeys', keys);
    }
    const n = pk.count;
    if (n < 0 || pk.offsets.length < n + 1) throw new HashGateRangeError(ErrorCodes.INVALID_ARG, `keys.offsets needs count + 1 = ${n + 1} entries, has ${pk.offsets.length}`, { name: 'keys.offsets' });
    if (n > this.options.maxBatchKeys) {
      throw new HashGateRangeError(ErrorCodes.INVALID_ARG, `keys has ${n} entries; dedup.maxBatchKeys is ${this.options.maxBatchKeys}`, { name: 'keys' });
    }
    for (let i = 0; i < n; i++) {
      const s = pk.offsets[i]!;
      const e = pk.offsets[i + 1]!;
      if (e < s || e > pk.bytes.length) throw new HashGateRangeError(ErrorCodes.INVALID_ARG, `keys.offsets[${i + 1}] is out of order or past the bytes`, { name: 'keys.offsets', index: i });
      if (e === s) throw new HashGateRangeError(ErrorCodes.EMPTY_KEY, `keys[${i}] is empty`, { name: 'keys', index: i });
      if (e - s > max) throw new HashGateRangeError(ErrorCodes.KEY_TOO_LONG, `keys[${i}] is ${e - s} bytes; dedup.maxKeyBytes is ${max}`, { name: 'keys', index: i, bytes: e - s });
    }
    return n;
  }

  /** The cache follows the newest window seen; calls for older windows bypass it. */
  private cacheFor(window: string, ms: number): SeenCache | undefined {
    if (this.cache === undefined) return undefined;
    if (window === this.cacheWindow) {
      if (ms > this.cacheMs) this.cacheMs = ms;
      return this.cache;
    }
    if (ms < this.cacheMs) return undefined;
    this.cache.clear();
    this.cacheWindow = window;
    this.cacheMs = ms;
    return this.cache;
  }

  private async bucketsFor(window: string): Promise<number> {
    const known = this.bucketsByWindow.get(window);
    if (known !== undefined) return known;
    const o = this.options;
    let b: number;
    try {
      b = await this.store.resolveBuckets(window, o.layout, o.buckets);
    } catch {
      return o.buckets; // store down: the journal records the bucketing used; resolve next call
    }
    if (this.bucketsByWindow.size >= 64) this.bucketsByWindow.clear();
    this.bucketsByWindow.set(window, b);
    return b;
  }

  /** Replays the fail-open journal into Redis under a lock. Reports instead of throwing on a bad segment. */
  async recover(): Promise<RecoverReport> {
    if (this.journal === undefined || !(this.store instanceof RedisStore)) return emptyReport();
    if (this.recovering !== undefined) return this.recovering;
    const run = (async () => {
      try {
        return await replayJournal(this.store instanceof RedisStore ? this.store.redis : (undefined as never), this.journal!, `${this.options.prefix}:lock:recover`, this.options.lockTtlMs);
      } catch (cause) {
        throw new HashGateError(ErrorCodes.STORE_UNAVAILABLE, `recover failed: ${(cause as Error).message}`, { cause });
      }
    })();
    this.recovering = run;
    try {
      return await run;
    } finally {
      this.recovering = undefined;
    }
  }

  /** Deletes every key of `window` (SCAN + UNLINK in batches); returns the number of keys deleted. */
  async purgeWindow(window: string): Promise<number> {
    if (typeof window !== 'string' || window === '' || /[\s:*?[\]{}\\]/.test(window)) throw invalidType('window', 'a window id such as "2025"', window);
    if (this.cacheWindow === window) {
      this.cache?.clear();
      this.cacheWindow = undefined;
      this.cacheMs = -Infinity;
    }
    this.bucketsByWindow.delete(window);
    return this.store.purge(window);
  }

  async stats(window?: string): Promise<DedupStats> {
    const w = window ?? this.windowOf();
    if (typeof w !== 'string' || w === '') throw invalidType('window', 'a window id such as "2026"', w);
    const buckets = await this.bucketsFor(w);
    const { exact, approximate } = await this.store.count(w, this.options.layout, buckets);
    return {
      window: w,
      layout: this.options.layout,
      store: this.store.kind,
      buckets,
      exact,
      approximate,
      cacheEntries: this.cache?.size ?? 0,
      journalBytes: this.journal?.pendingBytes() ?? 0,
      counters: { ...this.counters },
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    await this.recovering?.catch(() => undefined);
    try {
      this.journal?.close();
    } finally {
      await this.store.close();
    }
  }
}
