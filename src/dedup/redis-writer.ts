// Writes dedup members to Redis as plain SADDs over our own pipes: one SADD per member when the caller needs each answer (firstSeen), one per sub-bucket when it only needs the count (the loader, journal replay).
//
// Placement (compact layout) is growth.ts's rule over the table counts WindowTables caches. A
// SADD that Redis refuses with WRONGTYPE reached a tombstone: the table split since its count was
// read, nothing was written, and the member is sent again once the count is read anew. A Cluster
// redirection (MOVED, ASK) also wrote nothing: that member goes through the ioredis Cluster
// client, which follows redirections and refreshes its slot map (ours reads the same map).
import type { Cluster } from 'ioredis';
import { NotSentError } from '../redis/inflight.js';
import { arena } from '../hash/arena.js';
import { identity } from '../util/identity.js';
import { int64Bulk } from '../redis/int64.js';
import type { ReplySink, RespValue } from '../redis/pipe.js';
import type { PipeRoute, PipeRouter } from '../redis/pipes.js';
import { addressOfHigh, depthOf, subBucketOf } from './growth.js';
import type { Layout } from './options.js';
import type { TableGrowth, WindowTables } from './tables.js';
import type { Member } from './layout.js';

/** What happened to one member of a write. */
export const MemberStatus = {
  /** The answer is known (answers[j]). */
  Answered: 0,
  /** Certainly not written (never sent, or refused before it ran). */
  NotApplied: 1,
  /** Sent and the reply lost: it may be in Redis. */
  Unknown: 2,
  /** Not settled yet (internal). */
  Pending: 3,
  /** WRONGTYPE: a tombstone, the table split; to be resent (internal). */
  Stale: 4,
  /** MOVED / ASK: to be resent through the Cluster client (internal). */
  Redirect: 5,
} as const;

/** The members of one write: member j goes to bucket (table) `bucket[j]`. */
export interface MemberSource {
  /** `${prefix}:${window}`: every key of the window starts with it. */
  base: string;
  layout: Layout;
  /** The window's recorded bucket (table) count. */
  buckets: number;
  count: number;
  bucket: Uint32Array;
  /** Compact: member j is the signed 64-bit integer at byte `offs[j]` of `dv` (digest bytes 0..7). */
  dv?: DataView;
  offs?: Uint32Array;
  /** 'sets': member j's raw bytes. */
  member?(j: number): Member;
  /** 'sets', optional: member j is `bytes[offs[j], offs[j + 1])`, which grouped writes copy
   *  without making a view of each member (a loader's packed keys). */
  bytes?: Uint8Array;
}

/** Result of a write that needs every answer. */
export interface EachResult {
  /** Members answered 1 (added). */
  added: number;
  /** The first error that left a member NotApplied or Unknown. */
  error: unknown;
  /** Some member is Unknown. */
  unknown: boolean;
}

/** A batch's members split by whether their table is splitting right now (holdForSplits). */
interface HeldForSplits {
  /** Members of tables not splitting: they go at once. */
  now: Uint32Array;
  /** Members of splitting tables: they go once `splits` ended. */
  later: Uint32Array;
  splits: Array<Promise<void>>;
}

const ERR_REDIRECT = /^(MOVED|ASK) /;
const ERR_STALE = /^WRONGTYPE /;
/** Rounds of "a table split under us, read its count again and resend" before giving up. */
const MAX_STALE_ROUNDS = 16;
/** addOne's table list for prepare() (read synchronously there, never kept). */
const ONE_TABLE = new Uint32Array(1);

const digits = (v: number): number => (v < 10 ? 1 : v < 100 ? 2 : v < 1000 ? 3 : v < 10_000 ? 4 : v < 100_000 ? 5 : v < 1_000_000 ? 6 : v < 10_000_000 ? 7 : String(v).length);

/** Writes v's decimal digits (v >= 0) at buf[p..); returns the position after them. */
function putUint(buf: Uint8Array, p: number, v: number): number {
  const n = digits(v);
  let e = p + n;
  const end = e;
  do {
    const q = Math.floor(v / 10);
    buf[--e] = 48 + (v - q * 10);
    v = q;
  } while (v > 0);
  return end;
}

/**
 * Send buffers are reused: a chunk's buffer is taken when it is written and given back once its
 * replies came (the socket wrote it long before). A fresh ~200 KiB buffer per chunk meant an mmap,
 * page faults and munmap each time, and external memory that kept the young generation collecting.
 */
const POOL_BUFFER = 256 * 1024;
const POOL_MAX = 16;
const pool: Buffer[] = [];

/**
 * A send smaller than this gets a buffer of its own size, not a pooled one: a few keys' send
 * taking 256 KiB ran the pool dry once many small sends were in flight, and each buffer made
 * past it was an mmap and page faults. A small buffer is cheap to make (the heap, not mmap).
 */
const SMALL_SEND = 32 * 1024;

function takeBuffer(size: number): Buffer {
  if (size <= SMALL_SEND) return Buffer.allocUnsafe(size);
  for (let i = pool.length - 1; i >= 0; i--) {
    const b = pool[i]!;
    if (b.length >= size) {
      pool[i] = pool[pool.length - 1]!;
      pool.pop();
      return b;
    }
  }
  return Buffer.allocUnsafeSlow(Math.max(size, POOL_BUFFER));
}

function giveBack(b: Buffer): void {
  if (pool.length < POOL_MAX && b.length >= POOL_BUFFER && b.length <= 4 * POOL_BUFFER) pool.push(b);
}

/** RESP of single-member or multi-member SADDs, written straight into one (pooled) buffer. */
class SaddBuffer {
  buf: Buffer;
  p = 0;
  constructor(size: number) {
    this.buf = takeBuffer(size);
  }
  room(n: number): void {
    if (this.p + n <= this.buf.length) return;
    const b = takeBuffer(Math.max(this.buf.length * 2, this.p + n));
    this.buf.copy(b, 0, 0, this.p);
    giveBack(this.buf);
    this.buf = b;
  }
  /** Returns the buffer to the pool (after the send it was written for settled). */
  release(): void {
    giveBack(this.buf);
  }
  /** `*{2+members}\r\n$4\r\nSADD\r\n$len\r\n` + head + t + '}' + s + '.' + d + `\r\n` (a compact sub-bucket key). */
  compactKey(members: number, head: Buffer, t: number, s: number, d: number): void {
    const b = this.keyStart(members, head, head.length + digits(t) + 1 + digits(s) + 1 + digits(d));
    let p = putUint(b, this.p, t);
    b[p++] = 125; // '}'
    p = putUint(b, p, s);
    b[p++] = 46; // '.'
    p = putUint(b, p, d);
    b[p++] = 13;
    b[p++] = 10;
    this.p = p;
  }
  /** The same for a 'sets' bucket key: head + bucket. */
  setsKey(members: number, head: Buffer, bucket: number): void {
    const b = this.keyStart(members, head, head.length + digits(bucket));
    let p = putUint(b, this.p, bucket);
    b[p++] = 13;
    b[p++] = 10;
    this.p = p;
  }
  /** Makes room for a key of `len` bytes, then writes the SADD header, the key's `$len` and `head`; returns the buffer (this.p is after head). */
  private keyStart(members: number, head: Buffer, len: number): Buffer {
    this.room(len + 40);
    const b = this.buf;
    let p = this.header(this.p, members);
    b[p++] = 36;
    p = putUint(b, p, len);
    b[p++] = 13;
    b[p++] = 10;
    // a key head of a few dozen bytes copies faster in JS than through a native copy per member
    for (let i = 0; i < head.length; i++) b[p++] = head[i]!;
    this.p = p;
    return b;
  }
  private header(p: number, members: number): number {
    const b = this.buf;
    b[p++] = 42; // '*'
    p = putUint(b, p, members + 2);
    b[p++] = 13;
    b[p++] = 10;
    // $4\r\nSADD\r\n
    b[p++] = 36;
    b[p++] = 52;
    b[p++] = 13;
    b[p++] = 10;
    b[p++] = 83;
    b[p++] = 65;
    b[p++] = 68;
    b[p++] = 68;
    b[p++] = 13;
    b[p++] = 10;
    return p;
  }
  int64(dv: DataView, o: number): void {
    this.room(28);
    this.p = int64Bulk(this.buf, this.p, dv, o);
  }
  /** Room for a bulk string of `len` bytes and its `$len\r\n` head, written; where its bytes go. */
  private bulkHead(len: number): number {
    this.room(len + 16);
    const b = this.buf;
    let p = this.p;
    b[p++] = 36;
    p = putUint(b, p, len);
    b[p++] = 13;
    b[p++] = 10;
    return p;
  }
  raw(m: Member): void {
    const len = typeof m === 'string' ? Buffer.byteLength(m, 'utf8') : m.length;
    let p = this.bulkHead(len);
    const b = this.buf;
    if (typeof m === 'string') b.write(m, p, len, 'utf8');
    else b.set(m, p);
    p += len;
    b[p++] = 13;
    b[p++] = 10;
    this.p = p;
  }
  /** The bulk string of member bytes src[s, e). A key of a few dozen bytes copies faster in JS
   *  than through a native copy; a long one goes native. */
  rawBytes(src: Uint8Array, s: number, e: number): void {
    const len = e - s;
    let p = this.bulkHead(len);
    const b = this.buf;
    if (len <= 64) for (let i = s; i < e; i++) b[p++] = src[i]!;
    else {
      b.set(src.subarray(s, e), p);
      p += len;
    }
    b[p++] = 13;
    b[p++] = 10;
    this.p = p;
  }
  bytes(): Buffer {
    return this.buf.subarray(0, this.p);
  }
}

/** Sink of a chunk of single-member SADDs: reply i answers member idx[i]. */
class EachSink implements ReplySink {
  got = 0;
  constructor(
    private readonly idx: Uint32Array,
    private readonly answers: Uint8Array,
    private readonly status: Uint8Array,
    private readonly errors: Array<string | undefined>,
  ) {}
  int(i: number, v: number): void {
    const j = this.idx[i]!;
    this.answers[j] = v === 1 ? 1 : 0;
    this.status[j] = MemberStatus.Answered;
    this.got = i + 1;
  }
  error(i: number, message: string): void {
    const j = this.idx[i]!;
    if (ERR_STALE.test(message)) this.status[j] = MemberStatus.Stale;
    else if (ERR_REDIRECT.test(message)) this.status[j] = MemberStatus.Redirect;
    else {
      this.status[j] = MemberStatus.NotApplied;
      this.errors[0] ??= message;
    }
    this.got = i + 1;
  }
  value(i: number, v: RespValue): void {
    this.error(i, `SADD answered ${typeof v}`);
  }
}

/** Sink of one single-member SADD (addOne): its answer, or why there is none. */
class OneSink implements ReplySink {
  answer = 0;
  /** WRONGTYPE: the table split since its count was read; nothing was written. */
  stale = false;
  /** Any other error reply: nothing was written. */
  failure: string | undefined;
  int(_i: number, v: number): void {
    this.answer = v === 1 ? 1 : 0;
  }
  error(_i: number, message: string): void {
    if (ERR_STALE.test(message)) this.stale = true;
    else this.failure = message;
  }
  value(_i: number, v: RespValue): void {
    this.failure = `SADD answered ${typeof v}`;
  }
}

/** Sink of multi-member SADDs: reply i is the added count of group i. */
class GroupSink implements ReplySink {
  added = 0;
  readonly stale: number[] = [];
  readonly redirect: number[] = [];
  error: (i: number, message: string) => void;
  firstError: string | undefined;
  constructor() {
    this.error = (i, message) => {
      if (ERR_STALE.test(message)) this.stale.push(i);
      else if (ERR_REDIRECT.test(message)) this.redirect.push(i);
      else this.firstError ??= message;
    };
  }
  int(_i: number, v: number): void {
    this.added += v;
  }
  value(i: number): void {
    this.firstError ??= `SADD answered something other than an integer (reply ${i})`;
  }
}

export class RedisWriter {
  constructor(
    readonly router: PipeRouter,
    readonly growth: TableGrowth,
    /** SADDs per send (the dedup.maxKeysPerCommand option). */
    private readonly chunk: number,
    /** Redis's intset limit (read once per client). */
    private readonly limit: () => Promise<number>,
  ) {}

  /** The tables (or 'sets' buckets) of a source's window. */
  async tables(src: MemberSource): Promise<WindowTables> {
    const limit = await this.limit();
    this.knownLimit = limit;
    return this.growth.window(src.base, src.layout, src.buckets, limit);
  }

  /**
   * tables() without a wait once the intset limit is known: a batch whose tables are all known
   * then reaches the socket before its caller hashes its next piece, so Redis starts on it at once.
   */
  private tablesNow(src: MemberSource): WindowTables | undefined {
    const limit = this.knownLimit;
    return limit === undefined ? undefined : this.growth.window(src.base, src.layout, src.buckets, limit);
  }
  private knownLimit: number | undefined;

  /** Distinct tables of the members `idx` (or of all). */
  private touched(wt: WindowTables, src: MemberSource, idx?: Uint32Array): number[] {
    const mark = wt.marks();
    const epoch = wt.epoch;
    const out: number[] = [];
    const n = idx ? idx.length : src.count;
    const bucket = src.bucket;
    for (let i = 0; i < n; i++) {
      const t = bucket[idx ? idx[i]! : i]!;
      if (mark[t] !== epoch) {
        mark[t] = epoch;
        out.push(t);
      }
    }
    return out;
  }

  /** The route of member j's key. */
  private routeOf(wt: WindowTables, src: MemberSource, j: number): PipeRoute | undefined {
    if (!this.router.cluster) return this.router.main();
    return wt.route(src.bucket[j]!);
  }

  /**
   * One SADD per member; answers[j] = 1 when member j was added (first seen), 0 when it was there.
   * status[j] says which answers are known (MemberStatus). Never throws for a Redis failure: the
   * statuses and `error` say what happened.
   */
  async addEach(src: MemberSource, answers: Uint8Array, status: Uint8Array): Promise<EachResult> {
    const errors: Array<string | undefined> = [undefined];
    let error: unknown;
    let unknown = false;
    let wt: WindowTables;
    status.fill(MemberStatus.Pending, 0, src.count);
    const todo = identity(src.count);
    try {
      wt = this.tablesNow(src) ?? (await this.tables(src));
      const tables = wt.compact ? this.touched(wt, src) : [];
      const r = wt.read(tables);
      if (r !== undefined) await r;
      const p = wt.prepare(tables, src.count);
      if (p !== undefined) await p;
    } catch (err) {
      status.fill(MemberStatus.NotApplied, 0, src.count);
      return { added: 0, error: err, unknown: false };
    }
    let added = 0;
    const failed = (err: unknown, lost: boolean): void => {
      error ??= err;
      if (lost) unknown = true;
    };
    const held = this.holdForSplits(wt, src);
    // per member: the sub-bucket count of its table it was last sent with (compact layout)
    const placed = wt.compact ? new Uint32Array(src.count) : undefined;
    // The rounds' rarer work (members held for splits, refused as stale or redirected) lives in
    // sendEach and nextRound, which run on every round: paths first taken once the tables start
    // splitting, long after this function was compiled, then recompile only those, not this.
    let next: Uint32Array | undefined = src.count > 0 ? todo : undefined;
    for (let round = 0; next !== undefined; round++) {
      await this.sendEach(src, wt, next, answers, status, errors, failed, placed, round === 0 ? held : undefined);
      next = await this.nextRound(src, wt, next, answers, status, placed, round, failed);
    }
    for (let j = 0; j < src.count; j++) {
      const st = status[j]!;
      if (st === MemberStatus.Answered) added += answers[j]!;
      else if (st === MemberStatus.Pending) status[j] = MemberStatus.NotApplied;
    }
    if (error === undefined && errors[0] !== undefined) error = new Error(errors[0]);
    wt.added(added);
    return { added, error, unknown };
  }

  /**
   * After a round of addEach sent `todo`: redirects what a Cluster moved elsewhere, and returns the
   * members Redis refused as stale (WRONGTYPE: their table split since its count was read), to
   * go again with a fresh count; undefined when none are. Errors go to `failed`.
   */
  private async nextRound(
    src: MemberSource, wt: WindowTables, todo: Uint32Array, answers: Uint8Array, status: Uint8Array, placed: Uint32Array | undefined,
    round: number, failed: (err: unknown, lost: boolean) => void,
  ): Promise<Uint32Array | undefined> {
    const stale: number[] = [];
    const redirect: number[] = [];
    for (let i = 0; i < todo.length; i++) {
      const j = todo[i]!;
      const st = status[j]!;
      if (st === MemberStatus.Stale) stale.push(j);
      else if (st === MemberStatus.Redirect) redirect.push(j);
    }
    if (redirect.length > 0) await this.redirectEach(src, wt, redirect, answers, status, (err) => failed(err, false));
    if (stale.length === 0) return undefined;
    if (round >= MAX_STALE_ROUNDS || !wt.compact) {
      for (const j of stale) status[j] = MemberStatus.NotApplied;
      failed(new Error(`Redis kept answering WRONGTYPE for ${stale.length} members after ${round + 1} rounds (a table splitting faster than it can be read, or a key of another type at a sub-bucket's name)`), false);
      return undefined;
    }
    // sent again, so Pending again: a reply lost in the next round leaves them Unknown (written,
    // maybe applied), and nothing sends them a third time to read a 0 the lost 1 left behind
    for (const j of stale) status[j] = MemberStatus.Pending;
    try {
      // A member sent with a count this writer has since moved past (a split of its own ended
      // while the member was on the wire, behind the split on the other connection) goes again
      // with the count at hand: a count that is still behind names a tombstone, which refuses
      // the SADD again, and then the table is read. Only the other tables are read now: the
      // read was a round trip at the end of most calls that started splits.
      const behind = new Set<number>();
      for (const j of stale) {
        const t = src.bucket[j]!;
        if (placed![j]! >= wt.n[t]!) behind.add(t);
      }
      const tables = [...behind];
      for (const t of tables) wt.stale(t);
      if (tables.length > 0) await wt.read(tables, true);
    } catch (err) {
      for (const j of stale) status[j] = MemberStatus.NotApplied;
      failed(err, false);
      return undefined;
    }
    return Uint32Array.from(stale);
  }

  /**
   * addEach for a source of one member when nothing stands in its way: a standalone Redis, the
   * table's count known, no split of the table running or due. One SADD and one reply, without
   * addEach's per-write arrays and closures, settled through `done` from the reply's read (a
   * promise per layer was most of a sequential one-key caller's time after the reply came). A
   * WRONGTYPE reply (the table split since its count was read) hands the member to addEach after
   * a fresh read of that count, as addEach's own next round would. `done(undefined)`: answered;
   * `done(failure(result))`: the member got no answer. False when addEach must take the member
   * from the start; nothing was done then. `done` never runs before addOne returns.
   */
  addOne(src: MemberSource, answers: Uint8Array, status: Uint8Array, failure: (res: EachResult) => Error, done: (err: Error | undefined) => void): boolean {
    if (this.router.cluster || src.count !== 1) return false;
    const limit = this.knownLimit;
    if (limit === undefined) return false;
    const wt = this.growth.window(src.base, src.layout, src.buckets, limit);
    const t = src.bucket[0]!;
    if (!wt.knows(t)) return false;
    let w: SaddBuffer;
    if (wt.compact) {
      if (wt.splitOf(t) !== undefined) return false;
      ONE_TABLE[0] = t;
      const due = wt.prepare(ONE_TABLE, 1);
      // a split the member's table needs first: addEach waits for it (prepare() finds it running)
      if (due !== undefined) {
        const each = (): void => this.eachDone(src, answers, status, failure, done);
        due.then(each, each);
        return true;
      }
      const c = wt.n[t]!;
      const o = src.offs![0]!;
      const s = c <= 1 ? 0 : subBucketOf(addressOfHigh(src.dv!.getUint32(o + 4, true)), c);
      w = new SaddBuffer(wt.keyHead.length + 80);
      w.compactKey(1, wt.keyHead, t, s, c <= 1 ? 0 : depthOf(s, c));
      w.int64(src.dv!, o);
    } else {
      const m = src.member!(0);
      w = new SaddBuffer(wt.keyHead.length + (typeof m === 'string' ? 3 * m.length : m.length) + 64);
      w.setsKey(1, wt.keyHead, t);
      w.raw(m);
    }
    status[0] = MemberStatus.Pending;
    const sink = new OneSink();
    const route = this.router.main();
    const bytes = w.bytes();
    const pipe = route.pipe;
    route.lane.runWith(
      (ok, fail) => pipe.sendWith(bytes, 1, sink, ok, fail),
      1,
      () => {
        w.release();
        if (sink.stale) {
          wt.stale(t);
          wt.read([t], true)!.then(() => this.eachDone(src, answers, status, failure, done), (err: unknown) => {
            status[0] = MemberStatus.NotApplied;
            done(failure({ added: 0, error: err, unknown: false }));
          });
          return;
        }
        if (sink.failure !== undefined) {
          status[0] = MemberStatus.NotApplied;
          done(failure({ added: 0, error: new Error(sink.failure), unknown: false }));
          return;
        }
        const a = sink.answer;
        answers[0] = a;
        status[0] = MemberStatus.Answered;
        wt.added(a);
        done(undefined);
      },
      (err: unknown) => {
        w.release();
        // written and the reply lost (or a stall), or never sent: as addEach's sends say
        const sent = !(err instanceof NotSentError);
        status[0] = sent ? MemberStatus.Unknown : MemberStatus.NotApplied;
        done(failure({ added: 0, error: err, unknown: sent }));
      },
    );
    return true;
  }

  /** addOne's way out to addEach (a split due first, or a WRONGTYPE): its result through `done`. */
  private eachDone(src: MemberSource, answers: Uint8Array, status: Uint8Array, failure: (res: EachResult) => Error, done: (err: Error | undefined) => void): void {
    this.addEach(src, answers, status).then(
      (res) => done(res.error === undefined ? undefined : failure(res)),
      (err: unknown) => done(err instanceof Error ? err : new Error(String(err))),
    );
  }

  /**
   * Members of a table this writer is splitting right now wait for that split and go with the
   * count it returns; the others go at once. Sent meanwhile, they would land in the sub-bucket
   * being split after its DUMP (the split then has to find them with an SDIFF, 56 us a call) or
   * meet the tombstone it leaves (WRONGTYPE, a re-read of the count and a resend): about 2% of a
   * 10k-key batch's SADDs when its own count report had just started the splits. A split that
   * fails releases its members too; a count still stale then takes the WRONGTYPE path.
   */
  private holdForSplits(wt: WindowTables, src: MemberSource): HeldForSplits | undefined {
    if (!wt.compact || wt.splitsRunning === 0) return undefined;
    // the members that go now from the front, those that wait from the back: one array
    const both = new Uint32Array(src.count);
    const splits: Array<Promise<void>> = [];
    let k = 0;
    let h = src.count;
    const bucket = src.bucket;
    const mark = wt.marks();
    const epoch = wt.epoch;
    for (let j = 0; j < src.count; j++) {
      const t = bucket[j]!;
      const split = wt.splitOf(t);
      if (split === undefined) {
        both[k++] = j;
        continue;
      }
      both[--h] = j;
      if (mark[t] !== epoch) {
        mark[t] = epoch;
        splits.push(split.catch(() => undefined));
      }
    }
    if (h === src.count) return undefined;
    const later = both.subarray(h);
    // back in the members' order (the front half is)
    later.reverse();
    return { now: both.subarray(0, k), later, splits };
  }

  /**
   * Sends members `todo` in chunks per route; a chunk that fails marks its unanswered members.
   * Never rejects. Not an async function: a one-chunk write hands back its own promise. With
   * `held` (holdForSplits), sends its members instead: those of no splitting table at once, the
   * others once their splits ended (they run side by side on the control pipe), in one more send
   * rather than one per table.
   */
  private sendEach(
    src: MemberSource, wt: WindowTables, todo: Uint32Array, answers: Uint8Array, status: Uint8Array,
    errors: Array<string | undefined>, failed: (err: unknown, lost: boolean) => void, placed?: Uint32Array, held?: HeldForSplits,
  ): Promise<void> {
    if (held !== undefined) {
      return Promise.all([
        this.sendEach(src, wt, held.now, answers, status, errors, failed, placed),
        Promise.all(held.splits).then(() => this.sendEach(src, wt, held.later, answers, status, errors, failed, placed)),
      ]).then(() => undefined);
    }
    // members by route (one route on a standalone Redis)
    let byRoute: Map<PipeRoute, number[]> | undefined;
    let single: PipeRoute | undefined;
    if (!this.router.cluster) single = this.router.main();
    else {
      byRoute = new Map();
      for (let i = 0; i < todo.length; i++) {
        const j = todo[i]!;
        const r = this.routeOf(wt, src, j);
        if (r === undefined) {
          status[j] = MemberStatus.Redirect; // the Cluster client finds the owner
          continue;
        }
        let l = byRoute.get(r);
        if (l === undefined) byRoute.set(r, (l = []));
        l.push(j);
      }
    }
    // The first send needs no array; a list is made at the second, holding objects from the start
    // (an empty array pushed a promise changed its element kind, which deoptimized this path).
    let first: Promise<void> | undefined;
    let sends: Promise<void>[] | undefined;
    const each = (route: PipeRoute, list: ArrayLike<number>): void => {
      for (let s = 0; s < list.length; s += this.chunk) {
        const e = Math.min(list.length, s + this.chunk);
        // index lists are never written once made: a chunk of one is a view of it
        let idx: Uint32Array;
        if (list instanceof Uint32Array) idx = list.subarray(s, e);
        else {
          idx = new Uint32Array(e - s);
          for (let i = s; i < e; i++) idx[i - s] = list[i]!;
        }
        const sink = new EachSink(idx, answers, status, errors);
        // Encoded when the lane sends it, not here: a big batch queues most of its sends behind
        // maxInFlight, and a buffer taken per queued send (256 KiB each once the pool's 16 are
        // out) was ~1,000 fresh buffers and 6 more mark-compacts per 1M keys in 200k-key calls.
        // It also names each sub-bucket from the count as it stands when the send leaves.
        let w: SaddBuffer | undefined;
        // one then() rather than finally().catch(), and the pipe's promise itself once it is
        // connected: each promise step is a turn of the microtask queue on a one-key call's path
        const sent = route.lane.run(() => {
          w = this.encodeEach(src, wt, idx, placed);
          const bytes = w.bytes();
          return route.pipe.sendNow(bytes, idx.length, sink) ?? route.pipe.send(bytes, idx.length, sink);
        }, idx.length).then(
          () => w!.release(),
          (err: unknown) => {
            // undefined when the lane refused the send before it ran
            w?.release();
            // replies that came stand; the others were written and lost (PipeLostError, or a
            // stall: OutcomeUnknownError), or never sent (NotSentError)
            const wasSent = !(err instanceof NotSentError);
            for (let i = 0; i < idx.length; i++) {
              const j = idx[i]!;
              if (status[j] === MemberStatus.Pending) status[j] = wasSent ? MemberStatus.Unknown : MemberStatus.NotApplied;
            }
            failed(err, wasSent);
          },
        );
        if (first === undefined) first = sent;
        else if (sends === undefined) sends = [first, sent];
        else sends.push(sent);
      }
    };
    if (single !== undefined) each(single, todo);
    else for (const [route, list] of byRoute!) each(route, list);
    if (sends !== undefined) return Promise.all(sends).then(() => undefined);
    return first ?? Promise.resolve();
  }

  /** The SADDs of members idx; `placed[j]` gets the sub-bucket count member j was named with. */
  private encodeEach(src: MemberSource, wt: WindowTables, idx: Uint32Array, placed?: Uint32Array): SaddBuffer {
    const head = wt.keyHead;
    if (wt.compact) {
      // built by the kernel from four words per member (see wasm/assembly/resp.ts)
      const dv = src.dv!;
      const offs = src.offs!;
      const bucket = src.bucket;
      const n = wt.n;
      const resp = arena().compactSadds(head, idx.length, (u32, at) => {
        for (let i = 0; i < idx.length; i++) {
          const j = idx[i]!;
          const o = offs[j]!;
          const t = bucket[j]!;
          u32[at] = dv.getUint32(o, true);
          u32[at + 1] = dv.getUint32(o + 4, true);
          u32[at + 2] = t;
          const c = n[t]!;
          u32[at + 3] = c;
          if (placed !== undefined) placed[j] = c;
          at += 4;
        }
      });
      const w = new SaddBuffer(resp.length);
      w.buf.set(resp, 0);
      w.p = resp.length;
      return w;
    }
    const w = new SaddBuffer(idx.length * 128 + 64);
    for (let i = 0; i < idx.length; i++) {
      const j = idx[i]!;
      w.setsKey(1, head, src.bucket[j]!);
      w.raw(src.member!(j));
    }
    return w;
  }

  /** Key and member of member j as strings (the Cluster client's fallback). */
  private keyAndMember(src: MemberSource, wt: WindowTables, j: number): [string, string | Buffer] {
    const b = src.bucket[j]!;
    if (!wt.compact) return [`${wt.base}:${b}`, src.member!(j)];
    const o = src.offs![j]!;
    const c = wt.n[b]!;
    const s = c <= 1 ? 0 : subBucketOf(addressOfHigh(src.dv!.getUint32(o + 4, true)), c);
    return [`${wt.tablePrefix(b)}${s}.${c <= 1 ? 0 : depthOf(s, c)}`, src.dv!.getBigInt64(o, true).toString()];
  }

  /** Members a Cluster node redirected: one SADD each through the Cluster client (it follows MOVED/ASK). */
  private async redirectEach(
    src: MemberSource, wt: WindowTables, list: number[], answers: Uint8Array, status: Uint8Array, failed: (err: unknown) => void,
  ): Promise<void> {
    const client = this.router.client as Cluster;
    await Promise.all(list.map(async (j) => {
      const [key, member] = this.keyAndMember(src, wt, j);
      try {
        const r = await client.sadd(key, member);
        answers[j] = r === 1 ? 1 : 0;
        status[j] = MemberStatus.Answered;
      } catch (err) {
        const msg = (err as Error).message ?? '';
        // a tombstone: read the table's count again and send it with the rest
        if (ERR_STALE.test(msg)) status[j] = MemberStatus.Stale;
        else {
          status[j] = /^(OOM|LOADING|BUSY|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|NOREPLICAS)\b/.test(msg) ? MemberStatus.NotApplied : MemberStatus.Unknown;
          failed(err);
        }
      }
    }));
  }

  /**
   * One SADD per sub-bucket (members grouped), for writers that need only how many were new:
   * returns that count. Rejects when Redis did not take every member (the caller retries the
   * whole batch: SADD is idempotent, so re-adding what did land is harmless).
   */
  async addGrouped(src: MemberSource): Promise<number> {
    const wt = this.tablesNow(src) ?? (await this.tables(src));
    const tables = wt.compact ? this.touched(wt, src) : [];
    const r = wt.read(tables);
    if (r !== undefined) await r;
    const p = wt.prepare(tables, src.count);
    if (p !== undefined) await p;
    let todo = identity(src.count);
    let added = 0;
    for (let round = 0; ; round++) {
      const { added: a, stale, redirect, error } = await this.sendGrouped(src, wt, todo);
      added += a;
      if (error !== undefined) throw error;
      if (redirect.length > 0) {
        const client = this.router.client as Cluster;
        const byKey = new Map<string, Array<string | Buffer>>();
        for (const j of redirect) {
          const [k, m] = this.keyAndMember(src, wt, j);
          let l = byKey.get(k);
          if (l === undefined) byKey.set(k, (l = []));
          l.push(m);
        }
        for (const [k, ms] of byKey) {
          try {
            added += await client.sadd(k, ...(ms as string[]));
          } catch (err) {
            if (!ERR_STALE.test((err as Error).message ?? '')) throw err;
            stale.push(...redirect.filter((j) => this.keyAndMember(src, wt, j)[0] === k));
          }
        }
      }
      if (stale.length === 0) break;
      if (round >= MAX_STALE_ROUNDS || !wt.compact) throw new Error(`Redis kept answering WRONGTYPE for ${stale.length} members after ${round + 1} rounds`);
      todo = Uint32Array.from(stale);
      const again = this.touched(wt, src, todo);
      for (const t of again) wt.stale(t);
      await wt.read(again, true);
    }
    wt.added(added);
    return added;
  }

  private async sendGrouped(src: MemberSource, wt: WindowTables, todo: Uint32Array): Promise<{ added: number; stale: number[]; redirect: number[]; error: unknown }> {
    const compact = wt.compact;
    // members of one sub-bucket made adjacent: sorted by slot = bucket * S + sub-bucket
    // (S = most sub-buckets of a touched table), the index packed below the slot in one double
    // while both fit in 53 bits (one Float64Array sort, no comparator call per member)
    const m = todo.length;
    const subOf = new Uint32Array(m);
    let S = 1;
    for (let i = 0; i < m; i++) {
      const j = todo[i]!;
      if (compact) {
        const t = src.bucket[j]!;
        const c = wt.n[t]!;
        if (c > S) S = c;
        subOf[i] = c <= 1 ? 0 : subBucketOf(addressOfHigh(src.dv!.getUint32(src.offs![j]! + 4, true)), c);
      }
    }
    const order = new Uint32Array(m);
    const slot = (i: number): number => src.bucket[todo[i]!]! * S + subOf[i]!;
    let sorted = true;
    for (let i = 1; i < m && sorted; i++) sorted = slot(i - 1) <= slot(i);
    let span = 1;
    while (span < m) span *= 2;
    // a loader's batch of one bucket (as many buckets as buffers) is in order already
    if (sorted) for (let i = 0; i < m; i++) order[i] = i;
    else if (wt.T * S * span <= 2 ** 53) {
      const keyOf = new Float64Array(m);
      for (let i = 0; i < m; i++) keyOf[i] = slot(i) * span + i;
      keyOf.sort();
      for (let i = 0; i < m; i++) order[i] = keyOf[i]! % span;
    } else {
      for (let i = 0; i < m; i++) order[i] = i;
      order.sort((a, b) => slot(a) - slot(b) || a - b);
    }
    // groups: [start, end) runs of the same (bucket, sub-bucket), in sorted order
    const byRoute = new Map<PipeRoute, Array<[number, number]>>();
    const redirect: number[] = [];
    let single: PipeRoute | undefined = this.router.cluster ? undefined : this.router.main();
    for (let a = 0; a < m; ) {
      const i0 = order[a]!;
      const t = src.bucket[todo[i0]!]!;
      const s = subOf[i0]!;
      let b = a + 1;
      while (b < m && src.bucket[todo[order[b]!]!] === t && subOf[order[b]!] === s) b++;
      const route = single ?? this.routeOf(wt, src, todo[i0]!);
      if (route === undefined) {
        for (let k = a; k < b; k++) redirect.push(todo[order[k]!]!);
      } else {
        let l = byRoute.get(route);
        if (l === undefined) byRoute.set(route, (l = []));
        l.push([a, b]);
      }
      a = b;
    }
    let added = 0;
    let error: unknown;
    const stale: number[] = [];
    const sends: Promise<void>[] = [];
    for (const [route, groups] of byRoute) {
      // sends of up to `chunk` members (a big group gets a send of its own)
      for (let g = 0; g < groups.length; ) {
        let rows = 0;
        const first = g;
        while (g < groups.length && (g === first || rows + groups[g]![1] - groups[g]![0] <= this.chunk)) {
          rows += groups[g]![1] - groups[g]![0];
          g++;
        }
        const part = groups.slice(first, g);
        const w = new SaddBuffer(rows * 32 + part.length * 80 + 64);
        for (const [a, b] of part) {
          const i0 = order[a]!;
          const t = src.bucket[todo[i0]!]!;
          if (compact) {
            const c = wt.n[t]!;
            const s = subOf[i0]!;
            w.compactKey(b - a, wt.keyHead, t, s, c <= 1 ? 0 : depthOf(s, c));
            for (let k = a; k < b; k++) w.int64(src.dv!, src.offs![todo[order[k]!]!]!);
          } else {
            w.setsKey(b - a, wt.keyHead, t);
            const mb = src.bytes;
            if (mb !== undefined) {
              const offs = src.offs!;
              for (let k = a; k < b; k++) {
                const j = todo[order[k]!]!;
                w.rawBytes(mb, offs[j]!, offs[j + 1]!);
              }
            } else for (let k = a; k < b; k++) w.raw(src.member!(todo[order[k]!]!));
          }
        }
        const sink = new GroupSink();
        const bytes = w.bytes();
        sends.push(
          route.lane.run(() => route.pipe.send(bytes, part.length, sink), rows).finally(() => w.release()).then(
            () => {
              added += sink.added;
              if (sink.firstError !== undefined) error ??= new Error(sink.firstError);
              for (const gi of sink.stale) for (let k = part[gi]![0]; k < part[gi]![1]; k++) stale.push(todo[order[k]!]!);
              for (const gi of sink.redirect) for (let k = part[gi]![0]; k < part[gi]![1]; k++) redirect.push(todo[order[k]!]!);
            },
            (err: unknown) => {
              error ??= err;
            },
          ),
        );
      }
    }
    await Promise.all(sends);
    return { added, stale, redirect, error };
  }
}
