// Redis store. A batch without a request id is one plain SADD per key over the store's own pipes (redis-writer.ts): Redis's own atomic check-and-add, whose reply is the answer; a batch with one runs FIRST_SEEN_ONCE, which also records the keys it answered 1. Reads, scripts and administration go through the ioredis client.
//
// Standalone and Cluster alike: commands go out in sends of at most dedup.maxKeysPerCommand keys,
// at most dedup.maxInFlight of them in flight per connection, each timed from when Redis can start
// on it (src/redis/inflight.ts). ioredis auto-pipelining stays off for Cluster: after a master
// restart its auto-pipelines kept failing with MOVED instead of following the redirection.
import type { Cluster, Redis } from 'ioredis';
import { ErrorCodes, HashGateError } from '../errors.js';
import { isCluster, type RedisClient } from '../redis/client.js';
import { InFlightLimit, NotSentError } from '../redis/inflight.js';
import { PipeRouter } from '../redis/pipes.js';
import { LuaScript, runScript, runScriptWire } from '../redis/scripts.js';
import { RespWriter } from '../redis/resp.js';
import type { Layout } from './options.js';
import { bucketKey, metaKey, windowPattern } from './layout.js';
import { FIRST_SEEN_ONCE } from './scripts.js';
import { COUNT_LUA, addressOfHigh, putAddress, subBucketName, tablePrefix, tableStateKey, windowCountKey } from './growth.js';
import { RedisWriter, MemberStatus, type EachResult, type MemberSource } from './redis-writer.js';
import { TableGrowth, intsetLimitOf } from './tables.js';
import { StoreBatchError, type DedupStore, type StoreBatch } from './store.js';

const NO_TABLES = new Uint32Array(0);

const yieldToLoop = (): Promise<void> => new Promise((r) => setImmediate(r));

/** How the store paces its dedup commands (see the dedup.* options of the same names). */
export interface StorePacing {
  maxKeysPerCommand: number;
  maxInFlight: number;
  commandTimeoutMs: number;
  requestTtlMs: number;
}

const COUNT = new LuaScript(COUNT_LUA);
/** Sub-buckets one COUNT call reads (about 2 ms of Redis time). */
const COUNT_SLICE = 1000;
/** Tables counted at once (Redis runs one script at a time; a few in flight hide the round trips). */
const COUNT_LANES = 4;

/** Meta field that marks a compact window as written with tombstoned sub-bucket names (growth.ts). */
const COMPACT_LAYOUT_FIELD = 'compact.layout';
const COMPACT_LAYOUT = '2';

/**
 * Errors after which the command certainly did not run: never sent, or refused by Redis before the
 * script started (out of memory under the #!lua shebang, script not loaded, busy, loading,
 * read-only replica, cluster redirection or slot down).
 */
const isNotApplied = (err: unknown): boolean =>
  err instanceof NotSentError ||
  (err instanceof Error && err.name === 'ReplyError' && /^(OOM|NOSCRIPT|BUSY|LOADING|READONLY|MASTERDOWN|MOVED|ASK|TRYAGAIN|CLUSTERDOWN|CROSSSLOT|NOREPLICAS)\b/.test(err.message));

/** Standalone request record of one window (one set per request; its members name their bucket). */
const recordKey = (base: string, requestId: string): string => `${base}:r:${requestId}`;

/** Cluster request record of one 'sets' bucket: in its slot, so one script can update both. */
const clusterRecordKey = (slotKey: string, requestId: string): string => {
  const o = slotKey.indexOf('{');
  const c = o < 0 ? -1 : slotKey.indexOf('}', o + 1);
  return c > o + 1 ? `${slotKey}:r:${requestId}` : `{${slotKey}}:r:${requestId}`;
};

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
  /** Request-id scripts in flight and waiting on the ioredis connection (see src/redis/inflight.ts). */
  private readonly lane: InFlightLimit;
  /** The store's own connections (one per master) for plain SADDs, and what it knows of the tables. */
  readonly router: PipeRouter;
  readonly growth: TableGrowth;
  readonly writer: RedisWriter;
  private readonly closeListener = (): void => {
    const why = this.lastError?.message ?? 'connection closed';
    this.lane.connectionLost(why);
    // the pipes go to the same server: when ioredis lost it, what they owe is as good as lost
    this.router.reset(`the Redis connection closed (${why})`);
  };
  private readonly errorListener = (e: Error): void => {
    this.lastError = e;
  };

  constructor(
    readonly redis: RedisClient,
    private readonly prefix: string,
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
    this.router = new PipeRouter(redis, { connectTimeoutMs: Math.min(connectTimeoutMs, 5000), maxInFlight: pacing.maxInFlight, keysPerSend: pacing.maxKeysPerCommand, commandTimeoutMs: pacing.commandTimeoutMs });
    this.growth = new TableGrowth(this.router);
    this.writer = new RedisWriter(this.router, this.growth, pacing.maxKeysPerCommand, () => intsetLimitOf(redis));
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
  private async failFast(reason: string, count: number, answers: Uint8Array): Promise<never> {
    await yieldToLoop();
    throw new StoreBatchError(`Redis connection is ${reason}`, new Uint8Array(count), answers, this.lastError ?? new Error(`redis ${reason}`));
  }

  async resolveBuckets(window: string, layout: Layout, configured: number, record = true): Promise<number> {
    const why = await this.unavailable();
    if (why !== undefined) {
      await yieldToLoop();
      throw new HashGateError(ErrorCodes.STORE_UNAVAILABLE, `Redis connection is ${why}`, { cause: this.lastError });
    }
    return resolveWindowBuckets(this.redis, this.prefix, window, layout, configured, record);
  }

  /**
   * Makes ready what the first write of `window` would otherwise wait for: the server's intset
   * limit, the window's table counts (read whole, as a first write reads them) and the store's own
   * connections. Rejects with the first failure; whatever is not ready then is done by the first
   * write, as without this.
   */
  async warm(window: string, layout: Layout, buckets: number): Promise<void> {
    const wt = this.growth.window(this.baseOf(window), layout, buckets, await this.intsetLimit());
    await Promise.all([wt.read(NO_TABLES), this.router.connectAll()]);
  }

  async addBatch(b: StoreBatch, answers: Uint8Array): Promise<void> {
    if (b.count === 0) return;
    if (this.redis.status !== 'ready') {
      const why = await this.unavailable();
      if (why !== undefined) return this.failFast(why, b.count, answers);
    }
    if (b.requestId !== undefined) return this.addOnce(b, answers);
    const src = sourceOf(b, this.baseOf(b.window));
    const status = new Uint8Array(b.count);
    const res = await this.writer.addEach(src, answers, status);
    if (res.error !== undefined) throw eachError(res, status, answers);
  }

  /**
   * addBatch for a batch of one key without a request id (a lone one-key call), when the
   * connection is ready and the writer can send it at once: the same answer and the same
   * StoreBatchError, passed to `done` (undefined once answered) without the turns of addBatch's
   * async steps. False when addBatch must take it; `done` never runs before addOne returns.
   */
  addOne(b: StoreBatch, answers: Uint8Array, done: (err: Error | undefined) => void): boolean {
    if (b.count !== 1 || b.requestId !== undefined || this.redis.status !== 'ready' || this.aborted) return false;
    const status = new Uint8Array(1);
    return this.writer.addOne(sourceOf(b, this.baseOf(b.window)), answers, status, (res) => eachError(res, status, answers), done);
  }

  /**
   * `${prefix}:${window}`, kept for the last window: a service writes one window for months, and
   * the writer's lookups by this string then meet the same string every call (a concatenation
   * per call had to be flattened and hashed again each time).
   */
  private baseOf(window: string): string {
    if (window !== this.lastWindow) {
      this.lastBase = `${this.prefix}:${window}`;
      this.lastWindow = window;
    }
    return this.lastBase;
  }
  private lastWindow: string | undefined;
  private lastBase = '';

  /**
   * A batch with a request id: FIRST_SEEN_ONCE per chunk (standalone) or per table (Cluster, one
   * slot per call), resent after a reconnect (the record makes a resend answer as the first run did).
   */
  private async addOnce(b: StoreBatch, answers: Uint8Array): Promise<void> {
    const compact = b.layout === 'compact';
    const base = `${this.prefix}:${b.window}`;
    const wt = this.growth.window(base, b.layout, b.buckets, await this.intsetLimit());
    try {
      if (compact) {
        const tables = Array.from(b.groupBuckets);
        await wt.read(tables);
        await wt.prepare(tables, b.count);
      }
    } catch (cause) {
      throw new StoreBatchError(`Redis rejected or did not acknowledge the batch: ${(cause as Error).message}`, new Uint8Array(b.count), answers, cause, false);
    }
    const chunks = this.chunksOf(b);
    const ok = new Uint8Array(chunks.length);
    const sentUnanswered = new Uint8Array(chunks.length);
    let deadline = 0;
    let firstErr: unknown;
    let added = 0;
    for (let attempt = 0; ; attempt++) {
      firstErr = undefined;
      const sends: Promise<void>[] = [];
      for (let c = 0; c < chunks.length; c++) {
        if (ok[c]) continue;
        const ch = chunks[c]!;
        sends.push(
          this.sendOnce(b, base, ch).then(
            ([r, a]) => {
              let at = 0;
              for (let i = 0; i < ch.length; i += 3) for (let j = ch[i + 1]!; j < ch[i + 2]!; j++) answers[j] = r.charCodeAt(at++) - 48;
              added += a;
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
      if (firstErr === undefined) break;
      // With a request record a resend returns the original answers: try again after a reconnect.
      if (attempt >= 2 || this.aborted) break;
      // resends wait for a reconnect up to twice the command timeout after the first failure
      if (attempt === 0) deadline = performance.now() + 2 * this.pacing.commandTimeoutMs;
      // let a connection cut after a stall close before its status is read
      await new Promise((r) => setTimeout(r, 10));
      if (!(await this.readyBefore(deadline))) break;
    }
    wt.added(added);
    if (firstErr === undefined) return;
    let unknown = false;
    const done = new Uint8Array(b.count);
    for (let c = 0; c < chunks.length; c++) {
      const ch = chunks[c]!;
      if (!ok[c] && sentUnanswered[c]) unknown = true;
      if (ok[c]) for (let i = 0; i < ch.length; i += 3) done.fill(1, ch[i + 1]!, ch[i + 2]!);
    }
    const what = this.cluster ? 'Redis Cluster did not acknowledge part of the batch' : 'Redis rejected or did not acknowledge the batch';
    throw new StoreBatchError(`${what}: ${(firstErr as Error).message}`, done, answers, firstErr, unknown);
  }

  /**
   * The batch cut into commands of at most maxKeysPerCommand members, in member order (the same
   * batch always gives the same commands; a Cluster: one table's members each). A chunk is
   * segments (group, start, end) back to back.
   */
  private chunksOf(b: StoreBatch): Uint32Array[] {
    const max = this.pacing.maxKeysPerCommand;
    const out: Uint32Array[] = [];
    let segs: number[] = [];
    let count = 0;
    for (let g = 0; g < b.groupKeys.length; g++) {
      let s = b.starts[g]!;
      const e = b.starts[g + 1]!;
      while (s < e) {
        if (count === max || (this.cluster && segs.length > 0)) {
          out.push(Uint32Array.from(segs));
          segs = [];
          count = 0;
        }
        const take = Math.min(e - s, max - count);
        segs.push(g, s, s + take);
        count += take;
        s += take;
      }
    }
    if (segs.length > 0) out.push(Uint32Array.from(segs));
    return out;
  }

  /** FIRST_SEEN_ONCE over the segments of one chunk: [answers, members added]. */
  private sendOnce(b: StoreBatch, base: string, ch: Uint32Array): Promise<[string, number]> {
    const compact = b.layout === 'compact';
    const keys: string[] = [];
    const args: Array<string | Buffer> = [];
    const tps: string[] = [];
    const tables: string[] = [];
    let total = 0;
    for (let i = 0; i < ch.length; i += 3) {
      const t = b.groupBuckets[ch[i]!]!;
      total += ch[i + 2]! - ch[i + 1]!;
      if (compact) {
        const tp = tablePrefix(base, t);
        keys.push(tableStateKey(tp));
        tps.push(tp);
        tables.push(String(t));
      } else keys.push(b.groupKeys[ch[i]!]!);
    }
    const requestId = b.requestId!;
    // Cluster: a record per table (compact; next to the window's keys, in the table's slot) or bucket
    const record = !this.cluster ? recordKey(base, requestId) : compact ? `${base}:r{${tables[0]!}}:${requestId}` : clusterRecordKey(keys[0]!, requestId);
    keys.push(record);
    let addrs: Buffer | string = '';
    if (compact) {
      const { dv, idx } = b.compact!;
      addrs = Buffer.allocUnsafe(3 * total);
      let at = 0;
      for (let i = 0; i < ch.length; i += 3) {
        for (let j = ch[i + 1]!; j < ch[i + 2]!; j++, at += 3) putAddress(addrs, at, addressOfHigh(dv.getUint32((idx[j]! << 4) + 4, true)));
      }
    }
    const G = ch.length / 3;
    args.push(String(G), String(b.requestTtlMs ?? this.pacing.requestTtlMs), compact ? '1' : '0', addrs);
    for (let i = 0; i < ch.length; i += 3) args.push(String(ch[i + 2]! - ch[i + 1]!));
    if (compact) args.push(...tables, ...tps);
    const check = (r: unknown): [string, number] => {
      const [raw, added] = r as [string | Buffer, number];
      const ans = typeof raw === 'string' ? raw : Buffer.isBuffer(raw) ? raw.toString('latin1') : undefined;
      if (ans === undefined || ans.length !== total) {
        const got = ans === undefined ? 'no answer string' : `${ans.length} answers`;
        throw new Error(`FIRST_SEEN_ONCE returned ${got} for ${total} members`);
      }
      return [ans, Number(added)];
    };
    if (this.cluster) {
      for (let i = 0; i < ch.length; i += 3) for (let j = ch[i + 1]!; j < ch[i + 2]!; j++) args.push(b.member(j));
      return this.lane.run(() => runScript(this.redis, FIRST_SEEN_ONCE, keys.length, [...keys, ...args])).then(check);
    }
    // one RESP buffer (compact members written from the digests), untimed by ioredis: the lane
    // times it from when Redis can start on it, and a command ioredis timed out would let the
    // next one go while Redis may still run this one
    const w = new RespWriter(128 + keys.length * 48 + total * 29 + 3 * total);
    w.array(3 + keys.length + args.length + total);
    w.str('EVALSHA');
    w.str(FIRST_SEEN_ONCE.sha);
    w.uintStr(keys.length);
    for (const k of keys) w.str(k);
    for (const a of args) {
      if (typeof a === 'string') w.str(a);
      else w.bulk(a, 0, a.length);
    }
    for (let i = 0; i < ch.length; i += 3) {
      for (let j = ch[i + 1]!; j < ch[i + 2]!; j++) {
        if (compact) w.int64(b.compact!.dv, b.compact!.idx[j]! << 4);
        else w.member(b.member(j));
      }
    }
    const wire = w.bytes();
    return this.lane.run(() => this.writable(() => runScriptWire(this.redis as Redis, FIRST_SEEN_ONCE, wire, true))).then(check);
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
   * Hands a command to a standalone client only while its socket is writable. ioredis parks a
   * command written to a socket that already closed in its offline queue and sends it after the
   * reconnect, long after this store answered the call (fail-open) or reported it failed: a write
   * nobody waits for. Refused here, the command is known not to have been sent.
   */
  private writable<T>(send: () => Promise<T>): Promise<T> {
    if (this.cluster) return send();
    const r = this.redis as unknown as { status: string; stream?: { writable?: boolean } };
    if (r.status !== 'ready' || r.stream?.writable === false) return Promise.reject(new NotSentError(`the Redis connection is ${r.status}`));
    return send();
  }

  /**
   * Exact member count (SCARD of every bucket, 5000 commands per round trip; or of every
   * sub-bucket of every compact table, by COUNT scripts of at most COUNT_SLICE sub-buckets, each
   * reading the table's state with what it counts, COUNT_LANES tables at a time so a shared Redis
   * serves its other clients between slices), the largest (sub-)bucket and the sub-bucket total.
   */
  async count(window: string, layout: Layout, buckets: number): Promise<{ exact: number; approximate: number; largestBucket: number; subBuckets: number }> {
    let exact = 0;
    let largestBucket = 0;
    let subBuckets = 0;
    const base = `${this.prefix}:${window}`;
    const step = 5000;
    for (let s = 0; s < buckets; s += step) {
      const e = Math.min(buckets, s + step);
      if (layout === 'compact') {
        let next = s;
        const lane = async (): Promise<void> => {
          while (next < e) {
            const r = await this.countTable(tablePrefix(base, next++));
            exact += r.members;
            if (r.largest > largestBucket) largestBucket = r.largest;
            subBuckets += r.subBuckets;
          }
        };
        await Promise.all(Array.from({ length: Math.min(COUNT_LANES, e - s) }, lane));
        continue;
      }
      const keys: string[] = [];
      for (let b = s; b < e; b++) keys.push(bucketKey({ layout, prefix: this.prefix }, window, b));
      const counts = this.cluster
        ? await Promise.all(keys.map((k) => this.redis.scard(k)))
        : ((await (this.redis as Redis).pipeline(keys.map((k) => ['scard', k])).exec()) ?? []).map(([err, v]) => {
            if (err) throw err;
            return v as number;
          });
      for (const v of counts) {
        exact += v;
        if (v > largestBucket) largestBucket = v;
      }
      subBuckets += keys.length;
    }
    const approximate = await this.approximateCount(window, layout);
    return { exact, approximate, largestBucket, subBuckets };
  }

  /** One compact table's members, counted slice by slice; started again if it splits meanwhile. */
  private async countTable(tp: string): Promise<{ members: number; largest: number; subBuckets: number }> {
    const sk = tableStateKey(tp);
    for (let attempt = 0; ; attempt++) {
      let members = 0;
      let largest = 0;
      let n = -1;
      let from = 0;
      let split = false;
      do {
        const r = (await runScript(this.redis, COUNT, 1, [sk, tp, String(n), String(from), String(COUNT_SLICE)])) as [number, number, number, number];
        if (r[0] < 0) {
          split = true;
          break;
        }
        members += r[0];
        if (r[1] > largest) largest = r[1];
        n = r[2];
        from = r[3];
      } while (from < n);
      if (!split) return { members, largest, subBuckets: n };
      // a live window's table splits a few times per thousand new keys: a handful of restarts at most
      if (attempt >= 100) throw new Error(`table ${tp} kept splitting while it was counted (${attempt} attempts)`);
    }
  }

  /** The window count writers report (reports of the last few ms may still be on their way): one GET. */
  async approximateCount(window: string, layout: Layout): Promise<number> {
    await this.growth.flushCounts();
    const v = await this.redis.get(windowCountKey(`${this.prefix}:${window}`, layout));
    return v === null ? 0 : Number(v);
  }

  /** Sub-bucket counts of a sample of the window's tables (health: how far splitting has come). */
  async sampleTables(window: string, buckets: number, sample = 32): Promise<number[]> {
    const base = `${this.prefix}:${window}`;
    const step = Math.max(1, Math.floor(buckets / sample));
    const keys: string[] = [];
    for (let t = 0; t < buckets && keys.length < sample; t += step) keys.push(tableStateKey(tablePrefix(base, t)));
    const vals = await Promise.all(keys.map((k) => this.redis.get(k)));
    return vals.map((v) => (v === null ? 1 : Number(v)));
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
    // a window purged and written again starts from one sub-bucket per table
    this.growth.forget(`${this.prefix}:${window}`);
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
    await this.growth.close().catch(() => undefined);
    this.abort();
    this.lane.rejectWaiting('the dedup store is closing');
    this.router.close();
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

/** The names of the live sub-buckets of a table of n sub-buckets, whose key prefix is `tp`. */
export function* liveSubBuckets(tp: string, n: number): Generator<string> {
  if (n <= 1) {
    yield subBucketName(tp, 0, 0);
    return;
  }
  let l2 = 1;
  while (l2 * 2 <= n) l2 *= 2;
  const d = Math.log2(l2);
  for (let s = 0; s < n; s++) yield subBucketName(tp, s, s < n - l2 || s >= l2 ? d + 1 : d);
}

/**
 * The window's recorded bucket count (first writer wins: HSETNX of `configured`), or `configured`
 * when none is recorded and `record` is false. A compact window must carry the layout mark its
 * names need (growth.ts); one written by an older layout is refused rather than misread.
 */
export async function resolveWindowBuckets(redis: RedisClient, prefix: string, window: string, layout: Layout, configured: number, record: boolean): Promise<number> {
  const mk = metaKey(prefix, window);
  const field = `${layout}.buckets`;
  const [b0, l0] = await redis.hmget(mk, field, COMPACT_LAYOUT_FIELD);
  if (layout === 'compact' && b0 !== null && l0 !== COMPACT_LAYOUT) {
    throw new HashGateError(
      ErrorCodes.STORE,
      `window ${window} of prefix ${prefix} was written by an older compact layout (${mk} has no ${COMPACT_LAYOUT_FIELD} ${COMPACT_LAYOUT}): purge it (hashgate stats --purge) and load it again`,
      { details: { window, prefix } },
    );
  }
  if (b0 !== null) {
    const v = Number(b0);
    return Number.isInteger(v) && v > 0 ? v : configured;
  }
  if (!record) return configured;
  if (layout === 'compact') await redis.hsetnx(mk, COMPACT_LAYOUT_FIELD, COMPACT_LAYOUT);
  await redis.hsetnx(mk, field, String(configured));
  const v = Number(await redis.hget(mk, field));
  return Number.isInteger(v) && v > 0 ? v : configured;
}

/** The StoreBatchError of a write that needed every answer: which members were acknowledged, and why the others were not. */
function eachError(res: EachResult, status: Uint8Array, answers: Uint8Array): StoreBatchError {
  const done = new Uint8Array(status.length);
  for (let j = 0; j < status.length; j++) done[j] = status[j] === MemberStatus.Answered ? 1 : 0;
  const cause = res.error;
  const what = done.includes(1) ? 'Redis did not acknowledge part of the batch' : 'Redis rejected or did not acknowledge the batch';
  return new StoreBatchError(`${what}: ${(cause as Error).message ?? String(cause)}`, done, answers, cause, res.unknown);
}

/** A store batch as the writer takes it: the bucket of every member and where its digest is. */
function sourceOf(b: StoreBatch, base: string): MemberSource {
  let bucket = b.bucket;
  if (bucket === undefined) {
    bucket = new Uint32Array(b.count);
    for (let g = 0; g < b.groupBuckets.length; g++) bucket.fill(b.groupBuckets[g]!, b.starts[g]!, b.starts[g + 1]!);
  }
  const c = b.compact;
  let offs: Uint32Array | undefined;
  if (c !== undefined) {
    offs = new Uint32Array(b.count);
    for (let j = 0; j < b.count; j++) offs[j] = c.idx[j]! << 4;
  }
  // every field in the literal: one object shape for both layouts
  return { base, layout: b.layout, buckets: b.buckets, count: b.count, bucket, dv: c?.dv, offs, member: c === undefined ? b.member : undefined };
}

export const storeError = (msg: string, cause: unknown): HashGateError =>
  new HashGateError(ErrorCodes.STORE_UNAVAILABLE, msg, { cause });
