// The compact layout's tables as a writer sees them: each table's sub-bucket count (cached, refreshed when Redis says it is stale), the window count that times splits, and the splits themselves (rules in growth.ts).
import type { Cluster, Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { isCluster, type RedisClient } from '../redis/client.js';
import { IntsetSlice, lowerBound, readIntsetDump, type IntsetDump } from '../redis/dump.js';
import { PipeReplyError, encodeCommand, encodeCommands, type CommandArgs, type ReplySink, type RespValue } from '../redis/pipe.js';
import type { PipeRoute, PipeRouter } from '../redis/pipes.js';
import { LuaScript, runScript } from '../redis/scripts.js';
import {
  DEFAULT_INTSET_LIMIT,
  MAX_SUB_BUCKETS, SEALS_LUA, SPLIT_LUA, crossings, pow2le, splitBoundary, splitLoad, subBucketName, tablePrefix, tableStateKey,
  targetSubBuckets, windowCountKey,
} from './growth.js';

export const SPLIT = new LuaScript(SPLIT_LUA);
export const SEALS = new LuaScript(SEALS_LUA);

/**
 * Members a writer adds before it reports them to the window count (or FLUSH_MS after the first):
 * T x alpha / 128, within [MIN, MAX]. Members not reported yet land in tables that have not split
 * for them; spread over T tables that is at most alpha/128 a table per writer (above MIN), so 50 writers
 * together stay inside the headroom the schedule leaves (a table's fullest sub-buckets reach about
 * 2 alpha plus three standard deviations before it splits, and the intset limit is alpha / 0.3).
 * Each report costs an INCRBY and the splits its reply starts, each in writes of their own on the
 * control connection: fewer, bigger reports batch those splits.
 */
const FLUSH_KEYS_MIN = 256;
const FLUSH_KEYS_MAX = 1024;
const FLUSH_MS = 20;
/** Members of a report for a window of T tables of average load alpha. */
export const flushKeysFor = (T: number, alpha: number): number => Math.min(FLUSH_KEYS_MAX, Math.max(FLUSH_KEYS_MIN, Math.floor((T * alpha) / 128)));
/**
 * Tables of one window split at once in the background. Redis runs every command it read from a
 * connection in one turn before it serves the next client: a round's DUMPs (tens of us each) and
 * its seals (about as much with their RESTOREs) keep another client of a shared Redis waiting a
 * few ms at most.
 */
const ROUND_TABLES = 128;
/**
 * Of those, tables split one by one (splitTo: a Cluster, a count not read yet, a table already
 * splitting): each SPLIT call costs about 0.1-0.2 ms, so this many bound the wait to a few ms too.
 */
const SPLITS_IN_FLIGHT = 32;
/**
 * Seals of a round in one SEALS call. A seal whose RESTOREs were refused moves its sub-bucket's
 * members itself (about 0.6 us a member, some 0.2 ms for 300): 32 bound such a call to about 6 ms.
 */
const SEALS_PER_CALL = 32;
/**
 * Most empty sub-buckets one SPLIT call turns into tombstones (about 1.3 us each): 128 keeps a call
 * near the cost of a split that moves members. At 1,024 a call took 1.4 ms and 32 of them in one
 * turn made a client of the same Redis wait 70 ms while a load sized its window.
 */
const EMPTY_SPLITS_PER_CALL = 128;
/** A batch that would fill a table's fullest sub-buckets past this share of the intset limit splits the table first. */
const OVERFILL = 0.9;
/** A batch bringing each table this share of alpha on average splits its tables to the schedule first. */
const BIG_BATCH = 0.25;
/** Windows of up to this many tables have every table's count read at their first use. */
const READ_ALL_MAX = 65_536;
/** Windows whose tables a writer keeps (a year rolls over into the next: two are live at once). */
const MAX_WINDOWS = 4;

/** An error reply saying the command is renamed away, disabled or denied (not a failure of Redis). */
const REFUSED = /NOPERM|unknown command|Unknown Redis command|disabled command|can't run this command/;
const refusedCommand = (err: unknown): boolean => REFUSED.test((err as Error)?.message ?? '');

const limits = new WeakMap<object, Promise<number>>();

/**
 * Redis's `set-max-intset-entries` (on a Cluster, of its first master), read once per client.
 * 512, Redis's default, when CONFIG is refused (managed Redis services often rename it).
 */
export function intsetLimitOf(redis: RedisClient): Promise<number> {
  let p = limits.get(redis);
  if (p === undefined) {
    p = (async () => {
      try {
        const node = isCluster(redis) ? (redis as Cluster).nodes('master')[0] : (redis as Redis);
        const r = (await node?.config('GET', 'set-max-intset-entries')) as string[] | undefined;
        const v = Number(r?.[1]);
        return Number.isInteger(v) && v > 0 ? v : DEFAULT_INTSET_LIMIT;
      } catch {
        return DEFAULT_INTSET_LIMIT;
      }
    })();
    limits.set(redis, p);
  }
  return p;
}

type Command = CommandArgs;

/**
 * The RESTOREs of one split of the table whose prefix is `tp` and which has `n` sub-buckets, from
 * the DUMP of the sub-bucket that splits: one for each half that has members, pushed onto `cmds`.
 */
function pushRestores(cmds: Command[], tp: string, n: number, dump: IntsetDump, boundary: bigint): void {
  const l2 = pow2le(n);
  const d = Math.log2(l2);
  const p = n - l2;
  const k = lowerBound(dump, Number(BigInt.asIntN(32, boundary >> 32n)), Number(BigInt.asUintN(32, boundary)));
  if (k > 0) cmds.push(['RESTORE', subBucketName(tp, p, d + 1), '0', new IntsetSlice(dump, 0, k)]);
  if (k < dump.count) cmds.push(['RESTORE', subBucketName(tp, p + l2, d + 1), '0', new IntsetSlice(dump, k, dump.count)]);
}

/**
 * The commands of one split (as pushRestores says), then its seal (the last), which moves what
 * the halves lack.
 */
function splitCommands(tp: string, n: number, dump: IntsetDump, boundary: bigint): Command[] {
  const cmds: Command[] = [];
  pushRestores(cmds, tp, n, dump, boundary);
  cmds.push(['EVALSHA', SPLIT.sha, '1', tableStateKey(tp), tp, String(n), 'seal', boundary.toString()]);
  return cmds;
}

/** The replies of one send of several commands, error replies apart. */
class ManyReplies implements ReplySink {
  // filled ahead with values of every kind they will hold (integers, buffers, strings), so no
  // reply turns them into arrays of another kind under the reply parser's compiled code
  readonly vals: RespValue[];
  readonly errs: Array<string | undefined>;
  constructor(
    readonly views: boolean,
    count: number,
  ) {
    this.vals = new Array<RespValue>(count).fill(null);
    this.errs = new Array<string | undefined>(count).fill(undefined);
  }
  int(i: number, v: number): void {
    this.vals[i] = v;
  }
  error(i: number, m: string): void {
    this.errs[i] = m;
  }
  value(i: number, v: RespValue): void {
    this.vals[i] = v;
  }
}

/** Replies of a send of GETs / one MGET, read as sub-bucket counts (nil = 1). */
class CountsSink implements ReplySink {
  err: string | undefined;
  constructor(
    readonly out: Int32Array,
    readonly tables: ArrayLike<number>,
    readonly mget: boolean,
  ) {}
  int(): void {
    this.err ??= 'a state read returned an integer';
  }
  error(_i: number, m: string): void {
    this.err ??= m;
  }
  value(i: number, v: RespValue): void {
    if (this.mget) {
      if (!Array.isArray(v)) {
        this.err ??= 'MGET returned no array';
        return;
      }
      for (let k = 0; k < v.length; k++) this.set(k, v[k] ?? null);
    } else this.set(i, v);
  }
  private set(k: number, v: RespValue): void {
    const n = v === null ? 1 : Number(Buffer.isBuffer(v) ? v.toString('latin1') : v);
    const t = this.tables[k]!;
    // counts only grow: a read older than one already taken never lowers the cache
    if (Number.isInteger(n) && n >= 1 && n > this.out[t]!) this.out[t] = n;
  }
}

/**
 * One window's tables (of one layout): cached sub-bucket counts and the window count. A 'sets'
 * window has buckets that never split; only its count is kept.
 */
export class WindowTables {
  /** Sub-bucket count per table as last read (0: not read yet). */
  readonly n: Int32Array;
  /** The window count as last read or returned by our INCRBY. */
  count = 0;
  countKnown = false;
  /** Members added and not yet reported to the window count. */
  pending = 0;
  /** Pending members that make a report at once (flushKeysFor). */
  private readonly flushKeys: number;
  private flushing = false;
  private timer: NodeJS.Timeout | undefined;
  /** Background splits: table -> target, and the tables being split now. */
  private readonly wanted = new Map<number, number>();
  private readonly running = new Map<number, Promise<void>>();
  private readonly slotOf: Int32Array | undefined;
  /** 1 while this writer splits table t (the key of `splitting`, read per member by writers). */
  private readonly busy: Uint8Array;
  /** Key prefix up to the table number ("{base}:c{" compact, "{base}:" sets), for writers that build keys themselves. */
  readonly keyHead: Buffer;
  readonly countKey: string;
  readonly compact: boolean;
  /** First error of a background split or count report since the last look (for diagnostics). */
  lastError: unknown;

  constructor(
    private readonly growth: TableGrowth,
    /** `${prefix}:${window}`: every key of the window starts with it. */
    readonly base: string,
    readonly layout: 'compact' | 'sets',
    readonly T: number,
    readonly alpha: number,
    readonly limit: number,
  ) {
    this.compact = layout === 'compact';
    this.n = new Int32Array(this.compact ? T : 0);
    this.busy = new Uint8Array(this.compact ? T : 0);
    this.slotOf = growth.router.cluster ? new Int32Array(T).fill(-1) : undefined;
    this.keyHead = Buffer.from(this.compact ? `${base}:c{` : `${base}:`, 'latin1');
    this.countKey = windowCountKey(base, layout);
    this.flushKeys = flushKeysFor(T, alpha);
  }

  tablePrefix(t: number): string {
    return tablePrefix(this.base, t);
  }

  private mark: Uint32Array | undefined;
  /** Stamp of the current marks() pass. */
  epoch = 0;
  /** A per-table stamp array for finding a batch's distinct tables without a Set; advances epoch. */
  marks(): Uint32Array {
    this.mark ??= new Uint32Array(this.T);
    if (++this.epoch === 0xffff_ffff) {
      this.mark.fill(0);
      this.epoch = 1;
    }
    return this.mark;
  }

  /** Cluster slot of table (or 'sets' bucket) t's keys. */
  slot(t: number): number {
    const s = this.slotOf;
    if (s === undefined) return 0;
    let v = s[t]!;
    if (v < 0) s[t] = v = calculateSlot(this.compact ? `{${t}}` : `${this.base}:${t}`);
    return v;
  }

  /** The route of table t's keys (undefined: a Cluster whose slot map does not know the slot). */
  route(t: number): PipeRoute | undefined {
    return this.growth.router.forSlot(this.slot(t));
  }

  /**
   * Reads the sub-bucket counts of `tables` (with `fresh`, also those already known: a writer was
   * told its count is stale). Rejects when Redis cannot answer.
   */
  read(tables: ArrayLike<number>, fresh = false): Promise<void> | undefined {
    if (!fresh && this.countKnown && (this.allRead || !this.compact)) {
      // nothing to read unless a table is still unknown (a window past READ_ALL_MAX tables)
      if (!this.compact || this.T <= READ_ALL_MAX) return undefined;
      let unknown = false;
      for (let i = 0; i < tables.length && !unknown; i++) unknown = this.n[tables[i]!] === 0;
      if (!unknown) return undefined;
    }
    return this.readNow(tables, fresh);
  }

  /**
   * Whether table t's sub-bucket count is known and read([t]) has nothing to read: a one-member
   * writer then sends at once (a window of more than READ_ALL_MAX tables always goes through read).
   */
  knows(t: number): boolean {
    return this.countKnown && (!this.compact || (this.allRead && this.n[t] !== 0));
  }

  private async readNow(tables: ArrayLike<number>, fresh: boolean): Promise<void> {
    if (!this.compact) {
      if (!this.countKnown) await this.readCount();
      return;
    }
    const want: number[] = [];
    if (!fresh && !this.allRead && this.T <= READ_ALL_MAX) {
      // a window of up to READ_ALL_MAX tables is read whole at its first use: one MGET, and no
      // later batch waits on a read
      for (let t = 0; t < this.T; t++) if (this.n[t] === 0) want.push(t);
    } else {
      for (let i = 0; i < tables.length; i++) {
        const t = tables[i]!;
        if (fresh || this.n[t] === 0) want.push(t);
      }
    }
    if (want.length === 0) {
      if (!this.countKnown) await this.readCount();
      return;
    }
    const sends: Promise<void>[] = [];
    if (this.growth.router.cluster) {
      // tables live in many slots: GETs through the Cluster client, which follows redirections
      const client = this.growth.router.client as Cluster;
      for (let s0 = 0; s0 < want.length; s0 += 4096) {
        const part = want.slice(s0, s0 + 4096);
        sends.push(Promise.all(part.map((t) => client.get(tableStateKey(this.tablePrefix(t))))).then((vals) => {
          const sink = new CountsSink(this.n, part, true);
          sink.value(0, vals.map((v) => (v === null ? null : Buffer.from(v))));
        }));
      }
    } else {
      const route = this.growth.router.control();
      for (let s0 = 0; s0 < want.length; s0 += 4096) {
        const part = want.slice(s0, s0 + 4096);
        const bytes = encodeCommand(['MGET', ...part.map((t) => tableStateKey(this.tablePrefix(t)))]);
        const sink = new CountsSink(this.n, part, true);
        sends.push(route.lane.run(() => route.pipe.send(bytes, 1, sink)).then(() => {
          if (sink.err !== undefined) throw new PipeReplyError(sink.err);
        }));
      }
    }
    await Promise.all(sends);
    if (!fresh && this.T <= READ_ALL_MAX) this.allRead = true;
    if (!this.countKnown) await this.readCount();
  }
  private allRead = false;

  private async readCount(): Promise<void> {
    const v = await this.growth.command(this.countKey, ['GET', this.countKey]);
    const k = v === null ? 0 : Number(Buffer.isBuffer(v) ? v.toString('latin1') : v);
    if (Number.isFinite(k) && k > this.count) this.count = k;
    this.countKnown = true;
  }

  /**
   * Before a batch of `c` members to `tables`: splits (and waits for) the tables the batch would
   * take past their schedule before any writer could split them. A batch that brings a table a
   * good part of a sub-bucket's members (BIG_BATCH of alpha on average) is written into tables
   * already split for the window count after it; any batch whose members would fill a table's
   * fullest sub-buckets near the intset limit (OVERFILL, with three standard deviations of
   * Poisson spread) does the same. Small batches rely on the schedule's headroom. Resolves once
   * the splits are done or failed (a failed one is kept in lastError).
   */
  prepare(tables: ArrayLike<number>, c: number): Promise<void> | undefined {
    if (!this.compact) return undefined;
    const expected = this.count + this.pending + c;
    const perTable = expected / this.T;
    const big = c / this.T >= BIG_BATCH * this.alpha;
    const splits: Promise<void>[] = [];
    for (let i = 0; i < tables.length; i++) {
      const t = tables[i]!;
      const n = this.n[t]!;
      const target = targetSubBuckets(t, expected, this.T, this.alpha);
      // the fullest sub-buckets are the pow2le(n) not split yet at the table's level. Worked out
      // for every table, behind its target or not: the code a batch runs then stays the same when
      // tables start to fall behind, long after it was compiled (new code there forced a
      // recompile of the whole write path).
      const mean = perTable / pow2le(n);
      // A split that fails does not fail the batch: its members still go, exactly, to the
      // sub-buckets as they are (one may outgrow the intset limit: memory, which bucketFill
      // reports, not a wrong or fail-open answer); the table splits at its next chance.
      const full = mean + 3 * Math.sqrt(mean) > OVERFILL * this.limit;
      if (n < target && (big || full)) {
        splits.push(this.splitTo(t, target).catch((err: unknown) => {
          this.lastError = err;
        }));
      }
    }
    return splits.length === 0 ? undefined : Promise.all(splits).then(() => undefined);
  }

  /** Reports `added` new members to the window count (batched; see flushKeysFor). */
  added(added: number): void {
    if (added <= 0) return;
    this.pending += added;
    if (this.pending >= this.flushKeys) void this.flush();
    else this.arm();
  }

  private arm(): void {
    if (this.timer !== undefined || this.disposed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, FLUSH_MS);
    this.timer.unref();
  }

  /** Sends the pending count now (one INCRBY in flight per window); splits what its reply says. */
  flush(): Promise<void> {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.flushing || this.pending === 0 || this.disposed) return this.flushDone ?? Promise.resolve();
    const delta = this.pending;
    this.pending = 0;
    this.flushing = true;
    const run = (async () => {
      let ok = false;
      try {
        const v = await this.growth.command(this.countKey, ['INCRBY', this.countKey, String(delta)]);
        const k = Number(v);
        const before = k - delta;
        if (k > this.count) this.count = k;
        this.countKnown = true;
        ok = true;
        if (this.compact) {
          crossings(before, k, this.T, this.alpha, (t, target) => this.want(t, target));
          this.pump();
        }
      } catch (err) {
        // not counted yet: the next report (a timer's, not at once) carries it
        this.pending += delta;
        this.lastError = err;
      } finally {
        this.flushing = false;
        this.flushDone = undefined;
        if (!this.disposed && this.pending > 0) {
          if (ok && this.pending >= this.flushKeys) void this.flush();
          else this.arm();
        }
      }
    })();
    this.flushDone = run;
    return run;
  }
  private flushDone: Promise<void> | undefined;

  /** Schedules a background split of table t to `target` sub-buckets (started by the next pump()). */
  private want(t: number, target: number): void {
    if ((this.wanted.get(t) ?? 0) >= target || this.n[t]! >= target) return;
    this.wanted.set(t, target);
  }

  /**
   * Starts the wanted splits, up to ROUND_TABLES tables at once. On a standalone Redis, those of
   * tables whose count is known and which no split of this writer holds go together in one round
   * (splitRound); the others each through splitTo, up to SPLITS_IN_FLIGHT of them.
   */
  private pump(): void {
    if (this.disposed) return;
    const rounds = !this.growth.router.cluster && this.growth.dumpAllowed;
    let round: Array<[number, number]> | undefined;
    let single = this.running.size - this.inRounds;
    for (const [t, target] of this.wanted) {
      if (this.running.size + (round?.length ?? 0) >= ROUND_TABLES) break;
      if (this.running.has(t)) continue;
      const together = rounds && this.n[t] !== 0 && !this.splitting.has(t);
      // no room for one more split on its own: it stays wanted until a split ends
      if (!together && single >= SPLITS_IN_FLIGHT) continue;
      this.wanted.delete(t);
      if (this.n[t]! >= target) continue;
      if (together) {
        (round ??= []).push([t, target]);
        continue;
      }
      single++;
      this.track(t, this.splitTo(t, target));
    }
    if (round === undefined) return;
    if (round.length === 1) {
      this.track(round[0]![0], this.splitTo(round[0]![0], round[0]![1]));
      return;
    }
    const p = this.splitRound(round);
    this.inRounds += round.length;
    for (const [t] of round) {
      this.splitting.set(t, p);
      this.busy[t] = 1;
    }
    for (const [t] of round) {
      this.track(t, p.finally(() => {
        this.inRounds--;
        if (this.splitting.get(t) === p) {
          this.splitting.delete(t);
          this.busy[t] = 0;
        }
      }));
    }
  }
  /** Tables of `running` that are in a round. */
  private inRounds = 0;

  /** Counts background split `p` of table t as running until it settled; a failure goes to lastError. */
  private track(t: number, p: Promise<void>): void {
    const q = p.catch((err: unknown) => {
      this.lastError = err;
      // tried again at the table's next threshold, or by a writer that finds it overfull
    });
    this.running.set(t, q);
    void q.finally(() => {
      this.running.delete(t);
      // once for all the tables of a round that ended together: they make room for the next round
      if (this.pumpQueued) return;
      this.pumpQueued = true;
      queueMicrotask(() => {
        this.pumpQueued = false;
        this.pump();
      });
    });
  }
  private pumpQueued = false;

  /**
   * One split of each table in `round` (standalone Redis, counts known): the DUMPs of all their
   * next sub-buckets in one send, then every RESTORE and seal in one more. A window that grows
   * without sizing splits a few tables at every count report, thousands of times per million
   * members: two sends a round in place of two round trips a table. Whatever a round does not
   * finish (a table that needs more than one split, an empty or non-intset sub-bucket, a refused
   * command, a lost reply) goes on table by table through split(), which handles each of those.
   * Never rejects before each table was tried; the first error goes to the caller.
   */
  private async splitRound(round: ReadonlyArray<[number, number]>): Promise<void> {
    // built by push, as the split commands are: a list of another elements kind (map() makes
    // holey arrays) deoptimized the compiled encoder once
    const dumpCmds: Command[] = [];
    const ns: number[] = [];
    for (const [t] of round) {
      const n = this.n[t]!;
      const l2 = pow2le(n);
      ns.push(n);
      dumpCmds.push(['DUMP', subBucketName(this.tablePrefix(t), n - l2, Math.log2(l2))]);
    }
    const rest: Array<[number, number]> = [];
    let dumps: ManyReplies | undefined;
    try {
      // On the pipe the members go by, behind what was sent before this round began: those are
      // in the DUMPs, and later batches hold the members of these tables until the round ended
      // (holdForSplits). Sent on the control pipe, the DUMPs overtook a batch on its way about
      // once in four splits, and each such seal had to find the members its halves lacked.
      dumps = await this.growth.each(dumpCmds, true, this.growth.router.main());
    } catch {
      // the round gave up before it sent anything that splits: each table alone
    }
    const cmds: Command[] = [];
    // the tables whose halves go now (index in round, prefix, count, boundary), sealed after them
    const sealing: Array<[number, string, number, bigint]> = [];
    for (let i = 0; i < round.length; i++) {
      const v = dumps?.vals[i];
      const dump = dumps?.errs[i] === undefined && Buffer.isBuffer(v) ? readIntsetDump(v) : undefined;
      if (dump === undefined) continue;
      const n = ns[i]!;
      const l2 = pow2le(n);
      const tp = this.tablePrefix(round[i]![0]);
      const b = splitBoundary(n - l2, Math.log2(l2));
      pushRestores(cmds, tp, n, dump, b);
      sealing.push([i, tp, n, b]);
    }
    // per table of the round: the index in cmds of the SEALS call that seals it (-1: left to
    // split()), and its place in that call's reply
    const seals = new Array<number>(round.length).fill(-1);
    const at = new Array<number>(round.length).fill(0);
    for (let c = 0; c < sealing.length; c += SEALS_PER_CALL) {
      const e = Math.min(sealing.length, c + SEALS_PER_CALL);
      const call: string[] = ['EVALSHA', SEALS.sha, String(e - c)];
      for (let k = c; k < e; k++) call.push(tableStateKey(sealing[k]![1]));
      for (let k = c; k < e; k++) {
        const [i, tp, n, b] = sealing[k]!;
        call.push(tp, String(n), b.toString());
        seals[i] = cmds.length;
        at[i] = k - c;
      }
      cmds.push(call);
    }
    let res: ManyReplies | undefined;
    if (cmds.length > 0) {
      try {
        res = await this.growth.splitEach(cmds);
      } catch (err) {
        // sent and lost, or never sent: the seals check the state they were given, so each table
        // alone reads where it stands and goes on from there
        this.lastError = err;
      }
    }
    for (let i = 0; i < round.length; i++) {
      const [t, target] = round[i]!;
      const j = seals[i]!;
      const v = j >= 0 && res !== undefined && res.errs[j] === undefined ? res.vals[j] : undefined;
      const r = Array.isArray(v) ? v[at[i]!] : undefined;
      if (typeof r === 'number' && r > this.n[t]!) this.n[t] = r;
      if (this.n[t]! < target) rest.push([t, target]);
    }
    if (rest.length === 0) return;
    let first: unknown;
    await Promise.all(rest.map(([t, target]) => this.split(t, target).catch((err: unknown) => {
      first ??= err;
    })));
    if (first !== undefined) throw first;
  }

  /** Waits for the background splits and the count report (close, tests). */
  async settle(): Promise<void> {
    await this.flush();
    while (!this.disposed && (this.running.size > 0 || this.wanted.size > 0)) {
      this.pump();
      await Promise.all(this.running.values());
    }
  }

  /** Splits of this writer in progress, per table: one at a time per table, the others wait for it. */
  private readonly splitting = new Map<number, Promise<void>>();

  /** Tables this writer is splitting now. */
  get splitsRunning(): number {
    return this.splitting.size;
  }

  /** The split of table t this writer is running (settles when it ended, done or failed), if any. */
  splitOf(t: number): Promise<void> | undefined {
    // a byte per table: batches written while splits run ask this for every member
    return this.busy[t] === 1 ? this.splitting.get(t) : undefined;
  }

  /** Splits table t until it has at least `target` sub-buckets (more when another writer split it further). */
  async splitTo(t: number, target: number): Promise<void> {
    target = Math.min(target, MAX_SUB_BUCKETS);
    for (;;) {
      const running = this.splitting.get(t);
      if (running === undefined) break;
      await running.catch(() => undefined);
      if (this.n[t]! >= target) return;
    }
    if (this.n[t]! >= target) return;
    const p = this.split(t, target);
    this.splitting.set(t, p);
    this.busy[t] = 1;
    try {
      await p;
    } finally {
      if (this.splitting.get(t) === p) {
        this.splitting.delete(t);
        this.busy[t] = 0;
      }
    }
  }

  private async split(t: number, target: number): Promise<void> {
    if (this.n[t] === 0) await this.read([t]);
    const tp = this.tablePrefix(t);
    const sk = tableStateKey(tp);
    let idle = 0;
    // the last call turned its whole budget of empty sub-buckets into tombstones: the next one is
    // most likely empty too (a table sized before its first write), so skip its DUMP; the script
    // checks that it does not exist, and a call that finds it does changes nothing
    let emptyRun = false;
    while (this.n[t]! < target) {
      const n = this.n[t]!;
      const l2 = pow2le(n);
      const d = Math.log2(l2);
      const p = n - l2;
      // the sub-bucket that splits next is p, still at depth d
      const src = subBucketName(tp, p, d);
      const b = splitBoundary(p, d);
      let r: number;
      if (!this.growth.dumpAllowed) {
        r = await this.growth.split(sk, [tp, String(n), 'scan', b.toString()]);
        if (r > this.n[t]!) this.n[t] = r;
        else if (r <= n && ++idle > 8) throw new Error(`table ${t} did not split after ${idle} attempts`);
        continue;
      }
      let payload: RespValue = null;
      if (!emptyRun) {
        try {
          // a view of the read it came in: cut into the split's command below, then dropped
          payload = await this.growth.command(src, ['DUMP', src], true);
        } catch (err) {
          if (!refusedCommand(err)) throw err;
          // a managed Redis that renames or ACL-blocks DUMP: the script moves members itself
          this.growth.dumpAllowed = false;
          continue;
        }
      }
      if (payload === null) {
        r = await this.growth.split(sk, [tp, String(n), 'empty', String(target), String(EMPTY_SPLITS_PER_CALL)]);
        emptyRun = r === n + EMPTY_SPLITS_PER_CALL;
      } else {
        const dump = Buffer.isBuffer(payload) ? readIntsetDump(payload) : undefined;
        r = dump !== undefined
          ? await this.growth.seal(splitCommands(tp, n, dump, b))
          : await this.growth.split(sk, [tp, String(n), 'scan', b.toString()]);
      }
      if (r > this.n[t]!) this.n[t] = r;
      else if (r < n) throw new Error(`table ${t} reports ${r} sub-buckets, fewer than the ${n} read before`);
      // no progress (the sub-bucket an empty run skipped the DUMP of exists): a few more rounds at most
      if (r <= n && ++idle > 8) throw new Error(`table ${t} did not split after ${idle} attempts`);
    }
  }

  /** Forgets the cached count of table t (a writer found its sub-bucket gone). */
  stale(t: number): void {
    this.n[t] = 0;
  }

  /** Forgets every table's cached count: the next use reads them all again. */
  staleAll(): void {
    this.n.fill(0);
    this.allRead = false;
  }

  /** Set by dispose(): no more reports or splits. */
  private disposed = false;

  dispose(): void {
    this.disposed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.wanted.clear();
  }
}

/** The tables of every window a store, loader or replay writes, over one router. */
export class TableGrowth {
  private readonly windows = new Map<string, WindowTables>();
  private readonly connectionLost = (): void => this.staleAll();

  constructor(readonly router: PipeRouter) {
    // Whole-client close only, not per Cluster node: a master that is down would then fail the
    // count reads of every table, not only its own.
    router.client.on('close', this.connectionLost);
  }

  /**
   * False once Redis refused DUMP or RESTORE (renamed away or denied by an ACL, as some managed
   * services do): splits then run the script that moves the members itself (slower, same result).
   */
  dumpAllowed = true;

  /**
   * The tables of the window under `base` (`${prefix}:${window}`) in `layout`, T tables (buckets),
   * made on first use; `limit` = the server's intset limit.
   */
  window(base: string, layout: 'compact' | 'sets', T: number, limit: number): WindowTables {
    const last = this.last;
    if (last !== undefined && last.base === base && last.layout === layout && last.T === T) return last;
    const key = `${base}\u0000${layout}\u0000${T}`;
    let w = this.windows.get(key);
    if (w === undefined) {
      if (this.windows.size >= MAX_WINDOWS) {
        const [oldest, ow] = this.windows.entries().next().value as [string, WindowTables];
        void ow.flush();
        ow.dispose();
        this.windows.delete(oldest);
        if (this.last === ow) this.last = undefined;
      }
      w = new WindowTables(this, base, layout, T, splitLoad(limit), limit);
      this.windows.set(key, w);
      // the split scripts are loaded with the window's first use rather than its first round:
      // their source is the one long argument the pipe ever writes, and met first deep into a
      // run, its unused path cost the compiled command writer a deoptimization
      if (layout === 'compact' && !this.router.cluster) this.loadSplit(this.router.control());
    }
    this.last = w;
    return w;
  }
  /** The tables asked for last (a service writes one window for a year). */
  private last: WindowTables | undefined;

  /**
   * Forgets every window's cached sub-bucket counts. A server that comes back after a lost
   * connection may hold less than it told us (restarted from older persistence, or a replica
   * promoted before it had the last splits): a count cached from before would name sub-buckets
   * its state does not lead to, and other instances, reading that state, would not find the
   * members written there.
   */
  staleAll(): void {
    for (const w of this.windows.values()) w.staleAll();
  }

  /** Forgets a window's tables (after a purge: a new window of that name starts from one sub-bucket). */
  forget(base: string): void {
    if (this.last?.base === base) this.last = undefined;
    for (const [k, w] of this.windows) {
      if (w.base !== base) continue;
      w.dispose();
      this.windows.delete(k);
    }
  }

  /**
   * One command about `key`: over the pipe of a standalone Redis; on a Cluster through the Cluster
   * client, which routes it by its key and follows redirections (these commands are few).
   */
  async command(key: string, args: Array<string | Buffer>, views = false): Promise<RespValue> {
    if (this.router.cluster) {
      const [cmd, ...rest] = args as [string, ...Array<string | Buffer>];
      return (await (this.router.client as Cluster).callBuffer(cmd, ...rest)) as RespValue;
    }
    void key;
    const route = this.router.control();
    return route.lane.run(() => route.pipe.call(args, views));
  }

  /**
   * Commands in one send on a standalone Redis's pipe (the control pipe unless `route` says
   * otherwise); their replies, error replies apart (with `views`, bulk strings are views of the
   * reads they came in). Rejects when the send failed.
   */
  async each(commands: ReadonlyArray<Command>, views = false, route = this.router.control()): Promise<ManyReplies> {
    const bytes = encodeCommands(commands);
    const sink = new ManyReplies(views, commands.length);
    await route.lane.run(() => route.pipe.send(bytes, commands.length, sink), commands.length);
    return sink;
  }

  /**
   * The commands of splits (splitCommands) in one send on a standalone Redis, the script loaded on
   * the pipe first. A RESTORE refused as a command (renamed away, or denied by an ACL) turns later
   * splits member by member; its seal moves the members itself.
   */
  async splitEach(cmds: ReadonlyArray<Command>): Promise<ManyReplies> {
    const route = this.router.control();
    this.loadSplit(route);
    const res = await this.each(cmds);
    for (let i = 0; i < cmds.length; i++) {
      const e = res.errs[i];
      if (e === undefined) continue;
      if (cmds[i]![0] === 'RESTORE' && REFUSED.test(e)) this.dumpAllowed = false;
      // the scripts are gone (a server that restarted, or SCRIPT FLUSH): the next send loads them again
      else if (e.startsWith('NOSCRIPT')) this.loaded.delete(route.pipe);
    }
    return res;
  }

  /**
   * One split's commands (splitCommands), in order; resolves with the sub-bucket count the seal
   * returned. A RESTORE that fails (its key made already by another writer, or refused) leaves
   * its members to the seal.
   */
  async seal(cmds: ReadonlyArray<Command>): Promise<number> {
    const last = cmds[cmds.length - 1]!;
    const stateKey = last[3] as string;
    const args = last.slice(4) as string[];
    if (this.router.cluster) {
      const client = this.router.client as Cluster;
      for (let i = 0; i < cmds.length - 1; i++) {
        // the Cluster client takes the payload in a buffer of its own
        const [, key, ttl, half] = cmds[i]! as [string, string, string, IntsetSlice];
        try {
          await client.callBuffer('RESTORE', key, ttl, half.buffer());
        } catch (err) {
          if (refusedCommand(err)) this.dumpAllowed = false;
        }
      }
      return this.split(stateKey, args);
    }
    const res = await this.splitEach(cmds);
    const e = res.errs[cmds.length - 1];
    // NOSCRIPT (a server that restarted, or SCRIPT FLUSH): split() loads it and seals again
    if (e !== undefined) return e.startsWith('NOSCRIPT') ? this.split(stateKey, args) : Promise.reject(new PipeReplyError(e));
    return Number(res.vals[cmds.length - 1]);
  }

  /** SCRIPT LOAD of SPLIT and SEALS ahead of the first call on a connection (same socket: Redis runs them first). */
  private loadSplit(route: PipeRoute): void {
    if (this.loaded.has(route.pipe)) return;
    this.loaded.add(route.pipe);
    for (const script of [SPLIT, SEALS]) route.lane.run(() => route.pipe.call(['SCRIPT', 'LOAD', script.lua])).catch(() => this.loaded.delete(route.pipe));
  }

  /** Runs SPLIT for the table whose state key is `stateKey`: EVALSHA, and SCRIPT LOAD + again after a NOSCRIPT. */
  async split(stateKey: string, args: string[]): Promise<number> {
    if (this.router.cluster) return Number(await runScript(this.router.client, SPLIT, 1, [stateKey, ...args]));
    const route = this.router.control();
    const call = ['EVALSHA', SPLIT.sha, '1', stateKey, ...args];
    this.loadSplit(route);
    try {
      return Number(await route.lane.run(() => route.pipe.call(call)));
    } catch (err) {
      if (!(err instanceof PipeReplyError && err.message.startsWith('NOSCRIPT'))) throw err;
      await route.lane.run(() => route.pipe.call(['SCRIPT', 'LOAD', SPLIT.lua]));
      return Number(await route.lane.run(() => route.pipe.call(call)));
    }
  }
  private readonly loaded = new WeakSet<object>();

  /** Every window's pending count, reported. */
  async flushCounts(): Promise<void> {
    await Promise.all([...this.windows.values()].map((w) => w.flush()));
  }

  /** Every window's count reports and background splits, done. */
  async settle(): Promise<void> {
    await Promise.all([...this.windows.values()].map((w) => w.settle()));
  }

  /** Reports pending counts (best effort) and stops the timers. */
  async close(): Promise<void> {
    this.router.client.off('close', this.connectionLost);
    await Promise.all([...this.windows.values()].map((w) => w.flush().catch(() => undefined)));
    for (const w of this.windows.values()) w.dispose();
    this.windows.clear();
  }
}
