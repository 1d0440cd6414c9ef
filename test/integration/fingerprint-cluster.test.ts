// FingerprintIndex on a real 3-master Redis Cluster (test/helpers/redis-cluster.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Cluster } from 'ioredis';
import { requireClusterOrSkip, startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { FingerprintIndex } from '../../src/fingerprint/index.js';

const has = requireClusterOrSkip('index (redis cluster)');

type Model = Map<string, Map<string, string>>;
const modelMatch = (m: Model, q: Record<string, string>): string[] =>
  [...m].filter(([, a]) => Object.entries(q).every(([k, v]) => a.get(k) === v)).map(([d]) => d).sort();
const modelAny = (m: Model, q: Record<string, string>): string[] =>
  [...m].filter(([, a]) => Object.entries(q).some(([k, v]) => a.get(k) === v)).map(([d]) => d).sort();

describe.skipIf(!has)('FingerprintIndex on a real 3-master Redis Cluster', () => {
  let cl: RedisClusterHandle;
  let c: Cluster;
  beforeAll(async () => {
    cl = await startRedisCluster();
    c = new Cluster(cl.nodes);
    await c.ping();
  });
  afterAll(async () => {
    c?.disconnect();
    await cl?.stop();
  });

  it('hash-tagged partitions spread over all masters; match/any/remove agree with a model', async () => {
    const idx = new FingerprintIndex({ redis: c, shards: 12 });
    const m: Model = new Map();
    const ua = (i: number): string => `Mozilla/5.0 build ${i % 4} ${'x'.repeat(70)}`;
    for (let i = 0; i < 240; i++) {
      const a = { canvas: `c${i % 5}`, ua: ua(i), ip: `10.0.0.${i % 9}` };
      await idx.put(`dev${i}`, a);
      m.set(`dev${i}`, new Map(Object.entries(a)));
    }
    // every master holds part of the index: the sets of one query really live on different nodes
    const perNode = await Promise.all(c.nodes('master').map((n) => n.dbsize()));
    expect(perNode.length).toBe(3);
    for (const k of perNode) expect(k).toBeGreaterThan(0);
    for (let i = 0; i < 240; i += 3) {
      await idx.remove(`dev${i}`);
      m.delete(`dev${i}`);
    }
    for (let i = 1; i < 240; i += 7) {
      await idx.update(`dev${i}`, { canvas: 'moved' });
      // some were removed above: update re-creates them with just this attribute
      const cur = m.get(`dev${i}`) ?? new Map<string, string>();
      cur.set('canvas', 'moved');
      m.set(`dev${i}`, cur);
    }
    await fc.assert(
      fc.asyncProperty(
        fc.record({ canvas: fc.constantFrom('c0', 'c1', 'c4', 'moved'), ua: fc.nat(4).map(ua), ip: fc.nat(9).map((n) => `10.0.0.${n}`) }, { requiredKeys: [] }),
        fc.integer({ min: 1, max: 50 }),
        async (q, limit) => {
          if (Object.keys(q).length === 0) return;
          const want = modelMatch(m, q);
          const wantAny = modelAny(m, q);
          // issued together: merged into one script call per shard, answered per caller
          const [all, lim, allAny, limAny] = await Promise.all([
            idx.match(q, { limit: 10_000 }), idx.match(q, { limit }), idx.any(q, { limit: 10_000 }), idx.any(q, { limit }),
          ]);
          expect(all.sort()).toEqual(want);
          expect(lim.length).toBe(Math.min(limit, want.length));
          for (const d of lim) expect(want).toContain(d);
          expect(allAny.sort()).toEqual(wantAny);
          expect(limAny.length).toBe(Math.min(limit, wantAny.length));
          for (const d of limAny) expect(wantAny).toContain(d);
        },
      ),
      { numRuns: 40 },
    );
    for (const [id, a] of m) expect(await idx.get(id)).toEqual(Object.fromEntries(a));
  });

  it('rebuildGate() scans every master', async () => {
    const idx = new FingerprintIndex({ redis: c, shards: 12 });
    const n = await idx.rebuildGate();
    expect(n).toBeGreaterThan(0);
    expect((await idx.match({ canvas: 'moved' })).length).toBeGreaterThan(0);
  });
});
