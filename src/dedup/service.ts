// Exact first-seen dedup per window. HashGate.open() builds one DedupService and delegates
// firstSeen / recover / purgeWindow / stats / close to it.
//
// Answers: 1 = first time in the key's window, 0 = seen before (or earlier in the same batch).
// Order of checks per key: duplicate inside the batch -> local seen-cache (only ever holds keys
// the store confirmed or journaled, and "seen" never becomes "unseen" inside a window; skipped for
// a caller's requestId) -> store. Redis: one plain SADD per key (its reply is the answer), in
// sends of at most dedup.maxKeysPerCommand commands (a shared Redis serves other clients between
// them), at most dedup.maxInFlight sends in flight per connection, the rest queued locally and
// untimed; a send is timed from when Redis can start on it (src/redis/inflight.ts). Batches with
// a request id (the caller's, or one of ours under fail-closed) run a script per chunk instead,
// which records the keys it answered 1. Fail-open batches are also hashed in 2500-key
// pieces so Redis works on one while the next is hashed. Batches beyond dedup.maxQueuedKeys
// waiting keys reject with HG_ERR_OVERLOADED before anything is sent.
//
// Store failures (Redis unreachable, or no reply for commandTimeoutMs once Redis could work on it):
//   fail-open   answer 1 for every key whose write was not acknowledged, append those keys to the
//               journal (fsync'd) before answering; recover() replays them. If the journal
//               itself cannot be written the call rejects with HG_ERR_JOURNAL. While the
//               window's bucket count is unknown (Redis unreachable since start) nothing is sent
//               at all: the keys are journaled as digests and replay buckets them by the count
//               the window records.
//   fail-closed reject. HG_ERR_STORE_UNAVAILABLE: nothing of what is unknown was written (never
//               sent, or refused before it ran). HG_ERR_STORE_OUTCOME_UNKNOWN: a command
//               was sent and its reply lost, its keys may be in Redis. error.details.answers (per
//               input index: 0/1, or 255 = unknown) tells which answers are known, and
//               details.requestId the id whose retry returns the original answers: every
//               fail-closed batch carries a request id (the caller's, or one of ours), so its
//               scripts record the keys they answered 1 and a resend (ours after a reconnect, or
//               the caller's) answers them 1 again instead of 0. Nothing is rolled back, because
//               an undo could turn another process's concurrent duplicate into a lost first-seen.
//   Bad input (type, empty, too long, bad PackedKeys) is rejected before anything is hashed or
//   written, with details.index naming the key.
import { randomUUID } from 'node:crypto';
import type { Redis, Cluster } from 'ioredis';
import { ErrorCodes, HashGateError, HashGateTypeError, checkKnownKeys, invalidType } from '../errors.js';
import { digests128 } from '../hash/index.js';
import { CheckedKeys, checkKeys, type KeyLimits, type Keys } from '../hash/keys.js';
import { SeenCache } from './cache.js';
import { DigestSet } from '../hash/digest-set.js';
import { Journal, type JournalRecordV2 } from './journal.js';
import {
  bucketKey, bucketsOfDigests, compactMember, digestKeys, setsMember,
  type Member,
} from './layout.js';
import { bucketOrder } from './order.js';
import { PendingKeys, type PendingBatch } from './pending.js';
import { parseDedupOptions, type DedupOptions, type RedisConfig, type ResolvedDedupOptions } from './options.js';
import { emptyReport, replayJournal, type RecoverReport } from './recover.js';
import { createRedisClient, isRedisClient, type RedisClient } from '../redis/client.js';
import { RedisStore } from './redis-store.js';
import { LmdbStore } from './lmdb-store.js';
import { MemoryStore, StoreBatchError, type DedupStore, type StoreBatch } from './store.js';
import { noopMetrics } from '../metrics/noop.js';
import { errorKind } from '../metrics/channels.js';
import type { Metrics } from '../metrics/types.js';
import { WindowClock, windowId } from './window.js';
import { Coalescer, parseCoalesceOptions, type CoalesceOptions } from '../util/coalescer.js';
import { identity } from '../util/identity.js';

export type { RecoverReport } from './recover.js';

export interface DedupServiceOptions {
  /** URL, ioredis options, `{ cluster: nodes }`, or an existing ioredis client (not closed by us). */
  redis?: RedisConfig | Redis | Cluster;
  dedup?: DedupOptions;
  now?: () => number;
  /** Where store errors and journal appends are reported (HashGate passes its own). */
  metrics?: Metrics;
  /** Merge concurrent small calls into one store batch (see src/util/coalescer.ts). Default on. */
  coalesce?: CoalesceOptions | false;
}

/** Who a one-key batch answers (a merged call, or run()'s own promise). */
interface OneCall {
  resolve: (answers: Uint8Array) => void;
  reject: (err: unknown) => void;
}

/** One firstSeen call waiting to be merged. */
interface PendingCall extends OneCall {
  keys: CheckedKeys;
  /** murmur3_128 (seed 0) per key when the caller hashed them already (see firstSeenHashed). */
  digests: Uint8Array | undefined;
  n: number;
  window: string;
  ms: number;
}

export interface FirstSeenOptions {
  at?: Date;
  /**
   * Makes the call retryable (Redis store): Redis keeps, for dedup.requestTtlMs, which keys this
   * request answered 1, so calling again with the same keys and the same requestId (after an
   * HG_ERR_STORE_OUTCOME_UNKNOWN, a crash, a timeout of your own) returns the original answers
   * instead of 0 for keys the lost attempt added. 1-200 characters, unique per logical call.
   * The call is never merged with others and does not answer from the local seen-cache.
   */
  requestId?: string;
}

export interface DedupStats {
  window: string;
  layout: 'compact' | 'sets';
  store: DedupStore['kind'];
  buckets: number;
  /** Exact member count (sum of SCARD over the window's buckets). */
  exact: number;
  /** The window count writers report (a few ms behind; equals exact for the embedded stores). */
  approximate: number;
  cacheEntries: number;
  /**
   * Which answered keys the seen-cache takes now: 'all', or 'repeats' (dedup.cacheAdmit; under
   * 'auto', what its last review chose). Undefined without a cache.
   */
  cacheAdmits?: 'repeats' | 'all';
  journalBytes: number;
  counters: DedupCounters;
  /** Members of the fullest bucket, or sub-bucket of a compact bucket that split (exact; Redis store only). */
  largestBucket?: number;
  /** Compact layout on Redis: the sub-buckets the window's buckets have split into in all (>= buckets). */
  subBuckets?: number;
  /** Redis's set-max-intset-entries: a compact sub-bucket past it becomes a hashtable (about 8x the memory). */
  bucketLimit?: number;
}

/**
 * How full a compact window's buckets are, from the window count and a sample of table states
 * (cheap enough for every health check). Buckets split as they fill, so the ratio stays below 1 by
 * design; it rises past 0.9 only when splitting cannot keep up (a Redis whose
 * set-max-intset-entries was lowered after the window was written, or a table at its most
 * sub-buckets).
 */
export interface BucketFill {
  window: string;
  buckets: number;
  /** The window's member count as writers report it. */
  approximateKeys: number;
  /** Sub-buckets the buckets have split into (from a sample of tables). */
  subBuckets: number;
  /**
   * Expected largest sub-bucket: the sub-buckets not yet split at the current level hold the most
   * (mean m), and the largest of `subBuckets` Poisson counts is about m + sqrt(2 m ln subBuckets).
   */
  predictedLargest: number;
  /** Redis's set-max-intset-entries. */
  limit: number;
  /** predictedLargest / limit: past 1, buckets turn into hashtables. */
  ratio: number;
}

export interface DedupCounters {
  calls: number;
  /** Store batches sent; calls / batches is how many calls coalescing merged per batch. */
  batches: number;
  keys: number;
  firstSeen: number;
  batchDuplicates: number;
  cacheHits: number;
  storeKeys: number;
  storeErrors: number;
  journaledKeys: number;
  /** BucketFill.ratio of the current window at its last reading (compact layout on Redis). */
  bucketFillRatio?: number;
}


/** Empty group arrays of a batch that is not grouped by bucket. */
const NO_GROUPS = new Uint32Array(0);
const NO_KEYS: string[] = [];
/** runOne's one-key batch: member 0 is key 0 (shared, never written). */
const FIRST = new Uint32Array(1);
/** Pending-key answers of a one-key batch (shared, never written). */
const ANSWERED = Uint8Array.of(1);
const NOT_ANSWERED = Uint8Array.of(0);

/** A flat copy of `s` (one sequential string, not a rope of the parts it was concatenated from). */
const flatString = (s: string): string => Buffer.from(s, 'utf8').toString('utf8');

/** Bucket counts up to this keep their bucket key strings (see bucketKeyOf): ~5 MiB at most. */
const BUCKET_KEY_CACHE_MAX = 65_536;

/**
 * Lifetime of the record of a request id the service made up itself (fail-closed): long enough for
 * the store's own resend and a prompt retry with details.requestId, short because every
 * fail-closed batch writes one.
 */
const INTERNAL_REQUEST_TTL_MS = 60_000;

/** Keys hashed and sent per piece when fail-open batches are pipelined (see the header). */
const PIPELINE_CHUNK = 2500;

/**
 * A Redis batch of at least this many keys adds them to the seen-cache after its caller has the
 * answers (setImmediate), not before. The pieces of a big call mostly end together, after the
 * last reply (the splits they wait for end then), and their cache adds (a probe of a large table
 * per key) held the answer back while Redis sat idle: the caller's next call now reaches Redis
 * first, and the adds run while Redis works on it. A key not yet in the cache is asked of Redis,
 * which answers it exactly; only the cache's saving waits.
 */
const DEFER_SEEN_ADDS = 1024;

/**
 * Keys answered between two reviews of the seen-cache's admission under dedup.cacheAdmit 'auto'.
 * Short, so that a service answering a few thousand keys a day turns to caching first sights in
 * days rather than months once its keys come back; at the threshold below, the share of repeats
 * among this many keys is known to within a third of a percent (one standard deviation).
 */
const ADMIT_REVIEW_KEYS = 4096;
/**
 * Under 'auto' the cache takes first sights while at least one key in this many answered in the
 * last review period was a repeat: a first sight cached costs an add (and its memory) on every
 * key, and pays back only on the keys that come back while it is cached; below this share a
 * stream is nearly all new keys (message ids and their occasional retries, a backfill), whose
 * adds only push out the repeats. Low, because at a window's start repeats are rare even where
 * most keys come back later: a stream of keys that each come twice, shuffled, reaches this share
 * within its first few percent, and every first sight not cached before then is a hit lost.
 */
const ADMIT_REPEAT_ONE_IN = 32;

/** The deferred seen-cache adds of one batch (see DEFER_SEEN_ADDS). */
function addSeenLater(svc: DedupService, cache: SeenCache, gen: number, d32: Uint32Array, pend: Uint32Array, p: number, paced: boolean): void {
  if (cacheGenOf(svc) === gen) addSeen(cache, d32, pend, p, paced);
}

/** Adds digests d32[pend[j]] for j < p to the seen-cache; `paced`: its prefault is told of them here first. */
function addSeen(cache: SeenCache, d32: Uint32Array, pend: Uint32Array, p: number, paced: boolean): void {
  if (paced && cache.prefaultDue) cache.prefault(p);
  cache.addAll(d32, pend, p);
}
let cacheGenOf: (s: DedupService) => number;

/** Bytes of a buffer one-key calls' digests are cut from (runOne): 4,096 calls' worth. */
const ONE_SLAB = 64 * 1024;
/**
 * Bytes of the first such buffer: 64 calls' worth. The call that uses a buffer up makes the next
 * one; with a first buffer this small, that happens while the path still runs unoptimized code
 * and records what it meets, and the optimized path has the buffer's construction in it. With
 * every buffer full size, the 4,097th call met that construction for the first time in optimized
 * code, which threw the whole path back to the interpreter and compiled it again.
 */
const FIRST_ONE_SLAB = 1024;

// One shared executor instead of a closure per call: new Promise() runs it synchronously, so the
// functions it captures are read back before any other call can overwrite them.
const captured: { resolve?: (a: Uint8Array) => void; reject?: (e: unknown) => void } = {};
const capture = (resolve: (a: Uint8Array) => void, reject: (e: unknown) => void): void => {
  captured.resolve = resolve;
  captured.reject = reject;
};

/** The keys of several checked calls, back to back, as one checked array (packed keys become byte views). */
function concatKeys(calls: PendingCall[], total: number): CheckedKeys {
  const out: Array<string | Uint8Array> = new Array(total);
  let j = 0;
  // strings only when every call's were: they are then hashed from their UTF-16 code units
  let strings = true;
  for (const c of calls) {
    strings &&= c.keys.strings;
    for (let i = 0; i < c.n; i++) out[j++] = c.keys.at(i);
  }
  return CheckedKeys.trusted(out, total, undefined, strings);
}

/** The calls' digests back to back, or undefined unless every call brought its own. */
function concatDigests(calls: PendingCall[], total: number): Uint8Array | undefined {
  for (const c of calls) if (c.digests === undefined) return undefined;
  const out = new Uint8Array(total * 16);
  let j = 0;
  for (const c of calls) {
    out.set(c.digests!, j);
    j += c.digests!.length;
  }
  return out;
}

/**
 * The error of a merged batch as one caller sees it: fail-closed answers (per input index)
 * narrowed to that caller's keys; any other error is shared as is.
 */
function splitError(err: unknown, off: number, n: number, total: number): unknown {
  if (!(err instanceof HashGateError) || (err.code !== ErrorCodes.STORE_UNAVAILABLE && err.code !== ErrorCodes.STORE_OUTCOME_UNKNOWN)) return err;
  const answers = err.details?.answers;
  if (!(answers instanceof Uint8Array) || answers.length !== total) return err;
  return new HashGateError(err.code, err.message, {
    cause: err.cause,
    details: { ...err.details, answers: answers.slice(off, off + n) },
  });
}

let hashedEntry: (s: DedupService, batch: CheckedKeys, digests: Uint8Array | undefined, opts: FirstSeenOptions | undefined) => Promise<Uint8Array>;
let limitsOf: (s: DedupService) => KeyLimits;

/**
 * Validates `keys` against the service's dedup rules (type, empty, dedup.maxKeyBytes,
 * dedup.maxBatchKeys): the one check a batch gets on its way through firstSeenHashed.
 */
export function checkDedupKeys(s: DedupService, keys: Keys): CheckedKeys {
  return checkKeys(keys, 'keys', limitsOf(s));
}

/**
 * firstSeen for a batch checkDedupKeys validated, with `digests` = murmur3_128 seed 0 of every key
 * when the caller computed them already (HashGate does, for its Bloom filter): the service then
 * hashes nothing itself. Ignored when dedup.secret makes the service's digests HMACs.
 */
export function firstSeenHashed(s: DedupService, batch: CheckedKeys, digests: Uint8Array | undefined, opts?: FirstSeenOptions): Promise<Uint8Array> {
  return hashedEntry(s, batch, digests, opts);
}

/**
 * Faults in the seen-cache's next table for `keys` new keys. Called on the tick after a send, so
 * the page faults run while Redis works on the batch rather than before the batch leaves.
 */
const prefault = (cache: SeenCache, keys: number): void => cache.prefault(keys);

export class DedupService {
  readonly options: ResolvedDedupOptions;
  private readonly store: DedupStore;
  private readonly journal: Journal | undefined;
  private readonly clock: WindowClock;
  private readonly now: () => number;
  private readonly cache: SeenCache | undefined;
  private cacheWindow: string | undefined;
  /**
   * Bumped whenever the cache is emptied (a newer window, a purge): adds made for a batch sent
   * before that are dropped, so a purged window's keys never come back as "seen".
   */
  private cacheGen = 0;
  private cacheMs = -Infinity;
  /** Whether the seen-cache takes keys answered first-seen now (see admitsFirsts). */
  private cachesFirsts: boolean;
  /** Keys answered since the last admission review: repeats (answered 0 anywhere) and first sights. */
  private answeredRepeats = 0;
  private answeredFirsts = 0;
  private readonly bucketsByWindow = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private recovering: Promise<RecoverReport> | undefined;
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly metrics: Metrics;
  /** Keys of batches sent to or waiting for the Redis store (dedup.maxQueuedKeys). */
  private queuedKeys = 0;
  /** firstSeen calls in progress, so close() can let them finish (or fail with HG_ERR_CLOSED). */
  private active = 0;
  private drained: (() => void) | undefined;
  private replaySoon: NodeJS.Timeout | undefined;
  private readonly coalescer: Coalescer<PendingCall> | undefined;
  /** The embedded store when the layout is compact: batches go to it synchronously. */
  private readonly memCompact: MemoryStore | undefined;
  /** Bucket key strings of the latest window a batch went to (see bucketKeyOf). */
  private bucketKeys: { window: string; keys: Array<string | undefined> } | undefined;
  /** Tail of the runs waiting for a bucket count (keeps batches in call order). */
  private bucketsGate: Promise<number | undefined> | undefined;
  readonly counters: DedupCounters = {
    calls: 0, batches: 0, keys: 0, firstSeen: 0, batchDuplicates: 0, cacheHits: 0, storeKeys: 0, storeErrors: 0, journaledKeys: 0,
  };

  constructor(options: DedupServiceOptions = {}) {
    if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options);
    checkKnownKeys('options', options, ['redis', 'dedup', 'now', 'metrics', 'coalesce']);
    this.options = parseDedupOptions(options.dedup, 'options.dedup');
    this.#limits = {
      maxKeys: this.options.maxBatchKeys, maxKeysOption: 'dedup.maxBatchKeys',
      maxKeyBytes: this.options.maxKeyBytes, maxKeyBytesOption: 'dedup.maxKeyBytes',
    };
    if (options.now !== undefined && typeof options.now !== 'function') throw invalidType('options.now', 'a function returning epoch ms', options.now);
    this.now = options.now ?? Date.now;
    this.metrics = options.metrics ?? noopMetrics;
    const co = parseCoalesceOptions(options.coalesce, 'coalesce');
    this.coalescer = co === false ? undefined : new Coalescer<PendingCall>(co, (items) => this.runMerged(items));
    this.clock = new WindowClock(this.options.window, this.options.timeZone);
    const o = this.options;
    const r = options.redis;
    const pacing = { maxKeysPerCommand: o.maxKeysPerCommand, maxInFlight: o.maxInFlight, commandTimeoutMs: o.commandTimeoutMs, requestTtlMs: o.requestTtlMs };
    if (o.path !== undefined) {
      if (r !== undefined && r !== null) {
        throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, 'dedup.path (the durable embedded store) and redis are exclusive: give one', { name: 'dedup.path' });
      }
      this.store = new LmdbStore({ path: o.path, sync: o.sync, maxWindows: o.maxWindows });
    } else if (r === undefined || r === null) {
      this.store = new MemoryStore(o.memoryMaxKeys);
    } else if (isRedisClient(r)) {
      this.store = new RedisStore(r, o.prefix, false, o.connectTimeoutMs, pacing);
    } else if (typeof r === 'string' || typeof r === 'object') {
      this.store = new RedisStore(createRedisClient(r, o.commandTimeoutMs), o.prefix, true, o.connectTimeoutMs, pacing);
    } else {
      throw invalidType('options.redis', "a redis:// URL, ioredis options or { cluster: nodes }", r);
    }
    this.memCompact = this.store instanceof MemoryStore && o.layout === 'compact' ? this.store : undefined;
    // 17 B per cached entry at full size: its digest and a byte of tag and age.
    const maxEntries = Math.min(o.cacheMaxEntries, Math.floor(o.cacheMaxBytes / 17));
    // The embedded compact table answers a repeat as fast as the cache would (both are one
    // typed-array probe), so there a cache would only add a second probe and its memory.
    this.cache = maxEntries > 0 && this.memCompact === undefined ? new SeenCache(maxEntries) : undefined;
    this.cachesFirsts = o.cacheAdmit === 'all';
    if (this.store instanceof RedisStore) {
      this.journal = new Journal(o.journalDir, o.journalSegmentBytes, o.journalMaxBytes);
      // Back from an outage: replay what was journaled while serving, not an hour later.
      // replayIntervalMs 0 means the application runs recover() itself: no background replay.
      if (o.replayIntervalMs > 0) this.store.onReady = () => this.scheduleReplay(50);
      if (o.replayIntervalMs > 0) {
        this.timer = setInterval(() => {
          if (this.recovering === undefined && this.journal!.pendingBytes() > 0) this.recover().catch(() => undefined);
        }, o.replayIntervalMs);
        this.timer.unref();
      }
    }
  }

  /** Bytes of fail-open journal not yet replayed into Redis (0 for the embedded store). */
  journalBacklogBytes(): number {
    return this.journal?.pendingBytes() ?? 0;
  }

  /** Which store answers: the value `stats().store` and `health().tiers.dedup.store` report. */
  get storeKind(): DedupStore['kind'] {
    return this.store.kind;
  }

  /** The ioredis client, when the store is Redis (e.g. to hand a bulk load's RedisLayoutSink the same connection). */
  get redis(): RedisClient | undefined {
    return this.store instanceof RedisStore ? this.store.redis : undefined;
  }

  /** Window id of `at` (default: the injected clock's now). */
  windowOf(at?: Date | number): string {
    return at === undefined ? this.clock.idAt(this.now()) : windowId(at, this.options.window, this.options.timeZone);
  }

  /** 1 = first seen in its window, 0 = seen before. See the file header for failure semantics. */
  firstSeen(keys: Keys, opts?: FirstSeenOptions): Promise<Uint8Array> {
    return this.#firstSeen(keys, undefined, undefined, opts);
  }

  // The entry for callers that validated and hashed the batch already (firstSeenHashed).
  static {
    cacheGenOf = (s) => s.cacheGen;
    hashedEntry = (s, batch, digests, opts) => s.#firstSeen(undefined, batch, digests, opts);
    limitsOf = (s) => s.#limits;
  }

  /**
   * Where one-key calls hash to: 16-byte slices of a shared buffer, handed out in turn and never
   * reused (a new buffer once it is used up; the old one is collected with its last call's
   * views). A fresh 16-byte array per call needed a buffer of its own, a malloc, as soon as its
   * Uint32Array and DataView views were made: about half of that call's hashing time.
   */
  private oneSlab = new ArrayBuffer(FIRST_ONE_SLAB);
  private oneAt = 0;

  /** Dedup's per-key rules, in the form checkKeys applies them (built once from the options). */
  readonly #limits: KeyLimits;

  #firstSeen(keys: Keys | undefined, checked: CheckedKeys | undefined, digests: Uint8Array | undefined, opts: FirstSeenOptions | undefined): Promise<Uint8Array> {
    // Not an async function: a merged call resolves straight from the batch, without the extra
    // promise and ticks an async wrapper adds to every call. Errors still reject, never throw.
    let batch: CheckedKeys;
    let n: number;
    let ms: number;
    let window: string;
    let requestId: string | undefined;
    try {
      if (this.closed) throw new HashGateError(ErrorCodes.CLOSED, 'dedup service is closed');
      batch = checked ?? checkKeys(keys, 'keys', this.#limits);
      n = batch.count;
      if (opts?.at === undefined) ms = this.now();
      else if (opts.at instanceof Date && Number.isFinite(opts.at.getTime())) ms = opts.at.getTime();
      else throw invalidType('options.at', 'a valid Date', opts.at);
      window = this.clock.idAt(ms);
      requestId = opts?.requestId;
      if (requestId !== undefined && (typeof requestId !== 'string' || requestId.length === 0 || requestId.length > 200)) {
        throw invalidType('options.requestId', 'a string of 1 to 200 characters', requestId);
      }
    } catch (err) {
      return Promise.reject(err);
    }
    this.counters.calls++;
    this.counters.keys += n;
    if (n === 0) return Promise.resolve(new Uint8Array(0));
    const co = this.coalescer;
    if (co === undefined) return this.run(batch, digests, window, ms, requestId);
    // a request record belongs to one call: never merged
    if (requestId !== undefined || !co.accepts(n)) return this.runAlone(co, batch, digests, window, ms, requestId);
    const p = new Promise<Uint8Array>(capture);
    co.add({ keys: batch, digests, n, window, ms, resolve: captured.resolve!, reject: captured.reject! }, n);
    return p;
  }

  /** A big call runs as its own batch, after whatever is queued (call order decides repeated keys). */
  private async runAlone(co: Coalescer<PendingCall>, keys: CheckedKeys, digests: Uint8Array | undefined, window: string, ms: number, requestId?: string): Promise<Uint8Array> {
    co.flush();
    co.begin();
    try {
      return await this.run(keys, digests, window, ms, requestId);
    } finally {
      co.done();
    }
  }

  /**
   * Runs queued calls as one batch per window, keys concatenated in call order: the in-batch
   * duplicate rule (first occurrence answers, later ones 0) then gives exactly the answers of
   * running the calls one after another. Store work starts before the first await of every run.
   */
  private runMerged(items: PendingCall[]): void {
    const co = this.coalescer!;
    const first = items[0]!;
    if (items.length === 1) {
      // a one-key call is settled by the store's reply itself (runOne), else through run's promise
      this.run(first.keys, first.digests, first.window, first.ms, undefined, first, co)?.then(
        (a) => {
          co.done();
          first.resolve(a);
        },
        (e: unknown) => {
          co.done();
          first.reject(e);
        },
      );
      return;
    }
    let groups: PendingCall[][] = [items];
    for (let i = 1; i < items.length; i++) {
      if (items[i]!.window !== first.window) {
        const byWindow = new Map<string, PendingCall[]>();
        for (const it of items) {
          const g = byWindow.get(it.window);
          if (g === undefined) byWindow.set(it.window, [it]);
          else g.push(it);
        }
        groups = [...byWindow.values()];
        break;
      }
    }
    let left = groups.length;
    for (const g of groups) {
      let total = 0;
      let ms = -Infinity;
      for (const it of g) {
        total += it.n;
        if (it.ms > ms) ms = it.ms;
      }
      const merged = g.length === 1 ? g[0]!.keys : concatKeys(g, total);
      const digests = g.length === 1 ? g[0]!.digests : concatDigests(g, total);
      this.run(merged, digests, g[0]!.window, ms).then(
        (out) => {
          if (--left === 0) co.done();
          // a view, not a copy: one typed array per caller instead of one plus its buffer (made
          // with the constructor: subarray()'s species lookup took twice as long per view)
          const buf = out.buffer;
          let off = out.byteOffset;
          for (const it of g) {
            it.resolve(new Uint8Array(buf, off, it.n));
            off += it.n;
          }
        },
        (err: unknown) => {
          if (--left === 0) co.done();
          let off = 0;
          for (const it of g) {
            it.reject(splitError(err, off, it.n, total));
            off += it.n;
          }
        },
      );
    }
  }

  /**
   * One batch of validated keys of one window; counted so close() can let it finish. Against Redis
   * the keys count towards dedup.maxQueuedKeys until answered: a batch that would exceed it (while
   * others wait) is refused before anything is sent. Under fail-closed a batch without a requestId
   * gets one of its own, so the store can resend a command whose reply was lost (and the caller can
   * retry with details.requestId of the rejection).
   */
  private run(keys: CheckedKeys, digests: Uint8Array | undefined, window: string, ms: number, requestId?: string): Promise<Uint8Array>;
  /**
   * With `call`: undefined when the one-key path took the batch and settles `call` itself (after
   * `co.done()`); otherwise the promise, as without it.
   */
  private run(keys: CheckedKeys, digests: Uint8Array | undefined, window: string, ms: number, requestId: undefined, call: OneCall, co: Coalescer<PendingCall>): Promise<Uint8Array> | undefined;
  private run(keys: CheckedKeys, digests: Uint8Array | undefined, window: string, ms: number, requestId?: string, call?: OneCall, co?: Coalescer<PendingCall>): Promise<Uint8Array> | undefined {
    const n = keys.count;
    const redis = this.store.kind === 'redis';
    if (redis) {
      const max = this.options.maxQueuedKeys;
      if (this.queuedKeys > 0 && this.queuedKeys + n > max) {
        const err = new HashGateError(ErrorCodes.OVERLOADED, `dedup refused a batch of ${n} keys: ${this.queuedKeys} keys already wait for Redis (dedup.maxQueuedKeys = ${max}); nothing was written`, {
          details: { queuedKeys: this.queuedKeys, maxQueuedKeys: max, option: 'dedup.maxQueuedKeys' },
        });
        return Promise.resolve().then(() => {
          throw err;
        });
      }
      this.queuedKeys += n;
    }
    const callers = requestId !== undefined;
    if (redis && !callers && this.options.onStoreError === 'fail-closed') requestId = randomUUID();
    this.active++;
    const end = (): void => {
      if (redis) this.queuedKeys -= n;
      if (--this.active === 0) this.drained?.();
    };
    // then() on runIn's promise rather than an async function awaiting it: the answer reaches the
    // caller one microtask turn sooner, which a one-key call's latency shows
    let p: Promise<Uint8Array>;
    try {
      if (n === 1 && requestId === undefined && redis) {
        if (call !== undefined) {
          if (this.runOne(keys, digests, window, ms, end, call, co)) return undefined;
        } else {
          const own = new Promise<Uint8Array>(capture);
          if (this.runOne(keys, digests, window, ms, end, { resolve: captured.resolve!, reject: captured.reject! }, undefined)) return own;
        }
      }
      p = this.runIn(keys, digests, window, ms, requestId, callers);
    } catch (err) {
      p = Promise.reject(err);
    }
    return p.then(
      (out) => {
        end();
        return out;
      },
      (err: unknown) => {
        end();
        throw err;
      },
    );
  }

  /**
   * A one-key batch on Redis without a request id (fail-open) whose window's bucket count is
   * known: what runKnown, submit and send do for it, in the same order (the cache, the pending-key
   * tracker, the store, the journal when the store fails), without their per-batch arrays,
   * closures and promise turns, which were most of a sequential one-key caller's JS time. It
   * settles `call` itself, from the store's reply, after run()'s bookkeeping (`end`) and
   * `co.done()`. False, with nothing done, when runIn must take it (the key is in flight in an
   * earlier batch, the connection is not ready, the table's count is not at hand).
   */
  private runOne(keys: CheckedKeys, given: Uint8Array | undefined, window: string, ms: number, end: () => void, call: OneCall, co: Coalescer<PendingCall> | undefined): boolean {
    const store = this.store;
    if (!(store instanceof RedisStore) || this.bucketsGate !== undefined) return false;
    const buckets = this.bucketsByWindow.get(window);
    if (buckets === undefined) return false;
    const o = this.options;
    let digests: Uint8Array;
    if (o.secret === undefined && given === undefined) {
      if (this.oneAt === this.oneSlab.byteLength) {
        this.oneSlab = new ArrayBuffer(ONE_SLAB);
        this.oneAt = 0;
      }
      digests = digests128(keys, 0, new Uint8Array(this.oneSlab, this.oneAt, 16));
      this.oneAt += 16;
    } else {
      digests = o.secret === undefined ? given! : digestKeys(keys.keys, o.secret);
      if (digests.byteOffset % 4 !== 0) digests = digests.slice();
    }
    const d32 = new Uint32Array(digests.buffer, digests.byteOffset, 4);
    const cache = this.cacheFor(window, ms);
    const gen = this.cacheToken(window);
    const out = new Uint8Array(1);
    if (cache !== undefined && cache.has(d32, 0)) {
      this.counters.cacheHits++;
      this.answeredRepeats++;
      end();
      co?.done();
      call.resolve(out);
      return true;
    }
    const tracker = this.pendingOf(window);
    const rec = tracker.begin();
    if (!tracker.deferClaims(rec, d32, FIRST, 1) && tracker.claim(d32, 0, rec, 0) !== undefined) {
      tracker.end(rec, NOT_ANSWERED);
      return false;
    }
    const dv = new DataView(digests.buffer, digests.byteOffset, 16);
    const compact = o.layout === 'compact';
    const batch: StoreBatch = {
      window, layout: o.layout, buckets, groupBuckets: NO_GROUPS, groupKeys: NO_KEYS, starts: NO_GROUPS,
      bucket: bucketsOfDigests(digests, o.layout, buckets, undefined, dv), count: 1,
      member: compact ? () => compactMember(digests, 0, dv) : () => setsMember(keys.keys, 0),
      digests, idx: FIRST,
    };
    if (compact) batch.compact = { dv, idx: FIRST };
    // settles the caller with the store's error (and, like finish, never throws)
    const failed = (e: unknown, answered: boolean): void => {
      let bug: unknown;
      try {
        tracker.end(rec, answered ? ANSWERED : NOT_ANSWERED);
      } catch (b) {
        bug = b;
      }
      end();
      co?.done();
      call.reject(bug ?? e);
    };
    // settles the caller; runs from the reply's read, so it must not throw. `journaled`: the
    // store failed and the key went to the journal (fail-open)
    const finish = (journaled = false): void => {
      let bug: unknown;
      try {
        const first = out[0]!;
        this.counters.firstSeen += first;
        if (first === 1) this.answeredFirsts++;
        else this.answeredRepeats++;
        tracker.end(rec, ANSWERED);
        // the cache may have moved to a newer window (or been purged) while the store answered
        if (cache !== undefined && this.cacheGen === gen && (first === 0 || journaled || this.admitsFirsts())) {
          cache.add(d32, 0);
          if (cache.prefaultDue && !this.cachesFirsts) process.nextTick(prefault, cache, 1);
        }
      } catch (e) {
        bug = e;
      }
      end();
      co?.done();
      if (bug === undefined) call.resolve(out);
      else call.reject(bug);
    };
    // the store writes the answer straight into the caller's array
    const sent = store.addOne(batch, out, (err) => {
      if (err === undefined) {
        finish();
        return;
      }
      if (!(err instanceof StoreBatchError)) {
        failed(err, false);
        return;
      }
      this.counters.storeErrors++;
      this.onStoreFailure(err, batch, out, FIRST, FIRST, d32, out, this.cacheGen === gen ? cache : undefined, 1).then(() => finish(err.done[0] !== 1), (e: unknown) => failed(e, err.done[0] === 1));
    });
    if (!sent) {
      tracker.end(rec, NOT_ANSWERED);
      return false;
    }
    if (cache?.prefaultDue === true && this.cachesFirsts) process.nextTick(prefault, cache, 1);
    this.counters.batches++;
    this.counters.storeKeys++;
    return true;
  }

  /** A batch of one window: at once when its bucket count is known, else after the runs before it learnt it. */
  private runIn(keys: CheckedKeys, digests: Uint8Array | undefined, window: string, ms: number, requestId: string | undefined, callers: boolean): Promise<Uint8Array> {
    const known = this.bucketsGate === undefined ? this.bucketsByWindow.get(window) : undefined;
    if (known === undefined) return this.runAfterBuckets(keys, digests, window, ms, requestId, callers);
    return this.runKnown(keys, digests, window, ms, requestId, callers, known);
  }

  private async runAfterBuckets(keys: CheckedKeys, digests: Uint8Array | undefined, window: string, ms: number, requestId: string | undefined, callers: boolean): Promise<Uint8Array> {
    // Runs that must wait for a window's bucket count queue behind each other, and later runs
    // queue behind them even once the count is known: a batch never overtakes an earlier one.
    const prev = this.bucketsGate;
    const mine = (async () => {
      if (prev !== undefined) await prev;
      return this.bucketsFor(window);
    })();
    this.bucketsGate = mine;
    let resolved: number | undefined;
    try {
      resolved = await mine;
    } finally {
      if (this.bucketsGate === mine) this.bucketsGate = undefined;
    }
    return this.runKnown(keys, digests, window, ms, requestId, callers, resolved);
  }

  /** `resolved`: the window's bucket count, undefined while the store is unreachable. */
  private runKnown(
    keys: CheckedKeys, digests: Uint8Array | undefined, window: string, ms: number, requestId: string | undefined, callers: boolean, resolved: number | undefined,
  ): Promise<Uint8Array> {
    const o = this.options;
    const n = keys.count;
    const out = new Uint8Array(n);
    // Unknown while the store is unreachable: then nothing is written with a guessed count
    // (the batch is journaled as digests and replay places it against the window's count).
    const buckets = resolved ?? o.buckets;
    // Taken here, after any wait for the bucket count: a call for a newer window may have
    // switched the cache meanwhile.
    const cache = this.cacheFor(window, ms);
    // fail-open batches go out in pieces so Redis works on piece k while we hash piece k+1; a
    // fail-closed batch stays one store batch under one request id (its error then covers the
    // whole call, and a retry with that id answers every key as the first attempt did).
    const chunk = o.onStoreError === 'fail-open' && this.store.kind === 'redis' ? PIPELINE_CHUNK : n;
    // Used only by the synchronous loop below (submit checks every key before it returns).
    const inBatch = this.inBatchSet(n);
    const tasks: Promise<void>[] = [];
    for (let s = 0; s < n; s += chunk) {
      const e = Math.min(n, s + chunk);
      const whole = s === 0 && e === n;
      const given = digests === undefined || whole ? digests : digests.subarray(s << 4, e << 4);
      const t = this.submit(whole ? keys : keys.slice(s, e), given, s, window, buckets, cache, inBatch, out, resolved !== undefined, requestId, callers);
      if (t !== undefined) tasks.push(t);
    }
    if (tasks.length === 0) return Promise.resolve(out);
    if (tasks.length === 1) return tasks[0]!.then(() => out);
    return Promise.all(tasks).then(() => out);
  }

  /**
   * Hashes `part` (keys base..base+m of the call) unless the caller's digests came along, answers
   * what it can locally, sends the rest.
   */
  private submit(
    part: CheckedKeys, given: Uint8Array | undefined, base: number, window: string, buckets: number,
    cache: SeenCache | undefined, inBatch: DigestSet, out: Uint8Array, bucketsKnown = true, requestId?: string, callers = false,
  ): Promise<void> | undefined {
    const o = this.options;
    const m = part.count;
    // Without a secret the digests are murmur3_128 seed 0 (the same as digestKeys gives).
    let digests = o.secret === undefined ? (given ?? digests128(part, 0)) : digestKeys(part.keys, o.secret);
    // made here (not the caller's buffer, which it may reuse once answered)
    let own = o.secret !== undefined || given === undefined;
    if (digests.byteOffset % 4 !== 0) {
      digests = digests.slice();
      own = true;
    }
    const d32 = new Uint32Array(digests.buffer, digests.byteOffset, m * 4);
    const pend = new Uint32Array(m);
    let p = 0;
    // counted in locals: a property write per key on the shared counters object showed in profiles
    let hits = 0;
    let dups = 0;
    // A caller's requestId call asks Redis about every key: a key an earlier attempt added before
    // its reply was lost may sit in the cache as "seen", but its original answer is 1 (Redis' record knows).
    const ask = callers ? undefined : cache;
    ask?.warm(d32, undefined, m, false);
    for (let i = 0; i < m; i++) {
      if (ask !== undefined && ask.has(d32, i)) {
        hits++;
        continue;
      }
      // Only cache misses can repeat unseen inside the batch (hits are answered 0 anyway).
      if (!inBatch.add(d32, i << 2)) {
        dups++;
        continue;
      }
      pend[p++] = i;
    }
    this.counters.cacheHits += hits;
    this.counters.batchDuplicates += dups;
    this.answeredRepeats += hits + dups;
    if (p === 0) return undefined;
    if (this.store instanceof RedisStore) {
      // A key an earlier batch still has in flight is not raced: this batch waits for that one
      // (see src/dedup/pending.ts); the Redis store's second rounds can reorder batches.
      // The call's answer array names the call: its chunks never share a key (the in-batch set).
      const tracker = this.pendingOf(window);
      const rec = tracker.begin(out);
      // [key, owner, owner's position, this batch's position] of each key an earlier batch holds.
      // Positions: keys sent at once count up from 0, held keys (taken over, see pending.ts) down
      // from p - 1, so the batch's answered array has one place per key it holds.
      let waits: Array<[number, PendingBatch, number, number]> | undefined;
      let q = 0;
      if (tracker.deferClaims(rec, d32, pend, p)) q = p;
      else {
        for (let j = 0; j < p; j++) {
          const i = pend[j]!;
          const slot = p - 1 - (waits === undefined ? 0 : waits.length);
          const held = tracker.claim(d32, i, rec, q, slot);
          if (held === undefined) pend[q++] = i;
          else (waits ??= []).push([i, held[0], held[1], slot]);
        }
      }
      if (waits === undefined) {
        const answered = new Uint8Array(q);
        const t = q === 0 ? undefined : this.send(part, digests, d32, pend, q, base, window, buckets, cache, out, bucketsKnown, requestId, callers, m, answered, own);
        if (t === undefined) {
          tracker.end(rec, answered);
          return undefined;
        }
        return t.then(
          () => tracker.end(rec, answered),
          (err: unknown) => {
            tracker.end(rec, answered);
            throw err;
          },
        );
      }
      const list = waits;
      return (async () => {
        const held = new Uint8Array(p);
        // the position of each key sent after the wait (pend[q..count))
        const slots = new Uint32Array(list.length);
        let count = q;
        let answered: Uint8Array | undefined;
        try {
          // Every owner is older than this batch and waits only for older ones still: no cycle.
          await Promise.all(list.map((w) => w[1].done));
          for (const [i, owner, pos, slot] of list) {
            // answered by the earlier batch (by Redis or, failing open, by its journal): seen.
            // A caller's requestId call still asks Redis: its request record may hold the key.
            if (owner.answered![pos] === 1 && !callers) {
              out[base + i] = 0;
              held[slot] = 1;
              this.counters.batchDuplicates++;
              this.answeredRepeats++;
              continue;
            }
            slots[count - q] = slot;
            pend[count++] = i;
          }
          answered = new Uint8Array(count);
          if (count > 0) await this.send(part, digests, d32, pend, count, base, window, buckets, cache, out, bucketsKnown, requestId, callers, m, answered, own);
        } finally {
          if (answered !== undefined) {
            held.set(answered.subarray(0, q));
            for (let j = q; j < count; j++) held[slots[j - q]!] = answered[j]!;
          }
          tracker.end(rec, held);
        }
      })();
    }
    return this.send(part, digests, d32, pend, p, base, window, buckets, cache, out, bucketsKnown, requestId, callers, m, undefined, own);
  }

  /**
   * Sends keys pend[0..p) of `part` (digests d32) to the store and writes their answers to `out`;
   * `answered[j]` (pending-key tracking) gets 1 for every key whose answer is final. `own`: the
   * digests are this service's (not the caller's, who may reuse them once answered).
   */
  private send(
    part: CheckedKeys, digests: Uint8Array, d32: Uint32Array, pend: Uint32Array, p: number, base: number, window: string, buckets: number,
    cache: SeenCache | undefined, out: Uint8Array, bucketsKnown: boolean, requestId: string | undefined, callers: boolean, m: number,
    answered: Uint8Array | undefined, own: boolean,
  ): Promise<void> | undefined {
    const o = this.options;
    const all = bucketsOfDigests(digests, o.layout, buckets);
    const mem = this.memCompact;
    if (mem !== undefined && bucketsKnown) {
      const added = mem.addCompactNow(window, d32, pend, p, all, out, base);
      this.counters.batches++;
      this.counters.storeKeys += p;
      this.counters.firstSeen += added;
      if (cache !== undefined && this.cacheWindow === window) cache.addAll(d32, pend, p);
      return undefined;
    }
    const pb = new Uint32Array(p);
    for (let j = 0; j < p; j++) pb[j] = all[pend[j]!]!;
    const dv = new DataView(digests.buffer, digests.byteOffset, digests.byteLength);
    const ttl = callers ? undefined : INTERNAL_REQUEST_TTL_MS;
    const memberOf = o.layout === 'compact' ? (j: number) => compactMember(digests, idx[j]!, dv) : (j: number) => setsMember(part.keys, idx[j]!);
    let order: Uint32Array;
    let idx: Uint32Array;
    let batch: StoreBatch;
    if (this.store instanceof RedisStore && requestId === undefined) {
      // Plain SADDs answer each key where it stands: no grouping by bucket, members in call order.
      order = identity(p);
      idx = pend.subarray(0, p);
      batch = { window, layout: o.layout, buckets, groupBuckets: NO_GROUPS, groupKeys: [], starts: NO_GROUPS, bucket: pb, count: p, member: memberOf, digests, idx, ...(o.layout === 'compact' ? { compact: { dv, idx } } : {}) };
    } else {
      order = bucketOrder(pb, p);
      // Groups counted first so their arrays are made at their size: grown by push, with about one
      // group per key, they were a third of the garbage a batch left behind.
      let G = 0;
      for (let j = 0, cur = -1; j < p; j++) {
        const b = pb[order[j]!]!;
        if (b !== cur) {
          cur = b;
          G++;
        }
      }
      const groupKeys = new Array<string>(G);
      const groupBuckets = new Uint32Array(G);
      const starts = new Uint32Array(G + 1);
      idx = new Uint32Array(p);
      for (let j = 0, g = -1, cur = -1; j < p; j++) {
        const k = pend[order[j]!]!;
        const b = pb[order[j]!]!;
        idx[j] = k;
        if (b !== cur) {
          cur = b;
          g++;
          groupBuckets[g] = b;
          groupKeys[g] = this.bucketKeyOf(window, b, buckets);
          starts[g] = j;
        }
      }
      starts[G] = p;
      batch = { window, layout: o.layout, buckets, groupBuckets, groupKeys, starts, count: p, member: memberOf, digests, idx, requestId, requestTtlMs: ttl, ...(o.layout === 'compact' ? { compact: { dv, idx } } : {}) };
    }
    const answers = new Uint8Array(p);
    this.counters.batches++;
    this.counters.storeKeys += p;
    const gen = this.cacheToken(window);
    // `journaled`: after a store failure, fail-open, the keys the store did not answer (done[j] 0)
    // went to the journal
    const finish = (journaled?: Uint8Array): void => {
      let ones = 0;
      for (let j = 0; j < p; j++) {
        const a = answers[j]!;
        out[base + pend[order[j]!]!] = a;
        ones += a;
      }
      this.counters.firstSeen += ones;
      this.answeredFirsts += ones;
      this.answeredRepeats += p - ones;
      answered?.fill(1);
      // the cache may have moved to a newer window (or been purged) while the store answered
      if (cache === undefined || this.cacheGen !== gen) return;
      let adds = pend;
      let k = p;
      // how many keys are added is known only now when only repeats are: the prefault's pacing
      // is told with the adds then, not when the batch was sent
      const all = this.admitsFirsts();
      if (!all) {
        // keys answered "seen before", and keys only the journal holds: until it is replayed,
        // Redis would answer those first-seen again, and only this cache can say they were seen
        k = p - ones;
        if (journaled !== undefined) for (let j = 0; j < p; j++) if (journaled[j] === 0 && answers[j] === 1) k++;
        if (k === 0) return;
        adds = new Uint32Array(k);
        for (let j = 0, r = 0; j < p; j++) if (answers[j] === 0 || (journaled !== undefined && journaled[j] === 0)) adds[r++] = pend[order[j]!]!;
      }
      if (own && k >= DEFER_SEEN_ADDS) setImmediate(addSeenLater, this, cache, gen, d32, adds, k, !all);
      else addSeen(cache, d32, adds, k, !all);
    };
    const sent = bucketsKnown
      ? this.store.addBatch(batch, answers)
      : Promise.reject(new StoreBatchError("the window's bucket count is unknown because the store is unavailable", new Uint8Array(p), answers, undefined));
    if (cache?.prefaultDue === true && this.cachesFirsts) process.nextTick(prefault, cache, p);
    return sent.then(() => finish(), async (err: unknown) => {
      if (!(err instanceof StoreBatchError)) throw err;
      this.counters.storeErrors++;
      if (answered !== undefined) for (let j = 0; j < p; j++) if (err.done[j]) answered[order[j]!] = 1;
      // fail-closed never chunks, so base is 0 and `out` covers exactly this batch there
      await this.onStoreFailure(err, batch, answers, order, pend, d32, out, this.cacheGen === gen ? cache : undefined, m);
      finish(err.done);
    });
  }

  /** The pending-key tracker of `window` (the two newest windows are kept: a year rolls into the next). */
  private pendingOf(window: string): PendingKeys {
    let t = this.pending.get(window);
    if (t === undefined) {
      for (const [w, old] of this.pending) if (this.pending.size >= 2 && old.liveBatches === 0) this.pending.delete(w);
      this.pending.set(window, (t = new PendingKeys()));
    }
    return t;
  }
  private readonly pending = new Map<string, PendingKeys>();

  /** `cache`: the seen-cache only while the batch's cache token is current (undefined otherwise). */
  private async onStoreFailure(
    err: StoreBatchError, batch: StoreBatch, answers: Uint8Array, order: Uint32Array, pend: Uint32Array, d32: Uint32Array,
    out: Uint8Array, cache: SeenCache | undefined, n: number,
  ): Promise<void> {
    // close() cut this call short: say so instead of answering from a store we stopped asking.
    if (this.closed) throw new HashGateError(ErrorCodes.CLOSED, 'dedup service was closed before the store answered', { cause: err });
    this.metrics.storeError('redis', errorKind(err.cause ?? err), 1, err);
    if (this.options.onStoreError === 'fail-closed') {
      const known = new Uint8Array(n).fill(255);
      // Keys answered 0 locally (batch duplicate / cache) are known too.
      const isPending = new Uint8Array(n);
      for (let j = 0; j < pend.length && j < answers.length; j++) isPending[pend[j]!] = 1;
      for (let i = 0; i < n; i++) if (!isPending[i]) known[i] = out[i]!;
      for (let j = 0; j < batch.count; j++) {
        if (!err.done[j]) continue;
        known[pend[order[j]!]!] = answers[j]!;
        if (answers[j] === 0 || this.admitsFirsts()) cache?.add(d32, pend[order[j]!]!);
      }
      // Outcome unknown: some command was sent and its reply lost, so its keys may be in Redis;
      // a retry with the same requestId returns their original answers. Otherwise nothing of
      // what is unknown was written.
      const code = err.unknown ? ErrorCodes.STORE_OUTCOME_UNKNOWN : ErrorCodes.STORE_UNAVAILABLE;
      throw new HashGateError(code, `dedup store failed and dedup.onStoreError is 'fail-closed': ${err.message}`, {
        cause: err.cause,
        details: { answers: known, partial: err.done.some((d) => d === 1), requestId: batch.requestId },
      });
    }
    const o = this.options;
    let journaled = 0;
    for (let j = 0; j < batch.count; j++) if (!err.done[j]) journaled++;
    // Digests, not bucket keys: replay places each key against the window's recorded bucket count.
    const d = new Uint8Array(journaled * 16);
    const members: Member[] | undefined = o.layout === 'sets' ? new Array(journaled) : undefined;
    let q = 0;
    for (let j = 0; j < batch.count; j++) {
      if (err.done[j]) continue;
      const at = batch.idx[j]! << 4;
      d.set(batch.digests.subarray(at, at + 16), q << 4);
      if (members !== undefined) members[q] = batch.member(j);
      answers[j] = 1;
      q++;
    }
    const rec: JournalRecordV2 = { v: 2, t: this.now(), w: batch.window, p: o.prefix, l: o.layout, b: batch.buckets, h: 0, d };
    if (members !== undefined) rec.m = members;
    let bytes: number;
    try {
      bytes = await this.journal!.append(rec);
    } catch (jerr) {
      this.metrics.storeError('journal', 'io', 1, jerr);
      throw jerr;
    }
    this.metrics.journalAppended(1, bytes);
    this.counters.journaledKeys += journaled;
    // Redis is up but failed this batch (timeout, OOM...): replay soon rather than at the next interval.
    if (o.replayIntervalMs > 0 && this.store instanceof RedisStore && this.store.status === 'ready') this.scheduleReplay(1000);
  }

  /** Background replay once, after `delayMs` (coalesces repeated requests). */
  private scheduleReplay(delayMs: number): void {
    if (this.closed || this.replaySoon !== undefined || this.journal === undefined) return;
    this.replaySoon = setTimeout(() => {
      this.replaySoon = undefined;
      if (this.closed || this.recovering !== undefined || this.journal!.pendingBytes() === 0) return;
      // While Redis is away the next 'ready' schedules the replay.
      if (this.store instanceof RedisStore && this.store.status !== 'ready') return;
      this.recover().then(
        // Redis failed again mid-replay, or another instance held the lock: try again shortly.
        (rep) => (rep.failed.length > 0 || rep.lockHeld ? this.scheduleReplay(5000) : undefined),
        () => this.scheduleReplay(5000),
      );
    }, delayMs);
    this.replaySoon.unref();
  }

  /**
   * Waits for the first Redis connection (HashGate.open() calls it unless dedup.lazyConnect).
   * Rejects with HG_ERR_STORE_UNAVAILABLE after dedup.connectTimeoutMs. Then readies the current
   * window for the first call: records its bucket count if no writer has, reads its table counts
   * and connects the store's own pipes.
   */
  async connect(): Promise<void> {
    if (!(this.store instanceof RedisStore)) return;
    await this.store.waitFirstReady();
    if (this.closed) throw new HashGateError(ErrorCodes.CLOSED, 'dedup service is closed');
    if (this.store.status !== 'ready') {
      const cause = this.store.lastError;
      throw new HashGateError(
        ErrorCodes.STORE_UNAVAILABLE,
        `cannot connect to Redis within dedup.connectTimeoutMs = ${this.options.connectTimeoutMs} ms${cause ? ` (${cause.message})` : ''}; set dedup.lazyConnect: true to start without it`,
        { cause, details: { option: 'dedup.connectTimeoutMs', status: this.store.status } },
      );
    }
    // The current window's bucket count, table counts and the store's pipes, read and connected
    // now: the first call would otherwise wait for their round trips, connections and handshakes.
    // Best effort: what fails here the first call does again, as it would have.
    try {
      const window = this.windowOf(); // a window function of the caller's may throw: its calls will say so
      const buckets = await this.bucketsFor(window);
      if (buckets !== undefined && !this.closed) await this.store.warm(window, this.options.layout, buckets);
    } catch {
      // left to the first call, which meets the same failure and reports it
    }
  }

  /**
   * Redis key of bucket `b` of `window`. With a few keys per batch spread over many buckets there
   * is about one group per key, so building the key string is per-key work: the newest window's
   * keys are kept (one string per bucket at most, so bounded by the bucket count).
   */
  private bucketKeyOf(window: string, b: number, buckets: number): string {
    if (buckets > BUCKET_KEY_CACHE_MAX) return bucketKey(this.options, window, b);
    let c = this.bucketKeys;
    if (c === undefined || c.window !== window || c.keys.length !== buckets) {
      c = this.bucketKeys = { window, keys: new Array<string | undefined>(buckets) };
    }
    // kept flat: a key made by concatenation is a rope, and a rope read char by char for every
    // command it goes into costs an extra object (an extra cache miss) per read
    return (c.keys[b] ??= flatString(bucketKey(this.options, window, b)));
  }

  /**
   * An empty table for a batch's in-batch duplicates. The last one of at least 64 keys is kept and
   * cleared for the next batch of about its size: a 10k-key batch's table is 256 KiB, which
   * would otherwise be allocated, zeroed and faulted in again on every call.
   */
  private inBatchSet(n: number): DigestSet {
    // batches of fewer than 64 keys (one-key calls, most merged ones) share one small table:
    // two typed arrays made per call showed in a one-key call's profile
    if (n < 64) {
      const small = (this.inBatchSmall ??= new DigestSet(64));
      small.clear();
      return small;
    }
    const s = this.inBatchScratch;
    if (s !== undefined && s.capacity >= n && s.capacity <= 4 * n) {
      s.clear();
      return s;
    }
    const d = new DigestSet(n);
    this.inBatchScratch = d;
    return d;
  }
  private inBatchScratch: DigestSet | undefined;
  private inBatchSmall: DigestSet | undefined;

  /** The cache follows the newest window seen; calls for older windows bypass it. */
  private cacheFor(window: string, ms: number): SeenCache | undefined {
    if (this.cache === undefined) return undefined;
    if (window === this.cacheWindow) {
      if (ms > this.cacheMs) this.cacheMs = ms;
      return this.cache;
    }
    if (ms < this.cacheMs) return undefined;
    this.cache.clear();
    this.cacheGen++;
    this.cacheWindow = window;
    this.cacheMs = ms;
    return this.cache;
  }

  /**
   * The token a batch of `window` takes when it is sent: the cache's generation while the cache
   * holds that window, else -1 (never a generation). The batch adds its keys only if the token is
   * still current when the answers come: a batch that waited for an earlier one's keys may be sent
   * after a newer window took the cache, and its keys must not turn up as "seen" there.
   */
  private cacheToken(window: string): number {
    return this.cacheWindow === window ? this.cacheGen : -1;
  }

  /**
   * Whether the seen-cache takes keys the store answered first-seen (dedup.cacheAdmit 'all'), or
   * only keys answered "seen before" ('repeats'). Under 'auto' the choice is reviewed every
   * ADMIT_REVIEW_KEYS answered keys from the share of repeats among them, answered anywhere
   * (cache, in-batch, store): a share of the stream, not of what the cache caught, so the choice
   * does not feed on itself.
   */
  private admitsFirsts(): boolean {
    const n = this.answeredRepeats + this.answeredFirsts;
    if (n >= ADMIT_REVIEW_KEYS) {
      if (this.options.cacheAdmit === 'auto') this.cachesFirsts = this.answeredRepeats * ADMIT_REPEAT_ONE_IN >= n;
      this.answeredRepeats = 0;
      this.answeredFirsts = 0;
    }
    return this.cachesFirsts;
  }

  /** The window's recorded bucket count, or undefined while the store cannot tell. */
  private async bucketsFor(window: string): Promise<number | undefined> {
    const known = this.bucketsByWindow.get(window);
    if (known !== undefined) return known;
    const o = this.options;
    let b: number;
    try {
      b = await this.store.resolveBuckets(window, o.layout, o.buckets);
    } catch (err) {
      // a window this version cannot read (HG_ERR_STORE) is no outage: every call must say so
      if (err instanceof HashGateError && err.code === ErrorCodes.STORE) throw err;
      return undefined; // store down: resolve on a later call
    }
    // The first writer's count wins (every process must bucket a key the same way). A window
    // recorded with fewer buckets than this process is sized for is fine: its buckets split.
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
        const store = this.store as RedisStore;
        return await replayJournal(store.redis, this.journal!, `${this.options.prefix}:lock:recover`, this.options.lockTtlMs, {
          writer: store.writer,
          onReplayed: (records, bytes) => this.metrics.journalReplayed(records, bytes),
          sliceKeys: this.options.replaySliceKeys,
          liveBusy: () => this.active > 0,
        });
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
      this.cacheGen++;
      this.cacheWindow = undefined;
      this.cacheMs = -Infinity;
    }
    this.bucketsByWindow.delete(window);
    return this.store.purge(window);
  }

  async stats(window?: string): Promise<DedupStats> {
    const w = window ?? this.windowOf();
    if (typeof w !== 'string' || w === '') throw invalidType('window', 'a window id such as "2026"', w);
    // read-only: a window nobody wrote yet keeps no bucket count, so a later writer still decides it
    const buckets = this.bucketsByWindow.get(w) ?? await this.store.resolveBuckets(w, this.options.layout, this.options.buckets, false);
    const { exact, approximate, largestBucket, subBuckets } = await this.store.count(w, this.options.layout, buckets);
    const compactRedis = this.store instanceof RedisStore && this.options.layout === 'compact';
    return {
      window: w,
      layout: this.options.layout,
      store: this.store.kind,
      buckets,
      exact,
      approximate,
      cacheEntries: this.cache?.size ?? 0,
      ...(this.cache === undefined ? {} : { cacheAdmits: this.cachesFirsts ? ('all' as const) : ('repeats' as const) }),
      journalBytes: this.journal?.pendingBytes() ?? 0,
      counters: { ...this.counters },
      ...(largestBucket === undefined ? {} : { largestBucket }),
      ...(compactRedis && subBuckets !== undefined ? { subBuckets } : {}),
      ...(compactRedis ? { bucketLimit: await (this.store as RedisStore).intsetLimit() } : {}),
    };
  }

  /**
   * How full the window's buckets are (compact layout on Redis; else undefined): the window count
   * and the sub-bucket counts of a sample of tables, never a scan of the buckets.
   */
  async bucketFill(window: string = this.windowOf()): Promise<BucketFill | undefined> {
    const store = this.store;
    if (!(store instanceof RedisStore) || this.options.layout !== 'compact') return undefined;
    const buckets = this.bucketsByWindow.get(window) ?? await store.resolveBuckets(window, 'compact', this.options.buckets, false);
    const [approximateKeys, limit, sample] = await Promise.all([store.approximateCount(window, 'compact'), store.intsetLimit(), store.sampleTables(window, buckets)]);
    // the fullest sub-buckets of a table of n are the pow2le(n) not split yet at its level, each
    // holding 1/pow2le(n) of the table; the table split least far decides
    let least = Infinity;
    let sum = 0;
    for (const n of sample) {
      least = Math.min(least, 2 ** Math.floor(Math.log2(Math.max(1, n))));
      sum += n;
    }
    if (!Number.isFinite(least)) least = 1;
    const subBuckets = Math.max(buckets, Math.round((sum / Math.max(1, sample.length)) * buckets));
    const mean = approximateKeys / buckets / least;
    const predictedLargest = Math.ceil(mean + Math.sqrt(2 * mean * Math.log(Math.max(2, subBuckets))));
    const fill: BucketFill = { window, buckets, approximateKeys, subBuckets, predictedLargest, limit, ratio: predictedLargest / limit };
    if (window === this.windowOf()) this.counters.bucketFillRatio = fill.ratio;
    return fill;
  }

  /** Redis memory (used, RSS) over the masters; undefined for the embedded stores. `settled`: after background frees finished. */
  async storeMemory(settled = false): Promise<{ used: number; rss: number } | undefined> {
    return this.store instanceof RedisStore ? this.store.memory(settled) : undefined;
  }

  /** Refreshes counters.bucketFillRatio in the background when its reading is over a minute old (metrics scrapes). */
  refreshBucketFill(): void {
    const now = performance.now();
    if (now - this.fillReadAt < 60_000 || this.closed) return;
    this.fillReadAt = now;
    this.bucketFill().catch(() => undefined);
  }
  private fillReadAt = -Infinity;

  /**
   * Stops taking calls, lets calls in flight finish (answers Redis gives them are exact; calls
   * still waiting for a connection, or whose batch fails now, reject with HG_ERR_CLOSED), seals
   * the journal and closes the connection. Leaves no timer or socket behind.
   */
  async close(): Promise<void> {
    if (this.closing !== undefined) return this.closing;
    this.closed = true;
    this.closing = (async () => {
      // queued calls were accepted before close: start them now, ahead of the store closing
      this.coalescer?.flush();
      if (this.timer !== undefined) clearInterval(this.timer);
      if (this.replaySoon !== undefined) clearTimeout(this.replaySoon);
      this.replaySoon = undefined;
      if (this.store instanceof RedisStore) this.store.abort();
      if (this.active > 0) {
        let t: NodeJS.Timeout | undefined;
        // Commands already written get their replies within commandTimeoutMs; then we cut.
        await Promise.race([
          new Promise<void>((r) => (this.drained = r)),
          new Promise<void>((r) => (t = setTimeout(r, this.options.commandTimeoutMs + 100))),
        ]);
        clearTimeout(t);
      }
      await this.recovering?.catch(() => undefined);
      try {
        await this.journal?.close();
      } finally {
        await this.store.close();
      }
    })();
    return this.closing;
  }
}
