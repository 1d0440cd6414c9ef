// Multi-key reads and writes of the cache's Redis tier on a standalone Redis or a Redis Cluster.
// Value keys keep their plain layout `${prefix}${table}:${key}` (no hash tags: one table must
// spread over every master, and existing data and the migration SCAN keep working), so on a
// Cluster an MGET is split per slot and the per-slot MGETs are sent together; ioredis routes each
// to its master and follows MOVED per command (they are still pipelined on each node's socket,
// since ioredis writes without waiting for replies). Standalone keeps one MGET and one pipeline
// per batch.
import calculateSlot from 'cluster-key-slot';
import { ErrorCodes, HashGateError } from '../errors.js';
import { isCluster, type RedisClient } from '../redis/client.js';

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
