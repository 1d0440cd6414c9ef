// RedisBloom on a real 3-master Redis Cluster, shared with Redisson's cluster client: filters whose
// names hash to different masters are filled by Java and read by Node and the other way round.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { Cluster } from 'ioredis';
import { RedisBloom, RedisBloomReplica, rebuildRedisBloom } from 'hashgate/bloom';
import { ErrorCodes } from 'hashgate';
import { redissonHarness, type RedissonHarness } from './helpers/redisson.js';
import { requireClusterOrSkip, startRedisCluster, type RedisClusterHandle } from './helpers/redis-cluster.js';

const CI = process.env.CI === 'true';
const HAVE = requireClusterOrSkip('RedisBloom cluster');
let java: RedissonHarness | null = null;
let cluster: RedisClusterHandle | undefined;
let client: Cluster;
let nodes = '';

beforeAll(async () => {
  java = await redissonHarness();
  if (java === null && CI) throw new Error('java/javac/mvn not found: the Redisson cluster suite must run in CI');
  if (!HAVE) return;
  cluster = await startRedisCluster();
  client = new Cluster(cluster.nodes);
  nodes = cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',');
}, 600_000);

afterAll(async () => {
  client?.disconnect();
  await cluster?.stop();
});

const keys = (p: string, n: number) => Array.from({ length: n }, (_, i) => (i % 4 === 0 ? `${p}用户${i}` : i % 4 === 1 ? '' : `${p}-${i}`));

describe('RedisBloom on a 3-master cluster', () => {
  it('Java and Node share filters on every master, names with and without a hash tag', async (ctx) => {
    if (!HAVE || java === null) return ctx.skip();
    const j = java;
    // names chosen so the filters land on different masters
    const names = ['guard', 'risk{blacklist}', 'guard-2', 'zz', 'a{user}:bloom'];
    const masters = new Set<string>();
    for (const name of names) {
      const slot = Number(await client.cluster('KEYSLOT', name));
      const conf = Number(await client.cluster('KEYSLOT', name.includes('{') ? `${name}:config` : `{${name}}:config`));
      expect(conf).toBe(slot);
      const shards = (await client.cluster('SLOTS')) as Array<[number, number, [string, number]]>;
      masters.add(String(shards.find(([a, b]) => slot >= a && slot <= b)![2][1]));
    }
    expect(masters.size).toBeGreaterThan(1);

    for (const [i, name] of names.entries()) {
      const data = keys(name, 300);
      const absent = keys(`${name}-absent`, 600);
      if (i % 2 === 0) {
        expect((await j.run(['init', nodes, name, '1000', '0.01', '--cluster'])).out.trim()).toBe('true');
        expect(Number(await j.keys(['addall', nodes, name, '--cluster'], data))).toBeGreaterThan(200);
        const f = await RedisBloom.open({ redis: client, name });
        expect(Array.from(await f.containsAll(data)).every((b) => b === 1)).toBe(true);
        const javaSays = await j.keys(['contains', nodes, name, '--cluster'], absent);
        expect(Array.from(await f.containsAll(absent)).join('')).toBe(javaSays);
      } else {
        const f = await RedisBloom.open({ redis: client, name, expectedItems: 1000, fpp: 0.01 });
        expect(await f.tryInit()).toBe(true);
        await f.addAll(data);
        expect(await j.keys(['contains', nodes, name, '--cluster'], data)).toBe('1'.repeat(data.length));
        const javaSays = await j.keys(['contains', nodes, name, '--cluster'], absent);
        expect(Array.from(await f.containsAll(absent)).join('')).toBe(javaSays);
        expect(await f.count()).toBe(Number((await j.run(['count', nodes, name, '--cluster'])).out.trim()));
      }
    }
  }, 300_000);

  it('replicas follow a published filter and a rebuild swaps within the slot', async (ctx) => {
    if (!HAVE) return ctx.skip();
    const name = 'fleet{tenant-7}';
    const w = await RedisBloom.open({ redis: client, name, expectedItems: 5000, fpp: 0.01, publish: true });
    expect(await w.tryInit()).toBe(true);
    await w.addAll(['a', 'b']);
    const rep = await RedisBloomReplica.open({ redis: client, name, resyncIntervalMs: 0, blockMs: 100 });
    try {
      expect(Array.from(rep.containsAll(['a', 'b']))).toEqual([1, 1]);
      await w.addAll(['c-新']);
      const end = Date.now() + 10_000;
      while (!rep.contains('c-新') && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      expect(rep.contains('c-新')).toBe(true);
      const r = await rebuildRedisBloom({ redis: client, name, keys: ['x', 'y'] });
      expect(r.keys).toBe(2);
      expect(Array.from(await w.containsAll(['x', 'y', 'a']))).toEqual([1, 1, 0]);
      while (!rep.contains('x') && Date.now() < end) await new Promise((res) => setTimeout(res, 20));
      expect(Array.from(rep.containsAll(['x', 'y', 'a']))).toEqual([1, 1, 0]);
    } finally {
      await rep.close();
    }
  }, 120_000);

  it('rejects a name whose bitmap and config would sit in different slots', async (ctx) => {
    if (!HAVE) return ctx.skip();
    await expect(RedisBloom.open({ redis: client, name: 'half{open' })).rejects.toMatchObject({ code: ErrorCodes.INVALID_OPTION });
    await expect(RedisBloom.open({ redis: client, name: 'empty{}tag' })).rejects.toMatchObject({ code: ErrorCodes.INVALID_OPTION });
  });
});
