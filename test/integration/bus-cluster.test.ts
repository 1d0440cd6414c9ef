// The invalidation bus on a real 3-master Redis Cluster when the node its connections use is
// killed (SIGKILL, no replica, so the cluster also goes to the failed state): the subscriber moves
// to a live node, re-subscribes and its cache's local tier is cleared (never left stale), and
// invalidations published afterwards reach it through the surviving nodes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import { requireClusterOrSkip, startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { HotColdStore, TieredCache } from '../../src/entries/cache.js';

const has = requireClusterOrSkip('bus cluster');

const until = async (cond: () => boolean | Promise<boolean>, ms: number): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe.skipIf(!has)('invalidation bus on Redis Cluster: node failure', () => {
  let cl: RedisClusterHandle;
  beforeAll(async () => {
    cl = await startRedisCluster();
  });
  afterAll(async () => {
    await cl?.stop();
  });

  /** Subscribers of `channel` per node, asked of each node directly (a dead node counts -1). */
  const numsub = async (channel: string): Promise<number[]> =>
    Promise.all(
      cl.nodes.map(async ({ host, port }) => {
        const r = new Redis({ host, port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
        r.on('error', () => undefined);
        try {
          await r.connect();
          const out = (await r.call('PUBSUB', 'NUMSUB', channel)) as [string, number];
          return Number(out[1]);
        } catch {
          return -1;
        } finally {
          r.disconnect();
        }
      }),
    );

  it('killing the node the subscriber uses clears the local tier after re-subscribing elsewhere; later invalidations arrive', async () => {
    // one Cluster client per instance, as in two processes
    const [ca, cb] = [0, 1].map(() => new Cluster(cl.nodes, { redisOptions: { commandTimeout: 2_000 } })) as [Cluster, Cluster];
    const a = new TieredCache({ redis: { client: ca, timeoutMs: 2_000 }, bus: { channel: 'kill-bus', heartbeatMs: 500 }, negativeTtlMs: 60_000 });
    const b = new TieredCache({ redis: { client: cb, timeoutMs: 2_000 }, bus: { channel: 'kill-bus', heartbeatMs: 500 }, negativeTtlMs: 60_000 });
    try {
      await Promise.all([a.ready(10_000), b.ready(10_000)]);
      const keys = Array.from({ length: 50 }, (_, i) => `k${i}`);
      await new HotColdStore({ redis: a.redis! }).write('t', keys.map((key, i) => ({ key, value: { i } })));
      expect(await b.lookup('t', keys)).toEqual(keys.map((_, i) => ({ i })));
      expect(b.stats().local.entries).toBe(keys.length);

      const subs = await numsub('kill-bus');
      const victim = subs.findIndex((n) => n > 0);
      expect(victim).toBeGreaterThanOrEqual(0);
      const resyncs = b.bus!.stats().resyncs;
      await cl.kill(victim);
      // b's subscriber left the dead node, subscribed on a live one and cleared its local tier
      await until(() => b.bus!.stats().resyncs > resyncs && b.bus!.stats().connected, 20_000);
      expect(b.stats().local.entries).toBe(0);
      await until(async () => (await numsub('kill-bus')).filter((n) => n > 0).reduce((x, y) => x + y, 0) === 2, 20_000);

      // the bus carries invalidations again, publisher and subscriber both on surviving nodes
      const received = b.bus!.stats().received;
      await until(() => a.bus!.stats().connected, 20_000);
      a.bus!.publish('t', ['k1']);
      await until(() => b.bus!.stats().received > received, 10_000);
    } finally {
      await a.close();
      await b.close();
      ca.disconnect();
      cb.disconnect();
    }
  }, 90_000);
});
