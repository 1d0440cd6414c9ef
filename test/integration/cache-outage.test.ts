// Unknown is not absent, end to end: a Redis-only lookup cache (no cold store) in front of a real
// redis-server that is killed (SIGKILL), shut down (SHUTDOWN), stalled or cut off by a TCP proxy.
// A key the cache could not check rejects with HG_ERR_TIER_UNAVAILABLE (or is served from the
// opt-in grace period, flagged stale), never resolves undefined.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { HashGate, createMetrics, type HashGateError } from 'hashgate';
import { HotColdStore, TieredCache, encodeValue, wrapEnvelope } from 'hashgate/cache';
import { parseExposition, sampleValue } from '../helpers/exposition.js';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { startProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

const has = requireRedisOrSkip('cache outage (integration)');
const KEY = '王五110101198001011234';
const RECORD = { level: 'high', reason: 'chargeback' };

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The rejection of `p` (fails the test if it resolves). */
async function rejection(p: Promise<unknown>): Promise<HashGateError> {
  try {
    await p;
  } catch (err) {
    return err as HashGateError;
  }
  throw new Error('expected a rejection, got an answer');
}

describe.skipIf(!has)('lookups while the Redis tier is down (real redis-server)', () => {
  let srv: RedisServer;
  let admin: Redis;
  beforeAll(async () => {
    srv = await startRedis({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    admin = new Redis(srv.url, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined); // the server goes away under it
  });
  afterAll(async () => {
    admin?.disconnect();
    await srv?.stop();
  });

  for (const how of ['SIGKILL', 'SHUTDOWN'] as const) {
    it(`${how}: gate.lookup and TieredCache.lookup reject HG_ERR_TIER_UNAVAILABLE for a present key; answers come back after restart`, async () => {
      await admin.flushall();
      const gate = await HashGate.open({
        threads: 0,
        cache: { redis: { url: srv.url, timeoutMs: 500 }, negativeTtlMs: 600_000, breaker: { failures: 3, cooldownMs: 200 } },
      });
      try {
        const hot = new HotColdStore({ redis: admin });
        await hot.write('risk', [{ key: KEY, value: RECORD }, { key: 'local', value: { local: true } }]);
        // observed while Redis answered: a local value and a local negative entry are real answers later
        expect(await gate.lookup('risk', ['local', 'observed-absent'])).toEqual([{ local: true }, undefined]);

        if (how === 'SIGKILL') await srv.kill('SIGKILL');
        else {
          await admin.call('SHUTDOWN', 'NOSAVE').catch(() => undefined); // the reply is the connection closing
          await srv.kill('SIGKILL'); // reaps it (it has exited already)
        }

        for (let round = 0; round < 6; round++) {
          // the breaker opens after 3 failures: skipped loads must be unknown too
          const err = await rejection(gate.lookup('risk', ['observed-absent', KEY, 'local']));
          expect(err.code).toBe('HG_ERR_TIER_UNAVAILABLE');
          expect(err.details).toMatchObject({ tier: 'redis', tiers: ['redis'], indexes: [1] });
          expect(err.message).not.toContain(KEY);
          expect(err.message).not.toContain('王五');
          expect(JSON.stringify(err.details)).not.toContain('王五');
        }
        const direct = await rejection(gate.cache!.lookup('risk', [KEY]));
        expect(direct.code).toBe('HG_ERR_TIER_UNAVAILABLE');
        expect(await gate.lookup('risk', ['local', 'observed-absent'])).toEqual([{ local: true }, undefined]);
        const d = await gate.lookupDetailed('risk', [KEY, 'observed-absent', 'local']);
        expect(d).toMatchObject({ values: [undefined, undefined, { local: true }], unknown: [0], stale: [], degraded: true });
        expect(d.errors.every((e) => e.tier === 'redis')).toBe(true);
      } finally {
        await srv.restart();
      }
      try {
        await until('the cache to answer again', async () => (await gate.lookupDetailed('risk', [KEY])).unknown.length === 0);
        expect(await gate.lookup('risk', [KEY])).toEqual([RECORD]);
      } finally {
        await gate.close();
      }
    });
  }

  it('cache_tier_up{tier="redis"} turns 0 when Redis dies while local hits answer every lookup', async () => {
    await admin.flushall();
    await new HotColdStore({ redis: admin }).write('risk', [{ key: 'hot', value: { hot: true } }]);
    const metrics = createMetrics();
    const gate = await HashGate.open({ threads: 0, metrics, cache: { redis: { url: srv.url, timeoutMs: 500 } } });
    const up = async (): Promise<number | undefined> => sampleValue(parseExposition(await metrics.text()), 'hashgate_cache_tier_up', { tier: 'redis' });
    try {
      expect(await gate.lookup('risk', ['hot'])).toEqual([{ hot: true }]);
      expect(await up()).toBe(1);
      await srv.kill('SIGKILL');
      // every lookup is a local hit: Redis is never asked, yet the outage is reported
      await until('cache_tier_up to drop', async () => {
        expect(await gate.lookup('risk', ['hot'])).toEqual([{ hot: true }]);
        return (await up()) === 0;
      });
      expect((await gate.health()).tiers.cacheRedis!.status).not.toBe('up');
      expect(gate.cache!.stats().redis!.errors).toBe(0);
    } finally {
      await srv.restart();
    }
    try {
      await until('cache_tier_up to return', async () => (await up()) === 1);
    } finally {
      await gate.close();
    }
  });

  describe('through a TCP proxy', () => {
    let proxy: TcpProxy;
    beforeAll(async () => {
      proxy = await startProxy(srv.port);
    });
    afterAll(async () => {
      await proxy?.close();
    });

    it('a stalled network is bounded by the tier timeout and rejects; a refused one too; answers after recovery', async () => {
      await admin.flushall();
      await new HotColdStore({ redis: admin }).write('risk', [{ key: KEY, value: RECORD }]);
      const cache = new TieredCache({ redis: { url: proxy.url, timeoutMs: 300 }, breaker: { failures: 1000 } });
      try {
        await cache.ready(10_000);
        await proxy.stall();
        const err = await rejection(cache.lookup('risk', [KEY]));
        expect(err.code).toBe('HG_ERR_TIER_UNAVAILABLE');
        expect((err.details!.errors as { code: string }[])[0]!.code).toBe('HG_ERR_TIMEOUT');
        const d = await cache.lookupDetailed('risk', [KEY]);
        expect(d).toMatchObject({ values: [undefined], unknown: [0], degraded: true });
        await proxy.resume();
        await until('the stalled connection to answer', async () => (await cache.lookupDetailed('risk', [KEY])).unknown.length === 0);

        await admin.set('hg:v:risk:second', wrapEnvelope(encodeValue({ n: 2 }), Date.now()));
        await proxy.refuse();
        expect((await rejection(cache.lookup('risk', ['second']))).code).toBe('HG_ERR_TIER_UNAVAILABLE');
        // a Redis outage hidden by local hits is still reported: the client lost its connection
        expect(await cache.lookup('risk', [KEY])).toEqual([RECORD]);
        await until('the tier to be reported down', () => cache.stats().redis!.healthy === false);
        expect(cache.stats().degraded).toBe(true);
        await proxy.restore();
        await until('the tier to answer again', async () => (await cache.lookupDetailed('risk', ['second'])).unknown.length === 0);
        expect(await cache.lookup('risk', ['second'])).toEqual([{ n: 2 }]);
        expect(cache.stats().redis!.healthy).toBe(true);
      } finally {
        await proxy.resume();
        await proxy.restore();
        await cache.close();
      }
    });

    it('graceMs: a value past its local TTL is served, flagged stale with its age, only while Redis cannot answer', async () => {
      await admin.flushall();
      await admin.set('hg:v:risk:g', wrapEnvelope(encodeValue({ v: 1 }), Date.now()));
      let t = 1_000_000;
      const now = (): number => t;
      const cache = new TieredCache({
        redis: { url: proxy.url, timeoutMs: 300 },
        local: { ttlMs: 1_000 },
        graceMs: 60_000,
        negativeTtlMs: 0,
        breaker: { failures: 1000 },
        now,
      });
      try {
        await cache.ready(10_000);
        expect(await cache.lookup('risk', ['g'])).toEqual([{ v: 1 }]);
        // past its TTL with Redis up: Redis is asked again and its newer value wins
        await admin.set('hg:v:risk:g', wrapEnvelope(encodeValue({ v: 2 }), Date.now()));
        t += 1_500;
        expect(await cache.lookup('risk', ['g'])).toEqual([{ v: 2 }]);
        expect(await cache.lookupDetailed('risk', ['g'])).toEqual({ values: [{ v: 2 }], errors: [], degraded: false, unknown: [], stale: [] });

        t += 2_500; // loaded 2.5 s ago, fresh for 1 s
        await proxy.refuse();
        expect(await cache.lookup('risk', ['g'])).toEqual([{ v: 2 }]);
        const d = await cache.lookupDetailed('risk', ['g', 'never-seen']);
        expect(d).toMatchObject({ values: [{ v: 2 }, undefined], unknown: [1], stale: [{ index: 0, ageMs: 2_500 }], degraded: true });
        // past the grace period: unknown again
        t += 60_000;
        expect((await rejection(cache.lookup('risk', ['g']))).code).toBe('HG_ERR_TIER_UNAVAILABLE');
      } finally {
        await proxy.restore();
        await cache.close();
      }
    });

    it('graceMs: a key Redis has answered absent since is not served from grace', async () => {
      await admin.flushall();
      await admin.set('hg:v:risk:gone', wrapEnvelope(encodeValue({ v: 1 }), Date.now()));
      let t = 5_000_000;
      const cache = new TieredCache({
        redis: { url: proxy.url, timeoutMs: 300 },
        local: { ttlMs: 1_000 },
        graceMs: 60_000,
        negativeTtlMs: 0,
        breaker: { failures: 1000 },
        now: () => t,
      });
      try {
        await cache.ready(10_000);
        expect(await cache.lookup('risk', ['gone'])).toEqual([{ v: 1 }]);
        await admin.del('hg:v:risk:gone');
        t += 1_500;
        expect(await cache.lookup('risk', ['gone'])).toEqual([undefined]);
        await proxy.refuse();
        expect((await rejection(cache.lookup('risk', ['gone']))).code).toBe('HG_ERR_TIER_UNAVAILABLE');
      } finally {
        await proxy.restore();
        await cache.close();
      }
    });
  });
});
