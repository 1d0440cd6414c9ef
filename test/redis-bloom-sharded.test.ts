// ShardedRedisBloom on a real redis-server and a real 3-master cluster: slices are ordinary
// Redisson / Guava filters under their own hash tags, a key's slice is the top bits of the second
// half of its hash (checked here against the reference hashes, as a Java client computes it), the
// slice count is stored and adopted, no added key is ever absent (fast-check), sizing refuses
// more than 1e10 keys.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import fc from 'fast-check';
import { Cluster, Redis } from 'ioredis';
import { BloomFilter, RedisBloom, RedisBloomReplica, ShardedRedisBloom, encodeRedissonString, redissonShape, shardedShape, sliceName } from 'hashgate/bloom';
import { ErrorCodes, hashBatch } from 'hashgate';
import { highway128 } from '../src/hash/highway.js';
import { redissonHarness, type RedissonHarness } from './helpers/redisson.js';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';
import { requireClusterOrSkip, startRedisCluster, type RedisClusterHandle } from './helpers/redis-cluster.js';

const HAVE = requireRedisOrSkip('ShardedRedisBloom');
const HAVE_CLUSTER = requireClusterOrSkip('ShardedRedisBloom cluster');
let server: RedisServer | undefined;
let redis: Redis;
let cluster: RedisClusterHandle | undefined;
let clusterClient: Cluster | undefined;
let java: RedissonHarness | null = null;

beforeAll(async () => {
  if (HAVE) {
    server = await startRedis();
    redis = new Redis(server.port, '127.0.0.1');
  }
  if (HAVE_CLUSTER) {
    cluster = await startRedisCluster();
    clusterClient = new Cluster(cluster.nodes);
  }
  java = await redissonHarness().catch(() => null);
}, 600_000);

afterAll(async () => {
  redis?.disconnect();
  clusterClient?.disconnect();
  await server?.stop();
  await cluster?.stop();
});

const keys = (n: number, tag: string): Array<string | Uint8Array> =>
  Array.from({ length: n }, (_, i) => (i % 5 === 0 ? `张三${tag}${i}` : i % 5 === 1 ? new TextEncoder().encode(`b-${tag}-${i}`) : `${tag}:${i}`));

/** The documented slice rule, from the reference hashes: top `bits` bits of the second 64-bit half. */
function expectedSlice(layout: 'redisson' | 'guava', key: string | Uint8Array, bits: number): number {
  if (bits === 0) return 0;
  let h1: bigint;
  if (layout === 'guava') {
    const d = hashBatch([key]);
    h1 = Buffer.from(d.subarray(8, 16)).readBigUInt64LE(0);
  } else {
    let bytes: Uint8Array;
    if (typeof key === 'string') {
      const buf = Buffer.alloc(key.length * 3);
      bytes = buf.subarray(0, encodeRedissonString(key, buf, 0));
    } else bytes = key;
    h1 = BigInt.asUintN(64, highway128(bytes)[1]);
  }
  return Number(h1 >> BigInt(64 - bits));
}

describe('shardedShape (sizing)', () => {
  it('sizes 1e10 keys at 1% into power-of-two slices each within one Redis string; refuses more', () => {
    const s = shardedShape('redisson', 1e10, 0.01);
    expect(s.shards & (s.shards - 1)).toBe(0);
    expect(s.sliceBits).toBeLessThanOrEqual(2 ** 31);
    expect(s.sliceBits * s.shards).toBeGreaterThanOrEqual(redissonShape(1e8, 0.01).size * 100 * 0.99);
    expect(shardedShape('guava', 1e10, 0.01).sliceBits).toBeLessThanOrEqual(2 ** 31);
    // the one-filter limit this removes: 1e9 keys at 1% do not fit one Redis string
    expect(() => redissonShape(1e9, 0.01)).toThrow(RangeError);
    expect(shardedShape('redisson', 1e9, 0.01).shards).toBeGreaterThan(1);
    expect(() => shardedShape('redisson', 1e10 + 1, 0.01)).toThrow(RangeError);
    expect(() => shardedShape('redisson', 1e10 + 1, 0.01)).toThrow(/options\.expectedItems/);
    expect(() => shardedShape('redisson', 1e9, 0.01, 1)).toThrow(/options\.shards/);
  });

  it.skipIf(!HAVE)('open() refuses bad options with errors naming the option', async () => {
    await expect(ShardedRedisBloom.open({ redis, name: 'x', expectedItems: 2e10, fpp: 0.01 })).rejects.toThrow(RangeError);
    await expect(ShardedRedisBloom.open({ redis, name: 'x', expectedItems: 2e10, fpp: 0.01 })).rejects.toThrow(/options\.expectedItems/);
    await expect(ShardedRedisBloom.open({ redis, name: 'x', expectedItems: 1e9, fpp: 0.01, shards: 1 })).rejects.toThrow(/options\.shards/);
    await expect(ShardedRedisBloom.open({ redis, name: 'x', shards: 3 })).rejects.toThrow(/options\.shards/);
    await expect(ShardedRedisBloom.open({ redis, name: 'a{b}', shards: 2 })).rejects.toThrow(/options\.name/);
  });
});

describe.skipIf(!HAVE)('ShardedRedisBloom on a standalone redis-server', () => {
  for (const layout of ['redisson', 'guava'] as const) {
    it(`${layout}: every slice is a filter of its own, holding exactly the keys routed to it`, async () => {
      const name = `sh-${layout}`;
      const N = 20_000;
      const S = 8;
      const f = await ShardedRedisBloom.open({ redis, name, layout, expectedItems: N, fpp: 0.01, shards: S });
      expect(await f.tryInit()).toBe(true);
      expect(f.shards).toBe(S);
      const added = keys(N, 'in');
      expect(await f.addAll(added)).toBeGreaterThan(N * 0.98);
      expect((await f.containsAll(added)).every((x) => x === 1)).toBe(true);
      const absent = keys(20_000, 'out');
      const fp = (await f.containsAll(absent)).reduce((s, x) => s + x, 0);
      expect(fp / absent.length).toBeLessThan(0.02);

      // the routing rule, recomputed from the reference hashes
      const route = f.sliceOf(added);
      for (let j = 0; j < 500; j++) expect(route[j]).toBe(expectedSlice(layout, added[j]!, 3));
      const per = Array.from({ length: S }, () => [] as Array<string | Uint8Array>);
      added.forEach((k, j) => per[route[j]!]!.push(k));
      for (const p of per) expect(p.length).toBeGreaterThan(N / S / 2);

      for (let i = 0; i < S; i++) {
        // an ordinary filter opened on the slice key (what a Java client reads) finds its keys
        const slice = await RedisBloom.open({ redis, name: sliceName(name, i), layout });
        expect((await slice.containsAll(per[i]!)).every((x) => x === 1)).toBe(true);
        if (layout === 'redisson') {
          expect(slice.size).toBe(redissonShape(N / S, 0.01).size);
        } else {
          // byte for byte the bits of a Guava-sized local filter fed the slice's keys
          const local = BloomFilter.create({ expectedItems: N / S, fpp: 0.01 });
          local.addAll(per[i]!);
          const stored = Buffer.alloc(local.byteLength);
          (await redis.getBuffer(sliceName(name, i)))?.copy(stored);
          expect(stored.equals(Buffer.from(local.bitsView()))).toBe(true);
        }
      }
      const est = await f.count();
      expect(Math.abs(est - N) / N).toBeLessThan(0.05);
    }, 120_000);
  }

  it('Redisson reads one slice key and finds the keys routed to it', async (ctx) => {
    if (java === null) return ctx.skip();
    const f = await ShardedRedisBloom.open({ redis, name: 'sh-java', expectedItems: 4000, fpp: 0.01, shards: 4 });
    await f.tryInit();
    const added = Array.from({ length: 400 }, (_, i) => (i % 2 ? `用户${i}` : `k${i}`));
    await f.addAll(added);
    const route = f.sliceOf(added);
    const mine = added.filter((_, j) => route[j] === 2);
    const out = await java.keys(['contains', `127.0.0.1:${server!.port}`, sliceName('sh-java', 2)], mine);
    expect(out).toBe('1'.repeat(mine.length));
  }, 300_000);

  it('the stored slice count wins: a client asking for another count adopts it; reads before tryInit reject', async () => {
    const name = 'sh-adopt';
    const early = await ShardedRedisBloom.open({ redis, name, shards: 16 });
    await expect(early.containsAll(['a'])).rejects.toMatchObject({ code: ErrorCodes.BLOOM_NOT_INITIALIZED });
    const a = await ShardedRedisBloom.open({ redis, name, expectedItems: 4000, fpp: 0.01, shards: 4 });
    await a.tryInit();
    await a.addAll(['x', 'y', '张三']);
    const b = await ShardedRedisBloom.open({ redis, name, expectedItems: 4000, fpp: 0.01, shards: 32 });
    expect(await b.tryInit()).toBe(false);
    expect(b.shards).toBe(4);
    expect([...(await b.containsAll(['x', 'y', '张三']))]).toEqual([1, 1, 1]);
    // the client that opened before the filter existed reads the stored count on its next call
    expect([...(await early.containsAll(['x', 'y', '张三']))]).toEqual([1, 1, 1]);
    expect(early.shards).toBe(4);
    await expect(ShardedRedisBloom.open({ redis, name, layout: 'guava' })).rejects.toMatchObject({ code: ErrorCodes.BLOOM_CONFIG_CHANGED });
    const oldSize = a.slices[0]!.size;
    expect(await a.delete()).toBe(true);
    expect(await redis.exists(sliceName(name, 0), `${sliceName(name, 0)}:config`, '{sh-adopt}:hg:sharded')).toBe(0);
    // created again with twice the keys and twice the slices: slices 0..3 have the old size, so
    // only the stored count tells the clients still routing by 4 that their answers would be wrong
    const c = await ShardedRedisBloom.open({ redis, name, expectedItems: 8000, fpp: 0.01, shards: 8 });
    await c.tryInit();
    expect(c.slices[0]!.size).toBe(oldSize);
    const later = keys(200, 'later');
    await c.addAll(later);
    await expect(b.containsAll(later)).rejects.toMatchObject({ code: ErrorCodes.BLOOM_CONFIG_CHANGED });
    await expect(b.contains('later:3')).rejects.toMatchObject({ code: ErrorCodes.BLOOM_CONFIG_CHANGED });
    await b.reload();
    expect(b.shards).toBe(8);
    expect((await b.containsAll(later)).every((x) => x === 1)).toBe(true);
  });

  it('single-key add/contains from many concurrent callers land in the right slices', async () => {
    const f = await ShardedRedisBloom.open({ redis, name: 'sh-one', expectedItems: 2000, fpp: 0.01, shards: 8 });
    await f.tryInit();
    const added = keys(300, 'one');
    const changed = await Promise.all(added.map((k) => f.add(k)));
    expect(changed.filter(Boolean).length).toBeGreaterThan(290);
    expect((await Promise.all(added.map((k) => f.contains(k)))).every(Boolean)).toBe(true);
    expect((await f.containsAll(added)).every((x) => x === 1)).toBe(true);
    await expect(f.contains(42 as unknown as string)).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG });
  });

  it('replicas: a publishing sharded writer feeds one RedisBloomReplica per slice', async () => {
    const name = 'sh-rep';
    const w = await ShardedRedisBloom.open({ redis, name, expectedItems: 4000, fpp: 0.01, shards: 4, publish: true });
    await w.tryInit();
    const replicas = await Promise.all(w.slices.map((s) => RedisBloomReplica.open({ redis, name: s.name })));
    const added = keys(500, 'rep');
    await w.addAll(added);
    const route = w.sliceOf(added);
    const t0 = Date.now();
    const missing = () => added.filter((k, j) => !replicas[route[j]!]!.contains(k)).length;
    while (missing() > 0 && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 20));
    expect(missing()).toBe(0);
    for (const r of replicas) await r.close();
  }, 30_000);

  it('a Redis failure rejects with HG_ERR_STORE, never "absent"', async () => {
    const own = await startRedis();
    const c = new Redis(own.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => 100, enableOfflineQueue: false });
    c.on('error', () => undefined);
    await once(c, 'ready');
    try {
      const f = await ShardedRedisBloom.open({ redis: c, name: 'sh-down', expectedItems: 1000, fpp: 0.01, shards: 4 });
      await f.tryInit();
      await f.addAll(['a', 'b']);
      await own.kill('SIGKILL');
      await expect(f.containsAll(['a', 'b', 'c'])).rejects.toMatchObject({ code: ErrorCodes.STORE });
    } finally {
      c.disconnect();
      await own.stop().catch(() => undefined);
    }
  }, 30_000);

  it('property: no added key is ever reported absent (any keys, slice count and layout)', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.string({ maxLength: 40 }), fc.uint8Array({ maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 10 })), { minLength: 1, maxLength: 300 }),
        fc.integer({ min: 0, max: 5 }),
        fc.constantFrom('redisson' as const, 'guava' as const),
        fc.integer({ min: 1, max: 3 }),
        async (added, b, layout, parts) => {
          const name = `sh-prop-${run++}`;
          const f = await ShardedRedisBloom.open({ redis, name, layout, expectedItems: 500, fpp: 0.01, shards: 2 ** b });
          await f.tryInit();
          // added in several calls, read by a second client
          const step = Math.ceil(added.length / parts);
          for (let i = 0; i < added.length; i += step) await f.addAll(added.slice(i, i + step));
          const reader = await ShardedRedisBloom.open({ redis, name, layout });
          const got = await reader.containsAll(added);
          expect(got.every((x) => x === 1)).toBe(true);
          for (const k of added.slice(0, 5)) expect(await reader.contains(k)).toBe(true);
          await f.delete();
        },
      ),
      { numRuns: 40 },
    );
  }, 180_000);
});

describe.skipIf(!HAVE_CLUSTER)('ShardedRedisBloom on a 3-master cluster', () => {
  it('slices spread over the masters; adds and reads through the cluster client, in both layouts', async () => {
    const c = clusterClient!;
    for (const layout of ['redisson', 'guava'] as const) {
      const name = `csh-${layout}`;
      const f = await ShardedRedisBloom.open({ redis: c, name, layout, expectedItems: 20_000, fpp: 0.01, shards: 16 });
      await f.tryInit();
      const masters = new Set<string>();
      for (const s of f.slices) {
        const slot = Number(await c.cluster('KEYSLOT', s.name));
        expect(Number(await c.cluster('KEYSLOT', s.configKey))).toBe(slot);
        const ranges = (await c.cluster('SLOTS')) as Array<[number, number, [string, number]]>;
        const owner = ranges.find(([a, z]) => slot >= a && slot <= z)!;
        masters.add(`${owner[2][0]}:${owner[2][1]}`);
      }
      expect(masters.size).toBe(3);
      const added = keys(10_000, layout);
      await f.addAll(added);
      const reader = await ShardedRedisBloom.open({ redis: c, name, layout });
      expect((await reader.containsAll(added)).every((x) => x === 1)).toBe(true);
      const fp = (await reader.containsAll(keys(10_000, `no-${layout}`))).reduce((s, x) => s + x, 0);
      expect(fp).toBeLessThan(300);
    }
  }, 180_000);
});
