// Rebuild and swap of a shared filter on a real 3-master Redis Cluster: the source is a dedup
// window in the 'sets' layout (bucket sets spread over every master), every rebuild key lives in
// the filter's slot, readers on their own cluster connection never miss a key of both generations.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { Cluster } from 'ioredis';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { RedisBloom, rebuildRedisBloom, rebuildKeys, RedisSetWindowKeys, readRebuildStatus } from 'hashgate/bloom';
import { bucketOf } from 'hashgate';
import { redissonHarness, type RedissonHarness } from './helpers/redisson.js';
import { requireClusterOrSkip, startRedisCluster, type RedisClusterHandle } from './helpers/redis-cluster.js';

const HAVE = requireClusterOrSkip('bloom rebuild cluster');
const CI = process.env.CI === 'true';
let java: RedissonHarness | null = null;
let cluster: RedisClusterHandle | undefined;
let client: Cluster;

beforeAll(async () => {
  java = await redissonHarness();
  if (java === null && CI) throw new Error('java/javac/mvn not found: the Redisson cluster rebuild check must run in CI');
  if (!HAVE) return;
  cluster = await startRedisCluster();
  client = new Cluster(cluster.nodes);
}, 600_000);

afterAll(async () => {
  client?.disconnect();
  await cluster?.stop();
});

const BUCKETS = 64;

async function fillWindow(prefix: string, window: string, keys: string[]): Promise<void> {
  const byBucket = new Map<number, string[]>();
  for (const k of keys) {
    const b = bucketOf(k, BUCKETS);
    const list = byBucket.get(b) ?? [];
    list.push(k);
    byBucket.set(b, list);
  }
  for (const [b, members] of byBucket) await client.sadd(`${prefix}:${window}:${b}`, ...members);
  await client.hset(`${prefix}:${window}:meta`, 'sets.buckets', String(BUCKETS));
}

const ones = (u: Uint8Array): number => u.reduce((a, b) => a + b, 0);

describe('rebuild on a 3-master cluster', () => {
  for (const name of ['guard', 'risk{blacklist}']) {
    it(`swaps a generation built from a sets window (${name})`, async (ctx) => {
      if (!HAVE) return ctx.skip();
      const tag = name.replace(/[{}]/g, '');
      const A = Array.from({ length: 3000 }, (_, i) => `${tag}-old-${i}`);
      const B = Array.from({ length: 10_000 }, (_, i) => (i % 3 === 0 ? `${tag}-用户-${i}` : `${tag}-both-${i}`));
      const C = Array.from({ length: 10_000 }, (_, i) => `${tag}-new-${i}`);
      const live = await RedisBloom.open({ redis: client, name, expectedItems: 40_000, fpp: 0.01 });
      await live.tryInit();
      await live.addAll([...A, ...B]);
      await fillWindow(`dd${tag}`, '2026', [...B, ...C]);

      // the bucket sets really are spread over the masters
      const slots = new Set<string>();
      for (let b = 0; b < BUCKETS; b++) slots.add(String(await client.cluster('KEYSLOT', `dd${tag}:2026:${b}`)));
      expect(slots.size).toBeGreaterThan(10);
      // every key the rebuild touches is in the filter's slot
      const slot = await client.cluster('KEYSLOT', name);
      const rk = rebuildKeys(name);
      for (const k of [rk.lock, rk.next, rk.nextConfig, rk.last, name.includes('{') ? `${name}:hg:changes` : `{${name}}:hg:changes`]) {
        expect(await client.cluster('KEYSLOT', k), k).toBe(slot);
      }

      const readerConn = new Cluster(cluster!.nodes);
      const reader = await RedisBloom.open({ redis: readerConn, name });
      let done = false;
      let misses = 0;
      let duringBuild = 0;
      const loop = (async () => {
        while (!done) {
          const building = (await readerConn.exists(rk.next)) === 1;
          const r = await reader.containsAll(B);
          if (building) duringBuild++;
          misses += B.length - ones(r);
        }
      })();
      const source = new RedisSetWindowKeys({ redis: client, prefix: `dd${tag}`, windows: ['2026'] });
      const res = await rebuildRedisBloom({ redis: client, name, keys: source, sourceDescription: source.description });
      done = true;
      await loop;
      readerConn.disconnect();

      expect(res).toMatchObject({ keys: 20_000, generation: 1 });
      expect(source.bucketsRead).toBe(BUCKETS);
      expect(duringBuild).toBeGreaterThan(0);
      expect(misses).toBe(0);
      expect(ones(await live.containsAll(B))).toBe(B.length);
      expect(ones(await live.containsAll(C))).toBe(C.length);
      expect(ones(await live.containsAll(A)) / A.length).toBeLessThan(0.05);
      expect(await client.pttl(name)).toBe(-1);
      expect(await client.exists(rk.next, rk.nextConfig, rk.lock)).toBe(0);
      expect(await readRebuildStatus(client, name)).toMatchObject({ generation: 1, keys: 20_000, source: `sets:dd${tag}:2026` });
    }, 180_000);
  }

  it("Redisson's cluster client reads the rebuilt filter under the same name", async (ctx) => {
    if (!HAVE || java === null) return ctx.skip();
    const nodes = cluster!.nodes.map((n) => `${n.host}:${n.port}`).join(',');
    const name = 'java{guard}';
    const old = Array.from({ length: 200 }, (_, i) => `j-old-${i}`);
    const fresh = Array.from({ length: 200 }, (_, i) => (i % 2 ? `j-新-${i}` : `j-new-${i}`));
    expect((await java.run(['init', nodes, name, '5000', '0.001', '--cluster'])).out.trim()).toBe('true');
    expect(Number(await java.keys(['addall', nodes, name, '--cluster'], old))).toBeGreaterThan(150);
    const r = await rebuildRedisBloom({ redis: client, name, keys: [fresh] });
    expect(r.generation).toBe(1);
    expect(await java.keys(['contains', nodes, name, '--cluster'], fresh)).toBe('1'.repeat(fresh.length));
    const javaOld = await java.keys(['contains', nodes, name, '--cluster'], old);
    const f = await RedisBloom.open({ redis: client, name });
    expect(javaOld).toBe(Array.from(await f.containsAll(old)).join(''));
    expect(javaOld.split('').filter((c) => c === '1').length).toBeLessThan(5);
  }, 300_000);

  it('the CLI rebuilds through --cluster and a second run meanwhile exits 3', async (ctx) => {
    if (!HAVE) return ctx.skip();
    const name = 'cli{fleet}';
    const live = await RedisBloom.open({ redis: client, name, expectedItems: 1000, fpp: 0.01 });
    await live.tryInit();
    await live.addAll(['stale']);
    await fillWindow('ddcli', '2026', ['fresh-1', 'fresh-2']);
    const nodes = cluster!.nodes.map((n) => `${n.host}:${n.port}`).join(',');
    const CLI = join(process.cwd(), 'dist/src/cli/main.js');
    const args = ['bloom', 'rebuild', '--name', name, '--cluster', '--redis', `redis://${nodes.split(',')[0]}`, '--sets-window', '2026', '--sets-prefix', 'ddcli', '--json'];
    await client.set(rebuildKeys(name).lock, 'another-host', 'PX', 30_000);
    const locked = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 60_000 });
    expect(locked.status).toBe(3);
    expect(await live.contains('stale')).toBe(true);
    await client.del(rebuildKeys(name).lock);
    const ok = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 60_000 });
    expect(ok.stderr).toBe('');
    expect(ok.status).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ generation: 1, keys: 2 });
    expect(Array.from(await live.containsAll(['fresh-1', 'fresh-2']))).toEqual([1, 1]);
    expect(await live.contains('stale')).toBe(false);
  }, 120_000);
});
