// IdRegistry gate rebuild on a real 3-master Redis Cluster: registries with different prefixes land
// on different masters, and a reader with a private gate, using its own cluster client, lists every
// master page by page and then finds every document another client wrote (no false negative).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import { requireClusterOrSkip, startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { IdRegistry } from '../../src/ids/index.js';
import { checkGateRebuild, privateGate, records } from '../ids-scenarios.js';

const has = requireClusterOrSkip('ids cluster');

describe.skipIf(!has)('IdRegistry gate rebuild on Redis Cluster', () => {
  let cl: RedisClusterHandle;
  const clients: Cluster[] = [];
  const client = (): Cluster => {
    const c = new Cluster(cl.nodes.map((n) => ({ host: n.host, port: n.port })));
    clients.push(c);
    return c;
  };
  beforeAll(async () => {
    cl = await startRedisCluster();
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await cl?.stop();
  });

  it('ids written through one client are listed from every master and found after rebuildGate()', async () => {
    const wc = client();
    const rc = client();
    const prefixes = ['c0', 'c1', 'c2', 'c3', 'c4', 'c5'];
    const written = new Map<string, Awaited<ReturnType<IdRegistry['upsert']>>[]>();
    for (const p of prefixes) {
      const w = new IdRegistry({ redis: wc, keyPrefix: p });
      const out = [];
      for (const rec of records(150)) out.push(await w.upsert(rec));
      written.set(p, out);
    }
    // the stores sit on more than one master, so a listing that read one node would miss ids
    const sizes = await Promise.all(cl.nodes.map(async ({ host, port }) => {
      const r = new Redis({ host, port });
      try {
        return await r.dbsize();
      } finally {
        r.disconnect();
      }
    }));
    expect(sizes.filter((n) => n > 0).length).toBeGreaterThan(1);
    for (const p of prefixes) {
      const writer = new IdRegistry({ redis: wc, keyPrefix: p });
      const reader = new IdRegistry({ redis: rc, keyPrefix: p, gate: privateGate() });
      await checkGateRebuild(writer, reader, written.get(p)!, 50);
    }
  }, 120_000);
});
