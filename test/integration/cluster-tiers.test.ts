// The cache's Redis tier, HotColdStore writes, the invalidation bus and the Redis ID store on a real
// 3-master Redis Cluster started by the harness: values spread over every master, batched lookups
// across slots answer exactly, cold hits are backfilled, a killed master fails only its own keys
// (unknown, never cached as absent), and the ID registry keeps its atomic upsert in one slot.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { requireClusterOrSkip, startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { HotColdStore, MemoryColdStore, TieredCache, encodeValue } from '../../src/entries/cache.js';
import { IdRegistry, logicalId } from '../../src/entries/ids.js';
import { checkRepair, checkWeakHashScenario, records, weak12 } from '../ids-scenarios.js';

const has = requireClusterOrSkip('cache/ids cluster');

describe.skipIf(!has)('cache tier, tiering and ids on Redis Cluster', () => {
  let cl: RedisClusterHandle;
  const clusters: Cluster[] = [];
  const cluster = (): Cluster => {
    // no enableAutoPipelining: ioredis re-sends a whole auto-pipeline on MOVED and keeps failing
    // after a master restarts; plain per-slot commands are redirected
    const c = new Cluster(cl.nodes, { redisOptions: { commandTimeout: 2_000 } });
    clusters.push(c);
    return c;
  };
  beforeAll(async () => {
    // AOF so the master killed in the fault test comes back with its keys
    cl = await startRedisCluster({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  });
  afterAll(async () => {
    for (const c of clusters) c.disconnect();
    await cl?.stop();
  });

  /** Keys per master, by asking each node directly. */
  const perNode = async (pattern: string): Promise<number[]> =>
    Promise.all(
      cl.nodes.map(async ({ port }) => {
        const r = new Redis({ port, host: '127.0.0.1' });
        try {
          let n = 0;
          let cursor = '0';
          do {
            const [c, keys] = await r.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
            cursor = c;
            n += keys.length;
          } while (cursor !== '0');
          return n;
        } finally {
          r.disconnect();
        }
      }),
    );

  it('writes spread over every master; batched lookups across slots answer exactly; cold hits are backfilled', async () => {
    const c = cluster();
    const cold = new MemoryColdStore();
    const cache = new TieredCache({ redis: { client: c, timeoutMs: 2_000, batchSize: 500 }, cold, negativeTtlMs: 60_000 });
    const hot = new HotColdStore({ redis: c, cache });
    const keys = Array.from({ length: 3000 }, (_, i) => `用户:${i}`);
    for (let o = 0; o < keys.length; o += 1000) {
      expect((await hot.write('users', keys.slice(o, o + 1000).map((key, i) => ({ key, value: { i: o + i } })))).written).toBe(1000);
    }
    const spread = await perNode('hg:v:users:*');
    expect(spread.reduce((a, b) => a + b, 0)).toBe(3000);
    for (const n of spread) expect(n).toBeGreaterThan(500);

    const absent = Array.from({ length: 200 }, (_, i) => `nobody:${i}`);
    const coldOnly = Array.from({ length: 50 }, (_, i) => `archived:${i}`);
    await cold.mput('users', coldOnly.map((key, i) => ({ key, value: encodeValue({ cold: i }), ts: Date.now() - 1000 })));
    const all = [...keys, ...absent, ...coldOnly];
    const res = await cache.lookupDetailed('users', all);
    expect(res.degraded).toBe(false);
    for (let i = 0; i < keys.length; i++) expect(res.values[i]).toEqual({ i });
    for (let i = 0; i < absent.length; i++) expect(res.values[keys.length + i]).toBeUndefined();
    for (let i = 0; i < coldOnly.length; i++) expect(res.values[keys.length + absent.length + i]).toEqual({ cold: i });
    const st = cache.stats();
    expect(st.redis!.hits).toBe(3000);
    expect(st.redis!.backfills).toBe(50);
    // the backfilled copies are real keys on their own masters
    expect((await perNode('hg:v:users:archived:*')).reduce((a, b) => a + b, 0)).toBe(50);
    // a fresh cache (no local tier) reads the backfilled copies from Redis, not from the cold tier
    const fresh = new TieredCache({ redis: { client: c, timeoutMs: 2_000 } });
    expect(await fresh.lookup('users', coldOnly.slice(0, 5))).toEqual([0, 1, 2, 3, 4].map((i) => ({ cold: i })));
    await fresh.close();
    await cache.close();
  });

  it('the invalidation bus works with Cluster clients: a write through one cache evicts on another', async () => {
    const a = new TieredCache({ redis: { client: cluster(), timeoutMs: 2_000 }, bus: { channel: 'cl-bus' }, negativeTtlMs: 60_000 });
    const b = new TieredCache({ redis: { client: cluster(), timeoutMs: 2_000 }, bus: { channel: 'cl-bus' }, negativeTtlMs: 60_000 });
    await Promise.all([a.ready(10_000), b.ready(10_000)]);
    expect(await b.lookup('t', ['k'])).toEqual([undefined]); // cached as absent on b
    await new HotColdStore({ redis: a.redis!, cache: a }).write('t', [{ key: 'k', value: { v: 1 } }]);
    for (let i = 0; i < 200 && b.bus!.stats().received < 1; i++) await new Promise((r) => setTimeout(r, 10));
    expect(await b.lookup('t', ['k'])).toEqual([{ v: 1 }]);
    await a.close();
    await b.close();
  });

  it('a killed master fails only its own keys: unknown and degraded, never cached as absent; back after restart', async () => {
    const c = cluster();
    const hot = new HotColdStore({ redis: c });
    const keys = Array.from({ length: 600 }, (_, i) => `k${i}`);
    await hot.write('fo', keys.map((key, i) => ({ key, value: { i } })));
    const cache = new TieredCache({ redis: { client: c, timeoutMs: 500 }, negativeTtlMs: 60_000, breaker: { failures: 1_000 } });
    const victim = cl.nodes[2]!;
    const slots = (await c.cluster('SLOTS')) as Array<[number, number, [string, number]]>;
    const onVictim = (k: string): boolean => {
      const s = calculateSlot(`hg:v:fo:${k}`);
      return slots.some(([lo, hi, [, port]]) => s >= lo && s <= hi && port === victim.port);
    };
    await cl.kill(2);
    const res = await cache.lookupDetailed('fo', keys);
    expect(res.degraded).toBe(true);
    expect(res.errors.length).toBeGreaterThan(0);
    let lost = 0;
    for (let i = 0; i < keys.length; i++) {
      if (onVictim(keys[i]!)) {
        lost++;
        expect(res.values[i]).toBeUndefined();
      } else expect(res.values[i]).toEqual({ i });
    }
    expect(lost).toBeGreaterThan(100);
    expect(lost).toBeLessThan(400);
    await cl.restart(2);
    let again = await cache.lookupDetailed('fo', keys);
    for (let t = 0; t < 50 && again.degraded; t++) {
      await new Promise((r) => setTimeout(r, 200));
      again = await cache.lookupDetailed('fo', keys);
    }
    // the victim's keys were not cached as absent during the outage
    expect(again.values).toEqual(keys.map((_, i) => ({ i })));
    await cache.close();
  }, 120_000);

  it('IdRegistry: weak-hash scenario and repair on the cluster; one registry per slot, escalation seen by another client', async () => {
    const reg = new IdRegistry({ redis: cluster(), algorithm: weak12, keyPrefix: 'clids' });
    const { results } = await checkWeakHashScenario(reg, weak12, 500);
    await checkRepair(reg, results);
    // every key of the registry sits in the slot of {clids}: one master holds them all
    const spread = await perNode('{clids}:*');
    expect(spread.filter((n) => n > 0).length).toBe(1);
    expect(spread.reduce((a, b) => a + b, 0)).toBeGreaterThan(500);

    const a = new IdRegistry({ redis: cluster(), algorithm: weak12, keyPrefix: 'clesc', escalation: { threshold: 0.002, minDocuments: 100 } });
    const b = new IdRegistry({ redis: cluster(), algorithm: weak12, keyPrefix: 'clesc' });
    const recs = records(2000, 'esc');
    const done: Array<{ physicalId: string; id: string }> = [];
    let i = 0;
    for (; i < recs.length && a.activeAlgorithm !== 'sha256'; i++) done.push(await a.upsert(recs[i]));
    expect(a.activeAlgorithm).toBe('sha256');
    const o = await b.upsert(recs[i]);
    expect(o.id).toBe(logicalId(recs[i], 'sha256'));
    for (let j = 0; j < done.length; j += 11) {
      expect(await b.upsert(recs[j])).toMatchObject({ status: 'duplicate', physicalId: done[j]!.physicalId });
    }
    // an explicit tag in the prefix is kept as given
    const tagged = new IdRegistry({ redis: cluster(), keyPrefix: 'ids:{tenant7}' });
    expect((await tagged.upsert({ x: 1 })).status).toBe('new');
    expect((await perNode('ids:{tenant7}:*')).reduce((a2, b2) => a2 + b2, 0)).toBeGreaterThan(0);
  }, 120_000);

  it('migrateCold on a Cluster: a checkpoint key outside the lock\'s slot is refused, the default one is placed beside the lock', async () => {
    const c = cluster();
    const bad = new HotColdStore({ redis: c, cold: new MemoryColdStore(), lockKey: 'mig:lock', cursorKey: 'mig:cursor' });
    await expect(bad.migrateCold()).rejects.toMatchObject({ code: 'HG_ERR_INVALID_OPTION', message: expect.stringContaining('cursorKey') });
    const hot = new HotColdStore({ redis: c, cold: new MemoryColdStore(), lockKey: 'mig:lock' });
    await hot.write('mc', [{ key: 'a', value: { v: 1 } }], { ttlSeconds: 60 });
    const r = await hot.migrateCold({ thresholdMs: 3_600_000, batchSize: 1, maxBatches: 1 });
    expect(r).toMatchObject({ acquired: true, complete: false });
    expect(r.cursor).toMatch(/^127\.0\.0\.1:\d+\/\d+$/);
    expect(JSON.parse((await c.get('{mig:lock}:cursor'))!)).toMatchObject({ node: expect.any(String), cursor: expect.any(String) });
  });
});
