// Fleet-wide rebuild of a Redis-held filter (Redisson layout): build a new generation under a
// temporary name in the same cluster slot, then swap it in with RENAME in one script, so every
// reader (hashgate and Redisson alike) keeps using the same name and sees either the old or the
// new filter, never a half-built one. A lock key lets only one rebuild run.
//
// Adds made during the build by hashgate writers that publish (RedisBloom publish: true) are
// replayed into the new generation inside the swap script, atomically with the RENAME; adds by
// writers that do not publish (Redisson) during the build are lost unless the source has them.
// Replicas see the sequence counter jump and reload.
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { ErrorCodes, HashGateError, checkInt, invalidType } from '../errors.js';
import { RedisBloom } from './redis-bloom.js';
import { redissonConfigKey, redissonSuffixKey } from './redisson.js';

export interface RedisBloomRebuildOptions {
  redis: Redis | Cluster;
  name: string;
  /** Sizing of the new generation; default: the current config's expectedInsertions/falseProbability. */
  expectedItems?: number;
  fpp?: number;
  /** Every key of the new generation. */
  keys: AsyncIterable<string | Uint8Array> | Iterable<string | Uint8Array>;
  /** keys per addAll (default 8192) */
  batch?: number;
  /** lock lease, refreshed every third of it (default 60 s) */
  lockTtlMs?: number;
  onProgress?: (keys: number) => void;
}

export interface RedisBloomRebuildResult {
  keys: number;
  size: number;
  hashIterations: number;
  /** change-stream entries (adds during the build) replayed into the new generation */
  replayed: number;
  durationMs: number;
}

const LOCK_REFRESH_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const LOCK_RELEASE_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

/**
 * KEYS: new bitmap, new config, bitmap, config, lock, stream, seq. ARGV: lock token, stream id the
 * build started after, seq at that point, '1' when the shapes match (replay possible).
 * Replays the stream entries after ARGV[2] into the new bitmap, renames both keys over the live
 * ones, and appends a new-generation marker whose sequence number skips one, so every replica
 * reloads (replacing its bits, so removed keys go there too).
 */
const SWAP_LUA = `#!lua
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
  for p = 1, #blob, 4 do
    local b1, b2, b3, b4 = string.byte(blob, p, p + 3)
    redis.call('SETBIT', KEYS[1], b1 + b2 * 256 + b3 * 65536 + b4 * 16777216, 1)
  end
  expect = expect + 1
  replayed = replayed + 1
end
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('RENAME', KEYS[1], KEYS[3]) else redis.call('DEL', KEYS[3]) end
redis.call('RENAME', KEYS[2], KEYS[4])
local seq = redis.call('INCRBY', KEYS[7], 2)
redis.call('XADD', KEYS[6], '*', 's', seq, 'g', '1')
return replayed
`;

export async function rebuildRedisBloom(o: RedisBloomRebuildOptions): Promise<RedisBloomRebuildResult> {
  const t0 = Date.now();
  if (typeof o !== 'object' || o === null) throw invalidType('options', 'an object', o);
  if (typeof o.name !== 'string' || o.name.length === 0) throw invalidType('options.name', 'a non-empty string', o.name);
  if (o.keys === null || typeof o.keys !== 'object') throw invalidType('options.keys', 'an iterable of keys', o.keys);
  const batch = checkInt('options.batch', o.batch ?? 8192, 1, 100_000);
  const ttl = checkInt('options.lockTtlMs', o.lockTtlMs ?? 60_000, 1_000);
  const { redis, name } = o;
  const lockKey = redissonSuffixKey(name, 'hg:rebuild-lock');
  const streamKey = redissonSuffixKey(name, 'hg:changes');
  const seqKey = redissonSuffixKey(name, 'hg:seq');
  const nextName = redissonSuffixKey(name, 'hg:next');
  const token = randomBytes(16).toString('hex');

  if ((await redis.set(lockKey, token, 'PX', ttl, 'NX')) !== 'OK') {
    throw new HashGateError(ErrorCodes.LOCK_HELD, `another rebuild of ${name} holds ${lockKey}`, { details: { name } });
  }
  let lost = false;
  const timer = setInterval(() => {
    redis.eval(LOCK_REFRESH_LUA, 1, lockKey, token, ttl).then(
      (r) => {
        if (Number(r) !== 1) lost = true;
      },
      () => undefined,
    );
  }, Math.max(250, Math.floor(ttl / 3)));
  timer.unref();
  try {
    const live = await RedisBloom.open({ redis, name });
    const current = await live.config();
    const expectedItems = o.expectedItems ?? current?.expectedInsertions;
    const fpp = o.fpp ?? current?.falseProbability;
    if (expectedItems === undefined || fpp === undefined) {
      throw invalidType('options.expectedItems and options.fpp', 'numbers (the filter has no config to copy them from)', expectedItems ?? fpp);
    }
    // where the build starts in the change stream: later adds are replayed at the swap
    const [seqRaw, top] = (await redis.multi().get(seqKey).xrevrange(streamKey, '+', '-', 'COUNT', 1).exec())!.map(([e, v]) => {
      if (e) throw e;
      return v;
    }) as [string | null, Array<[string, string[]]>];
    const startId = top[0]?.[0] ?? '0-0';
    const startSeq = top[0] ? Number(top[0][1][top[0][1].indexOf('s') + 1]) : Number(seqRaw ?? 0);

    await redis.del(nextName, redissonConfigKey(nextName));
    const next = await RedisBloom.open({ redis, name: nextName, expectedItems, fpp });
    await next.tryInit();
    let n = 0;
    let buf: Array<string | Uint8Array> = [];
    for await (const key of o.keys as AsyncIterable<string | Uint8Array>) {
      buf.push(key);
      if (buf.length >= batch) {
        await next.addAll(buf);
        n += buf.length;
        buf = [];
        o.onProgress?.(n);
        if (lost) throw new HashGateError(ErrorCodes.LOCK_HELD, `rebuild of ${name} lost its lock ${lockKey}`, { details: { name } });
      }
    }
    if (buf.length > 0) await next.addAll(buf);
    n += buf.length;
    const sameShape = current !== null && current.size === next.size && current.hashIterations === next.hashIterations;
    let replayed: number;
    try {
      replayed = Number(
        await redis.eval(SWAP_LUA, 7, nextName, redissonConfigKey(nextName), name, redissonConfigKey(name), lockKey, streamKey, seqKey, token, startId, startSeq, sameShape ? '1' : '0'),
      );
    } catch (err) {
      const msg = (err as Error).message;
      const code = msg.includes('HGREBUILDLOCK') ? ErrorCodes.LOCK_HELD : ErrorCodes.STORE;
      throw new HashGateError(code, `rebuild of ${name} not swapped in: ${msg}`, { cause: err, details: { name } });
    }
    return { keys: n, size: next.size, hashIterations: next.hashIterations, replayed, durationMs: Date.now() - t0 };
  } catch (err) {
    await redis.del(nextName, redissonConfigKey(nextName)).catch(() => undefined);
    throw err;
  } finally {
    clearInterval(timer);
    await redis.eval(LOCK_RELEASE_LUA, 1, lockKey, token).catch(() => undefined);
  }
}
