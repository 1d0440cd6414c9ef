// Redis store. Standalone: a whole firstSeen batch is ONE script call (atomic, all-or-nothing).
// Cluster: one script call per bucket (keys of different buckets live in different slots), all
// issued at once so they share each node's connection back to back (pipelined on the wire);
// atomic per bucket only. ioredis auto-pipelining is off for Cluster on purpose: after a master
// restart its auto-pipelines kept failing with MOVED instead of following the redirection.
import { Cluster, type Redis } from 'ioredis';
import { ErrorCodes, HashGateError } from '../errors.js';
import type { RedisClient } from '../redis/client.js';
import { int64Decimal } from '../redis/int64.js';
import { RawCommand, RespWriter } from '../redis/resp.js';
import { runScript, runScriptWire } from '../redis/scripts.js';
import type { Layout } from './options.js';
import { hllKey, metaField, metaKey, windowPattern, bucketKey, type Member } from './layout.js';
import { FIRST_SEEN } from './scripts.js';
import { StoreBatchError, type DedupStore, type StoreBatch } from './store.js';

const yieldToLoop = (): Promise<void> => new Promise((r) => setImmediate(r));
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
  ) {
    this.cluster = redis instanceof Cluster;
    this.everReady = redis.status === 'ready';
    this.deadline = performance.now() + connectTimeoutMs;
    redis.on('ready', this.readyListener);
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
    if (!this.cluster && b.count === 1) return this.addOne(b, hk, answers);
    if (!this.cluster) {
      const wire = this.encodeBatch(b, G, hk);
      try {
        const r = await runScriptWire(this.redis as Redis, FIRST_SEEN, wire);
        for (let j = 0; j < b.count; j++) answers[j] = r[j]! - 48;
      } catch (cause) {
        throw new StoreBatchError(`Redis rejected or did not acknowledge the batch: ${(cause as Error).message}`, new Uint8Array(G), answers, cause);
      }
      return;
    }
    const done = new Uint8Array(G);
    let firstErr: unknown;
    const calls: Promise<void>[] = [];
    for (let g = 0; g < G; g++) {
      const s = b.starts[g]!;
      const e = b.starts[g + 1]!;
      const members: Member[] = new Array(e - s);
      for (let j = s; j < e; j++) members[j - s] = b.member(j);
      calls.push(
        runScript(this.redis, FIRST_SEEN, 1, [b.groupKeys[g]!, '1', '0', String(e - s), ...members]).then(
          (r) => {
            const str = r as string;
            for (let j = s; j < e; j++) answers[j] = str.charCodeAt(j - s) - 48;
            done[g] = 1;
          },
          (err) => {
            firstErr ??= err;
          },
        ),
      );
      if (this.hll) calls.push(this.redis.pfadd(hk, ...(members as string[])).then(() => undefined, () => undefined));
    }
    await Promise.all(calls);
    if (firstErr !== undefined) {
      throw new StoreBatchError(`Redis Cluster did not acknowledge part of the batch: ${(firstErr as Error).message}`, done, answers, firstErr);
    }
  }

  /**
   * A batch of one key (the sequential service call): a plain SADD, whose reply is the answer and
   * which is atomic on its own, plus the PFADD in the same write. Redis spends about half the CPU
   * of a script call on it. The HyperLogLog only feeds stats().approximate, so a failed PFADD
   * after an acknowledged SADD does not fail the call.
   */
  private async addOne(b: StoreBatch, hk: string, answers: Uint8Array): Promise<void> {
    const key = b.groupKeys[0]!;
    const w = new RespWriter(96 + key.length * 3);
    w.array(3);
    w.str('SADD');
    w.str(key);
    let member: Member;
    if (b.compact !== undefined) {
      const o = b.compact.idx[0]! << 4;
      w.int64(b.compact.dv, o);
      member = this.hll ? int64Decimal(b.compact.dv, o) : '';
    } else {
      member = b.member(0);
      w.member(member);
    }
    const sadd = (this.redis as Redis).sendCommand(new RawCommand('sadd', [], w.bytes())) as Promise<unknown>;
    if (this.hll) this.queueHll(hk, member);
    let reply: unknown;
    try {
      reply = await sadd;
    } catch (cause) {
      throw new StoreBatchError(`Redis rejected or did not acknowledge the batch: ${(cause as Error).message}`, new Uint8Array(1), answers, cause);
    }
    if (reply !== 0 && reply !== 1) {
      throw new StoreBatchError('Redis answered SADD with something other than 0 or 1', new Uint8Array(1), answers, new Error(String(reply)));
    }
    answers[0] = reply;
  }

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

  /** EVALSHA sha numkeys keys... G hll counts... members... as one RESP buffer. */
  private encodeBatch(b: StoreBatch, G: number, hk: string): Buffer {
    const numKeys = G + (this.hll ? 1 : 0);
    const w = new RespWriter(64 + G * 48 + b.count * (b.compact ? 26 : 40));
    w.array(3 + numKeys + 2 + G + b.count);
    w.str('EVALSHA');
    w.str(FIRST_SEEN.sha);
    w.uintStr(numKeys);
    for (let g = 0; g < G; g++) w.str(b.groupKeys[g]!);
    if (this.hll) w.str(hk);
    w.uintStr(G);
    w.str(this.hll ? '1' : '0');
    for (let g = 0; g < G; g++) w.uintStr(b.starts[g + 1]! - b.starts[g]!);
    if (b.compact !== undefined) {
      const { dv, idx } = b.compact;
      for (let j = 0; j < b.count; j++) w.int64(dv, idx[j]! << 4);
    } else {
      for (let j = 0; j < b.count; j++) w.member(b.member(j));
    }
    return w.bytes();
  }

  async count(window: string, layout: Layout, buckets: number): Promise<{ exact: number; approximate: number; largestBucket: number }> {
    let exact = 0;
    let largestBucket = 0;
    const spec = { layout, prefix: this.prefix };
    const step = 5000;
    for (let s = 0; s < buckets; s += step) {
      const e = Math.min(buckets, s + step);
      if (!this.cluster) {
        const pl = (this.redis as Redis).pipeline();
        for (let b = s; b < e; b++) pl.scard(bucketKey(spec, window, b));
        for (const [err, v] of (await pl.exec()) ?? []) {
          if (err) throw err;
          exact += v as number;
          if ((v as number) > largestBucket) largestBucket = v as number;
        }
      } else {
        const ps: Promise<number>[] = [];
        for (let b = s; b < e; b++) ps.push(this.redis.scard(bucketKey(spec, window, b)));
        for (const v of await Promise.all(ps)) {
          exact += v;
          if (v > largestBucket) largestBucket = v;
        }
      }
    }
    this.flushHll(); // same connection: the PFCOUNT below runs after these PFADDs
    const approximate = await this.redis.pfcount(hllKey(this.prefix, window, layout));
    return { exact, approximate, largestBucket };
  }

  /** HyperLogLog estimate of the window's members alone: one PFCOUNT, cheap enough for health checks. */
  async approximateCount(window: string, layout: Layout): Promise<number> {
    this.flushHll();
    return this.redis.pfcount(hllKey(this.prefix, window, layout));
  }

  /**
   * Redis's `set-max-intset-entries`: a compact bucket holding more members turns from an intset
   * (8 B a member) into a hashtable (about 8x that). 512, Redis's default, when CONFIG is refused
   * (managed Redis services often rename or disable it).
   */
  async intsetLimit(): Promise<number> {
    if (this.intsetEntries !== undefined) return this.intsetEntries;
    try {
      const node = this.cluster ? (this.redis as Cluster).nodes('master')[0] : (this.redis as Redis);
      const r = (await node?.config('GET', 'set-max-intset-entries')) as string[] | undefined;
      const v = Number(r?.[1]);
      this.intsetEntries = Number.isInteger(v) && v > 0 ? v : 512;
    } catch {
      this.intsetEntries = 512;
    }
    return this.intsetEntries;
  }
  private intsetEntries: number | undefined;

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
    this.redis.off('ready', this.readyListener);
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
      const clients: RedisClient[] = this.redis instanceof Cluster ? this.redis.nodes() : [this.redis];
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
