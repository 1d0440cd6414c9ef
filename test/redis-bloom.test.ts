// RedisBloom against the real Redisson jar (org.redisson:redisson, test/helpers/redisson.ts) on a
// private redis-server: same hash, indexes, sizing and config strings offline; then filters filled
// by Java answer the same in Node and the other way round, byte-identical bitmaps, config refusal.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { RedisBloom, redissonShape, javaDoubleToString, encodeRedissonString, REDISSON_MAX_BITS } from 'hashgate/bloom';
import { ErrorCodes } from 'hashgate';
import { highway128 } from '../src/hash/highway.js';
import { redissonIndexesInto, redissonConfigKey, redissonKeysShareSlot, redissonIndexBlob, redissonKeyIndexes, redissonContainsAll } from '../src/bloom/redisson.js';
import { highwayKernel } from '../src/hash/highway-kernel.js';
import { redissonHarness, type RedissonHarness } from './helpers/redisson.js';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';

const CI = process.env.CI === 'true';
const HAVE_REDIS = requireRedisOrSkip('RedisBloom');
let java: RedissonHarness | null = null;
let server: RedisServer | undefined;
let redis: Redis;
let addr = '';

beforeAll(async () => {
  java = await redissonHarness();
  if (java === null) {
    if (CI) throw new Error('java/javac/mvn not found: the Redisson compatibility suite must run in CI');
    console.warn('\n\n!!! java/javac/mvn not found: SKIPPING the Redisson compatibility tests !!!\n\n');
  }
  if (HAVE_REDIS) {
    server = await startRedis();
    redis = new Redis(server.port, '127.0.0.1');
    addr = `127.0.0.1:${server.port}`;
  }
}, 600_000);

afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

const itJava = (name: string, fn: (j: RedissonHarness) => Promise<void>, timeout = 180_000) =>
  it(name, async (ctx) => {
    if (java === null) return ctx.skip();
    await fn(java);
  }, timeout);
const itBoth = (name: string, fn: (j: RedissonHarness) => Promise<void>, timeout = 180_000) =>
  it(name, async (ctx) => {
    if (java === null || !HAVE_REDIS) return ctx.skip();
    await fn(java);
  }, timeout);

/** UTF-16 strings biased towards surrogates, CJK and ASCII, including ill-formed ones. */
const unit = fc.oneof(
  fc.integer({ min: 0x20, max: 0x7e }),
  fc.integer({ min: 0xd7f0, max: 0xe00f }),
  fc.integer({ min: 0x4e00, max: 0x9fff }),
  fc.integer({ min: 0, max: 0xffff }),
);
const utf16 = (maxLength: number) => fc.array(unit, { maxLength }).map((a) => String.fromCharCode(...a));

const FIXED = [
  '', 'a', 'abc', '中文', '张伟|110101199003070012', '😀', 'x'.repeat(31), 'y'.repeat(32), 'z'.repeat(33), 'q'.repeat(63), 'w'.repeat(64),
  '长'.repeat(2000), 'long-key-'.repeat(700), '\uD800', '\uDC00', 'a\uD800b', '\uD800\u4E2D', '\uD800\uD800\uDC00', '\uDBFF\uDFFF', 'tail\uD83D',
  'line\nbreak', '\u0000', '\u00e9\u00e8', '\uFFFF',
];
const sample = <T>(arb: fc.Arbitrary<T>, n: number, seed: number): T[] => fc.sample(arb, { numRuns: n, seed });

function ourBytes(s: string): string {
  const buf = Buffer.alloc(s.length * 3 + 8);
  return buf.subarray(0, encodeRedissonString(s, buf, 0)).toString('hex');
}

describe('Redisson hash, indexes and sizing (offline, against the jar)', () => {
  itJava('StringCodec bytes and HighwayHash-128 match for fixed and random UTF-16 keys', async (j) => {
    const keys = [...FIXED, ...sample(utf16(80), 600, 14), ...sample(utf16(400), 40, 15)];
    const rows = (await j.keys(['hash'], keys)).split('\n');
    expect(rows).toHaveLength(keys.length);
    keys.forEach((k, i) => {
      const [hex, h0, h1] = rows[i]!.split(' ');
      expect(ourBytes(k), `bytes of key ${i}`).toBe(hex);
      const [a, b] = highway128(Buffer.from(hex!, 'hex'));
      expect(`${a} ${b}`, `hash of key ${i}`).toBe(`${h0} ${h1}`);
    });
    // the Netty quirks this relies on, spelled out
    expect(ourBytes('\uD800\u4E2D')).toBe('3f2d');
    expect(ourBytes('\uD800\uD800\uDC00')).toBe('3f3f3f');
    expect(ourBytes('a\uDC00')).toBe('613f');
  });

  itJava('bit index sequences match for many sizes, k and hashes', async (j) => {
    const sizes = [1, 2, 7, 1000, 0x1fffff, 0x200000, 0x200001, 9585058, 2 ** 31 + 11, REDISSON_MAX_BITS];
    const hashes = sample(fc.tuple(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })), 60, 7);
    hashes.push([-1n, -1n], [0n, 0n], [2n ** 63n - 1n, -(2n ** 63n)]);
    const lines: string[] = [];
    const ours: string[] = [];
    const h = new Uint32Array(4);
    for (const size of sizes) {
      for (const [h0, h1] of hashes) {
        const k = 1 + (lines.length % 14);
        lines.push(`${size} ${k} ${h0} ${h1}`);
        const u0 = BigInt.asUintN(64, h0);
        const u1 = BigInt.asUintN(64, h1);
        h[0] = Number(u0 & 0xffffffffn);
        h[1] = Number(u0 >> 32n);
        h[2] = Number(u1 & 0xffffffffn);
        h[3] = Number(u1 >> 32n);
        const out = new Uint32Array(k);
        redissonIndexesInto(h, 0, k, size, out, 0);
        ours.push(Array.from(out).join(' '));
      }
    }
    const got = await j.run(['indexes'], lines.join('\n') + '\n');
    expect(got.code).toBe(0);
    expect(got.out.trim().split('\n')).toEqual(ours);
  });

  itJava('size, hash iterations and the falseProbability string match Java', async (j) => {
    const ps = [0.5, 0.3, 0.1, 0.05, 0.03, 0.01, 0.001, 0.0001, 1e-5, 1e-7, 1e-10, 0.123, 1 / 3, 0.0015, 0.999, ...sample(fc.double({ min: 1e-9, max: 0.99, noNaN: true }), 40, 3)];
    const ns = [1, 2, 3, 10, 100, 1000, 12345, 1_000_000, 10_000_000, 100_000_000, 400_000_000];
    const lines: string[] = [];
    for (const n of ns) for (const p of ps) lines.push(`${n} ${p}`);
    const got = (await j.run(['sizing'], lines.join('\n') + '\n')).out.trim().split('\n');
    let checked = 0;
    lines.forEach((l, i) => {
      const [n, p] = l.split(' ').map(Number) as [number, number];
      const [size, k, str] = got[i]!.split(' ');
      expect(javaDoubleToString(p), `Double.toString(${p})`).toBe(str);
      const javaSize = Number(size);
      if (javaSize > 0 && javaSize <= REDISSON_MAX_BITS) {
        expect(redissonShape(n, p), l).toEqual({ size: javaSize, hashIterations: Number(k) });
        checked++;
      } else {
        expect(() => redissonShape(n, p), l).toThrow(RangeError);
      }
    });
    expect(checked).toBeGreaterThan(lines.length / 2);
    expect(javaDoubleToString(0.0001)).toBe('1.0E-4');
  });
});

describe('key layout', () => {
  it('config key and slot rules follow Redisson', () => {
    expect(redissonConfigKey('guard')).toBe('{guard}:config');
    expect(redissonConfigKey('a{b}c')).toBe('a{b}c:config');
    expect(redissonKeysShareSlot('guard')).toBe(true);
    expect(redissonKeysShareSlot('a{b}c')).toBe(true);
    expect(redissonKeysShareSlot('a{b')).toBe(false);
    expect(redissonKeysShareSlot('a{}b')).toBe(false);
  });
});

/** Keys both sides use: CJK, empty, long, ill-formed, and generated ones. */
function corpus(prefix: string, n: number): string[] {
  const names = ['张伟', '王芳', '李娜', '刘洋', '陈静'];
  const out = [...FIXED.map((k) => (k === '' ? k : prefix + k))];
  for (let i = 0; i < n; i++) out.push(i % 3 === 0 ? `${prefix}${names[i % 5]}|${110101199000000000 + i}` : `${prefix}user-${i}`);
  return out;
}

describe('RedisBloom and Redisson on one Redis', () => {
  itBoth('a filter Java filled answers identically in Node, and Node builds the same bytes', async (j) => {
    const added = corpus('j', 600);
    const probe = [...corpus('other', 1500), ...added.slice(0, 50)];
    expect((await j.run(['init', addr, 'jfill', '2000', '0.01'])).out.trim()).toBe('true');
    const javaCount = Number(await j.keys(['addall', addr, 'jfill'], added));
    const javaSays = await j.keys(['contains', addr, 'jfill'], probe);

    const f = await RedisBloom.open({ redis, name: 'jfill' });
    expect(f.size).toBe(19170);
    expect(f.hashIterations).toBe(7);
    expect(Array.from(await f.containsAll(added)).every((b) => b === 1)).toBe(true);
    const ours = await f.containsAll(probe);
    expect(Array.from(ours).join('')).toBe(javaSays);
    expect(javaSays).toContain('0'); // the probe set is not all false positives

    const n = await RedisBloom.open({ redis, name: 'nfill', expectedItems: 2000, fpp: 0.01 });
    expect(await n.tryInit()).toBe(true);
    expect(await n.addAll(added)).toBe(javaCount);
    expect(await redis.getBuffer('nfill')).toEqual(await redis.getBuffer('jfill'));
    expect(await redis.hgetall('{nfill}:config')).toEqual(await redis.hgetall('{jfill}:config'));
    expect(await n.count()).toBe(Number((await j.run(['count', addr, 'nfill'])).out.trim()));
  });

  itBoth('a filter Node filled answers identically in Java (config strings as Java writes them)', async (j) => {
    const f = await RedisBloom.open({ redis, name: 'node:guard', expectedItems: 5000, fpp: 0.0001 });
    expect(await f.tryInit()).toBe(true);
    expect(await redis.hgetall('{node:guard}:config')).toEqual({
      size: String(redissonShape(5000, 0.0001).size),
      hashIterations: String(redissonShape(5000, 0.0001).hashIterations),
      expectedInsertions: '5000',
      falseProbability: '1.0E-4',
    });
    const added = corpus('n', 800);
    await f.addAll(added);
    expect(await j.keys(['contains', addr, 'node:guard'], added)).toBe('1'.repeat(added.length));
    const probe = corpus('absent', 2000);
    const javaSays = await j.keys(['contains', addr, 'node:guard'], probe);
    expect(Array.from(await f.containsAll(probe)).join('')).toBe(javaSays);
    const cfg = (await j.run(['config', addr, 'node:guard'])).out.trim();
    expect(cfg).toBe(`${f.size} ${f.hashIterations} 5000 1.0E-4`);
  });

  itBoth('per-key add results and counts agree, duplicates inside a batch counted once', async (j) => {
    const keys = ['a', 'b', 'a', '中文', '', '中文', 'c'.repeat(100)];
    expect((await j.run(['init', addr, 'jadd', '100', '0.03'])).out.trim()).toBe('true');
    const javaPerKey = await j.keys(['add', addr, 'jadd'], keys);
    const n = await RedisBloom.open({ redis, name: 'nadd', expectedItems: 100, fpp: 0.03 });
    await n.tryInit();
    let perKey = '';
    for (const k of keys) perKey += (await n.add(k)) ? '1' : '0';
    expect(perKey).toBe(javaPerKey);
    expect(await redis.getBuffer('nadd')).toEqual(await redis.getBuffer('jadd'));
    const m = await RedisBloom.open({ redis, name: 'nadd2', expectedItems: 100, fpp: 0.03 });
    await m.tryInit();
    expect((await j.run(['init', addr, 'jadd2', '100', '0.03'])).out.trim()).toBe('true');
    expect(await m.addAll(keys)).toBe(Number(await j.keys(['addall', addr, 'jadd2'], keys)));
  });

  itBoth('tryInit: the existing config wins on both sides', async (j) => {
    expect((await j.run(['init', addr, 'shared', '1000', '0.01'])).out.trim()).toBe('true');
    const f = await RedisBloom.open({ redis, name: 'shared', expectedItems: 50_000, fpp: 0.001 });
    expect(await f.tryInit()).toBe(false);
    expect(f.size).toBe(redissonShape(1000, 0.01).size); // adopted Java's shape
    await f.addAll(['from-node']);
    expect(await j.keys(['contains', addr, 'shared'], ['from-node'])).toBe('1');

    const g = await RedisBloom.open({ redis, name: 'shared2', expectedItems: 1000, fpp: 0.01 });
    expect(await g.tryInit()).toBe(true);
    expect((await j.run(['init', addr, 'shared2', '50000', '0.001'])).out.trim()).toBe('false');
    expect(await j.run(['config', addr, 'shared2'])).toEqual({ code: 0, out: `${g.size} ${g.hashIterations} 1000 0.01\n` });
  });

  itBoth('refuses add and contains when the config changed underneath, and writes nothing', async (j) => {
    const f = await RedisBloom.open({ redis, name: 'swapped', expectedItems: 1000, fpp: 0.01 });
    await f.tryInit();
    await f.addAll(['x', 'y']);
    // another writer recreates the filter with another shape
    await redis.del('{swapped}:config');
    expect((await j.run(['init', addr, 'swapped', '9000', '0.01'])).out.trim()).toBe('true');
    const before = await redis.getBuffer('swapped');
    await expect(f.containsAll(['x'])).rejects.toMatchObject({ code: ErrorCodes.BLOOM_CONFIG_CHANGED });
    // a large batch takes the client-side snapshot path: refused the same way
    await expect(f.containsAll(Array.from({ length: 5000 }, (_, i) => `k${i}`))).rejects.toMatchObject({ code: ErrorCodes.BLOOM_CONFIG_CHANGED });
    await expect(f.addAll(['z'])).rejects.toMatchObject({ code: ErrorCodes.BLOOM_CONFIG_CHANGED });
    expect(await redis.getBuffer('swapped')).toEqual(before);
    // after reload the client uses the new shape and agrees with Java
    await f.reload();
    expect(f.size).toBe(redissonShape(9000, 0.01).size);
    await f.addAll(['after']);
    expect(await j.keys(['contains', addr, 'swapped'], ['after'])).toBe('1');
    // config deleted: unknown, never "absent"
    await redis.del('{swapped}:config');
    await expect(f.containsAll(['after'])).rejects.toMatchObject({ code: ErrorCodes.BLOOM_CONFIG_CHANGED });
    const fresh = await RedisBloom.open({ redis, name: 'swapped' });
    await expect(fresh.containsAll(['after'])).rejects.toMatchObject({ code: ErrorCodes.BLOOM_NOT_INITIALIZED });
    await expect(fresh.count()).rejects.toMatchObject({ code: ErrorCodes.BLOOM_NOT_INITIALIZED });
  });
});

describe('RedisBloom batching and options', () => {
  const itRedis = (name: string, fn: () => Promise<void>) => it(name, async (ctx) => (HAVE_REDIS ? fn() : ctx.skip()), 60_000);

  itRedis('snapshot and per-probe modes and any chunking give the same answers and bits', async () => {
    const keys = sample(utf16(30), 3000, 99);
    const probe = sample(utf16(30), 3000, 100);
    const answers: string[] = [];
    const bitmaps: Buffer[] = [];
    const modes = [
      { snapshotBytesPerProbe: 0, clientSnapshotBytesPerProbe: 0 },
      { snapshotBytesPerProbe: Infinity, clientSnapshotBytesPerProbe: 0 },
      { clientSnapshotBytesPerProbe: Infinity, maxBatch: 100 },
      { maxBatch: 7, maxInFlight: 3, clientSnapshotBytesPerProbe: 0 },
      { maxBatch: 1 },
    ];
    for (const [i, o] of modes.entries()) {
      const f = await RedisBloom.open({ redis, name: `modes${i}`, expectedItems: 2000, fpp: 0.02, ...o });
      await f.tryInit();
      const changed = await f.addAll(keys);
      answers.push(`${changed} ${Array.from(await f.containsAll(probe)).join('')}`);
      bitmaps.push((await redis.getBuffer(`modes${i}`))!);
      expect(Array.from(await f.containsAll(keys)).every((b) => b === 1)).toBe(true);
    }
    expect(answers.map((a) => a.split(' ')[0])).toEqual(answers.map(() => answers[0]!.split(' ')[0]));
    expect(new Set(answers).size).toBe(1);
    for (const b of bitmaps) expect(b).toEqual(bitmaps[0]);
  });

  itRedis('concurrent single-key contains() calls share one script call and answer like containsAll', async () => {
    const f = await RedisBloom.open({ redis, name: 'coalesce', expectedItems: 10_000, fpp: 0.01 });
    await f.tryInit();
    const keys = Array.from({ length: 3000 }, (_, i) => `c-${i}`);
    await f.addAll(keys.filter((_, i) => i % 3 === 0));
    const probe = keys.slice(0, 500);
    const expected = Array.from(await f.containsAll(probe)).map((b) => b === 1);
    await redis.config('RESETSTAT');
    const got = await Promise.all(probe.map((k) => f.contains(k)));
    expect(got).toEqual(expected);
    const stats = String(await redis.info('commandstats'));
    const calls = Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0) + Number(/cmdstat_eval:calls=(\d+)/.exec(stats)?.[1] ?? 0);
    const multis = Number(/cmdstat_multi:calls=(\d+)/.exec(stats)?.[1] ?? 0);
    expect(calls + multis).toBe(1);
    await expect(f.contains(5 as unknown as string)).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG });
    // adds merge the same way, each caller getting its own key's answer (duplicates: first wins)
    const fresh = ['n1', 'n2', 'n1', 'c-0', 'n3'];
    await redis.config('RESETSTAT');
    expect(await Promise.all(fresh.map((k) => f.add(k)))).toEqual([true, true, false, false, true]);
    expect(String(await redis.info('commandstats'))).toMatch(/cmdstat_evalsha?:calls=1,/);
    expect(Array.from(await f.addAllFlags(['n1', 'n4']))).toEqual([0, 1]);
  });

  itRedis('Uint8Array keys hash as their raw bytes (Redisson ByteArrayCodec)', async () => {
    const f = await RedisBloom.open({ redis, name: 'bytes', expectedItems: 100, fpp: 0.01 });
    await f.tryInit();
    await f.addAll([Buffer.from('中文'), new Uint8Array([0xff, 0x00, 0x80])]);
    expect(Array.from(await f.containsAll(['中文', new Uint8Array([0xff, 0x00, 0x80])]))).toEqual([1, 1]);
  });

  itRedis('rejects bad options and keys with coded errors naming them', async () => {
    await expect(RedisBloom.open({ redis, name: '' })).rejects.toMatchObject({ code: ErrorCodes.INVALID_OPTION, details: { name: 'options.name' } });
    await expect(RedisBloom.open({ redis, name: 'o', fpp: 1 })).rejects.toBeInstanceOf(RangeError);
    await expect(RedisBloom.open({ redis, name: 'o', expectedItems: 0 })).rejects.toBeInstanceOf(RangeError);
    await expect(RedisBloom.open({ redis, name: 'o', expectedItems: 5e9, fpp: 0.01 })).rejects.toBeInstanceOf(RangeError);
    const f = await RedisBloom.open({ redis, name: 'o' });
    await expect(f.tryInit()).rejects.toBeInstanceOf(TypeError);
    const g = await RedisBloom.open({ redis, name: 'o2', expectedItems: 10, fpp: 0.1 });
    await g.tryInit();
    await expect(g.containsAll(['a', 3 as unknown as string])).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG, details: { name: 'keys[1]' } });
    await expect(g.addAll('abc' as unknown as string[])).rejects.toBeInstanceOf(TypeError);
    expect(await g.containsAll([])).toEqual(new Uint8Array(0));
  });

  itRedis('a dead Redis rejects with a coded store error, never an answer', async () => {
    const s = await startRedis();
    const r = new Redis(s.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null });
    r.on('error', () => undefined);
    const f = await RedisBloom.open({ redis: r, name: 'dead', expectedItems: 10, fpp: 0.1 });
    await f.tryInit();
    await s.kill();
    await expect(f.containsAll(['a'])).rejects.toMatchObject({ code: ErrorCodes.STORE });
    r.disconnect();
    await s.stop();
  });
});

describe('wasm HighwayHash kernel', () => {
  it('gives the same hashes and indexes as the plain-JS reference', () => {
    // the exports of the one kernel (wasm/hashgate.wasm, whose bytes test/wasm-kernel.test.ts checks)
    const kern = highwayKernel();
    expect(kern.reserved).toBe(65536);
    const keys = [...FIXED, ...sample(utf16(120), 2000, 5)];
    for (const [k, size] of [[7, 9585058], [1, 3], [13, REDISSON_MAX_BITS], [4, 0x200001]] as const) {
      const blob = redissonIndexBlob(keys, 0, keys.length, k, size);
      const ref = new Uint32Array(keys.length * k);
      const scratch = Buffer.alloc(4096 * 3);
      keys.forEach((key, j) => redissonKeyIndexes(key, scratch, k, size, ref, j * k));
      expect(blob.equals(Buffer.from(ref.buffer))).toBe(true);
    }
    // membership against a bitmap, including one shorter than the filter (trailing zero bytes)
    const size = 50_000;
    const bitmap = Buffer.from(sample(fc.uint8Array({ minLength: 5000, maxLength: 5000 }), 1, 9)[0]!.map((b) => b | 0x5a));
    const got = redissonContainsAll(keys, 3, size, bitmap, 333);
    const ref = new Uint32Array(3);
    const scratch = Buffer.alloc(4096 * 3);
    keys.forEach((key, j) => {
      redissonKeyIndexes(key, scratch, 3, size, ref, 0);
      const want = Array.from(ref).every((ix) => ix >>> 3 < bitmap.length && (bitmap[ix >>> 3]! & (0x80 >>> (ix & 7))) !== 0) ? 1 : 0;
      expect(got[j], `key ${j}`).toBe(want);
    });
    expect(got.some((b) => b === 1) && got.some((b) => b === 0)).toBe(true);
    const m = Buffer.from(kern!.memory.buffer);
    const data = Buffer.from('张伟|110101199003070012'.repeat(5));
    m.set(data, 1024);
    kern!.highway128(1024, data.length, 4096);
    const [h0, h1] = highway128(data);
    expect([m.readBigInt64LE(4096), m.readBigInt64LE(4104)]).toEqual([h0, h1]);
  });
});
