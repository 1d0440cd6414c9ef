// The tiered cache against a real redis-server and a real HBase (services/hbase): backfill,
// negative cache, stampede, Bloom gate, Redis down, HBase down. HBase calls are counted by the
// adapter (HBaseStore.callCounts()), Redis calls by INFO commandstats.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { requireRedisOrSkip, startRedis, freePort, type RedisServer } from '../helpers/redis-server.js';
import { ensureHBase, hbaseConfigured, type HBaseHarness } from '../helpers/hbase.js';
import { HBaseStore } from '../../src/hbase/client.js';
import { BloomFilter } from '../../src/bloom/index.js';
import { FLAG_ARCHIVED, HBaseColdStore, TieredCache, coldTableDdl, encodeValue, readEnvelope, wrapEnvelope } from '../../src/cache/index.js';
import { HotColdStore } from '../../src/tiering/index.js';

/** Generous tier timeouts: a loaded CI box must not turn a slow answer into a degraded one. */
const SLOW = 20_000;

const hasRedis = requireRedisOrSkip('cache (integration)');
const hasHBase = hbaseConfigured('cache (integration)');

async function cmdCalls(r: Redis, cmd: string): Promise<number> {
  const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(await r.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

const T0 = Date.now() - 60_000;

const hbaseReads = (s: HBaseStore): number => {
  const c = s.callCounts();
  return c.ops.get + c.ops.mget;
};

describe.skipIf(!hasRedis || !hasHBase)('TieredCache: Redis + real HBase', () => {
  let srv: RedisServer;
  let admin: Redis;
  let hb: HBaseHarness;
  let store: HBaseStore;
  let cold: HBaseColdStore;
  let table: string;

  beforeAll(async () => {
    srv = await startRedis();
    admin = new Redis(srv.url, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined); // one case kills the server under it
    hb = await ensureHBase();
    table = hb.uniqueName('cache');
    await hb.ddl(coldTableDdl(table));
    store = hb.store();
    cold = new HBaseColdStore({ store });
    await store.ready(table);
    const rows = ['u1', 'u2', 'u3', 'stampede', 'bin'].map((key, i) => ({
      key,
      value: encodeValue(key === 'bin' ? Uint8Array.of(1, 2, 3) : { level: i, reason: `r${i}` }),
      ts: T0 + i, // recent: the family TTL (90 d) counts from the cell timestamp
    }));
    await cold.mput(table, rows);
  });
  afterAll(async () => {
    admin?.disconnect();
    await srv?.stop();
    if (table) await hb?.ddl(`drop ${table}`).catch(() => undefined);
    await hb?.release();
  });
  beforeEach(async () => {
    await admin.flushall();
    await admin.config('RESETSTAT');
    store.resetCallCounts();
  });

  it('backfill: an HBase hit is copied into Redis (archived, original ts) and the local tier', async () => {
    const cache = new TieredCache({ redis: { client: admin, ttlSeconds: 300, timeoutMs: SLOW }, cold, coldOptions: { timeoutMs: SLOW } });
    expect(await cache.lookup(table, ['u1', 'bin'])).toEqual([{ level: 0, reason: 'r0' }, Buffer.of(1, 2, 3)]);
    expect(hbaseReads(store)).toBe(1);
    const env = readEnvelope((await admin.getBuffer(`hg:v:${table}:u1`))!);
    expect(env?.ts).toBe(T0);
    expect(env!.flags & FLAG_ARCHIVED).toBe(FLAG_ARCHIVED);
    expect(await admin.pttl(`hg:v:${table}:u1`)).toBeGreaterThan(250_000);
    // local tier answers now: neither Redis nor HBase is asked again
    const mgets = await cmdCalls(admin, 'mget');
    expect(await cache.lookup(table, ['u1'])).toEqual([{ level: 0, reason: 'r0' }]);
    expect(await cmdCalls(admin, 'mget')).toBe(mgets);
    // a second cache (empty local tier, e.g. another process) is served by Redis, not HBase
    const other = new TieredCache({ redis: { client: admin, timeoutMs: SLOW }, cold, coldOptions: { timeoutMs: SLOW } });
    expect(await other.lookup(table, ['u1'])).toEqual([{ level: 0, reason: 'r0' }]);
    expect(other.stats().redis!.hits).toBe(1);
    expect(hbaseReads(store)).toBe(1);
    expect(cache.stats()).toMatchObject({ cold: { hits: 2, errors: 0 }, redis: { backfills: 2 } });
  });

  it('negative cache: a key absent everywhere costs one HBase read, then none until the TTL passes', async () => {
    let t = 1_000;
    const cache = new TieredCache({ redis: { client: admin, timeoutMs: SLOW }, cold, coldOptions: { timeoutMs: SLOW }, negativeTtlMs: 500, now: () => t });
    expect(await cache.lookup(table, ['nope'])).toEqual([undefined]);
    expect(await cache.lookup(table, ['nope'])).toEqual([undefined]);
    expect(hbaseReads(store)).toBe(1);
    expect(cache.stats().local.negativeHits).toBe(1);
    t += 501;
    expect(await cache.lookup(table, ['nope'])).toEqual([undefined]);
    expect(hbaseReads(store)).toBe(2);
  });

  it('stampede: 100 concurrent lookups of one missing key -> exactly 1 HBase read', async () => {
    const cache = new TieredCache({ redis: { client: admin, timeoutMs: SLOW }, cold, coldOptions: { timeoutMs: SLOW } });
    const before = store.callCounts().rpcs;
    const res = await Promise.all(Array.from({ length: 100 }, () => cache.lookup(table, ['stampede'])));
    expect(res.every((r) => (r[0] as { level: number }).level === 3)).toBe(true);
    expect(hbaseReads(store)).toBe(1);
    const after = store.callCounts().rpcs;
    expect(after.Get + after.Multi - before.Get - before.Multi).toBe(1);
    expect(cache.stats().singleFlight).toEqual({ loads: 1, shared: 99 });
  });

  it('Bloom gate: absent keys cause zero HBase and zero Redis calls', async () => {
    const bloom = BloomFilter.create({ expectedItems: 1_000, fpp: 0.001 });
    for (const k of ['u1', 'u2', 'u3']) bloom.add(k);
    const cache = new TieredCache({ redis: { client: admin, timeoutMs: SLOW }, cold, coldOptions: { timeoutMs: SLOW }, bloom });
    const absent = Array.from({ length: 50 }, (_, i) => `absent-${i}`);
    const rpcs = store.callCounts().rpcs;
    const res = await cache.lookup(table, absent);
    expect(res.every((v) => v === undefined)).toBe(true);
    expect(cache.stats().bloom.rejected).toBeGreaterThanOrEqual(49); // fpp 0.001: at most a stray false positive
    expect(store.callCounts().rpcs).toEqual(rpcs);
    expect(await cmdCalls(admin, 'mget')).toBe(0);
    // a present key passes the gate and is loaded
    expect(await cache.lookup(table, ['u2'])).toEqual([{ level: 1, reason: 'r1' }]);
    expect(hbaseReads(store)).toBe(1);
  });

  it('Redis stopped: lookups are still answered from HBase and the errors are counted', async () => {
    const cache = new TieredCache({ redis: { url: srv.url, timeoutMs: 500 }, cold, coldOptions: { timeoutMs: SLOW }, breaker: { failures: 3, cooldownMs: 60_000 } });
    await cache.ready();
    await srv.kill();
    try {
      const r = await cache.lookupDetailed(table, ['u1', 'u2', 'missing']);
      expect(r.values).toEqual([{ level: 0, reason: 'r0' }, { level: 1, reason: 'r1' }, undefined]);
      expect(r.unknown).toEqual([2]); // HBase says absent, but Redis may hold it: unknown
      expect(r.degraded).toBe(true);
      expect(r.errors.some((e) => e.tier === 'redis')).toBe(true);
      expect(await cache.lookup(table, ['u3'])).toEqual([{ level: 2, reason: 'r2' }]);
      for (const k of ['x1', 'x2', 'x3']) {
        await expect(cache.lookup(table, [k])).rejects.toMatchObject({ code: 'HG_ERR_TIER_UNAVAILABLE', details: { tier: 'redis', indexes: [0] } });
      }
      const s = cache.stats();
      expect(s.redis!.errors).toBeGreaterThanOrEqual(3);
      expect(s.redis!.breakerOpen).toBe(true);
      expect(s.redis!.skipped).toBeGreaterThanOrEqual(1);
      expect(s.cold!.hits).toBe(3);
      expect(s.degraded).toBe(true);
    } finally {
      await cache.close();
      await srv.restart();
      admin.disconnect();
      admin = new Redis(srv.url, { maxRetriesPerRequest: 1 });
      admin.on('error', () => undefined);
    }
  });

  it('Redis killed -9 in migrate mode: HBase saying "absent" is not cached; the Redis-only value is found after restart', async () => {
    const aof = await startRedis({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    const w = new Redis(aof.url, { maxRetriesPerRequest: 1 });
    w.on('error', () => undefined);
    const cache = new TieredCache({
      redis: { url: aof.url, timeoutMs: 500 },
      cold,
      coldOptions: { timeoutMs: SLOW },
      negativeTtlMs: 600_000,
      breaker: { failures: 2, cooldownMs: 1_000 },
    });
    try {
      // a fresh entry lives only in Redis until migrateCold() archives it
      await new HotColdStore({ redis: w, cold }).write(table, [{ key: 'fresh', value: { reason: 'fraud' } }]);
      await cache.ready();
      await aof.kill('SIGKILL');
      const during = [];
      for (let i = 0; i < 4; i++) during.push(await cache.lookupDetailed(table, ['fresh', 'u1']));
      // HBase answered every time (u1 found, fresh absent there), Redis could not: unknown, degraded
      expect(during.map((r) => r.values)).toEqual(new Array(4).fill([undefined, { level: 0, reason: 'r0' }]));
      expect(during.map((r) => r.degraded)).toEqual([true, true, true, true]);
      expect(during.map((r) => r.unknown)).toEqual(new Array(4).fill([0]));
      expect(during[3]!.errors).toEqual([expect.objectContaining({ tier: 'redis', skipped: true })]);
      expect(hbaseReads(store)).toBe(4); // nothing was cached, so HBase was asked each time
      await aof.restart();
      await cache.ready(10_000);
      await new Promise((r) => setTimeout(r, 1_100)); // let the breaker's cool-down pass
      expect(await cache.lookupDetailed(table, ['fresh', 'u1'])).toEqual({
        values: [{ reason: 'fraud' }, { level: 0, reason: 'r0' }],
        errors: [],
        degraded: false,
        unknown: [],
        stale: [],
      });
    } finally {
      await cache.close();
      w.disconnect();
      await aof.stop();
    }
  });

  it('HBase unreachable: Redis and local answers keep coming, failures are counted and surfaced', async () => {
    const deadPort = await freePort();
    const dead = new HBaseStore({ zookeeper: `127.0.0.1:${deadPort}`, operationTimeoutMs: 1_500, connectTimeoutMs: 500 });
    const deadCold = new HBaseColdStore({ store: dead });
    const cache = new TieredCache({ redis: { client: admin, timeoutMs: SLOW }, cold: deadCold, coldOptions: { timeoutMs: 3_000 } });
    await admin.set(`hg:v:${table}:hot`, wrapEnvelope(encodeValue({ hot: true }), Date.now()), 'PX', 60_000);
    try {
      const r = await cache.lookupDetailed(table, ['hot', 'u1']);
      expect(r.values).toEqual([{ hot: true }, undefined]);
      expect(r.unknown).toEqual([1]);
      expect(r.degraded).toBe(true);
      expect(r.errors[0]).toMatchObject({ tier: 'cold' });
      expect(['HG_ERR_HBASE_UNAVAILABLE', 'HG_ERR_TIMEOUT']).toContain(r.errors[0]!.code);
      expect(await cache.lookup(table, ['hot'])).toEqual([{ hot: true }]); // local now
      const s = cache.stats();
      expect(s.cold!.errors).toBe(1);
      expect(s.cold!.healthy).toBe(false);
      expect(s.degraded).toBe(true);
      // the failed key was not negatively cached: it is retried (and fails again, counted)
      await expect(cache.lookup(table, ['u1'])).rejects.toMatchObject({ code: 'HG_ERR_TIER_UNAVAILABLE', details: { tier: 'cold' } });
      expect(cache.stats().cold!.errors).toBe(2);
    } finally {
      await cache.close();
      await dead.close();
    }
  });

  it('HBase breaker open: lookups that needed HBase are degraded (skip reported), Redis hits are not', async () => {
    const deadPort = await freePort();
    const dead = new HBaseStore({ zookeeper: `127.0.0.1:${deadPort}`, operationTimeoutMs: 1_500, connectTimeoutMs: 500 });
    const cache = new TieredCache({
      redis: { client: admin, timeoutMs: SLOW },
      cold: new HBaseColdStore({ store: dead }),
      coldOptions: { timeoutMs: 3_000 },
      breaker: { failures: 1, cooldownMs: 600_000 },
      negativeTtlMs: 600_000,
    });
    await admin.set(`hg:v:${table}:hot`, wrapEnvelope(encodeValue({ hot: true }), Date.now()), 'PX', 60_000);
    try {
      const first = await cache.lookupDetailed(table, ['u1']);
      expect(first.degraded).toBe(true);
      expect(first.errors[0]).toMatchObject({ tier: 'cold' });
      expect(cache.stats().cold!.breakerOpen).toBe(true);
      const skipped = await cache.lookupDetailed(table, ['u2', 'hot']);
      expect(skipped.values).toEqual([undefined, { hot: true }]);
      expect(skipped.unknown).toEqual([0]);
      expect(skipped.degraded).toBe(true);
      expect(skipped.errors).toEqual([expect.objectContaining({ tier: 'cold', skipped: true, code: 'HG_ERR_HBASE_UNAVAILABLE' })]);
      expect(cache.stats().local.entries).toBe(1); // only the Redis hit: u1 and u2 are unknown, not absent
      // a key Redis answers needs no cold tier: not degraded
      expect(await cache.lookupDetailed(table, ['hot'])).toEqual({ values: [{ hot: true }], errors: [], degraded: false, unknown: [], stale: [] });
      expect(cache.stats().cold).toMatchObject({ errors: 1, skipped: 1 });
    } finally {
      await cache.close();
      await dead.close();
    }
  });
});
