// Unknown is not absent: the tiered cache under real Redis outages (redis-server killed with
// SIGKILL, restarted from its AOF) and before its first connection, with the in-process cold store.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { freePort, requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';
import { MemoryColdStore, TieredCache, encodeValue, wrapEnvelope, type LookupResult } from '../src/cache/index.js';
import { HotColdStore } from '../src/tiering/index.js';

/** Generous tier timeouts: a loaded CI box must not turn a slow answer into a degraded one. */
const SLOW = 20_000;
const has = requireRedisOrSkip('cache-faults');

async function cmdCalls(r: Redis, cmd: string): Promise<number> {
  const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(await r.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

describe.skipIf(!has)('TieredCache faults on a real redis-server', () => {
  let srv: RedisServer;
  let admin: Redis;
  beforeAll(async () => {
    srv = await startRedis({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    admin = new Redis(srv.url, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined); // the server is killed under it
  });
  afterAll(async () => {
    admin?.disconnect();
    await srv?.stop();
  });

  /** SIGKILL, run `during`, then restart from the AOF and wait until `cache` is connected again. */
  async function outage(cache: TieredCache, during: () => Promise<void>): Promise<void> {
    await srv.kill('SIGKILL');
    try {
      await during();
    } finally {
      await srv.restart();
      await cache.ready(10_000);
      await admin.ping();
    }
  }

  it('every lookup that needed Redis is degraded while its breaker is open, and the skip is reported', async () => {
    await admin.flushall();
    const cold = new MemoryColdStore();
    await cold.mput('t', [{ key: 'k3', value: encodeValue({ v: 3 }), ts: 1 }]);
    const cache = new TieredCache({
      redis: { url: srv.url, timeoutMs: 500 },
      cold,
      coldOptions: { timeoutMs: SLOW },
      breaker: { failures: 2, cooldownMs: 600_000 },
    });
    await cache.ready();
    const results: LookupResult[] = [];
    await outage(cache, async () => {
      for (let i = 0; i < 20; i++) results.push(await cache.lookupDetailed('t', [`k${i}`]));
      expect(cache.stats().redis!.breakerOpen).toBe(true);
    });
    expect(results.map((r) => r.degraded)).toEqual(new Array(20).fill(true));
    expect(results[3]!.values).toEqual([{ v: 3 }]); // the cold tier still answers
    expect(results[3]!.unknown).toEqual([]);
    expect(results.filter((r) => r.unknown.length === 1).length).toBe(19); // the cold misses: unknown
    const skipped = results.filter((r) => r.errors.some((e) => e.tier === 'redis' && e.skipped === true));
    expect(skipped.length).toBe(18); // 2 real failures opened the breaker, the other 18 skipped Redis
    expect(skipped[0]!.errors[0]!.code).toBe('HG_ERR_STORE_UNAVAILABLE');
    expect(cache.stats().redis).toMatchObject({ errors: 2, skipped: 18 });
    await cache.close();
  });

  it('a lookup sharing another lookup\'s failed load is degraded too', async () => {
    await admin.flushall();
    const cache = new TieredCache({ redis: { url: srv.url, timeoutMs: 500 }, cold: new MemoryColdStore(), breaker: { failures: 1000 } });
    await cache.ready();
    await outage(cache, async () => {
      const [a, b] = await Promise.all([cache.lookupDetailed('t', ['same']), cache.lookupDetailed('t', ['same'])]);
      expect(cache.stats().singleFlight.shared).toBe(1);
      expect(a.degraded).toBe(true);
      expect(b.degraded).toBe(true);
      // the follower could not check the key either: unknown for both, never "absent"
      expect([a.unknown, b.unknown]).toEqual([[0], [0]]);
      expect(b.errors.some((e) => e.tier === 'redis')).toBe(true);
    });
    // healthy again: no tier was skipped or failed, so nothing is degraded
    const ok = await cache.lookupDetailed('t', ['same']);
    expect(ok).toEqual({ values: [undefined], errors: [], degraded: false, unknown: [], stale: [] });
    await cache.close();
  });

  it('migrate mode: a value only Redis holds is never cached as absent while Redis is down', async () => {
    await admin.flushall();
    const cold = new MemoryColdStore(); // migrate mode: nothing reaches the cold tier on write
    const hot = new HotColdStore({ redis: admin, cold });
    await hot.write('blacklist', [{ key: 'fresh', value: { reason: 'fraud' } }]);
    const cache = new TieredCache({
      redis: { url: srv.url, timeoutMs: 500 },
      cold,
      coldOptions: { timeoutMs: SLOW },
      negativeTtlMs: 600_000,
      breaker: { failures: 1000 },
    });
    await cache.ready();
    await outage(cache, async () => {
      const r = await cache.lookupDetailed('blacklist', ['fresh', 'never']);
      expect(r.values).toEqual([undefined, undefined]);
      expect(r.unknown).toEqual([0, 1]); // unknown, never "absent"
      expect(r.degraded).toBe(true);
      expect(cache.stats().local.entries).toBe(0);
    });
    expect(await cache.lookupDetailed('blacklist', ['fresh', 'never'])).toEqual({
      values: [{ reason: 'fraud' }, undefined],
      errors: [],
      degraded: false,
      unknown: [],
      stale: [],
    });
    // every tier answered this time: 'never' is a real absent and is now cached negatively
    const mgets = await cmdCalls(admin, 'mget');
    const reads = cold.counters.keysRead;
    expect(await cache.lookup('blacklist', ['never'])).toEqual([undefined]);
    expect(await cmdCalls(admin, 'mget')).toBe(mgets);
    expect(cold.counters.keysRead).toBe(reads);
    await cache.close();
  });

  it('a cold copy read while Redis is down is answered but not cached: the newer hot value wins afterwards', async () => {
    await admin.flushall();
    const cold = new MemoryColdStore();
    await cold.mput('t', [{ key: 'k', value: encodeValue({ v: 'archived' }), ts: 1 }]);
    await admin.set('hg:v:t:k', wrapEnvelope(encodeValue({ v: 'current' }), Date.now()));
    const cache = new TieredCache({ redis: { url: srv.url, timeoutMs: 500 }, cold, coldOptions: { timeoutMs: SLOW }, breaker: { failures: 1000 } });
    await cache.ready();
    await outage(cache, async () => {
      const r = await cache.lookupDetailed('t', ['k']);
      expect(r.values).toEqual([{ v: 'archived' }]);
      expect(r.degraded).toBe(true);
    });
    expect(await cache.lookup('t', ['k'])).toEqual([{ v: 'current' }]);
    await cache.close();
  });

  it('a cache looked up right after construction waits for its first connection', async () => {
    await admin.flushall();
    await admin.set('hg:v:t:early', wrapEnvelope(encodeValue({ early: true }), Date.now()));
    for (let round = 0; round < 5; round++) {
      // a generous bound: on a loaded box the first connect may take longer than the 250 ms default
      const cache = new TieredCache({ redis: { url: srv.url, timeoutMs: 5_000 } });
      const r = await cache.lookupDetailed('t', ['early']);
      expect(r).toEqual({ values: [{ early: true }], errors: [], degraded: false, unknown: [], stale: [] });
      await cache.close();
    }
  });

  it('a Redis that never comes up costs one tier timeout per load, degrades, and caches nothing', async () => {
    const dead = `redis://127.0.0.1:${await freePort()}`;
    const cold = new MemoryColdStore();
    await cold.mput('t', [{ key: 'c', value: encodeValue({ c: 1 }), ts: 1 }]);
    const cache = new TieredCache({ redis: { url: dead, timeoutMs: 200 }, cold, coldOptions: { timeoutMs: SLOW }, breaker: { failures: 1000 } });
    const r = await cache.lookupDetailed('t', ['c', 'absent']);
    expect(r.values).toEqual([{ c: 1 }, undefined]);
    expect(r.unknown).toEqual([1]); // the cold copy is an answer; a cold miss with Redis down is not
    expect(r.degraded).toBe(true);
    expect(r.errors[0]).toMatchObject({ tier: 'redis', code: 'HG_ERR_TIMEOUT' });
    const reads = cold.counters.keysRead;
    await expect(cache.lookup('t', ['absent'])).rejects.toMatchObject({ code: 'HG_ERR_TIER_UNAVAILABLE', details: { tier: 'redis' } });
    expect(cold.counters.keysRead).toBe(reads + 1); // asked again: it was not cached as absent
    await cache.close();
  });
  it('a stalled Redis (SIGSTOP) is bounded by one timer per load, owned client or not, and reported as HG_ERR_TIMEOUT', async () => {
    await admin.flushall();
    await admin.set('hg:v:t:stall', wrapEnvelope(encodeValue({ s: 1 }), Date.now()));
    // owned client: its commandTimeout is the bound; a user client without one: the cache's own timer
    const user = new Redis(srv.url, { maxRetriesPerRequest: 0 });
    user.on('error', () => undefined);
    const caches = [
      new TieredCache({ redis: { url: srv.url, timeoutMs: 300 }, breaker: { failures: 1000 } }),
      new TieredCache({ redis: { client: user, timeoutMs: 300 }, breaker: { failures: 1000 } }),
    ];
    for (const c of caches) await c.ready(10_000);
    await user.ping();
    process.kill(srv.pid!, 'SIGSTOP');
    try {
      for (const cache of caches) {
        const t0 = Date.now();
        const r = await cache.lookupDetailed('t', ['stall']);
        const took = Date.now() - t0;
        expect(r.values).toEqual([undefined]);
        expect(r.unknown).toEqual([0]);
        expect(r.degraded).toBe(true);
        expect(r.errors[0]).toMatchObject({ tier: 'redis', code: 'HG_ERR_TIMEOUT' });
        expect(took).toBeLessThan(SLOW);
      }
    } finally {
      process.kill(srv.pid!, 'SIGCONT');
    }
    // not cached as absent: once Redis answers again the value is found
    for (const cache of caches) expect(await cache.lookup('t', ['stall'])).toEqual([{ s: 1 }]);
    for (const cache of caches) await cache.close();
    user.disconnect();
  });
});
