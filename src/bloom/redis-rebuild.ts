// Fleet-wide rebuild of a Redis-held filter (Redisson layout): build a new generation under a
// temporary name in the same cluster slot, then swap it in with RENAME in one script, so every
// reader (hashgate and Redisson alike) keeps using the same name and sees either the old or the
// new filter, never a half-built one. A lock key lets only one rebuild run.
//
// Keys, all in the name's slot (`{name}:...`, or `name:...` when the name holds a tag):
//   hg:rebuild-lock   SET NX PX token, refreshed while the rebuild runs
//   hg:next           the generation being built (config at hg:next:config); it carries a TTL
//                     renewed with the lock, and the next lock holder discards its bits first, so a
//                     run killed mid-build leaves nothing behind for long and never touches the live keys
//   hg:rebuild-last   hash describing the last swap (generation, time, keys, duration, source):
//                     `hashgate bloom status` and `hashgate metrics --bloom` read it
//   hg:spare          the generation the last swap replaced (keepSpare), kept so the next
//                     rebuild writes into a string Redis already holds: a new string of that size
//                     is zero-filled by one command whose time grows with the filter (page faults
//                     dominate on a VM)
//
// The bitmap is built in this process's memory when it fits (maxLocalBytes) and uploaded in
// SETRANGE chunks: one Redis command per MiB instead of one SETBIT per bit (measured 1.99M keys/s
// against 67k keys/s for scripted SETBITs at 1M keys, bench bloom-rebuild). Every upload checks the lock token inside its script, so a run that lost
// its lock (paused past the lease) can never overwrite the bits of the run that holds it now.
//
// Adds made during the build by hashgate writers that publish (RedisBloom publish: true) are
// replayed into the new generation inside the swap script, atomically with the RENAME; adds by
// writers that do not publish (Redisson) during the build are lost unless the source has them.
// Replicas see the sequence counter jump and reload, replacing their bits.
//
// Safety: a source yielding fewer than minKeys keys (default 1) is refused, because an empty export
// must not wipe a blacklist; a shape different from the live one needs `reshape`, because Redisson
// readers cache the shape and would answer "absent" until they re-read the config.
import type { Cluster, Redis } from 'ioredis';
import { ErrorCodes, HashGateError, HashGateTypeError, checkInt, invalidType } from '../errors.js';
import { RedisLock } from '../redis/lock.js';
import { LuaScript, runScript } from '../redis/scripts.js';
import { RedisBloom } from './redis-bloom.js';
import { redissonConfigKey, redissonIndexBlob, redissonKeysShareSlot, redissonShape, redissonSuffixKey } from './redisson.js';

export const REDIS_REBUILD_DEFAULTS = {
  batch: 8192,
  lockTtlMs: 60_000,
  /** Largest bitmap (bytes) built in this process's memory and uploaded in chunks. */
  maxLocalBytes: 512 * 1024 * 1024,
  /** Bytes per SETRANGE when uploading a locally built bitmap. */
  uploadChunkBytes: 1024 * 1024,
  minKeys: 1,
  keepSpare: true,
} as const;

/** Exit codes of `hashgate bloom rebuild` (README documents the same). */
export const REBUILD_EXIT = { swapped: 0, error: 1, usage: 2, locked: 3, swappedWithRejects: 4, interrupted: 130 } as const;

type Key = string | Uint8Array;

export interface RedisBloomRebuildOptions {
  redis: Redis | Cluster;
  name: string;
  /** Sizing of the new generation; default: the current config's expectedInsertions/falseProbability. */
  expectedItems?: number;
  fpp?: number;
  /** Allow a shape (size, hash count) different from the live filter's. */
  reshape?: boolean;
  /**
   * Every key of the new generation: single keys, or arrays of keys (a batch; it is consumed before
   * the next one is pulled, so a source may reuse its buffers).
   */
  keys: AsyncIterable<Key | Key[]> | Iterable<Key | Key[]>;
  /** Recorded with the swap (e.g. 'files:3'); never key contents. */
  sourceDescription?: string;
  /** keys per write when the bitmap is built in Redis (default 8192) */
  batch?: number;
  /** lock lease, refreshed every third of it (default 60 s) */
  lockTtlMs?: number;
  /** refuse to swap in fewer keys than this (default 1; 0 allows an empty filter) */
  minKeys?: number;
  /**
   * Keep the replaced generation's bitmap as `{name}:hg:spare` and build the next generation in it
   * (default true): no command of a later rebuild allocates the bitmap, at the cost of holding a
   * second bitmap in Redis between rebuilds. false deletes it at the swap.
   */
  keepSpare?: boolean;
  /** Build in this process and upload (default: when the bitmap is at most maxLocalBytes). */
  local?: boolean;
  /** Aborting stops the build; nothing is swapped. */
  signal?: AbortSignal;
  onProgress?: (keys: number) => void;
  /** Clock of the recorded swap time (Unix ms). */
  now?: () => number;
  /** Told about the swap (bloom_last_rebuild_* gauges). */
  metrics?: { recordRebuild(name: string, result: RedisBloomRebuildResult, at?: number): void };
}

export interface RedisBloomRebuildResult {
  keys: number;
  size: number;
  hashIterations: number;
  /** change-stream entries (adds during the build) replayed into the new generation */
  replayed: number;
  /** generations swapped in so far under this name (1 after the first rebuild) */
  generation: number;
  /** true when the previous run left a generation behind (crashed) and this run discarded its bits */
  cleanedStale: boolean;
  /** true when the new generation was written into a bitmap Redis already held (spare or stale) */
  reusedBitmap: boolean;
  durationMs: number;
}

export interface RedisBloomRebuildStatus {
  generation: number;
  /** Unix ms of the last swap */
  at: number;
  durationMs: number;
  keys: number;
  source: string;
}

// The lease is the Redis layer's RedisLock (take, release); its refresh is this script instead,
// because the rebuild's refresh must also extend the generation being built (KEYS[2..]: a shorter
// TTL of its own) atomically with the lease, and RedisLock refreshes its one key only.
const LOCK_REFRESH = new LuaScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
for i = 2, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
return 1`);

/**
 * KEYS: lock, new bitmap, new config, spare. ARGV: token, '1' to keep the bitmap as the spare.
 * A failed run's bitmap becomes the spare, so the next run need not allocate one.
 */
const DROP = new LuaScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('RENAME', KEYS[2], KEYS[4])
  redis.call('PERSIST', KEYS[4])
end
return redis.call('DEL', KEYS[2], KEYS[3])`);

/**
 * KEYS: lock, new bitmap, new config, spare. ARGV: token, final byte length, '1' to reuse, ttl ms.
 * Returns {stale, reused}: whether a crashed run left a generation, and whether the new bitmap is
 * one Redis already holds (that generation, or the spare renamed to it). A bitmap no longer than
 * the final length is reused: one filled by SETBITs ends at its highest set bit, a few bytes short,
 * and ALLOCATE adds the missing tail. A longer one (the filter was reshaped smaller) is deleted.
 */
const PREPARE = new LuaScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('HGREBUILDLOCK lock lost') end
local want = tonumber(ARGV[2])
local stale = redis.call('EXISTS', KEYS[2])
local reused = 0
redis.call('DEL', KEYS[3])
if ARGV[3] == '1' then
  local stale_len, spare_len = redis.call('STRLEN', KEYS[2]), redis.call('STRLEN', KEYS[4])
  if stale_len > 0 and stale_len <= want then
    reused = 1
  elseif spare_len > 0 and spare_len <= want then
    redis.call('RENAME', KEYS[4], KEYS[2])
    reused = 1
  end
end
if reused == 1 then
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  redis.call('DEL', KEYS[4])
else
  redis.call('DEL', KEYS[2], KEYS[4])
end
return {stale, reused}`);

/** KEYS: lock, new bitmap. ARGV: token, byte offset, bytes. Zeroes a reused bitmap in place. */
const ZERO = new LuaScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('HGREBUILDLOCK lock lost') end
return redis.call('SETRANGE', KEYS[2], ARGV[2], string.rep('\\0', tonumber(ARGV[3])))`);

/**
 * KEYS: lock, new bitmap, new config. ARGV: token, final byte length, ttl ms. Gives the new bitmap
 * its final length in one command. Growing it a few MiB per command does not spread the cost:
 * Redis reallocates a growing string, and jemalloc moves a large one to a new extent at most of
 * its size classes, copying and faulting in everything written so far each time. A 114 MiB bitmap
 * grown 2 MiB per command kept Redis busy for 90 to 420 ms at each of eight moves (4.4 s rebuild);
 * allocated at once, for 290 ms once (2.3 s rebuild).
 */
const ALLOCATE = new LuaScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('HGREBUILDLOCK lock lost') end
local want = tonumber(ARGV[2])
if redis.call('STRLEN', KEYS[2]) < want then redis.call('SETRANGE', KEYS[2], want - 1, '\\0') end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1`);

/** KEYS: lock, new bitmap. ARGV: token, byte offset, bytes. Fenced by the lock token. */
const UPLOAD = new LuaScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('HGREBUILDLOCK lock lost') end
return redis.call('SETRANGE', KEYS[2], ARGV[2], ARGV[3])`);

/**
 * KEYS: new bitmap, new config, bitmap, config, lock, stream, seq, last, spare. ARGV: lock token,
 * stream id the build started after, seq at that point, '1' when the shapes match (replay
 * possible), time, duration ms, keys, source, '1' to keep the replaced bitmap as the spare.
 * Replays the stream entries after ARGV[2] into the new bitmap, renames both keys over the live
 * ones, and appends a new-generation marker whose sequence number skips one, so every replica
 * reloads (replacing its bits, so removed keys go there too).
 */
const SWAP = new LuaScript(`#!lua
if redis.call('GET', KEYS[5]) ~= ARGV[1] then return redis.error_reply('HGREBUILDLOCK lock lost') end
local entries = redis.call('XRANGE', KEYS[6], '(' .. ARGV[2], '+')
local expect = tonumber(ARGV[3]) + 1
local replayed = 0
for _, e in ipairs(entries) do
  local f = e[2]
  local seq, blob = nil, nil
  for i = 1, #f, 2 do
    if f[i] == 's' then seq = tonumber(f[i + 1]) elseif f[i] == 'b' then blob = f[i + 1] end
  end
  if seq ~= expect then return redis.error_reply('HGREBUILDGAP change stream trimmed during the build') end
  if ARGV[4] ~= '1' then return redis.error_reply('HGREBUILDSHAPE adds during the build used the old shape') end
  if blob then
    for p = 1, #blob - 3, 4 do
      local b1, b2, b3, b4 = string.byte(blob, p, p + 3)
      redis.call('SETBIT', KEYS[1], b1 + b2 * 256 + b3 * 65536 + b4 * 16777216, 1)
    end
  end
  expect = expect + 1
  replayed = replayed + 1
end
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('EXISTS', KEYS[2]) == 0 then return redis.error_reply('HGREBUILDNOGEN new generation missing') end
if ARGV[9] == '1' and redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('RENAME', KEYS[3], KEYS[9])
else
  redis.call('DEL', KEYS[9])
end
redis.call('RENAME', KEYS[1], KEYS[3])
redis.call('PERSIST', KEYS[3])
redis.call('RENAME', KEYS[2], KEYS[4])
redis.call('PERSIST', KEYS[4])
local seq = redis.call('INCRBY', KEYS[7], 2)
redis.call('XADD', KEYS[6], '*', 's', seq, 'g', '1')
local gen = redis.call('HINCRBY', KEYS[8], 'generation', 1)
redis.call('HSET', KEYS[8], 'at', ARGV[5], 'durationMs', ARGV[6], 'keys', ARGV[7], 'source', ARGV[8])
return {replayed, gen}
`);

/** `{name}:hg:<suffix>` keys of the rebuild, in the filter's slot. */
export function rebuildKeys(name: string): { lock: string; next: string; nextConfig: string; last: string; spare: string } {
  const next = redissonSuffixKey(name, 'hg:next');
  return {
    lock: redissonSuffixKey(name, 'hg:rebuild-lock'), next, nextConfig: redissonConfigKey(next), last: redissonSuffixKey(name, 'hg:rebuild-last'),
    spare: redissonSuffixKey(name, 'hg:spare'),
  };
}

/** The last swap recorded for `name`, or null when it was never rebuilt. */
export async function readRebuildStatus(redis: Redis | Cluster, name: string): Promise<RedisBloomRebuildStatus | null> {
  const h = await redis.hgetall(rebuildKeys(name).last);
  if (h.generation === undefined) return null;
  return { generation: Number(h.generation), at: Number(h.at), durationMs: Number(h.durationMs), keys: Number(h.keys), source: h.source ?? '' };
}

function lockLost(name: string, lockKey: string, cause?: unknown): HashGateError {
  return new HashGateError(ErrorCodes.LOCK_HELD, `rebuild of ${name} lost its lock ${lockKey}; nothing swapped, the live filter is unchanged`, {
    ...(cause !== undefined ? { cause } : {}),
    details: { name },
  });
}

/** Runs `step(0..count-1)` four commands at a time (the upload's pipelining depth). */
async function inGroups(count: number, step: (i: number) => Promise<unknown> | undefined): Promise<void> {
  let group: Promise<unknown>[] = [];
  try {
    for (let i = count - 1; i >= 0; i--) {
      const p = step(i);
      if (p === undefined) continue;
      group.push(p);
      if (group.length >= 4) {
        const g = group;
        group = [];
        await Promise.all(g);
      }
    }
  } finally {
    // a step that threw (lock lost, aborted) leaves no command's rejection unobserved
    await Promise.allSettled(group);
  }
  await Promise.all(group);
}

/** Sets the u32 LE indexes of `blob` in `bits` (Redis bitmap order). */
function setLocal(bits: Uint8Array, blob: Buffer): void {
  for (let o = 0; o + 3 < blob.length; o += 4) {
    const ix = blob.readUInt32LE(o);
    bits[ix >>> 3]! |= 0x80 >>> (ix & 7);
  }
}

export async function rebuildRedisBloom(o: RedisBloomRebuildOptions): Promise<RedisBloomRebuildResult> {
  const t0 = performance.now();
  if (typeof o !== 'object' || o === null) throw invalidType('options', 'an object', o);
  if (typeof o.name !== 'string' || o.name.length === 0) throw invalidType('options.name', 'a non-empty string', o.name);
  const src = o.keys as unknown;
  if (src === null || typeof src !== 'object' || (!(Symbol.asyncIterator in src) && !(Symbol.iterator in src))) {
    throw invalidType('options.keys', 'an (async) iterable of keys or key arrays', src);
  }
  // the scripts touch the live, temporary, lock and record keys together: one cluster slot
  if (!redissonKeysShareSlot(o.name)) {
    throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `options.name cannot keep its config and rebuild keys in one cluster slot (use a name without '{' or with one non-empty '{tag}')`, {
      name: 'options.name',
    });
  }
  if (typeof o.redis !== 'object' || o.redis === null) throw invalidType('options.redis', 'an ioredis Redis or Cluster client', o.redis);
  const batch = checkInt('options.batch', o.batch ?? REDIS_REBUILD_DEFAULTS.batch, 1, 100_000);
  const ttl = checkInt('options.lockTtlMs', o.lockTtlMs ?? REDIS_REBUILD_DEFAULTS.lockTtlMs, 1_000);
  const minKeys = checkInt('options.minKeys', o.minKeys ?? REDIS_REBUILD_DEFAULTS.minKeys, 0);
  const keepSpare = o.keepSpare ?? REDIS_REBUILD_DEFAULTS.keepSpare;
  if (typeof keepSpare !== 'boolean') throw invalidType('options.keepSpare', 'a boolean', keepSpare);
  const keep = keepSpare ? '1' : '0';
  const tempTtl = 2 * ttl;
  const now = o.now ?? Date.now;
  const { redis, name } = o;
  const { lock: lockKey, next: nextName, nextConfig, last: lastKey, spare: spareKey } = rebuildKeys(name);
  const streamKey = redissonSuffixKey(name, 'hg:changes');
  const seqKey = redissonSuffixKey(name, 'hg:seq');
  const lock = await RedisLock.acquire(redis, lockKey, ttl);
  if (lock === undefined) {
    throw new HashGateError(ErrorCodes.LOCK_HELD, `another rebuild of ${name} holds ${lockKey}`, { details: { name } });
  }
  const { token } = lock;
  let lost = false;
  let beat: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    beat = runScript(redis, LOCK_REFRESH, 3, [lockKey, nextName, nextConfig, token, ttl, tempTtl]).then(
      (r) => {
        if (Number(r) !== 1) lost = true;
      },
      () => undefined, // a missed beat is retried next tick; every write to the generation checks the token
    );
  }, Math.max(250, Math.floor(ttl / 3)));
  timer.unref();
  const check = (): void => {
    if (lost) throw lockLost(name, lockKey);
    o.signal?.throwIfAborted();
  };
  try {
    const live = await RedisBloom.open({ redis, name });
    const current = await live.config();
    const expectedItems = o.expectedItems ?? current?.expectedInsertions;
    const fpp = o.fpp ?? current?.falseProbability;
    if (expectedItems === undefined || fpp === undefined) {
      throw invalidType('options.expectedItems and options.fpp', 'numbers (the filter has no config to copy them from)', expectedItems ?? fpp);
    }
    const shape = redissonShape(expectedItems, fpp);
    const sameShape = current !== null && current.size === shape.size && current.hashIterations === shape.hashIterations;
    if (current !== null && !sameShape && o.reshape !== true) {
      throw new HashGateError(
        ErrorCodes.BLOOM_SHAPE_MISMATCH,
        `filter ${name} is size=${current.size} hashIterations=${current.hashIterations}; the new sizing gives size=${shape.size} hashIterations=${shape.hashIterations}. ` +
          `Keep the live sizing, or pass reshape (Redisson readers answer "absent" until they re-read the config)`,
        { details: { name, live: { size: current.size, hashIterations: current.hashIterations }, wanted: shape } },
      );
    }
    // where the build starts in the change stream: later adds are replayed at the swap
    const [seqRaw, top] = (await redis.multi().get(seqKey).xrevrange(streamKey, '+', '-', 'COUNT', 1).exec())!.map(([e, v]) => {
      if (e) throw e;
      return v;
    }) as [string | null, Array<[string, string[]]>];
    const startId = top[0]?.[0] ?? '0-0';
    const startSeq = top[0] ? Number(top[0][1][top[0][1].indexOf('s') + 1]) : Number(seqRaw ?? 0);

    const size = shape.size;
    const k = shape.hashIterations;
    const bytes = Math.ceil(size / 8);
    // a generation left by a run that died mid-build (kill -9, host lost) is ours now: its bits are
    // discarded, and its string (or the spare) is written over when it already has the final length
    const [staleRaw, reusedRaw] = (await runScript(redis, PREPARE, 4, [lockKey, nextName, nextConfig, spareKey, token, bytes, keep, tempTtl])) as [number, number];
    const cleanedStale = Number(staleRaw) === 1;
    const reusedBitmap = Number(reusedRaw) === 1;
    const next = await RedisBloom.open({ redis, name: nextName, expectedItems, fpp });
    await next.tryInit();
    check();
    await runScript(redis, ALLOCATE, 3, [lockKey, nextName, nextConfig, token, bytes, tempTtl]);
    const useLocal = o.local ?? bytes <= REDIS_REBUILD_DEFAULTS.maxLocalBytes;
    const bits = useLocal ? new Uint8Array(bytes) : undefined;
    const chunk = REDIS_REBUILD_DEFAULTS.uploadChunkBytes;
    if (reusedBitmap && bits === undefined) {
      // the keys are set bit by bit in Redis: clear the reused string first, in place, in chunks
      await inGroups(Math.ceil(bytes / chunk), (i) => {
        check();
        return runScript(redis, ZERO, 2, [lockKey, nextName, token, i * chunk, Math.min(chunk, bytes - i * chunk)]);
      });
    }
    let n = 0;
    const write = async (keys: Key[]): Promise<void> => {
      check();
      if (bits !== undefined) {
        for (let from = 0; from < keys.length; from += 8192) {
          const m = Math.min(8192, keys.length - from);
          setLocal(bits, redissonIndexBlob(keys, from, m, k, size));
        }
      } else {
        for (let from = 0; from < keys.length; from += batch) await next.addAll(keys.slice(from, from + batch));
      }
      n += keys.length;
      o.onProgress?.(n);
    };
    let single: Key[] = [];
    for await (const item of o.keys as AsyncIterable<Key | Key[]>) {
      if (Array.isArray(item)) {
        if (single.length > 0) await write(single.splice(0));
        if (item.length > 0) await write(item);
      } else {
        single.push(item);
        if (single.length >= batch) await write(single.splice(0));
      }
    }
    if (single.length > 0) await write(single);
    if (n < minKeys) {
      throw new HashGateError(ErrorCodes.INVALID_ARG, `the source gave ${n} keys, fewer than minKeys ${minKeys}; the live filter ${name} is kept`, {
        details: { name, keys: n, minKeys },
      });
    }
    check();
    if (bits !== undefined) {
      // The bitmap already has its final length (allocated above, or reused): every chunk is written
      // in place, and no command reallocates (copies) the string.
      await inGroups(Math.ceil(bytes / chunk), (i) => {
        const off = i * chunk;
        const part = bits.subarray(off, Math.min(bytes, off + chunk));
        if (part.every((b) => b === 0)) {
          if (!reusedBitmap) return undefined; // a grown bitmap is already zeros
          check();
          return runScript(redis, ZERO, 2, [lockKey, nextName, token, off, part.length]);
        }
        check();
        return runScript(redis, UPLOAD, 2, [lockKey, nextName, token, off, Buffer.from(part.buffer, part.byteOffset, part.length)]);
      });
    }
    await beat;
    check();
    const durationMs = performance.now() - t0;
    const at = now();
    let swapped: [number, number];
    try {
      swapped = (await runScript(redis, SWAP, 9, [
        nextName, nextConfig, name, redissonConfigKey(name), lockKey, streamKey, seqKey, lastKey,
        spareKey, token, startId, startSeq, sameShape ? '1' : '0', at, Math.round(durationMs), n, o.sourceDescription ?? 'library', keep,
      ])) as [number, number];
    } catch (err) {
      const msg = (err as Error).message;
      if (msg.includes('HGREBUILDLOCK')) throw lockLost(name, lockKey, err);
      throw new HashGateError(ErrorCodes.STORE, `rebuild of ${name} not swapped in: ${msg}`, { cause: err, details: { name } });
    }
    const result: RedisBloomRebuildResult = {
      keys: n, size, hashIterations: k, replayed: Number(swapped[0]), generation: Number(swapped[1]), cleanedStale, reusedBitmap, durationMs,
    };
    o.metrics?.recordRebuild(name, result, at);
    return result;
  } catch (e) {
    await beat;
    // an upload or prepare script refused: another run holds the lock now
    const err = !(e instanceof HashGateError) && e instanceof Error && e.message.includes('HGREBUILDLOCK') ? lockLost(name, lockKey, e) : e;
    // delete our generation only while we still hold the lock: after it, hg:next is the new holder's
    await runScript(redis, DROP, 4, [lockKey, nextName, nextConfig, spareKey, token, keep]).catch(() => undefined);
    throw err;
  } finally {
    clearInterval(timer);
    await lock.release().catch(() => undefined);
  }
}
