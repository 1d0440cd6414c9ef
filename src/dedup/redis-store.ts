// Redis store. Standalone: a whole firstSeen batch is ONE script call (atomic, all-or-nothing).
// Cluster: one script call per bucket (keys of different buckets live in different slots), all
// issued at once so they share each node's connection back to back (pipelined on the wire);
// atomic per bucket only. ioredis auto-pipelining is off for Cluster on purpose: after a master
// restart its auto-pipelines kept failing with MOVED instead of following the redirection.
import type { Cluster, Redis } from 'ioredis';
import { ErrorCodes, HashGateError } from '../errors.js';
import { isCluster, type RedisClient } from '../redis/client.js';
import { int64Decimal } from '../redis/int64.js';
import { RespWriter, UntimedRawCommand } from '../redis/resp.js';
import { runScript, runScriptWire } from '../redis/scripts.js';
import type { Layout } from './options.js';
import { hllKey, metaField, metaKey, windowPattern, bucketKey, type Member } from './layout.js';
import { FIRST_SEEN, FIRST_SEEN_ONCE } from './scripts.js';
import { decodeTableState, intsetLimitOf, memberLow20, putLow20, splitLoad, subBucketKey, tableStateKey } from './growth.js';
import { InFlightLimit, NotSentError } from '../redis/inflight.js';
import { StoreBatchError, type DedupStore, type StoreBatch } from './store.js';

const yieldToLoop = (): Promise<void> => new Promise((r) => setImmediate(r));

/** How the store paces its dedup commands (see the dedup.* options of the same names). */
export interface StorePacing {
  maxKeysPerCommand: number;
  maxInFlight: number;
  commandTimeoutMs: number;
  requestTtlMs: number;
}

/** Members of one script call: segments (group, start, end) back to back; at[i] = offset of segment i in the reply. */
interface Chunk {
  segs: Uint32Array;
  at: Uint32Array;
  count: number;
}

/**
 * Errors after which the command certainly did not run: never sent, or refused by Redis before the
 * script started (out of memory under the #!lua shebang, script not loaded, busy, loading,
 * read-only replica, cluster redirection or slot down).
 */
const isNotApplied = (err: unknown): boolean =>
  err instanceof NotSentError ||
  (err instanceof Error && err.name === 'ReplyError' && /^(OOM|NOSCRIPT|BUSY|LOADING|READONLY|MASTERDOWN|MOVED|ASK|TRYAGAIN|CLUSTERDOWN|CROSSSLOT|NOREPLICAS)\b/.test(err.message));

/** Standalone request record of one window (one set per request; its members name their bucket). */
const recordKey = (prefix: string, window: string, requestId: string): string => `${prefix}:${window}:r:${requestId}`;

/**
 * Cluster request record of one bucket: in the bucket key's slot, so one script can update both.
 * A bucket key without a hash tag is hashed whole, so the whole key becomes the record's tag.
 */
const clusterRecordKey = (bucket: string, requestId: string): string => {
  const o = bucket.indexOf('{');
  const c = o < 0 ? -1 : bucket.indexOf('}', o + 1);
  return c > o + 1 ? `${bucket}:r:${requestId}` : `{${bucket}}:r:${requestId}`;
};
const HLL_FLUSH_KEYS = 256;
const HLL_FLUSH_MS = 20;

export class RedisStore implements DedupStore {
  readonly kind = 'redis' as const;
  readonly cluster: boolean;

  /** Last connection-level error ioredis reported (for stats/diagnostics). */
  lastError: Error | undefined;
  /** Called each time the client becomes ready (first connection and every reconnection). */
  onReady: (() => void) | undefined;

  /** Before the first connection, calls wait for it until this deadline (performance.now()). */
  private readonly deadline: number;
  private everReady: boolean;
  private aborted = false;
  private readyWait: Promise<void> | undefined;
  private wakeReady: (() => void) | undefined;
  private readyTimer: NodeJS.Timeout | undefined;
  private readonly readyListener = (): void => {
    this.everReady = true;
    this.lastError = undefined;
    this.wake();
    this.onReady?.();
  };
  /** Dedup commands in flight and waiting (see src/redis/inflight.ts). */
  private readonly lane: InFlightLimit;
  private readonly closeListener = (): void => {
    this.lane.connectionLost(this.lastError?.message ?? 'connection closed');
  };
  private readonly errorListener = (e: Error): void => {
    this.lastError = e;
  };

  /**
   * HyperLogLog members of one-key batches not yet sent, per HLL key. A PFADD next to every
   * SADD made the sequential call ~1.4x a plain SADD round trip (Redis answers both together);
   * they go out together instead, at HLL_FLUSH_KEYS members or after HLL_FLUSH_MS. The HLL
   * only feeds stats().approximate (which flushes first); a crash loses at most those members
   * from the estimate, never a key from the exact sets.
   */
  private readonly hllPending = new Map<string, Member[]>();
  private hllCount = 0;
  private hllTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly hll: boolean,
    private readonly owned: boolean,
    private readonly connectTimeoutMs = 10_000,
    private readonly pacing: StorePacing = { maxKeysPerCommand: 2000, maxInFlight: 2, commandTimeoutMs: 2000, requestTtlMs: 600_000 },
  ) {
    this.cluster = isCluster(redis);
    this.everReady = redis.status === 'ready';
    this.deadline = performance.now() + connectTimeoutMs;
    // A stalled connection of our own is cut and reconnected: what it still owes us is lost anyway,
    // and a fresh connection lets requestId calls resend. A user's client is left alone.
    this.lane = new InFlightLimit(pacing.maxInFlight, pacing.commandTimeoutMs, () => {
      if (this.owned && !this.aborted) this.redis.disconnect(true);
    });
    redis.on('ready', this.readyListener);
    redis.on('close', this.closeListener);
    // Without a listener ioredis prints every reconnect failure; failures surface per call anyway.
    if (owned) redis.on('error', this.errorListener);
  }

  get status(): string {
    return this.redis.status;
  }

  private wake(): void {
    if (this.readyTimer !== undefined) clearTimeout(this.readyTimer);
    this.readyTimer = undefined;
    const w = this.wakeReady;
    this.wakeReady = undefined;
    this.readyWait = undefined;
    w?.();
  }

  /**
   * Resolves when the client is ready, or when the first-connection deadline passed, or on
   * abort(): the caller then re-checks the status. One shared timer and listener for all callers.
   */
  waitFirstReady(): Promise<void> {
    if (this.redis.status === 'ready' || this.everReady || this.aborted) return Promise.resolve();
    const left = this.deadline - performance.now();
    if (left <= 0) return Promise.resolve();
    if (this.redis.status === 'wait') this.redis.connect().catch(() => undefined); // a lazyConnect client of the user's
    this.readyWait ??= new Promise<void>((res) => {
      this.wakeReady = res;
      this.readyTimer = setTimeout(() => this.wake(), left);
    });
    return this.readyWait;
  }

  /** Rejects every caller waiting for the first connection (close()). */
  abort(): void {
    this.aborted = true;
    this.wake();
  }

  /**
   * Why the store cannot take a command now, or undefined when it can. A client that has not
   * connected yet is waited for (up to connectTimeoutMs); after it was ready once, any other
   * status means the connection was lost and the call fails at once (fail-open journals it).
   */
  private async unavailable(): Promise<string | undefined> {
    if (this.aborted) return 'closed';
    if (this.redis.status === 'ready') return undefined;
    if (!this.everReady) {
      await this.waitFirstReady();
      if (this.aborted) return 'closed';
      if ((this.redis.status as string) === 'ready') return undefined;
      const st = this.redis.status;
      return this.everReady ? st : `not connected within dedup.connectTimeoutMs = ${this.connectTimeoutMs} ms (status ${st})`;
    }
    return this.redis.status;
  }

  /** Fails the batch after one turn of the event loop, so callers failing in a loop never starve timers and I/O. */
  private async failFast(reason: string, groups: number, answers: Uint8Array): Promise<never> {
    await yieldToLoop();
    throw new StoreBatchError(`Redis connection is ${reason}`, new Uint8Array(groups), answers, this.lastError ?? new Error(`redis ${reason}`));
  }

  async resolveBuckets(window: string, layout: Layout, configured: number, record = true): Promise<number> {
    const why = await this.unavailable();
    if (why !== undefined) {
      await yieldToLoop();
      throw new HashGateError(ErrorCodes.STORE_UNAVAILABLE, `Redis connection is ${why}`, { cause: this.lastError });
    }
    const mk = metaKey(this.prefix, window);
    if (layout === 'compact') this.alpha = String(splitLoad(await this.intsetLimit()));
    if (record) await this.redis.hsetnx(mk, metaField(layout), String(configured));
    const v = Number(await this.redis.hget(mk, metaField(layout)));
    return Number.isInteger(v) && v > 0 ? v : configured;
  }

  async addBatch(b: StoreBatch, answers: Uint8Array): Promise<void> {
    const G = b.groupKeys.length;
    if (G === 0) return;
    const hk = hllKey(this.prefix, b.window, b.layout);
    if (this.redis.status !== 'ready') {
      const why = await this.unavailable();
      if (why !== undefined) return this.failFast(why, G, answers);
    }
    if (!this.cluster && b.count === 1 && b.requestId === undefined) return this.addOne(b, hk, answers);
    const chunks = this.chunksOf(b);
    const ok = new Uint8Array(chunks.length);
    /** Chunks sent whose reply never came: applied or not, nobody knows (until a resend answers). */
    const sentUnanswered = new Uint8Array(chunks.length);
    let deadline = 0;
    let firstErr: unknown;
    for (let attempt = 0; ; attempt++) {
      firstErr = undefined;
      const sends: Promise<void>[] = [];
      for (let c = 0; c < chunks.length; c++) {
        if (ok[c]) continue;
        const ch = chunks[c]!;
        sends.push(
          this.sendChunk(b, ch, hk).then(
            (r) => {
              for (let i = 0; i < ch.segs.length; i += 3) {
                const s = ch.segs[i + 1]!;
                const e = ch.segs[i + 2]!;
                for (let j = s; j < e; j++) answers[j] = r.charCodeAt(ch.at[i / 3]! + j - s) - 48;
              }
              ok[c] = 1;
            },
            (err: unknown) => {
              if (firstErr === undefined || !isNotApplied(err)) firstErr = err;
              if (!isNotApplied(err)) sentUnanswered[c] = 1;
            },
          ),
        );
      }
      await Promise.all(sends);
      if (firstErr === undefined) return;
      // With a request record a resend returns the original answers: try again after a reconnect.
      if (b.requestId === undefined || attempt >= 2 || this.aborted) break;
      // resends wait for a reconnect up to twice the command timeout after the first failure
      if (attempt === 0) deadline = performance.now() + 2 * this.pacing.commandTimeoutMs;
      // let a connection cut after a stall close before its status is read
      await new Promise((r) => setTimeout(r, 10));
      if (!(await this.readyBefore(deadline))) break;
    }
    let unknown = false;
    const done = new Uint8Array(G).fill(1);
    for (let c = 0; c < chunks.length; c++) {
      if (ok[c]) continue;
      if (sentUnanswered[c]) unknown = true;
      const segs = chunks[c]!.segs;
      for (let i = 0; i < segs.length; i += 3) done[segs[i]!] = 0;
    }
    const what = this.cluster ? 'Redis Cluster did not acknowledge part of the batch' : 'Redis rejected or did not acknowledge the batch';
    throw new StoreBatchError(`${what}: ${(firstErr as Error).message}`, done, answers, firstErr, unknown);
  }

  /** Resolves true once the client is ready (false if `deadline` passes first or the store closes). */
  private async readyBefore(deadline: number): Promise<boolean> {
    while (!this.aborted) {
      if (this.redis.status === 'ready') return true;
      const left = deadline - performance.now();
      if (left <= 0) return false;
      await new Promise<void>((res) => {
        const done = (): void => {
          clearTimeout(t);
          this.redis.off('ready', done);
          res();
        };
        const t = setTimeout(done, Math.min(left, 50));
        this.redis.once('ready', done);
      });
    }
    return false;
  }

  /**
   * The batch cut into commands of at most maxKeysPerCommand members, in member order (so the same
   * batch always gives the same commands). A chunk is segments (group, start, end) back to back.
   */
  private chunksOf(b: StoreBatch): Chunk[] {
    const max = this.pacing.maxKeysPerCommand;
    const G = b.groupKeys.length;
    // Every chunk's segments are views of one array made at its bound (a cut splits at most one
    // group, so G + chunks segments): with about one group per key, arrays grown segment by
    // segment were the largest garbage of a batch.
    const cap = G + Math.ceil(b.count / max) + 1;
    const segs = new Uint32Array(3 * cap);
    const at = new Uint32Array(cap);
    const out: Chunk[] = [];
    let n = 0;
    let first = 0;
    let count = 0;
    for (let g = 0; g < G; g++) {
      let s = b.starts[g]!;
      const e = b.starts[g + 1]!;
      while (s < e) {
        // Cluster: one bucket per command (buckets live in different slots)
        if (count === max || (this.cluster && n > first)) {
          out.push({ segs: segs.subarray(3 * first, 3 * n), at: at.subarray(first, n), count });
          first = n;
          count = 0;
        }
        const take = Math.min(e - s, max - count);
        segs[3 * n] = g;
        segs[3 * n + 1] = s;
        segs[3 * n + 2] = s + take;
        at[n++] = count;
        count += take;
        s += take;
      }
    }
    if (count > 0) out.push({ segs: segs.subarray(3 * first, 3 * n), at: at.subarray(first, n), count });
    return out;
  }

  /**
   * Hands a command to a standalone client only while its socket is writable. ioredis parks a
   * command written to a socket that already closed in its offline queue and sends it after the
   * reconnect, long after this store answered the call (fail-open) or reported it failed: a write
   * nobody waits for. Refused here, the command is known not to have been sent.
   */
  private writable<T>(send: () => Promise<T>): Promise<T> {
    const r = this.redis as unknown as { status: string; stream?: { writable?: boolean } };
    if (r.status !== 'ready' || r.stream?.writable === false) return Promise.reject(new NotSentError(`the Redis connection is ${r.status}`));
    return send();
  }

  /** One chunk as one script call, through the in-flight limit; the reply is one '0'/'1' per member. */
  private sendChunk(b: StoreBatch, ch: Chunk, hk: string): Promise<string> {
    if (!this.cluster) {
      const wire = this.encodeChunk(b, ch, hk);
      const script = b.requestId === undefined ? FIRST_SEEN : FIRST_SEEN_ONCE;
      return this.lane.run(() => this.writable(() => runScriptWire(this.redis as Redis, script, wire, true))).then((r) => (r as Buffer).toString('latin1'));
    }
    const g = ch.segs[0]!;
    const s = ch.segs[1]!;
    const e = ch.segs[2]!;
    const members: Member[] = new Array(e - s);
    for (let j = s; j < e; j++) members[j - s] = b.member(j);
    const key = b.groupKeys[g]!;
    let lows: Buffer | string = '';
    if (b.compact !== undefined) {
      const { dv, idx } = b.compact;
      lows = Buffer.allocUnsafe(3 * (e - s));
      for (let j = s; j < e; j++) putLow20(lows, 3 * (j - s), memberLow20(dv, idx[j]! << 4));
    }
    if (this.hll) this.redis.pfadd(hk, ...(members as string[])).catch(() => undefined);
    if (b.requestId === undefined) {
      return this.lane.run(() => runScript(this.redis, FIRST_SEEN, 1, [key, '1', '0', this.alphaOf(b), lows, String(e - s), ...members])) as Promise<string>;
    }
    const rk = clusterRecordKey(key, b.requestId);
    return this.lane.run(() => runScript(this.redis, FIRST_SEEN_ONCE, 2, [key, rk, '1', '0', this.alphaOf(b), String(b.requestTtlMs ?? this.pacing.requestTtlMs), lows, String(e - s), ...members])) as Promise<string>;
  }

  /**
   * A batch of one key (the sequential service call). 'sets': a plain SADD, whose reply is the
   * answer and which is atomic on its own. 'compact': FIRST_SEEN for one member, because only the
   * script knows which sub-bucket of a grown bucket holds it (see growth.ts). The HyperLogLog
   * member goes out with others later (see hllPending): it only feeds stats().approximate, so a
   * failed PFADD after an acknowledged add does not fail the call.
   */
  private async addOne(b: StoreBatch, hk: string, answers: Uint8Array): Promise<void> {
    const key = b.groupKeys[0]!;
    const w = new RespWriter(144 + key.length * 3);
    let member: Member;
    if (b.compact !== undefined) {
      const o = b.compact.idx[0]! << 4;
      w.array(10);
      w.str('EVALSHA');
      w.str(FIRST_SEEN.sha);
      w.str('1');
      w.str(key);
      w.str('1');
      w.str('0');
      w.str(this.alphaOf(b));
      // bulkSpace first: it may move w.buf to a bigger buffer
      const lowAt = w.bulkSpace(3);
      putLow20(w.buf, lowAt, memberLow20(b.compact.dv, o));
      w.str('1');
      w.int64(b.compact.dv, o);
      member = this.hll ? int64Decimal(b.compact.dv, o) : '';
      const bytes = w.bytes();
      // SCRIPT LOAD goes out ahead of the first call on each connection (runScriptWire)
      const sent = this.lane.run(() => this.writable(() => runScriptWire(this.redis as Redis, FIRST_SEEN, bytes, true)));
      if (this.hll) this.queueHll(hk, member);
      let reply: Buffer;
      try {
        reply = await sent;
      } catch (cause) {
        throw new StoreBatchError(`Redis rejected or did not acknowledge the batch: ${(cause as Error).message}`, new Uint8Array(1), answers, cause, !isNotApplied(cause));
      }
      if (reply.length !== 1 || (reply[0] !== 48 && reply[0] !== 49)) {
        throw new StoreBatchError('Redis answered the first-seen script with something other than 0 or 1', new Uint8Array(1), answers, new Error(reply.toString('latin1')));
      }
      answers[0] = reply[0]! - 48;
      return;
    }
    w.array(3);
    w.str('SADD');
    w.str(key);
    member = b.member(0);
    w.member(member);
    const bytes = w.bytes();
    const cmd = new UntimedRawCommand('sadd', [], bytes);
    const sadd = this.lane.run(() => this.writable(() => (this.redis as Redis).sendCommand(cmd) as Promise<unknown>));
    if (this.hll) this.queueHll(hk, member);
    let reply: unknown;
    try {
      reply = await sadd;
    } catch (cause) {
      throw new StoreBatchError(`Redis rejected or did not acknowledge the batch: ${(cause as Error).message}`, new Uint8Array(1), answers, cause, !isNotApplied(cause));
    }
    if (reply !== 0 && reply !== 1) {
      throw new StoreBatchError('Redis answered SADD with something other than 0 or 1', new Uint8Array(1), answers, new Error(String(reply)));
    }
    answers[0] = reply;
  }

  /** The script's alpha for a batch: members per sub-bucket before a compact bucket splits; '0' for 'sets'. */
  private alphaOf(b: StoreBatch): string {
    return b.layout === 'compact' ? this.alpha : '0';
  }
  /** splitLoad of the server's intset limit, read with the first window's bucket count (512 until then). */
  private alpha = String(splitLoad(512));

  private queueHll(hk: string, member: Member): void {
    const list = this.hllPending.get(hk);
    if (list === undefined) this.hllPending.set(hk, [member]);
    else list.push(member);
    if (++this.hllCount >= HLL_FLUSH_KEYS) this.flushHll();
    else if (this.hllTimer === undefined) {
      this.hllTimer = setTimeout(() => this.flushHll(), HLL_FLUSH_MS);
      this.hllTimer.unref();
    }
  }

  /** Sends the queued HLL members (fire and forget: the estimate tolerates a lost PFADD). */
  private flushHll(): void {
    if (this.hllTimer !== undefined) clearTimeout(this.hllTimer);
    this.hllTimer = undefined;
    if (this.hllCount === 0) return;
    for (const [hk, members] of this.hllPending) this.redis.pfadd(hk, ...(members as string[])).catch(() => undefined);
    this.hllPending.clear();
    this.hllCount = 0;
  }

  /**
   * EVALSHA sha numkeys keys... G hll alpha [ttl] lows counts... members... of one chunk as one RESP buffer
   * (FIRST_SEEN, or FIRST_SEEN_ONCE with the request record as last key and its TTL).
   */
  private encodeChunk(b: StoreBatch, ch: Chunk, hk: string): Buffer {
    const G = ch.segs.length / 3;
    const once = b.requestId !== undefined;
    const numKeys = G + (this.hll ? 1 : 0) + (once ? 1 : 0);
    const w = new RespWriter(128 + G * 48 + ch.count * (b.compact ? 29 : 40));
    w.array(3 + numKeys + 4 + (once ? 1 : 0) + G + ch.count);
    w.str('EVALSHA');
    w.str(once ? FIRST_SEEN_ONCE.sha : FIRST_SEEN.sha);
    w.uintStr(numKeys);
    for (let i = 0; i < ch.segs.length; i += 3) w.str(b.groupKeys[ch.segs[i]!]!);
    if (this.hll) w.str(hk);
    if (once) w.str(recordKey(this.prefix, b.window, b.requestId!));
    w.uintStr(G);
    w.str(this.hll ? '1' : '0');
    w.str(this.alphaOf(b));
    if (once) w.uintStr(b.requestTtlMs ?? this.pacing.requestTtlMs);
    if (b.compact !== undefined) {
      const { dv, idx } = b.compact;
      let at = w.bulkSpace(3 * ch.count);
      for (let i = 0; i < ch.segs.length; i += 3) {
        const e = ch.segs[i + 2]!;
        for (let j = ch.segs[i + 1]!; j < e; j++, at += 3) putLow20(w.buf, at, memberLow20(dv, idx[j]! << 4));
      }
    } else w.str('');
    for (let i = 0; i < ch.segs.length; i += 3) w.uintStr(ch.segs[i + 2]! - ch.segs[i + 1]!);
    for (let i = 0; i < ch.segs.length; i += 3) {
      const e = ch.segs[i + 2]!;
      if (b.compact !== undefined) {
        const { dv, idx } = b.compact;
        for (let j = ch.segs[i + 1]!; j < e; j++) w.int64(dv, idx[j]! << 4);
      } else {
        for (let j = ch.segs[i + 1]!; j < e; j++) w.member(b.member(j));
      }
    }
    return w.bytes();
  }

  /**
   * Exact member count (SCARD of every bucket, and of every sub-bucket of a compact bucket that
   * split), the largest (sub-)bucket and the sub-bucket total, 5000 buckets per round trip.
   */
  async count(window: string, layout: Layout, buckets: number): Promise<{ exact: number; approximate: number; largestBucket: number; subBuckets: number }> {
    let exact = 0;
    let largestBucket = 0;
    let subBuckets = 0;
    const spec = { layout, prefix: this.prefix };
    const step = 5000;
    // standalone: one pipeline per round; Cluster: commands routed one by one, written together
    const each = async <T>(cmds: Array<[string, string]>): Promise<T[]> => {
      if (!this.cluster) {
        const pl = (this.redis as Redis).pipeline();
        for (const [c, k] of cmds) (pl as unknown as Record<string, (k: string) => unknown>)[c]!.call(pl, k);
        const res = (await pl.exec()) ?? [];
        return res.map(([err, v]) => {
          if (err) throw err;
          return v as T;
        });
      }
      const r = this.redis as unknown as Record<string, (k: string) => Promise<T>>;
      return Promise.all(cmds.map(([c, k]) => r[c]!.call(this.redis, k)));
    };
    for (let s = 0; s < buckets; s += step) {
      const e = Math.min(buckets, s + step);
      const bases: string[] = [];
      for (let b = s; b < e; b++) bases.push(bucketKey(spec, window, b));
      const subs: string[] = [];
      if (layout === 'compact') {
        const states = await each<string | null>(bases.map((k) => ['get', tableStateKey(k)]));
        for (let i = 0; i < bases.length; i++) {
          const n = decodeTableState(states[i]!)?.subBuckets ?? 1;
          for (let j = 0; j < n; j++) subs.push(subBucketKey(bases[i]!, j));
        }
      } else subs.push(...bases);
      for (let i = 0; i < subs.length; i += step) {
        for (const v of await each<number>(subs.slice(i, i + step).map((k) => ['scard', k]))) {
          exact += v;
          if (v > largestBucket) largestBucket = v;
        }
      }
      subBuckets += subs.length;
    }
    this.flushHll(); // same connection: the PFCOUNT below runs after these PFADDs
    const approximate = await this.redis.pfcount(hllKey(this.prefix, window, layout));
    return { exact, approximate, largestBucket, subBuckets };
  }

  /** HyperLogLog estimate of the window's members alone: one PFCOUNT, cheap enough for health checks. */
  async approximateCount(window: string, layout: Layout): Promise<number> {
    this.flushHll();
    return this.redis.pfcount(hllKey(this.prefix, window, layout));
  }

  /**
   * Redis's `set-max-intset-entries`: a compact sub-bucket holding more members turns from an
   * intset (8 B a member) into a hashtable (about 8x that); buckets split well before (growth.ts).
   */
  intsetLimit(): Promise<number> {
    return intsetLimitOf(this.redis);
  }

  /**
   * used_memory and used_memory_rss summed over the masters (what a purge gives back). With
   * `settled`, first waits (up to 10 s) until Redis's background thread has freed what UNLINK
   * handed it (lazyfree_pending_objects 0), so the figure shows the purge's effect.
   */
  async memory(settled = false): Promise<{ used: number; rss: number }> {
    const nodes: Redis[] = this.cluster ? (this.redis as Cluster).nodes('master') : [this.redis as Redis];
    let used = 0;
    let rss = 0;
    for (const node of nodes) {
      let info = await node.info('memory');
      for (let i = 0; settled && i < 200 && Number(/^lazyfree_pending_objects:(\d+)/m.exec(info)?.[1] ?? 0) > 0; i++) {
        await new Promise((r) => setTimeout(r, 50));
        info = await node.info('memory');
      }
      used += Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? 0);
      rss += Number(/^used_memory_rss:(\d+)/m.exec(info)?.[1] ?? 0);
    }
    return { used, rss };
  }

  async purge(window: string): Promise<number> {
    const pattern = windowPattern(this.prefix, window);
    const nodes: Redis[] = this.cluster ? (this.redis as Cluster).nodes('master') : [this.redis as Redis];
    let deleted = 0;
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        cursor = next;
        if (keys.length === 0) continue;
        if (!this.cluster) deleted += await node.unlink(...keys);
        else {
          // UNLINK of several keys must stay within one slot in a cluster: one key per command.
          const pl = node.pipeline();
          for (const k of keys) pl.unlink(k);
          for (const [err, v] of (await pl.exec()) ?? []) {
            if (err) throw err;
            deleted += v as number;
          }
        }
      } while (cursor !== '0');
    }
    return deleted;
  }

  async close(): Promise<void> {
    this.flushHll();
    this.abort();
    this.lane.rejectWaiting('the dedup store is closing');
    this.redis.off('ready', this.readyListener);
    this.redis.off('close', this.closeListener);
    if (!this.owned) return;
    // A handshake in progress is let finish (briefly): cutting it midway leaves ioredis running
    // its ready check on a dead socket, with a 2 s disconnect timer nobody clears.
    if (this.redis.status === 'connecting' || this.redis.status === 'connect') await this.settle(500);
    // QUIT on a live connection (it lets commands already written finish); anything else is cut
    // at once, so no reconnect timer or half-open socket keeps the process alive.
    if ((this.redis.status as string) === 'ready') {
      let timer: NodeJS.Timeout | undefined;
      const quit = this.redis.quit().then(() => true, () => false);
      const late = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 1000)));
      const ok = await Promise.race([quit, late]);
      clearTimeout(timer);
      if (!ok) this.redis.disconnect();
      return;
    }
    const stillConnecting = this.redis.status === 'connecting';
    this.redis.disconnect();
    if (stillConnecting) {
      // A server that never answers the SYN: nothing will close this socket but us.
      type Streams = { stream?: { destroy(): void }; connector?: { stream?: { destroy(): void } } };
      const clients: RedisClient[] = isCluster(this.redis) ? this.redis.nodes() : [this.redis];
      for (const c of clients) {
        (c as unknown as Streams).stream?.destroy();
        (c as unknown as Streams).connector?.stream?.destroy();
      }
    }
  }

  /** Resolves on the next ready/close/end of the client, or after `ms`. */
  private settle(ms: number): Promise<void> {
    return new Promise<void>((res) => {
      const done = (): void => {
        clearTimeout(t);
        for (const ev of ['ready', 'close', 'end'] as const) this.redis.off(ev, done);
        res();
      };
      const t = setTimeout(done, ms);
      for (const ev of ['ready', 'close', 'end'] as const) this.redis.once(ev, done);
    });
  }
}

export const storeError = (msg: string, cause: unknown): HashGateError =>
  new HashGateError(ErrorCodes.STORE_UNAVAILABLE, msg, { cause });
