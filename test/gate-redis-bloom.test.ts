// The gate's Bloom filter held in Redis: two gates stand for two instances of a fleet sharing one
// filter on a real redis-server. An add on one is seen by a check on the other, a restarted
// instance keeps the bits, and a Redis failure is a typed rejection, never "absent".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { ErrorCodes, HashGate } from 'hashgate';
import { RedisBloom, RedisBloomReplica, ShardedRedisBloom, type RedisHeldBloom } from 'hashgate/bloom';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';

const HAVE = requireRedisOrSkip('HashGate with a Redis-held bloom');
let srv: RedisServer;
const clients: Redis[] = [];

beforeAll(async () => {
  if (HAVE) srv = await startRedis();
}, 60_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  await srv?.stop();
});

/** One instance's own connection, failing fast when Redis is gone. */
function client(): Redis {
  const c = new Redis(srv.port, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
  c.on('error', () => undefined);
  clients.push(c);
  return c;
}

const blacklisted = Array.from({ length: 300 }, (_, i) => (i % 3 === 0 ? `王五${i}|110101198001011234` : `bad-${i}`));
const others = Array.from({ length: 2000 }, (_, i) => `ok-${i}`);

type Kind = 'RedisBloom' | 'ShardedRedisBloom' | 'RedisBloomReplica';

async function filterOf(kind: Kind, name: string): Promise<RedisHeldBloom> {
  const redis = client();
  if (kind === 'RedisBloom') {
    const b = await RedisBloom.open({ redis, name, expectedItems: 10_000, fpp: 0.01 });
    await b.tryInit();
    return b;
  }
  if (kind === 'ShardedRedisBloom') {
    const b = await ShardedRedisBloom.open({ redis, name, expectedItems: 10_000, fpp: 0.01, shards: 4 });
    await b.tryInit();
    return b;
  }
  const w = await RedisBloom.open({ redis, name, expectedItems: 10_000, fpp: 0.01 });
  await w.tryInit();
  return RedisBloomReplica.open({ redis, name });
}

async function gateOf(bloom: RedisHeldBloom): Promise<HashGate> {
  return HashGate.open({ threads: 0, bloom });
}

describe.skipIf(!HAVE)('HashGate({ bloom: <held in Redis> })', () => {
  for (const kind of ['RedisBloom', 'ShardedRedisBloom', 'RedisBloomReplica'] as const) {
    it(`${kind}: an add on one instance is seen by the other, and a restarted instance keeps it`, async () => {
      const name = `blacklist-${kind}`;
      const a = await gateOf(await filterOf(kind, name));
      const bFilter = await filterOf(kind, name);
      const b = await gateOf(bFilter);
      expect([...(await b.bloomCheck(blacklisted))].every((x) => x === 0)).toBe(true);

      expect(await a.bloomAdd(blacklisted)).toBe(blacklisted.length);
      // the adding instance reads its own adds at once (a replica writes through and sets its bits)
      expect([...(await a.bloomCheck(blacklisted))].every((x) => x === 1)).toBe(true);
      if (bFilter instanceof RedisBloomReplica) {
        // the other instance's replica applies the change stream
        const t0 = Date.now();
        while (bFilter.containsAll(blacklisted).some((x) => x === 0) && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 20));
      }
      expect([...(await b.bloomCheck(blacklisted))].every((x) => x === 1)).toBe(true);
      const fp = (await b.bloomCheck(others)).reduce((s, x) => s + x, 0);
      expect(fp).toBeLessThan(others.length * 0.05);

      // a restart: both instances go away, a new one opens the same filter
      await a.close();
      await b.close();
      if (bFilter instanceof RedisBloomReplica) await bFilter.close();
      const c = await gateOf(await filterOf(kind, name));
      expect([...(await c.bloomCheck(blacklisted))].every((x) => x === 1)).toBe(true);
      // and its count of changed keys is 0: every key is there already
      expect(await c.bloomAdd(blacklisted.slice(0, 10))).toBe(0);
      await c.close();
    }, 60_000);
  }

  it('gate.bloom stays the in-process filter; options naming the Redis-held one are accepted', async () => {
    const redis = client();
    const f = await RedisBloom.open({ redis, name: 'shape-check', expectedItems: 100, fpp: 0.01 });
    await f.tryInit();
    const g = await HashGate.open({ threads: 0, bloom: f });
    expect(g.bloom).toBeUndefined();
    expect(g.stats().bloom).toBeUndefined();
    // order: a check called right after an add (not awaited in between) sees the add
    const added = g.bloomAdd(['late-key']);
    const seen = g.bloomCheck(['late-key']);
    expect(await added).toBe(1);
    expect([...(await seen)]).toEqual([1]);
    await g.close();
  });

  it('keys in flight to Redis are bounded: past maxQueue * chunkKeys a call rejects with HG_ERR_QUEUE_FULL', async () => {
    const f = await RedisBloom.open({ redis: client(), name: 'bounded', expectedItems: 100, fpp: 0.01 });
    await f.tryInit();
    const g = await HashGate.open({ threads: 0, bloom: f, maxQueue: 1, chunkKeys: 2 });
    const first = g.bloomAdd(['a', 'b']);
    await expect(g.bloomCheck(['c'])).rejects.toMatchObject({ code: ErrorCodes.QUEUE_FULL });
    expect(await first).toBe(2);
    // once the first call is answered there is room again
    expect([...(await g.bloomCheck(['a', 'b']))]).toEqual([1, 1]);
    await g.close();
  });

  it('a Redis failure rejects bloomCheck with HG_ERR_STORE instead of answering absent', async () => {
    const own = await startRedis();
    const redis = new Redis(own.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => 100, enableOfflineQueue: false });
    redis.on('error', () => undefined);
    await once(redis, 'ready');
    try {
      const f = await RedisBloom.open({ redis, name: 'down', expectedItems: 1000, fpp: 0.01 });
      await f.tryInit();
      const g = await HashGate.open({ threads: 0, bloom: f });
      await g.bloomAdd(['x']);
      await own.kill('SIGKILL');
      await expect(g.bloomCheck(['x', 'y'])).rejects.toMatchObject({ code: ErrorCodes.STORE });
      await expect(g.bloomAdd(['z'])).rejects.toMatchObject({ code: ErrorCodes.STORE });
      await g.close();
    } finally {
      redis.disconnect();
      await own.stop().catch(() => undefined);
    }
  }, 30_000);

  it('a replica past maxStalenessMs asks Redis: exact while Redis answers, HG_ERR_STORE when it is gone', async () => {
    const own = await startRedis();
    const redis = new Redis(own.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => 100 });
    redis.on('error', () => undefined);
    let now = Date.now();
    try {
      const w = await RedisBloom.open({ redis, name: 'stale', expectedItems: 1000, fpp: 0.01 });
      await w.tryInit();
      const replica = await RedisBloomReplica.open({ redis, name: 'stale', maxStalenessMs: 1000, resyncIntervalMs: 0, now: () => now });
      const g = await HashGate.open({ threads: 0, bloom: replica });
      await g.bloomAdd(['mine']);
      // the clock jumps: the local bits are too old to say "absent", so Redis answers
      now += 60_000;
      await w.addAll(['written-elsewhere']);
      expect([...(await g.bloomCheck(['mine', 'written-elsewhere']))]).toEqual([1, 1]);
      await own.kill('SIGKILL');
      now += 60_000;
      await expect(g.bloomCheck(['mine', 'never'])).rejects.toMatchObject({ code: ErrorCodes.STORE });
      await g.close();
      await replica.close();
    } finally {
      redis.disconnect();
      await own.stop().catch(() => undefined);
    }
  }, 30_000);

  it('firstSeenBloom in Redis samples the false-positive rate; its failure never changes exact answers', async () => {
    const own = await startRedis();
    const redis = new Redis(own.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => 100, enableOfflineQueue: false });
    redis.on('error', () => undefined);
    await once(redis, 'ready');
    try {
      const f = await RedisBloom.open({ redis, name: 'fsb', expectedItems: 1000, fpp: 0.01 });
      await f.tryInit();
      const g = await HashGate.open({ threads: 0, firstSeenBloom: f });
      expect([...(await g.firstSeen(['a', 'b', 'a']))]).toEqual([1, 1, 0]);
      expect(g.stats().dedup.bloomTrueNegatives).toBe(2);
      expect([...(await f.containsAll(['a', 'b']))]).toEqual([1, 1]);
      await own.kill('SIGKILL');
      expect([...(await g.firstSeen(['a', 'c']))]).toEqual([0, 1]);
      expect(g.stats().dedup.bloomTrueNegatives).toBe(2);
      await g.close();
    } finally {
      redis.disconnect();
      await own.stop().catch(() => undefined);
    }
  }, 30_000);
});
