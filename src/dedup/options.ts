// Options of the dedup service, validated once. Names match the public API exactly
// (`dedup.layout`, `dedup.buckets`, ...); errors name the option as the user wrote it.
import type { RedisOptions } from 'ioredis';
import { checkInt, checkOneOf, invalidType, HashGateRangeError, HashGateTypeError, ErrorCodes } from '../errors.js';
import { DEFAULT_INTSET_LIMIT, splitLoad } from './growth.js';
import { LMDB_MAX_MEMBER_BYTES } from './lmdb-store.js';
import { checkTimeZone, type WindowSpec } from './window.js';
import { MAX_KEY_BYTES } from '../util/limits.js';

export type Layout = 'compact' | 'sets';
export type OnStoreError = 'fail-open' | 'fail-closed';
/** Which keys the seen-cache takes (see DedupOptions.cacheAdmit). */
export type CacheAdmit = 'auto' | 'repeats' | 'all';

export interface ClusterNode {
  host: string;
  port: number;
}

export type RedisConfig = string | RedisOptions | { cluster: Array<ClusterNode | string>; options?: Record<string, unknown> };

export interface DedupOptions {
  /** 'compact' (default): 64-bit digest suffixes in intset buckets; 'sets': raw keys in `{prefix}:{window}:{bucket}` sets (readable by plain SISMEMBER). */
  layout?: Layout;
  /** Buckets per window. Default: 1000 for 'sets'; for 'compact' 1024 on Redis (each bucket splits into sub-buckets as it fills), 65,536 with `path`, or derived from expectedKeys. */
  buckets?: number;
  /**
   * Compact layout sizing hint when `buckets` is not given: the keys a window is expected to hold.
   * On Redis (and embedded) buckets = nextPow2(expectedKeys / 153), so the window fills to that
   * many keys without splitting a table; with `path` buckets = nextPow2(expectedKeys / 256).
   */
  expectedKeys?: number;
  /** Redis key prefix. Default 'hg:dedup'. */
  prefix?: string;
  window?: WindowSpec;
  timeZone?: string;
  onStoreError?: OnStoreError;
  /** Directory of the fail-open journal. Default './hashgate-journal', relative to process.cwd(). */
  journalDir?: string;
  /** Compact layout only: HMAC-SHA-256 key; digests become HMAC(secret, key) truncated to 128 bits. */
  secret?: string | Uint8Array;
  /**
   * Background replay period. Replay also runs as soon as the connection comes back after a
   * failure. 0 disables both: the application calls recover() itself. Default 3_600_000 (hourly).
   */
  replayIntervalMs?: number;
  /** Seen-key cache bounds (entries and approximate bytes). 0 entries disables the cache. */
  cacheMaxEntries?: number;
  cacheMaxBytes?: number;
  /**
   * Which answered keys the seen-cache takes. 'repeats': keys the store answered "seen before"
   * (a second sight in the window, or a first one here after another instance wrote the key);
   * keys answered "first seen" stay out, so a stream of new keys costs the cache nothing and
   * leaves it to the keys that recur. 'all': every answered key, so a second sight on this
   * instance is answered locally (worth it when many keys come back soon; every new key costs an
   * add and 17 B of memory written). 'auto' (default): 'repeats' at first, then, reviewed every
   * 4,096 answered keys, 'all' while at least 1 in 32 of them was a repeat. In every mode a key
   * that only the fail-open journal holds is taken, and the answers are the same: the mode
   * decides which repeats Redis answers.
   */
  cacheAdmit?: CacheAdmit;
  /** Largest key accepted, in UTF-8 bytes. Default 1024. */
  maxKeyBytes?: number;
  /** Largest batch accepted by one firstSeen call. Default 200_000. */
  maxBatchKeys?: number;
  /** Redis command timeout used when hashgate builds the client. Default 2000. */
  commandTimeoutMs?: number;
  /**
   * Most keys one send of ours carries: that many single-key SADDs written together, or one
   * request-record script call (requestId and fail-closed batches) of that many keys. A script
   * keeps a shared Redis busy while it runs (other clients' commands wait), so a batch is split
   * into scripts of at most this many keys; all-or-nothing for the caller comes from requestId
   * retries, not from one giant script. Default 2000.
   */
  maxKeysPerCommand?: number;
  /**
   * Dedup sends (see maxKeysPerCommand) the store keeps in flight at once per connection (per
   * master on a Cluster), counted in keys: maxInFlight x maxKeysPerCommand keys, so smaller sends
   * (calls of a few keys each) may have more sends out; the rest wait locally, untimed, in call
   * order. A send's commandTimeoutMs starts only once the sends ahead of it answered, so a long
   * local queue never turns into timeouts (and fail-open answers). Default 2 (Redis works on one
   * full send while the next is on the wire).
   */
  maxInFlight?: number;
  /**
   * Keys of calls that may wait for the Redis store at once (in flight or queued locally). A call
   * that would exceed it is refused with HG_ERR_OVERLOADED before anything is sent (never a
   * fail-open answer). Default 2_000_000.
   */
  maxQueuedKeys?: number;
  /**
   * How long Redis keeps the record of a call made with a requestId (the keys it answered 1), so
   * that a retry with the same requestId returns the original answers. Default 600_000.
   */
  requestTtlMs?: number;
  /**
   * How long HashGate.open() waits for the first Redis connection before it rejects with
   * HG_ERR_STORE_UNAVAILABLE; with `lazyConnect`, how long calls made before the first
   * connection wait for it before the store counts as failed. Default 10_000.
   */
  connectTimeoutMs?: number;
  /** true: open() resolves without waiting for Redis (the connection is made in the background). Default false. */
  lazyConnect?: boolean;
  /** Journal segment size bound and total journal bound. */
  journalSegmentBytes?: number;
  journalMaxBytes?: number;
  /** Recover lock TTL (refreshed while replaying). Default 60_000. */
  lockTtlMs?: number;
  /**
   * Journal keys replay handles per slice: one synchronous step and one pipeline, never more than
   * one in flight, with an event-loop turn between slices. Smaller is gentler on live calls,
   * larger replays faster. Default 1000.
   */
  replaySliceKeys?: number;
  /**
   * @deprecated Ignored. stats().approximate is the window count every writer keeps (it also
   * times bucket splits), so there is nothing to turn off; setting it emits a DeprecationWarning
   * (code HG_DEP_DEDUP_HLL) once.
   */
  hll?: boolean;
  /** Embedded store bound (keys over all windows). Default 50_000_000. */
  memoryMaxKeys?: number;
  /**
   * Directory of a durable embedded store (LMDB) instead of the in-memory table: survives
   * restarts and is shared by the processes of one host. Not combinable with `redis`.
   */
  path?: string;
  /**
   * With `path`: also sync the file before answering a batch made only of stored keys (another
   * process's commit is visible before its fsync ends). Default true. Batches that write always
   * wait for their commit's fsync, so false does not make new keys faster.
   */
  sync?: boolean;
  /** With `path`: windows (per layout) the store can hold before old ones must be purged. Default 500. */
  maxWindows?: number;
}

export const DEFAULTS = {
  layout: 'compact' as Layout,
  setsBuckets: 1000,
  /**
   * Compact buckets of a Redis window: each splits into sub-buckets as it fills (see
   * src/dedup/growth.ts), so a small count serves 1e5 to 1e10 keys; few buckets keep a small
   * window from paying a Redis key per handful of members.
   */
  compactBuckets: 1024,
  /** Compact buckets of an LMDB window (blocks of sorted members; they do not split). */
  lmdbCompactBuckets: 65_536,
  prefix: 'hg:dedup',
  window: 'year' as WindowSpec,
  timeZone: 'Asia/Shanghai',
  onStoreError: 'fail-open' as OnStoreError,
  journalDir: './hashgate-journal',
  replayIntervalMs: 3_600_000,
  cacheMaxEntries: 1_000_000,
  cacheMaxBytes: 128 * 1024 * 1024,
  cacheAdmit: 'auto' as CacheAdmit,
  maxKeyBytes: MAX_KEY_BYTES,
  maxBatchKeys: 200_000,
  commandTimeoutMs: 2000,
  maxKeysPerCommand: 2000,
  maxInFlight: 2,
  maxQueuedKeys: 2_000_000,
  requestTtlMs: 600_000,
  connectTimeoutMs: 10_000,
  lazyConnect: false,
  journalSegmentBytes: 64 * 1024 * 1024,
  journalMaxBytes: 4 * 1024 * 1024 * 1024,
  lockTtlMs: 60_000,
  replaySliceKeys: 1000,
  memoryMaxKeys: 50_000_000,
  sync: true,
  maxWindows: 500,
  /**
   * Keys per compact bucket that expectedKeys sizes an LMDB window for (its buckets are blocks of
   * sorted members and never split).
   */
  lmdbTargetLoad: 256,
  /**
   * Keys per compact bucket that expectedKeys sizes a Redis (or embedded) window for: the load at
   * which a Redis table starts to split, so a window sized for its keys fills without one split
   * (each costs Redis a DUMP and a script, and the writer a round trip) and every table stays an
   * intset. Past expectedKeys the tables split as in an unsized window.
   */
  compactTargetLoad: splitLoad(DEFAULT_INTSET_LIMIT),
} as const;

export interface ResolvedDedupOptions {
  layout: Layout;
  buckets: number;
  prefix: string;
  window: WindowSpec;
  timeZone: string;
  onStoreError: OnStoreError;
  journalDir: string;
  secret: Uint8Array | undefined;
  replayIntervalMs: number;
  cacheMaxEntries: number;
  cacheMaxBytes: number;
  cacheAdmit: CacheAdmit;
  maxKeyBytes: number;
  maxBatchKeys: number;
  commandTimeoutMs: number;
  maxKeysPerCommand: number;
  maxInFlight: number;
  maxQueuedKeys: number;
  requestTtlMs: number;
  connectTimeoutMs: number;
  lazyConnect: boolean;
  journalSegmentBytes: number;
  journalMaxBytes: number;
  lockTtlMs: number;
  replaySliceKeys: number;
  memoryMaxKeys: number;
  path: string | undefined;
  sync: boolean;
  maxWindows: number;
}

const KNOWN = new Set([
  'layout', 'buckets', 'expectedKeys', 'prefix', 'window', 'timeZone', 'onStoreError', 'journalDir', 'secret',
  'replayIntervalMs', 'cacheMaxEntries', 'cacheMaxBytes', 'cacheAdmit', 'maxKeyBytes', 'maxBatchKeys', 'commandTimeoutMs', 'maxKeysPerCommand', 'maxInFlight', 'maxQueuedKeys', 'requestTtlMs', 'connectTimeoutMs', 'lazyConnect',
  'journalSegmentBytes', 'journalMaxBytes', 'lockTtlMs', 'replaySliceKeys', 'hll', 'memoryMaxKeys',
  'path', 'sync', 'maxWindows',
]);

let hllWarned = false;
/** The one deprecation warning of the HyperLogLog option (its name as the user wrote it). */
export function warnHllOnce(name: string): void {
  if (hllWarned) return;
  hllWarned = true;
  process.emitWarning(`${name} is deprecated and ignored: the window count that stats().approximate reports is always kept`, { type: 'DeprecationWarning', code: 'HG_DEP_DEDUP_HLL' });
}

const nextPow2 = (n: number): number => 2 ** Math.ceil(Math.log2(Math.max(1, n)));

export function parseDedupOptions(input: unknown, name = 'options.dedup'): ResolvedDedupOptions {
  if (input === undefined || input === null) input = {};
  if (typeof input !== 'object') throw invalidType(name, 'an object', input);
  const o = input as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!KNOWN.has(k)) {
      throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `${name}.${k} is not a known option`, { name: `${name}.${k}` });
    }
  }
  if (o['hll'] !== undefined) {
    if (typeof o['hll'] !== 'boolean') throw invalidType(`${name}.hll`, 'a boolean', o['hll']);
    warnHllOnce(`${name}.hll`);
  }

  const opt = <T>(k: string, parse: (n: string, v: unknown) => T, dflt: T): T =>
    o[k] === undefined ? dflt : parse(`${name}.${k}`, o[k]);

  const layout = opt('layout', (n, v) => checkOneOf(n, v, ['compact', 'sets'] as const), DEFAULTS.layout);
  const expectedKeys = opt('expectedKeys', (n, v) => checkInt(n, v, 1), 0);
  const dfltBuckets =
    layout === 'sets'
      ? DEFAULTS.setsBuckets
      : expectedKeys > 0
        ? Math.min(2 ** 30, nextPow2(expectedKeys / (o.path !== undefined ? DEFAULTS.lmdbTargetLoad : DEFAULTS.compactTargetLoad)))
        : o.path !== undefined
          ? DEFAULTS.lmdbCompactBuckets
          : DEFAULTS.compactBuckets;
  const buckets = opt('buckets', (n, v) => checkInt(n, v, 1, 2 ** 30), dfltBuckets);
  const prefix = opt(
    'prefix',
    (n, v) => {
      if (typeof v !== 'string' || v === '' || v.length > 128) throw invalidType(n, 'a non-empty string of at most 128 characters', v);
      return v;
    },
    DEFAULTS.prefix,
  );
  const window = opt(
    'window',
    (n, v): WindowSpec => {
      if (typeof v === 'function') return v as WindowSpec;
      return checkOneOf(n, v, ['year', 'month', 'day'] as const);
    },
    DEFAULTS.window,
  );
  const timeZone = opt('timeZone', (n, v) => checkTimeZone(v, n), DEFAULTS.timeZone);
  const onStoreError = opt('onStoreError', (n, v) => checkOneOf(n, v, ['fail-open', 'fail-closed'] as const), DEFAULTS.onStoreError);
  const journalDir = opt(
    'journalDir',
    (n, v) => {
      if (typeof v !== 'string' || v === '') throw invalidType(n, 'a directory path', v);
      return v;
    },
    DEFAULTS.journalDir,
  );
  const secret = opt(
    'secret',
    (n, v): Uint8Array | undefined => {
      if (typeof v === 'string' && v !== '') return new TextEncoder().encode(v);
      if (v instanceof Uint8Array && v.length > 0) return v;
      throw invalidType(n, 'a non-empty string or Uint8Array', v);
    },
    undefined,
  );
  if (secret !== undefined && layout !== 'compact') {
    throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `${name}.secret needs ${name}.layout 'compact' (the 'sets' layout stores raw keys)`, { name: `${name}.secret` });
  }
  const int = (k: keyof typeof DEFAULTS & string, min: number, max?: number): number =>
    opt(k, (n, v) => checkInt(n, v, min, max), DEFAULTS[k] as number);
  const path = opt(
    'path',
    (n, v) => {
      if (typeof v !== 'string' || v === '' || v.includes('\0')) throw invalidType(n, 'a directory path', v);
      return v;
    },
    undefined as string | undefined,
  );
  for (const k of ['sync', 'maxWindows'] as const) {
    if (o[k] !== undefined && path === undefined) {
      throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `${name}.${k} needs ${name}.path (it configures the durable embedded store)`, { name: `${name}.${k}` });
    }
  }
  const maxKeyBytes = int('maxKeyBytes', 1, 512 * 1024 * 1024);
  if (path !== undefined && layout === 'sets' && maxKeyBytes > LMDB_MAX_MEMBER_BYTES) {
    throw new HashGateRangeError(ErrorCodes.INVALID_OPTION, `${name}.maxKeyBytes must be <= ${LMDB_MAX_MEMBER_BYTES} with ${name}.path and layout 'sets' (LMDB stores raw keys as sorted duplicates), got ${maxKeyBytes}`, { name: `${name}.maxKeyBytes` });
  }
  return {
    layout,
    buckets,
    prefix,
    window,
    timeZone,
    onStoreError,
    journalDir,
    secret,
    replayIntervalMs: int('replayIntervalMs', 0, 2 ** 31 - 1),
    cacheMaxEntries: int('cacheMaxEntries', 0, 2 ** 28),
    cacheMaxBytes: int('cacheMaxBytes', 0),
    cacheAdmit: opt('cacheAdmit', (n, v) => checkOneOf(n, v, ['auto', 'repeats', 'all'] as const), DEFAULTS.cacheAdmit),
    maxKeyBytes,
    maxBatchKeys: int('maxBatchKeys', 1, 10_000_000),
    commandTimeoutMs: int('commandTimeoutMs', 1),
    maxKeysPerCommand: int('maxKeysPerCommand', 1, 1_000_000),
    maxInFlight: int('maxInFlight', 1, 1024),
    maxQueuedKeys: int('maxQueuedKeys', 1),
    requestTtlMs: int('requestTtlMs', 1000, 2 ** 31 - 1),
    connectTimeoutMs: int('connectTimeoutMs', 1, 2 ** 31 - 1),
    lazyConnect: opt('lazyConnect', (n, v) => {
      if (typeof v !== 'boolean') throw invalidType(n, 'a boolean', v);
      return v;
    }, DEFAULTS.lazyConnect),
    journalSegmentBytes: int('journalSegmentBytes', 4096),
    journalMaxBytes: int('journalMaxBytes', 4096),
    lockTtlMs: int('lockTtlMs', 1000),
    replaySliceKeys: int('replaySliceKeys', 1, 10_000),
    memoryMaxKeys: int('memoryMaxKeys', 1),
    path,
    sync: opt('sync', (n, v) => {
      if (typeof v !== 'boolean') throw invalidType(n, 'a boolean', v);
      return v;
    }, DEFAULTS.sync),
    maxWindows: int('maxWindows', 1, 16_000),
  };
}
