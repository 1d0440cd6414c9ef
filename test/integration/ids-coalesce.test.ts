// Merged ids.upsert calls on a real redis-server and a real 3-master Redis Cluster: answers equal
// the sequential model, one script call per batch, and a killed server rejects every caller of the batch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import { ErrorCodes, HashGateError } from 'hashgate';
import { IdRegistry, RedisIdStore } from 'hashgate/ids';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { requireClusterOrSkip, startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { checkInterleavings, countBatches, deterministic } from '../ids-coalesce-scenarios.js';

const has = requireRedisOrSkip('ids coalescing (redis)');
const hasCluster = requireClusterOrSkip('ids coalescing (redis cluster)');

async function cmdCalls(r: Redis, cmd: string): Promise<number> {
  const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(await r.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

type Counted = IdRegistry & { store: { batches: number[] } };

describe.skipIf(!has)('ids.upsert coalescing on a real redis-server', () => {
  let srv: RedisServer;
  let r: Redis;
  let n = 0;
  const open = (coalesce: { maxKeys: number; maxDelayMs: number } | false, client: Redis | Cluster = r): Counted =>
    new IdRegistry({ store: countBatches(new RedisIdStore({ client, keyPrefix: `ic${++n}` })), coalesce, ...deterministic() }) as Counted;

  beforeAll(async () => {
    srv = await startRedis();
    r = new Redis(srv.url);
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
  });

  it('random interleavings of concurrent upserts answer like the same upserts run one after another', async () => {
    const sizes = await checkInterleavings((co) => open(co), 60);
    expect(Math.max(...sizes)).toBeGreaterThan(1);
  });

  it('256 concurrent upserts go out as two script calls of 128; repeats answer duplicate in call order', async () => {
    const reg = new IdRegistry({ store: countBatches(new RedisIdStore({ client: r, keyPrefix: `ic${++n}` })) }) as Counted;
    await reg.upsert({ warm: 1 });
    const before = await cmdCalls(r, 'evalsha');
    const recs = Array.from({ length: 256 }, (_, i) => ({ k: i % 200 }));
    const out = await Promise.all(recs.map((x) => reg.upsert(x)));
    expect(await cmdCalls(r, 'evalsha')).toBe(before + 2);
    expect(reg.store.batches).toEqual([1, 128, 128]);
    expect(out.slice(0, 200).every((o) => o.status === 'new')).toBe(true);
    for (let i = 200; i < 256; i++) {
      expect(out[i]!.status).toBe('duplicate');
      expect(out[i]!.physicalId).toBe(out[i - 200]!.physicalId);
    }
    expect((await reg.stats()).docs).toBe(201);
  });

  it('a bad record among good ones rejects only its own call', async () => {
    const reg = open({ maxKeys: 128, maxDelayMs: 0 });
    await reg.stats();
    const got = await Promise.allSettled([reg.upsert({ a: 1 }), reg.upsert({ a: NaN }), reg.upsert({ bb: 2 }), reg.upsert({ a: 1 })]);
    expect(got.map((g) => (g.status === 'fulfilled' ? g.value.status : (g.reason as { code: string }).code))).toEqual(['new', 'HG_ERR_CANONICAL_JSON', 'new', 'duplicate']);
    expect(reg.store.batches).toEqual([3]);
  });

  it('kill -9 of the redis-server rejects every caller of the batch with HG_ERR_STORE', async () => {
    const own = await startRedis();
    const c = new Redis({ port: own.port, maxRetriesPerRequest: 0, retryStrategy: () => null });
    c.on('error', () => undefined);
    try {
      const reg = open({ maxKeys: 128, maxDelayMs: 0 }, c);
      expect((await reg.upsert({ warm: 1 })).status).toBe('new');
      await own.kill('SIGKILL');
      const got = await Promise.allSettled([reg.upsert({ a: 1 }), reg.upsert({ b: 1 }), reg.upsert({ a: NaN }), reg.upsert({ c: 1 }), reg.upsert({ a: 1 })]);
      expect(reg.store.batches).toEqual([1, 4]);
      const reasons = got.map((g) => (g as PromiseRejectedResult).reason as HashGateError);
      expect(got.map((g) => g.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected', 'rejected']);
      expect(reasons.map((e) => e.code)).toEqual([ErrorCodes.STORE, ErrorCodes.STORE, 'HG_ERR_CANONICAL_JSON', ErrorCodes.STORE, ErrorCodes.STORE]);
      for (const i of [0, 1, 3, 4]) {
        expect(reasons[i]).toBeInstanceOf(HashGateError);
        expect(reasons[i]!.message).toMatch(/^ids upsert failed: /);
      }
      // all four callers share the one batch failure
      expect(reasons[1]).toBe(reasons[0]);
      expect(reasons[4]).toBe(reasons[0]);
    } finally {
      c.disconnect();
      await own.stop();
    }
  });
});

describe.skipIf(!hasCluster)('ids.upsert coalescing on a real 3-master Redis Cluster', () => {
  let cl: RedisClusterHandle;
  let c: Cluster;
  let n = 0;
  beforeAll(async () => {
    cl = await startRedisCluster();
    c = new Cluster(cl.nodes);
    await c.ping();
  });
  afterAll(async () => {
    c?.disconnect();
    await cl?.stop();
  });

  it('random interleavings answer like the sequential model; each batch is one script call on the store slot', async () => {
    const open = (coalesce: { maxKeys: number; maxDelayMs: number } | false): Counted =>
      new IdRegistry({ store: countBatches(new RedisIdStore({ client: c, keyPrefix: `cc${++n}` })), coalesce, ...deterministic() }) as Counted;
    const sizes = await checkInterleavings(open, 25);
    expect(Math.max(...sizes)).toBeGreaterThan(1);
    // registries on several prefixes at once: every batch lands on its prefix's master, and the
    // prefixes spread over more than one master
    const regs = Array.from({ length: 6 }, () => open({ maxKeys: 128, maxDelayMs: 0 }));
    await Promise.all(regs.map((g) => g.stats()));
    const out = await Promise.all(regs.flatMap((g) => Array.from({ length: 20 }, (_, i) => g.upsert({ k: i % 10 }))));
    expect(out.filter((o) => o.status === 'duplicate').length).toBe(60);
    for (const g of regs) expect(g.store.batches).toEqual([20]);
    const perNode = await Promise.all(c.nodes('master').map((m) => m.keys(`{cc${n}}*`).then((k) => k.length)));
    expect(perNode.filter((k) => k > 0).length).toBe(1);
    const masters = new Set<string>();
    for (const m of c.nodes('master')) if ((await m.keys('{cc*')).length > 0) masters.add(`${m.options.port}`);
    expect(masters.size).toBeGreaterThan(1);
  });
});
