// Redis store. Standalone: a whole firstSeen batch is ONE script call (atomic, all-or-nothing).
// Cluster: one script call per bucket (keys of different buckets live in different slots), all
// issued at once so they share each node's connection back to back (pipelined on the wire);
// atomic per bucket only. ioredis auto-pipelining is off for Cluster on purpose: after a master
// restart its auto-pipelines kept failing with MOVED instead of following the redirection.
import { Redis, Cluster, type RedisOptions } from 'ioredis';
import { ErrorCodes, HashGateError } from '../errors.js';
import type { Layout, RedisConfig } from './options.js';
import { hllKey, metaField, metaKey, windowPattern, bucketKey, type Member, type RedisClient } from './layout.js';
import { FIRST_SEEN_LUA, FIRST_SEEN_SHA, runScript } from './scripts.js';
import { RawCommand, RespWriter } from './resp.js';
import { StoreBatchError, type DedupStore, type StoreBatch } from './store.js';

export function createRedisClient(config: RedisConfig, commandTimeoutMs: number): RedisClient {
  // Fail fast instead of queueing forever: fail-open needs an answer within the timeout.
  const ours: RedisOptions = { maxRetriesPerRequest: 1, commandTimeout: commandTimeoutMs, enableAutoPipelining: false };
  if (typeof config === 'string') return new Redis(config, ours);
  if (config !== null && typeof config === 'object' && 'cluster' in config && Array.isArray(config.cluster)) {
    return new Cluster(config.cluster, {
      enableAutoPipelining: false,
      ...(config.options ?? {}),
      redisOptions: { ...ours, ...((config.options?.redisOptions as RedisOptions | undefined) ?? {}) },
    });
  }
  return new Redis({ ...ours, ...(config as RedisOptions) });
}

export class RedisStore implements DedupStore {
  readonly kind = 'redis' as const;
  readonly cluster: boolean;

  /** Last connection-level error ioredis reported (for stats/diagnostics). */
  lastError: Error | undefined;

  constructor(
    readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly hll: boolean,
    private readonly owned: boolean,
  ) {
    this.cluster = redis instanceof Cluster;
    // Without a listener ioredis prints every reconnect failure; failures surface per call anyway.
    if (owned) redis.on('error', (e: Error) => (this.lastError = e));
  }

  /** While ioredis is between connections, fail the batch now instead of queueing it. */
  private down(): string | undefined {
    const st = this.redis.status;
    return st === 'reconnecting' || st === 'end' || st === 'close' ? st : undefined;
  }

  async resolveBuckets(window: string, layout: Layout, configured: number, record = true): Promise<number> {
    const mk = metaKey(this.prefix, window);
    if (record) await this.redis.hsetnx(mk, metaField(layout), String(configured));
    const v = Number(await this.redis.hget(mk, metaField(layout)));
    return Number.isInteger(v) && v > 0 ? v : configured;
  }

  async addBatch(b: StoreBatch, answers: Uint8Array): Promise<void> {
    const G = b.groupKeys.length;
    if (G === 0) return;
    const hk = hllKey(this.prefix, b.window, b.layout);
    const down = this.down();
    if (down !== undefined) {
      throw new StoreBatchError(`Redis connection is ${down}`, new Uint8Array(G), answers, this.lastError ?? new Error(`redis status ${down}`));
    }
    if (!this.cluster) {
      const wire = this.encodeBatch(b, G, hk);
      try {
        let r: Buffer;
        try {
          r = (await (this.redis as Redis).sendCommand(new RawCommand('evalsha', [], wire))) as Buffer;
        } catch (err) {
          if (!(err instanceof Error && err.message.startsWith('NOSCRIPT'))) throw err;
          await this.redis.script('LOAD', FIRST_SEEN_LUA);
          r = (await (this.redis as Redis).sendCommand(new RawCommand('evalsha', [], wire))) as Buffer;
        }
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
        runScript(this.redis, FIRST_SEEN_LUA, 1, [b.groupKeys[g]!, '1', '0', String(e - s), members]).then(
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

  /** EVALSHA sha numkeys keys... G hll counts... members... as one RESP buffer. */
  private encodeBatch(b: StoreBatch, G: number, hk: string): Buffer {
    const numKeys = G + (this.hll ? 1 : 0);
    const w = new RespWriter(64 + G * 48 + b.count * (b.compact ? 26 : 40));
    w.array(3 + numKeys + 2 + G + b.count);
    w.str('EVALSHA');
    w.str(FIRST_SEEN_SHA);
    w.str(String(numKeys));
    for (let g = 0; g < G; g++) w.str(b.groupKeys[g]!);
    if (this.hll) w.str(hk);
    w.str(String(G));
    w.str(this.hll ? '1' : '0');
    for (let g = 0; g < G; g++) w.str(String(b.starts[g + 1]! - b.starts[g]!));
    if (b.compact !== undefined) {
      const { dv, idx } = b.compact;
      for (let j = 0; j < b.count; j++) {
        const o = idx[j]! << 4;
        w.int64(dv.getUint32(o, true), dv.getInt32(o + 4, true));
      }
    } else {
      for (let j = 0; j < b.count; j++) w.member(b.member(j));
    }
    return w.bytes();
  }

  async count(window: string, layout: Layout, buckets: number): Promise<{ exact: number; approximate: number }> {
    let exact = 0;
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
        }
      } else {
        const ps: Promise<number>[] = [];
        for (let b = s; b < e; b++) ps.push(this.redis.scard(bucketKey(spec, window, b)));
        for (const v of await Promise.all(ps)) exact += v;
      }
    }
    const approximate = await this.redis.pfcount(hllKey(this.prefix, window, layout));
    return { exact, approximate };
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
    if (!this.owned) return;
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}

export const storeError = (msg: string, cause: unknown): HashGateError =>
  new HashGateError(ErrorCodes.STORE_UNAVAILABLE, msg, { cause });
