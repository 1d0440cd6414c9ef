// Multi-key reads and writes of the cache's Redis tier on a standalone Redis or a Redis Cluster.
// Value keys keep their plain layout `${prefix}${table}:${key}` (no hash tags: one table must
// spread over every master, and existing data and the migration SCAN keep working), so on a
// Cluster an MGET is split per slot and the per-slot MGETs are sent together; ioredis routes each
// to its master and follows MOVED per command (they are still pipelined on each node's socket,
// since ioredis writes without waiting for replies). Standalone keeps one MGET and one pipeline
// per batch; its MGETs go over a connection of the tier's own (MgetPipe).
import type { Redis, RedisOptions } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { ErrorCodes, HashGateError } from '../errors.js';
import { isCluster, type RedisClient } from '../redis/client.js';
import { PipeReplyError, RespPipe, type ReplySink, type RespValue } from '../redis/pipe.js';
import { endpointOf } from '../redis/pipes.js';
import { RespWriter } from '../redis/resp.js';

export { isCluster, type RedisClient };

export interface MgetResult {
  /** Per key: the value, null = absent, undefined = its node did not answer (Cluster only). */
  values: (Buffer | null | undefined)[];
  /** The first failure when some slots failed (the rest still answered). */
  error?: unknown;
}

/**
 * Values of `keys` in order. Standalone: one MGET, which rejects as a whole. Cluster: one MGET per
 * slot, each bounded by `timeoutMs`; a slot whose node is down or slow leaves its keys undefined
 * and the others still answer (a dead master costs only its share of the keys). Rejects only
 * when every slot failed.
 */
export async function mgetBuffers(client: RedisClient, keys: readonly string[], timeoutMs: number): Promise<MgetResult> {
  if (!isCluster(client)) return { values: await client.mgetBuffer(...(keys as string[])) };
  const bySlot = new Map<number, number[]>();
  for (let i = 0; i < keys.length; i++) {
    const slot = calculateSlot(keys[i]!);
    const g = bySlot.get(slot);
    if (g) g.push(i);
    else bySlot.set(slot, [i]);
  }
  const values: (Buffer | null | undefined)[] = new Array<Buffer | null | undefined>(keys.length).fill(undefined);
  let error: unknown;
  let ok = 0;
  await Promise.all(
    [...bySlot.values()].map(async (idx) => {
      try {
        const vals = await bounded(client.mgetBuffer(...idx.map((i) => keys[i]!)), timeoutMs);
        for (let j = 0; j < idx.length; j++) values[idx[j]!] = vals[j] ?? null;
        ok++;
      } catch (e) {
        error ??= e;
      }
    }),
  );
  if (ok === 0 && keys.length > 0) throw error;
  return error === undefined ? { values } : { values, error };
}

function bounded<T>(p: Promise<T>, ms: number): Promise<T> {
  p.catch(() => undefined);
  let t: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      t = setTimeout(() => reject(new HashGateError(ErrorCodes.TIMEOUT, `redis MGET did not answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(t));
}

/** Bytes of a RESP bulk string head: `$` + up to 10 digits + CRLF, with room to spare. */
const BULK_HEAD = 16;

/** The one reply of an MGET: an array of values, or an error. */
class MgetReply implements ReplySink {
  // the values are decoded as soon as the reply is in, and only the decoded objects are kept
  readonly views = true;
  values: RespValue = null;
  err: string | undefined;
  int(): void {
    this.err ??= 'MGET answered an integer';
  }
  error(_i: number, message: string): void {
    this.err = message;
  }
  value(_i: number, v: RespValue): void {
    this.values = v;
  }
}

/**
 * MGETs of a standalone Redis (not a Sentinel set) over a RESP connection of the tier's own: one
 * buffer carries the MGET, each key written as prefix bytes + the key's UTF-8, and the values come
 * back as Buffers. Through ioredis each call built a Command, a prefixed string per key (then
 * flattened and measured again on write) and its reply parser's objects: a large share of a
 * Redis-served lookup's CPU (bench/concurrency.ts, lookup Redis hits, times both). The client's
 * own keyPrefix is applied as ioredis would. A call that outlives its
 * timeout fails with HG_ERR_TIMEOUT and cuts the connection (the next call connects again): a
 * stalled socket must not hold later calls behind it.
 */
export class MgetPipe {
  readonly #pipe: RespPipe;
  /** The client's keyPrefix (ioredis adds it to every key it sends). */
  readonly keyPrefix: string;

  constructor(client: Redis, connectTimeoutMs: number) {
    this.#pipe = new RespPipe(endpointOf(client, connectTimeoutMs));
    this.keyPrefix = (client.options as RedisOptions).keyPrefix ?? '';
  }

  /** Whether `client` is one this class can serve (standalone, not through Sentinel). */
  static serves(client: RedisClient): client is Redis {
    return !isCluster(client) && !(client.options as RedisOptions).sentinels;
  }

  /** Whether its connection is up (lookups read through it; the client serves the rest). */
  get isReady(): boolean {
    return this.#pipe.isReady;
  }

  /** Connects unless connected (rejects when it cannot; the next call tries again). */
  connect(): Promise<void> {
    return this.#pipe.connect();
  }

  /** Connects ahead of the first call; a failure is left to that call. */
  warm(): void {
    this.#pipe.connect().catch(() => undefined);
  }

  /**
   * Values of keys[off..end), each read at `prefix` (UTF-8 bytes, keyPrefix included) + key; null
   * where absent. Rejects with HG_ERR_TIMEOUT past `timeoutMs`, or with the connection's or
   * Redis' error.
   */
  mget(prefix: Buffer, keys: readonly string[], off: number, end: number, timeoutMs: number): Promise<(Buffer | null)[]> {
    const n = end - off;
    // sized for the most bytes the keys can take (3 per UTF-16 unit), so the writer never grows
    let units = 0;
    for (let j = off; j < end; j++) units += keys[j]!.length;
    const w = new RespWriter(32 + n * (prefix.length + BULK_HEAD) + 3 * units);
    w.array(n + 1);
    w.str('MGET');
    for (let j = off; j < end; j++) w.prefixed(prefix, keys[j]!);
    const b = w.bytes();
    const reply = new MgetReply();
    const pipe = this.#pipe;
    return new Promise<(Buffer | null)[]>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new HashGateError(ErrorCodes.TIMEOUT, `redis MGET did not answer within ${timeoutMs} ms`));
        pipe.destroy(`an MGET did not answer within ${timeoutMs} ms`);
      }, timeoutMs);
      pipe.send(b, 1, reply).then(
        () => {
          clearTimeout(timer);
          const v = reply.values;
          if (reply.err !== undefined) reject(new PipeReplyError(reply.err));
          else if (!Array.isArray(v) || v.length !== n) reject(new PipeReplyError(`MGET of ${n} keys answered ${Array.isArray(v) ? `${v.length} values` : 'no array'}`));
          else resolve(v as (Buffer | null)[]);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  }

  close(): void {
    this.#pipe.close();
  }
}

export interface SetItem {
  key: string;
  value: Buffer;
  px: number;
  /** Only if absent (SET NX). */
  nx?: boolean;
}

/**
 * SET ... PX [NX] for every item; rejects with the first failure after all were tried (a failed
 * key is never reported as written). Standalone: one pipeline.
 */
export async function setMany(client: RedisClient, items: readonly SetItem[]): Promise<void> {
  if (items.length === 0) return;
  if (!isCluster(client)) {
    const pipe = client.pipeline();
    for (const it of items) {
      if (it.nx) pipe.set(it.key, it.value, 'PX', it.px, 'NX');
      else pipe.set(it.key, it.value, 'PX', it.px);
    }
    const res = await pipe.exec();
    for (const r of res ?? []) if (r[0]) throw r[0];
    return;
  }
  const res = await Promise.allSettled(items.map((it) => (it.nx ? client.set(it.key, it.value, 'PX', it.px, 'NX') : client.set(it.key, it.value, 'PX', it.px))));
  for (const r of res) if (r.status === 'rejected') throw r.reason;
}
