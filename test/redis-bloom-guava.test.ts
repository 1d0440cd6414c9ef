// RedisBloom's Guava layout on a real redis-server: the Redis string is hashgate's BloomFilter bits
// byte for byte (same sizing, indexes, key encoding), every read path answers as a local
// BloomFilter does, the layouts refuse each other, and a RedisBloomReplica of it is a BloomFilter
// kept current by the change stream that a worker thread attaches to without a copy.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { BloomFilter, RedisBloom, RedisBloomReplica } from '../src/entries/bloom.js';
import { ErrorCodes } from '../src/index.js';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';

const HAVE = requireRedisOrSkip('RedisBloom guava layout');
const DIST_BLOOM = fileURLToPath(new URL('../dist/src/bloom/index.js', import.meta.url));
let server: RedisServer;
let redis: Redis;

beforeAll(async () => {
  if (!HAVE) return;
  server = await startRedis();
  redis = new Redis(server.port, '127.0.0.1');
});
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

const N = 5000;
const FPP = 0.01;
const keys = (n: number, tag: string): Array<string | Uint8Array> => {
  const out: Array<string | Uint8Array> = [];
  for (let i = 0; i < n; i++) out.push(i % 5 === 0 ? `张三${tag}${i}` : i % 5 === 1 ? new TextEncoder().encode(`b-${tag}-${i}`) : `${tag}:${i}`);
  return out;
};
// empty, lone surrogate, long: encoded as the local BloomFilter encodes them
const odd = ['', '\ud800x', 'x'.repeat(5000)];

/** The Redis string padded to the filter's bytes (trailing zero bytes are never stored). */
const redisBits = async (name: string, bytes: number): Promise<Buffer> => {
  const b = Buffer.alloc(bytes);
  (await redis.getBuffer(name))?.copy(b);
  return b;
};

const until = async (cond: () => boolean, ms = 10_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe.skipIf(!HAVE)('RedisBloom layout guava', () => {
  it('stores exactly the bits of a local BloomFilter of the same options; every read path answers as that filter', async () => {
    const rb = await RedisBloom.open({ redis, name: 'g:bits', layout: 'guava', expectedItems: N, fpp: FPP });
    expect(await rb.tryInit()).toBe(true);
    const local = BloomFilter.create({ expectedItems: N, fpp: FPP });
    expect([rb.size, rb.hashIterations]).toEqual([local.bitSize, local.hashFunctions]);
    const added = [...keys(3000, 'a'), ...odd];
    expect(await rb.addAll(added)).toBe(local.addAll(added));
    expect((await redisBits('g:bits', local.byteLength)).equals(Buffer.from(local.bitsView()))).toBe(true);
    // the Guava stream Java reads is the same bytes as a local filter's
    const snap = BloomFilter.readFrom(local.writeTo());
    expect(snap.mightContainAll(added).every((x) => x === 1)).toBe(true);
    const probe = [...added, ...keys(4000, 'absent')];
    const want = local.mightContainAll(probe);
    expect(want.includes(0)).toBe(true);
    for (const o of [{ clientSnapshotBytesPerProbe: 0, snapshotBytesPerProbe: 0 }, { clientSnapshotBytesPerProbe: 0, snapshotBytesPerProbe: Infinity }, { clientSnapshotBytesPerProbe: Infinity }]) {
      const c = await RedisBloom.open({ redis, name: 'g:bits', layout: 'guava', ...o });
      expect(Buffer.from(await c.containsAll(probe)).equals(Buffer.from(want))).toBe(true);
    }
    expect(await rb.contains('a:7')).toBe(true);
    expect(await rb.count()).toBe(local.approximateElementCount());
  });

  it('the layouts refuse each other: Redisson config is absent, tryInit on the other layout rejects', async () => {
    const g = await RedisBloom.open({ redis, name: 'g:sep', layout: 'guava', expectedItems: 1000, fpp: 0.01 });
    await g.tryInit();
    await g.addAll(['k']);
    expect(await redis.exists('{g:sep}:config')).toBe(0);
    const r = await RedisBloom.open({ redis, name: 'g:sep', expectedItems: 1000, fpp: 0.01 });
    await expect(r.containsAll(['k'])).rejects.toMatchObject({ code: ErrorCodes.BLOOM_NOT_INITIALIZED });
    await expect(r.tryInit()).rejects.toMatchObject({ code: ErrorCodes.BLOOM_CONFIG_CHANGED });
    const r2 = await RedisBloom.open({ redis, name: 'g:red', expectedItems: 1000, fpp: 0.01 });
    await r2.tryInit();
    await expect((await RedisBloom.open({ redis, name: 'g:red', layout: 'guava', expectedItems: 1000, fpp: 0.01 })).tryInit()).rejects.toMatchObject({
      code: ErrorCodes.BLOOM_CONFIG_CHANGED,
    });
    await expect(RedisBloom.open({ redis, name: 'x', layout: 'kryo' as never })).rejects.toThrow(/options\.layout/);
  });

  it('a replica is a BloomFilter equal to Redis, kept current by the stream, attached by a worker without a copy', async () => {
    const writer = await RedisBloom.open({ redis, name: 'g:rep', layout: 'guava', expectedItems: N, fpp: FPP, publish: true });
    await writer.tryInit();
    const before = keys(2000, 'before');
    await writer.addAll(before);
    const rep = await RedisBloomReplica.open({ redis, name: 'g:rep', layout: 'guava', chunkBytes: 1024, resyncIntervalMs: 0 });
    try {
      const f = rep.filter!;
      expect(f).toBeInstanceOf(BloomFilter);
      expect(rep.buffer).toBe(f.memory.buffer);
      expect(Buffer.from(f.bitsView()).equals(await redisBits('g:rep', f.byteLength))).toBe(true);
      expect(f.bitCount()).toBe(f.countBits());
      expect(rep.containsAll(before).every((x) => x === 1)).toBe(true);

      const w = new Worker(
        `const { parentPort, workerData } = require('node:worker_threads');
         import(workerData.dist).then(({ BloomFilter }) => {
           const f = BloomFilter.fromShared(workerData.descriptor);
           parentPort.on('message', (k) => parentPort.postMessage(Array.from(f.mightContainAll(k))));
           parentPort.postMessage('ready');
         });`,
        { eval: true, workerData: { dist: DIST_BLOOM, descriptor: f.toShared() } },
      );
      try {
        expect((await once(w, 'message'))[0]).toBe('ready');
        const after = ['after:1', 'after:2', '李四after'];
        w.postMessage(after);
        const first = (await once(w, 'message'))[0] as number[];
        expect(first).toEqual(Array.from(rep.containsAll(after)));
        expect(first).toContain(0);
        const seq = rep.stats().seq;
        await writer.addAll(after);
        await until(() => rep.stats().seq > seq);
        expect(rep.stats().resyncs).toBe(0);
        expect(Array.from(rep.containsAll(after))).toEqual([1, 1, 1]);
        // the worker sees the stream's bits in the memory it attached at the start
        w.postMessage(after);
        expect((await once(w, 'message'))[0]).toEqual([1, 1, 1]);
        expect(f.bitCount()).toBe(f.countBits());
        expect(Buffer.from(f.bitsView()).equals(await redisBits('g:rep', f.byteLength))).toBe(true);
      } finally {
        await w.terminate();
      }
    } finally {
      await rep.close();
    }
  });

  it('a guava-layout filter recreated with another shape replaces the replica\'s BloomFilter (event reset)', async () => {
    const w = await RedisBloom.open({ redis, name: 'g:reshape', layout: 'guava', expectedItems: 1000, fpp: 0.01 });
    await w.tryInit();
    await w.addAll(['old']);
    const rep = await RedisBloomReplica.open({ redis, name: 'g:reshape', layout: 'guava', resyncIntervalMs: 0 });
    try {
      const old = rep.filter!;
      const resets: unknown[] = [];
      rep.on('reset', (e) => resets.push(e));
      await w.delete();
      const w2 = await RedisBloom.open({ redis, name: 'g:reshape', layout: 'guava', expectedItems: 50_000, fpp: 0.001 });
      await w2.tryInit();
      await w2.addAll(['new']);
      await rep.resync();
      const shape = BloomFilter.create({ expectedItems: 50_000, fpp: 0.001 });
      expect(rep.filter).not.toBe(old);
      expect([rep.filter!.bitSize, rep.filter!.hashFunctions]).toEqual([shape.bitSize, shape.hashFunctions]);
      expect(resets).toEqual([{ size: shape.bitSize, hashIterations: shape.hashFunctions }]);
      expect(rep.contains('new')).toBe(true);
    } finally {
      await rep.close();
    }
  });
});
