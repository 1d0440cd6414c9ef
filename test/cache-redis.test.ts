// Tier logic with a real redis-server as the hot tier and the in-process cold store (the HBase
// versions of these cases live in test/integration/cache.test.ts and tiering.test.ts).
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';
import { FLAG_ARCHIVED, MemoryColdStore, TieredCache, encodeValue, readEnvelope, type ColdEntry } from '../src/cache/index.js';
import { HotColdStore } from '../src/tiering/index.js';

/** Generous tier timeouts: a loaded CI box must not turn a slow answer into a degraded one. */
const SLOW = 20_000;

const has = requireRedisOrSkip('cache-redis');

async function cmdCalls(r: Redis, cmd: string): Promise<number> {
  const info = await r.info('commandstats');
  const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info);
  return m ? Number(m[1]) : 0;
}

describe.skipIf(!has)('TieredCache + HotColdStore on a real redis-server', () => {
  let srv: RedisServer;
  let admin: Redis;
  beforeAll(async () => {
    srv = await startRedis();
    admin = new Redis(srv.url, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined); // the Redis-down case kills the server under it
  });
  afterAll(async () => {
    admin?.disconnect();
    await srv?.stop();
  });
  beforeEach(async () => {
    await admin.flushall();
    await admin.config('RESETSTAT');
  });

  it('backfills: Redis hit -> local; cold hit -> Redis (archived, backfill TTL) and local', async () => {
    const cold = new MemoryColdStore();
    const hot = new HotColdStore({ redis: admin, cold });
    await hot.write('risk', [{ key: 'hot1', value: { level: 1 } }]);
    await cold.mput('risk', [{ key: 'cold1', value: encodeValue({ level: 9 }), ts: 1234 }]);
    const cache = new TieredCache({ redis: { url: srv.url, ttlSeconds: 120, timeoutMs: SLOW }, cold });
    await cache.ready();
    expect(await cache.lookup('risk', ['hot1', 'cold1', 'none'])).toEqual([{ level: 1 }, { level: 9 }, undefined]);
    let s = cache.stats();
    expect(s.redis).toMatchObject({ hits: 1, misses: 2, errors: 0, backfills: 1 });
    expect(s.cold).toMatchObject({ hits: 1, misses: 1 });
    expect(cold.counters.keysRead).toBe(2); // hot1 never reached the cold tier
    const env = readEnvelope((await admin.getBuffer('hg:v:risk:cold1'))!);
    expect(env?.ts).toBe(1234);
    expect(env!.flags & FLAG_ARCHIVED).toBe(FLAG_ARCHIVED);
    const pttl = await admin.pttl('hg:v:risk:cold1');
    expect(pttl).toBeGreaterThan(100_000);
    expect(pttl).toBeLessThanOrEqual(120_000);
    // second lookup: all local (including the negative entry), no Redis round trip
    const mgets = await cmdCalls(admin, 'mget');
    expect(await cache.lookup('risk', ['hot1', 'cold1', 'none'])).toEqual([{ level: 1 }, { level: 9 }, undefined]);
    expect(await cmdCalls(admin, 'mget')).toBe(mgets);
    s = cache.stats();
    expect(s.local).toMatchObject({ hits: 2, negativeHits: 1 });
    // a fresh process (empty local tier) now finds cold1 in Redis
    const cache2 = new TieredCache({ redis: { client: admin, timeoutMs: SLOW }, cold, coldOptions: { timeoutMs: SLOW } });
    expect(await cache2.lookup('risk', ['cold1'])).toEqual([{ level: 9 }]);
    expect(cache2.stats().redis!.hits).toBe(1);
    expect(cold.counters.keysRead).toBe(2);
    await cache.close();
    await cache2.close();
  });

  it('foreign values under the prefix are misses; a corrupt envelope is a counted Redis error, answered by the cold tier', async () => {
    const cold = new MemoryColdStore();
    await cold.mput('t', [{ key: 'bad', value: encodeValue({ from: 'cold' }), ts: 1 }]);
    await admin.set('hg:v:t:foreign', 'plain text');
    await admin.set('hg:v:t:bad', Buffer.from([1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x92, 0x01])); // truncated msgpack array
    const cache = new TieredCache({ redis: { client: admin, timeoutMs: SLOW }, cold, coldOptions: { timeoutMs: SLOW } });
    const r = await cache.lookupDetailed('t', ['foreign', 'bad']);
    expect(r.values).toEqual([undefined, { from: 'cold' }]);
    expect(r.errors).toEqual([expect.objectContaining({ tier: 'redis', code: 'HG_ERR_PARSE' })]);
    expect(cache.stats().redis).toMatchObject({ hits: 0, errors: 1 });
  });

  it('Bloom-gated absent keys reach neither Redis nor the cold tier', async () => {
    const cold = new MemoryColdStore();
    const present = new Set(['p']);
    const cache = new TieredCache({ redis: { client: admin, timeoutMs: SLOW }, cold, coldOptions: { timeoutMs: SLOW }, bloom: { mightContain: (k) => present.has(k) } });
    const before = await cmdCalls(admin, 'mget');
    expect(await cache.lookup('t', ['a', 'b', 'c'])).toEqual([undefined, undefined, undefined]);
    expect(await cmdCalls(admin, 'mget')).toBe(before);
    expect(cold.counters.mgetCalls).toBe(0);
    await cache.lookup('t', ['p']);
    expect(await cmdCalls(admin, 'mget')).toBe(before + 1);
  });

  it('Redis down -> lookups answered by the cold tier, errors counted; recovers after restart', async () => {
    const cold = new MemoryColdStore();
    await cold.mput('t', [{ key: 'k1', value: encodeValue({ v: 1 }), ts: 1 }, { key: 'k2', value: encodeValue({ v: 2 }), ts: 1 }]);
    const cache = new TieredCache({ redis: { url: srv.url, timeoutMs: 500 }, cold, coldOptions: { timeoutMs: SLOW }, breaker: { failures: 1000 } });
    await cache.ready();
    await srv.kill();
    const r = await cache.lookupDetailed('t', ['k1', 'zz']);
    expect(r.values).toEqual([{ v: 1 }, undefined]);
    expect(r.degraded).toBe(true);
    expect(r.errors[0]?.tier).toBe('redis');
    let s = cache.stats();
    expect(s.redis!.errors).toBeGreaterThanOrEqual(1);
    expect(s.redis!.healthy).toBe(false);
    expect(s.degraded).toBe(true);
    expect(s.cold!.hits).toBe(1);
    await srv.restart();
    await cache.ready(10_000);
    expect(await cache.lookup('t', ['k2'])).toEqual([{ v: 2 }]);
    s = cache.stats();
    expect(s.redis!.healthy).toBe(true);
    expect(s.redis!.backfills).toBeGreaterThanOrEqual(1);
    await cache.close();
    admin.disconnect();
    admin = new Redis(srv.url, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined); // the Redis-down case kills the server under it
  });

  it('100 concurrent lookups of one key -> one Redis MGET and one cold read', async () => {
    const cold = new MemoryColdStore();
    await cold.mput('t', [{ key: 'hot', value: encodeValue({ n: 1 }), ts: 1 }]);
    const cache = new TieredCache({ redis: { client: admin, timeoutMs: SLOW }, cold, coldOptions: { timeoutMs: SLOW } });
    const before = await cmdCalls(admin, 'mget');
    const res = await Promise.all(Array.from({ length: 100 }, () => cache.lookup('t', ['hot'])));
    expect(res.every((r) => (r[0] as { n: number }).n === 1)).toBe(true);
    expect(await cmdCalls(admin, 'mget')).toBe(before + 1);
    expect(cold.counters.mgetCalls).toBe(1);
  });

  it('reads over its own connection as the client would: its keyPrefix, UTF-8 keys, batches past batchSize, values spanning many reads', async () => {
    // a client with a keyPrefix: ioredis puts it before every key, the cache's reads must too
    const pc = new Redis(srv.url, { keyPrefix: 'app:' });
    try {
      const table = 'risk.cn';
      const keys = Array.from({ length: 700 }, (_, i) => `张三${i}-11010119900307${String(i).padStart(4, '0')}`);
      // every third key absent; values of every size up to 60 KiB so the reply spans many reads
      const present = keys.filter((_, i) => i % 3 !== 0);
      const valueOf = (k: string): { k: string; pad: string } => ({ k, pad: 'x'.repeat((k.length * 7919) % 61_440) });
      await new HotColdStore({ redis: pc }).write(table, present.map((key) => ({ key, value: valueOf(key) })));
      expect(await admin.exists(`app:hg:v:${table}:${present[0]!}`)).toBe(1);
      const cache = new TieredCache({ redis: { client: pc, timeoutMs: SLOW, batchSize: 300 } });
      await cache.ready(SLOW);
      const before = await cmdCalls(admin, 'mget');
      const got = await cache.lookup(table, keys);
      expect(got).toEqual(keys.map((k, i) => (i % 3 !== 0 ? valueOf(k) : undefined)));
      expect(await cmdCalls(admin, 'mget')).toBe(before + 3); // 700 keys in MGETs of at most 300
      expect(cache.stats().redis).toMatchObject({ hits: present.length, misses: keys.length - present.length, errors: 0 });
      await cache.close();
      // without the prefix nothing is found where the client put it
      const bare = new TieredCache({ redis: { url: srv.url, timeoutMs: SLOW } });
      expect(await bare.lookup(table, present.slice(0, 5))).toEqual([undefined, undefined, undefined, undefined, undefined]);
      await bare.close();
    } finally {
      pc.disconnect();
    }
  });

  it('binary values read from Redis hold only their own bytes, not the socket read they came in', async () => {
    const table = 'bin';
    const keys = Array.from({ length: 200 }, (_, i) => `k${i}`);
    const valueOf = (i: number): Uint8Array => Uint8Array.from({ length: 64 + i }, (_, j) => (i * 31 + j) & 255);
    await new HotColdStore({ redis: admin }).write(table, keys.map((key, i) => ({ key, value: { bytes: valueOf(i) } })));
    const cache = new TieredCache({ redis: { url: srv.url, timeoutMs: SLOW } });
    try {
      const got = (await cache.lookup(table, keys)) as Array<{ bytes: Uint8Array }>;
      got.forEach((v, i) => {
        expect(Buffer.from(v.bytes).equals(Buffer.from(valueOf(i)))).toBe(true);
        // a view would keep the whole reply's read buffer (tens of KiB) alive in the local tier
        expect(v.bytes.buffer.byteLength).toBe(v.bytes.byteLength);
      });
    } finally {
      await cache.close();
    }
  });

  describe('migrateCold', () => {
    const setup = async (cold: MemoryColdStore) => {
      const hot = new HotColdStore({ redis: admin, cold });
      const near = Array.from({ length: 40 }, (_, i) => ({ key: `near${i}`, value: { i }, ts: 1_000 + i }));
      const far = Array.from({ length: 60 }, (_, i) => ({ key: `far${i}`, value: { i }, ts: 2_000 + i }));
      await hot.write('fp', near, { ttlSeconds: 600 }); // under the 1 h threshold
      await hot.write('fp', far); // 7 days
      await admin.set('hg:v:fp:notours', 'plain string', 'PX', 1000);
      await admin.set('hg:v:fp:forever', 'x'); // foreign, no TTL
      return { hot, near, far };
    };

    it('moves exactly the near-expiry keys with their timestamps, marks them, keeps the TTL; twice is harmless', async () => {
      const cold = new MemoryColdStore();
      const { hot, near } = await setup(cold);
      const before = await admin.pttl('hg:v:fp:near0');
      const r = await hot.migrateCold({ batchSize: 25 });
      expect(r).toMatchObject({ acquired: true, complete: true, candidates: 40, migrated: 40, raced: 0, foreign: 2 });
      expect(r.scanned).toBe(102);
      expect(cold.size).toBe(40);
      const cells = await cold.mget('fp', near.map((n) => n.key));
      expect(cells.map((c) => c?.ts)).toEqual(near.map((n) => n.ts));
      expect((await cold.mget('fp', ['far0']))[0]).toBeUndefined();
      const env = readEnvelope((await admin.getBuffer('hg:v:fp:near0'))!);
      expect(env!.flags & FLAG_ARCHIVED).toBe(FLAG_ARCHIVED);
      const after = await admin.pttl('hg:v:fp:near0');
      expect(after).toBeGreaterThan(0);
      expect(after).toBeLessThanOrEqual(before);
      expect(await admin.exists('hg:migrate:cursor', 'hg:migrate:lock')).toBe(0);
      const writes = cold.counters.keysWritten;
      const again = await hot.migrateCold({ batchSize: 25 });
      expect(again).toMatchObject({ complete: true, migrated: 0, alreadyArchived: 40 });
      expect(cold.counters.keysWritten).toBe(writes);
    });

    it('concurrent runs: one holds the lock, the other does nothing', async () => {
      const cold = new MemoryColdStore();
      const { hot } = await setup(cold);
      const hot2 = new HotColdStore({ redis: admin, cold });
      const [a, b] = await Promise.all([hot.migrateCold({ batchSize: 10 }), hot2.migrateCold({ batchSize: 10 })]);
      expect([a.acquired, b.acquired].sort()).toEqual([false, true]);
      expect(a.migrated + b.migrated).toBe(40);
      expect(cold.counters.keysWritten).toBe(40);
    });

    it('is resumable from the SCAN cursor checkpoint', async () => {
      const cold = new MemoryColdStore();
      const { hot } = await setup(cold);
      const first = await hot.migrateCold({ batchSize: 10, maxBatches: 2 });
      expect(first.complete).toBe(false);
      expect(first.cursor).not.toBe('0');
      expect(JSON.parse((await admin.get('hg:migrate:cursor'))!)).toMatchObject({ cursor: first.cursor });
      const rest = await hot.migrateCold({ batchSize: 10 });
      expect(rest.resumedFrom).toBe(first.cursor);
      expect(rest.complete).toBe(true);
      expect(first.migrated + rest.migrated).toBe(40);
      expect(cold.size).toBe(40);
      expect(first.scanned + rest.scanned).toBeGreaterThanOrEqual(102);
    });

    it('an aborted run stops after the current batch with its checkpoint saved', async () => {
      const cold = new MemoryColdStore();
      const { hot } = await setup(cold);
      const ac = new AbortController();
      const first = await hot.migrateCold({ batchSize: 10, signal: ac.signal, onBatch: () => ac.abort() });
      expect(first).toMatchObject({ aborted: true, complete: false, batches: 1 });
      const rest = await hot.migrateCold({ batchSize: 10 });
      expect(rest.resumedFrom).toBe(first.cursor);
      expect(first.migrated + rest.migrated).toBe(40);
    });

    it('dual-write archives on write, so migration has nothing to do; dry run writes nothing', async () => {
      const cold = new MemoryColdStore();
      const hot = new HotColdStore({ redis: admin, cold, mode: 'dual-write' });
      const w = await hot.write('fp', [{ key: 'a', value: { a: 1 } }], { ttlSeconds: 60 });
      expect(w).toEqual({ written: 1, coldWritten: 1 });
      expect(cold.size).toBe(1);
      const plain = new HotColdStore({ redis: admin, cold: new MemoryColdStore() });
      await plain.write('fp', [{ key: 'b', value: { b: 1 } }], { ttlSeconds: 60 });
      const dry = await plain.migrateCold({ dryRun: true });
      expect(dry).toMatchObject({ candidates: 1, migrated: 0, alreadyArchived: 1, dryRun: true });
      const r = await hot.migrateCold();
      expect(r).toMatchObject({ migrated: 1, alreadyArchived: 1 });
    });

    it('a run whose lock was taken over stops at the next checkpoint and never frees the new owner', async () => {
      const cold = new MemoryColdStore();
      const { hot } = await setup(cold);
      let stolen = false;
      const r = await hot.migrateCold({
        batchSize: 10,
        onBatch: () => {
          if (!stolen) {
            stolen = true;
            void admin.set('hg:migrate:lock', 'other-owner', 'PX', 60_000);
          }
        },
      });
      expect(r.lockLost).toBe(true);
      expect(r.complete).toBe(false);
      expect(r.batches).toBe(2);
      expect(await admin.get('hg:migrate:lock')).toBe('other-owner');
      // the cursor saved before the takeover lets the new owner continue
      expect(await admin.exists('hg:migrate:cursor')).toBe(1);
    });

    it('cold tier down: dual-write leaves values unarchived for later; migrateCold rejects, frees the lock, and a rerun finishes', async () => {
      const good = new MemoryColdStore();
      let down = true;
      const flaky = {
        kind: 'flaky',
        mget: (t: string, k: readonly string[]) => good.mget(t, k),
        mput: async (t: string, e: readonly ColdEntry[]) => {
          if (down) throw Object.assign(new Error('region server gone'), { code: 'HG_ERR_HBASE_UNAVAILABLE' });
          return good.mput(t, e);
        },
      };
      const hot = new HotColdStore({ redis: admin, cold: flaky, mode: 'dual-write' });
      const w = await hot.write('fp', [{ key: 'x', value: { x: 1 } }], { ttlSeconds: 60 });
      expect(w.coldWritten).toBe(0);
      expect(w.coldError).toMatchObject({ code: 'HG_ERR_HBASE_UNAVAILABLE' });
      expect(readEnvelope((await admin.getBuffer('hg:v:fp:x'))!)!.flags & FLAG_ARCHIVED).toBe(0);
      await expect(hot.migrateCold()).rejects.toMatchObject({ code: 'HG_ERR_HBASE_UNAVAILABLE' });
      expect(await admin.exists('hg:migrate:lock')).toBe(0);
      down = false;
      const r = await hot.migrateCold();
      expect(r).toMatchObject({ complete: true, migrated: 1 });
      expect((await good.mget('fp', ['x']))[0]).toBeDefined();
    });

    it('write() adds keys to the Bloom gate and drops negative local entries', async () => {
      const added: string[] = [];
      const cache = new TieredCache({ redis: { client: admin, timeoutMs: SLOW } });
      expect(await cache.lookup('t', ['w'])).toEqual([undefined]);
      const hot = new HotColdStore({ redis: admin, cache, bloom: { add: (k: string) => added.push(k), mightContain: () => true } });
      await hot.write('t', [{ key: 'w', value: { w: 1 } }]);
      expect(added).toEqual(['w']);
      expect(await cache.lookup('t', ['w'])).toEqual([{ w: 1 }]);
    });
  });
});
