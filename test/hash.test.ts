import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import {
  bucketOf,
  hashBatch,
  jumpBucket,
  murmur3_128,
  murmur3_128Hex,
  murmur3_128Ref,
  murmur3_32,
  murmur3_64,
  murmur3_x86_128,
  xxh64,
} from '../src/hash/index.js';
import { refMurmur3x64_128Bytes, refMurmur3x86_32 } from '../src/hash/reference.js';
import { BatchKind, HashArena } from '../src/hash/arena.js';

const require = createRequire(import.meta.url);
// Strings are passed with an explicit 'utf8': murmurhash-native defaults to 'binary' (latin1).
const native = require('murmurhash-native') as {
  murmurHash32(data: string, encoding: 'utf8', seed: number): number;
  murmurHash32(data: Buffer, seed: number): number;
  murmurHash128x64(data: string, encoding: 'utf8', seed: number, out: 'hex'): string;
  murmurHash128x64(data: Buffer, seed: number, out: 'hex'): string;
  murmurHash128x86(data: Buffer, seed: number, out: 'hex'): string;
};

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
/** murmurhash-native prints each 64-bit lane big-endian; Guava order is each lane little-endian. */
const nativeLanesToGuava = (h: string): string =>
  Buffer.from(h.slice(0, 16), 'hex').reverse().toString('hex') + Buffer.from(h.slice(16), 'hex').reverse().toString('hex');
/** murmurhash-native prints x86_128 as four big-endian u32 words. */
const nativeWordsToLE = (h: string): string =>
  [0, 8, 16, 24].map((i) => Buffer.from(h.slice(i, i + 8), 'hex').reverse().toString('hex')).join('');
const nativeHex128 = (d: Uint8Array, seed: number): string => nativeLanesToGuava(native.murmurHash128x64(Buffer.from(d), seed, 'hex'));

/** SMHasher VerificationTest: key i = bytes 0..i-1 hashed with seed 256-i; hash of all digests, first 4 bytes LE. */
function smhasher(hashBytes: number, fn: (key: Uint8Array, seed: number) => Uint8Array): number {
  const key = new Uint8Array(256);
  const all = new Uint8Array(hashBytes * 256);
  for (let i = 0; i < 256; i++) {
    key[i] = i;
    all.set(fn(key.subarray(0, i), 256 - i), i * hashBytes);
  }
  const final = fn(all, 0);
  return new DataView(final.buffer, final.byteOffset, 4).getUint32(0, true);
}
const u32le = (v: number): Uint8Array => {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v, true);
  return b;
};

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const SURNAMES = '王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗欧阳司马';
const GIVEN = '伟芳娜秀英敏静丽强磊军洋勇艳杰娟涛明超兰霞平刚桂鑫';
function chineseNameId(r: () => number): string {
  let s = SURNAMES[Math.floor(r() * SURNAMES.length)]! + GIVEN[Math.floor(r() * GIVEN.length)]!;
  if (r() < 0.5) s += GIVEN[Math.floor(r() * GIVEN.length)]!;
  for (let j = 0; j < 17; j++) s += Math.floor(r() * 10);
  return s + '0123456789X'[Math.floor(r() * 11)]!;
}

describe('SMHasher verification values', () => {
  it('x86_32 = 0xB0F57EE3', () => {
    expect(smhasher(4, (k, s) => u32le(murmur3_32(k, s)))).toBe(0xb0f57ee3);
    expect(smhasher(4, (k, s) => u32le(refMurmur3x86_32(k, s)))).toBe(0xb0f57ee3);
  });
  it('x64_128 = 0x6384BA69 (kernel, Guava-seeded kernel, JS oracle)', () => {
    expect(smhasher(16, (k, s) => murmur3_128(k, s))).toBe(0x6384ba69);
    expect(smhasher(16, (k, s) => murmur3_128Ref(k, s))).toBe(0x6384ba69);
    expect(smhasher(16, (k, s) => refMurmur3x64_128Bytes(k, BigInt(s)))).toBe(0x6384ba69);
  });
  it('x86_128 = 0xB3ECE62A', () => {
    expect(smhasher(16, (k, s) => murmur3_x86_128(k, s))).toBe(0xb3ece62a);
  });
});

describe('known answers', () => {
  it('murmur3_128("hello") matches Guava', () => {
    expect(murmur3_128Hex('hello')).toBe('029bbd41b3a7d8cb191dae486a901e5b');
    expect(hex(murmur3_128('hello'))).toBe('029bbd41b3a7d8cb191dae486a901e5b');
    expect(murmur3_128('hello')).toBeInstanceOf(Uint8Array);
    expect(murmur3_128('hello').buffer).toBeInstanceOf(ArrayBuffer); // never a view of shared memory
    expect(murmur3_64('hello')).toBe(0xcbd8a7b341bd9b02n);
  });
  it('Guava test vectors for the quick brown fox', () => {
    const fox = 'The quick brown fox jumps over the lazy dog';
    expect(murmur3_128Hex(fox)).toBe('6c1b07bc7bbc4be347939ac4a93c437a');
    expect(murmur3_32(fox)).toBe(0x2e4ff723);
    expect(murmur3_32('hello')).toBe(0x248bfa47);
  });
  it('empty input', () => {
    expect(murmur3_128Hex('')).toBe('00000000000000000000000000000000');
    expect(murmur3_128Hex(new Uint8Array(0))).toBe('00000000000000000000000000000000');
    expect(murmur3_32('')).toBe(0);
    expect(murmur3_32('', 1)).toBe(0x514e28b7);
    expect(murmur3_32('', 0xffffffff)).toBe(0x81f16f39);
    expect(murmur3_128Hex('', 1)).toBe(hex(refMurmur3x64_128Bytes(new Uint8Array(0), 1n)));
  });
  it('every tail length 0..15 (and a few blocks) equals oracle and murmurhash-native', () => {
    for (let len = 0; len <= 15 + 48; len++) {
      const d = new Uint8Array(len).map((_, i) => (i * 37 + 11) & 255);
      for (const seed of [0, 1, 0x7fffffff]) {
        const h = hex(murmur3_128(d, seed));
        expect(h).toBe(hex(refMurmur3x64_128Bytes(d, BigInt(seed))));
        expect(h).toBe(nativeHex128(d, seed));
        expect(murmur3_32(d, seed)).toBe(native.murmurHash32(Buffer.from(d), seed) >>> 0);
        expect(hex(murmur3_x86_128(d, seed))).toBe(nativeWordsToLE(native.murmurHash128x86(Buffer.from(d), seed, 'hex')));
      }
    }
  });
  it('lone surrogates encode as U+FFFD (EF BF BD) on every path', () => {
    const fffd = Uint8Array.of(0xef, 0xbf, 0xbd);
    expect(murmur3_128Hex('\ud800')).toBe(hex(murmur3_128(fffd)));
    expect(hashBatch(['\udc00x'])).toEqual(murmur3_128(Uint8Array.of(0xef, 0xbf, 0xbd, 0x78)));
  });
  it('bytes >= 0x80 and Chinese names with 18-digit IDs', () => {
    const hi = new Uint8Array(40).map((_, i) => 0x80 + i * 3);
    expect(hex(murmur3_128(hi))).toBe(nativeHex128(hi, 0));
    expect(murmur3_32(hi)).toBe(refMurmur3x86_32(hi, 0));
    for (const s of ['王伟110101199003074518', '欧阳娜娜44030119851212002X', '张三', 'Zoë', '😀 emoji 𝄞']) {
      const b = new TextEncoder().encode(s);
      expect(murmur3_128Hex(s)).toBe(hex(murmur3_128(b)));
      expect(murmur3_128Hex(s)).toBe(nativeLanesToGuava(native.murmurHash128x64(s, 'utf8', 0, 'hex')));
      expect(murmur3_32(s, 42)).toBe(native.murmurHash32(s, 'utf8', 42) >>> 0);
    }
  });
  it('1 MiB input (memory grows to fit)', () => {
    const big = new Uint8Array(1 << 20).map((_, i) => (i * 2654435761) >>> 24);
    expect(murmur3_128Hex(big)).toBe(nativeHex128(big, 0));
    expect(murmur3_128Hex(big, 7)).toBe(nativeHex128(big, 7));
    expect(murmur3_32(big, 7)).toBe(native.murmurHash32(Buffer.from(big), 7) >>> 0);
    const s = '王'.repeat(400_000); // 1.2 MB of UTF-8
    expect(murmur3_128Hex(s)).toBe(nativeLanesToGuava(native.murmurHash128x64(s, 'utf8', 0, 'hex')));
  });
  it('seeds >= 2^31 follow Guava (sign-extended), murmur3_128Ref follows C++ (zero-extended)', () => {
    const d = new TextEncoder().encode('seed test 王');
    for (const seed of [0x80000000, 0xdeadbeef, 0xffffffff]) {
      const guava = BigInt.asUintN(64, BigInt(seed | 0));
      expect(hex(murmur3_128(d, seed))).toBe(hex(refMurmur3x64_128Bytes(d, guava)));
      expect(hex(murmur3_128Ref(d, seed))).toBe(hex(refMurmur3x64_128Bytes(d, BigInt(seed))));
      expect(hex(murmur3_128Ref(d, seed))).toBe(nativeHex128(d, seed));
      expect(murmur3_32(d, seed)).toBe(native.murmurHash32(Buffer.from(d), seed) >>> 0);
    }
    // Guava: Hashing.murmur3_128(-1).hashString("hello", UTF_8) starts both lanes at 0xffffffffffffffff.
    expect(murmur3_128Hex('hello', 0xffffffff)).toBe(hex(refMurmur3x64_128Bytes(new TextEncoder().encode('hello'), (1n << 64n) - 1n)));
  });
  it('10,000 random keys agree with murmurhash-native (strings, bytes, seeds < 2^31)', () => {
    const r = rng(12345);
    const keys: string[] = [];
    for (let i = 0; i < 10_000; i++) {
      if (i % 3 === 0) keys.push(chineseNameId(r));
      else {
        const len = Math.floor(r() * 70);
        let s = '';
        for (let j = 0; j < len; j++) s += String.fromCharCode(r() < 0.8 ? 32 + Math.floor(r() * 95) : 0xa0 + Math.floor(r() * 0x4000));
        keys.push(s);
      }
    }
    const seed = Math.floor(r() * 0x7fffffff);
    const batch = hashBatch(keys, { seed });
    const batch32 = hashBatch(keys, { seed, algorithm: 'murmur3_32' });
    const dv32 = new DataView(batch32.buffer);
    let mismatches = 0;
    keys.forEach((k, i) => {
      const want = nativeLanesToGuava(native.murmurHash128x64(k, 'utf8', seed, 'hex'));
      if (hex(batch.subarray(i * 16, i * 16 + 16)) !== want) mismatches++;
      if (murmur3_128Hex(k, seed) !== want) mismatches++;
      if (dv32.getUint32(i * 4, true) !== native.murmurHash32(k, 'utf8', seed) >>> 0) mismatches++;
    });
    expect(mismatches).toBe(0);
  });
  it('xxh64 matches @node-rs/xxhash', () => {
    const rs = require('@node-rs/xxhash') as { xxh64(input: string | Buffer, seed?: bigint): bigint };
    for (const s of ['', 'hello', '王伟110101199003074518', 'x'.repeat(1000)]) {
      expect(xxh64(s)).toBe(rs.xxh64(Buffer.from(s)));
      expect(xxh64(new TextEncoder().encode(s), 99)).toBe(rs.xxh64(Buffer.from(s), 99n));
      expect(xxh64(s, 2n ** 64n - 1n)).toBe(rs.xxh64(Buffer.from(s), 2n ** 64n - 1n));
    }
    expect(xxh64('')).toBe(0xef46db3751d8e999n);
  });
  it('kernel XXH64 (batch path) matches @node-rs/xxhash for lengths 0..200 and 64-bit seeds', () => {
    const rs = require('@node-rs/xxhash') as { xxh64(input: string | Buffer, seed?: bigint): bigint };
    const a = new HashArena();
    const keys: Uint8Array[] = [];
    for (let len = 0; len <= 200; len++) keys.push(new Uint8Array(len).map((_, i) => (i * 59 + len) & 255));
    for (const seed of [0n, 1n, 0xffffffffn, 0x123456789abcdef0n, 2n ** 64n - 1n]) {
      const lo = Number(seed & 0xffffffffn);
      const hi = Number(seed >> 32n);
      const out = new Uint8Array(keys.length * 8);
      a.batch(keys, BatchKind.Xxh64, lo, hi, out);
      const dv = new DataView(out.buffer);
      keys.forEach((k, i) => {
        const want = rs.xxh64(Buffer.from(k), seed);
        expect(dv.getBigUint64(i * 8, true)).toBe(want);
        expect(a.xxh64(k, lo, hi)).toBe(want);
      });
    }
    const s = '王伟110101199003074518';
    expect(new DataView(hashBatch([s], { algorithm: 'xxh64', seed: 7 }).buffer).getBigUint64(0, true)).toBe(rs.xxh64(Buffer.from(s), 7n));
  });
});

describe('argument checks', () => {
  it('rejects bad input and seeds with TypeError/RangeError naming the argument', () => {
    expect(() => murmur3_128(42 as never)).toThrow(TypeError);
    expect(() => murmur3_128(42 as never)).toThrow(/input/);
    expect(() => murmur3_128Hex('a', -1)).toThrow(RangeError);
    expect(() => murmur3_32('a', 2 ** 32)).toThrow(/seed/);
    expect(() => murmur3_32('a', 1.5)).toThrow(TypeError);
    expect(() => xxh64('a', -1n)).toThrow(RangeError);
    expect(() => bucketOf('a', 0)).toThrow(/buckets/);
    expect(() => bucketOf('a', 1.5)).toThrow(TypeError);
    expect(() => jumpBucket('a', 2 ** 31)).toThrow(RangeError);
    expect(() => hashBatch(['a', 1 as never])).toThrow(/keys\[1\]/);
    expect(() => hashBatch(['a'], { algorithm: 'md5' as never })).toThrow(/options\.algorithm/);
    expect(() => hashBatch(['a'], { out: new Uint8Array(3) })).toThrow(/options\.out/);
    expect(() => hashBatch('abc' as never)).toThrow(TypeError);
    expect(() => hashBatch({ bytes: new Uint8Array(2), offsets: Uint32Array.of(0, 3), count: 1 })).toThrow(/offsets\[1\]/);
    expect(() => hashBatch({ bytes: new Uint8Array(4), offsets: Uint32Array.of(0, 3, 1, 4), count: 3 })).toThrow(RangeError);
    try {
      murmur3_128(null as never);
    } catch (e) {
      expect((e as { code: string }).code).toBe('HG_ERR_INVALID_ARG');
    }
  });
});
