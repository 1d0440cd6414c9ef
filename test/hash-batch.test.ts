import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  HashArena,
  bucketOf,
  bucketsOf,
  digestSize,
  hashBatch,
  jumpBucket,
  jumpBucketsOf,
  murmur3_128,
  murmur3_32,
  packKeys,
  packLines,
  packedKey,
  xxh64,
} from '../src/hash/index.js';
import type { HashAlgorithm, PackedKeys } from '../src/hash/index.js';
import { BatchKind } from '../src/hash/arena.js';

const ALGS: HashAlgorithm[] = ['murmur3_128', 'murmur3_32', 'xxh64'];

function one(alg: HashAlgorithm, k: string | Uint8Array, seed: number): Uint8Array {
  if (alg === 'murmur3_128') return murmur3_128(k, seed);
  const b = new Uint8Array(digestSize(alg));
  const dv = new DataView(b.buffer);
  if (alg === 'murmur3_32') dv.setUint32(0, murmur3_32(k, seed), true);
  else dv.setBigUint64(0, xxh64(k, seed), true);
  return b;
}

function oneByOne(alg: HashAlgorithm, keys: ReadonlyArray<string | Uint8Array>, seed: number): Uint8Array {
  const size = digestSize(alg);
  const out = new Uint8Array(keys.length * size);
  keys.forEach((k, i) => out.set(one(alg, k, seed), i * size));
  return out;
}

const keyArb = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.uint8Array({ maxLength: 70 }),
);
const seedArb = fc.oneof(fc.constant(0), fc.nat(), fc.integer({ min: 0, max: 0xffffffff }));

describe('hashBatch == one key at a time', () => {
  it('any mix of strings and bytes, every algorithm, any seed', () => {
    fc.assert(
      fc.property(fc.array(keyArb, { maxLength: 60 }), seedArb, fc.constantFrom(...ALGS), (keys, seed, alg) => {
        expect(hashBatch(keys, { algorithm: alg, seed })).toEqual(oneByOne(alg, keys, seed));
      }),
      { numRuns: 300 },
    );
  });

  it('PackedKeys (also with a non-zero first offset) equal the array form', () => {
    fc.assert(
      fc.property(fc.array(keyArb, { maxLength: 60 }), seedArb, fc.constantFrom(...ALGS), fc.nat(5), (keys, seed, alg, lead) => {
        const p = packKeys(keys);
        // Shift the keys inside a larger buffer (a view with its own byteOffset) so offsets[0] > 0.
        const backing = new Uint8Array(1 + lead + p.bytes.length + 3);
        const bytes = backing.subarray(1);
        bytes.set(p.bytes, lead);
        const shifted: PackedKeys = { bytes, offsets: p.offsets.map((o) => o + lead), count: p.count };
        const want = oneByOne(alg, keys, seed);
        expect(hashBatch(p, { algorithm: alg, seed })).toEqual(want);
        expect(hashBatch(shifted, { algorithm: alg, seed })).toEqual(want);
        for (let i = 0; i < p.count; i++) expect(Uint8Array.from(packedKey(shifted, i))).toEqual(Uint8Array.from(packedKey(p, i)));
      }),
      { numRuns: 200 },
    );
  });

  it('reuses options.out and returns a view of it', () => {
    const out = new Uint8Array(16 * 10);
    const r = hashBatch(['a', 'b', 'c'], { out });
    expect(r.buffer).toBe(out.buffer);
    expect(r.length).toBe(48);
    expect(r.subarray(16, 32)).toEqual(murmur3_128('b'));
    expect(hashBatch([], {})).toEqual(new Uint8Array(0));
  });

  it('chunking: many keys through a tiny arena, keys larger than the bytes region, memory growth', () => {
    const memory = new WebAssembly.Memory({ initial: 2, maximum: 1024, shared: true });
    const a = new HashArena({ memory, chunkKeys: 7 });
    const keys: (string | Uint8Array)[] = [];
    for (let i = 0; i < 500; i++) keys.push(i % 50 === 0 ? 'x'.repeat(30_000 + i) : i % 2 ? `key-${i}-王` : new Uint8Array(i % 37).fill(i));
    const want = oneByOne('murmur3_128', keys, 5);
    const got = new Uint8Array(want.length);
    a.batch(keys, BatchKind.Murmur128, 5, 0, got);
    expect(got).toEqual(want);
    expect(memory.buffer.byteLength).toBeGreaterThan(2 * 65536);
    const p = packKeys(keys);
    const got2 = new Uint8Array(want.length);
    a.batch(p, BatchKind.Murmur128, 5, 0, got2);
    expect(got2).toEqual(want);
    expect(a.murmur128('王'.repeat(200_000), 0)).toEqual(murmur3_128('王'.repeat(200_000)));
  });

  it('keys beyond maxBytes are hashed in a throw-away memory; the arena memory stays small', () => {
    const memory = new WebAssembly.Memory({ initial: 4, maximum: 1024, shared: true });
    const a = new HashArena({ memory, chunkKeys: 16, maxBytes: 64 * 1024 });
    const big = 'z'.repeat(300_000);
    const bigBytes = new Uint8Array(200_000).fill(7);
    const keys: (string | Uint8Array)[] = ['a', big, 'b', bigBytes, '王'];
    const want = oneByOne('murmur3_128', keys, 3);
    const got = new Uint8Array(want.length);
    a.batch(keys, BatchKind.Murmur128, 3, 0, got);
    expect(got).toEqual(want);
    const got2 = new Uint8Array(want.length);
    a.batch(packKeys(keys), BatchKind.Murmur128, 3, 0, got2);
    expect(got2).toEqual(want);
    expect(a.murmur128(big, 3)).toEqual(murmur3_128(big, 3));
    expect(a.murmur32(bigBytes, 3)).toBe(murmur3_32(bigBytes, 3));
    expect(memory.buffer.byteLength).toBe(4 * 65536);
  });

  it('an arena with a fixed end refuses keys that do not fit, with a typed error', () => {
    const a = new HashArena({ chunkKeys: 4, end: 65536 + 64 + 64 + 64 + 4 * 16 + 256 });
    expect(a.murmur128('short', 0)).toEqual(murmur3_128('short'));
    expect(() => a.murmur128('y'.repeat(1000), 0)).toThrow(expect.objectContaining({ code: 'HG_ERR_CAPACITY' }));
  });
});

describe('string batches hash from UTF-16 code units (the same digests)', () => {
  // arrays of strings only take the kernel's UTF-16 route; the one-key functions encode UTF-8
  const strArb = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 60 }), // lone surrogates included: U+FFFD, as TextEncoder
    fc.string({ unit: 'grapheme', maxLength: 30 }),
    fc.constantFrom('王小明110101199003071234', '\ud800', 'a\udc00b', '\ud83d\ude00', 'x'.repeat(1025), '王'.repeat(1100)),
  );

  it('any strings, any seed, equal one key at a time', () => {
    fc.assert(
      fc.property(fc.array(strArb, { maxLength: 80 }), seedArb, (keys, seed) => {
        expect(hashBatch(keys, { seed })).toEqual(oneByOne('murmur3_128', keys, seed));
      }),
      { numRuns: 300 },
    );
  });

  it('chunking, keys larger than the bytes region, memory growth, keys beyond maxBytes', () => {
    const memory = new WebAssembly.Memory({ initial: 2, maximum: 1024, shared: true });
    const a = new HashArena({ memory, chunkKeys: 7, maxBytes: 256 * 1024 });
    const keys: string[] = [];
    for (let i = 0; i < 500; i++) keys.push(i % 50 === 0 ? '王'.repeat(40_000 + i) : i % 97 === 0 ? 'z'.repeat(200_000) : `key-${i}-王${'\ud800'.repeat(i % 3)}`);
    const want = oneByOne('murmur3_128', keys, 5);
    const got = new Uint8Array(want.length);
    a.batch(keys, BatchKind.Murmur128, 5, 0, got);
    expect(got).toEqual(want);
    expect(memory.buffer.byteLength).toBeGreaterThan(2 * 65536);
  });

  it('an arena whose fixed region cannot hold the UTF-16 scratch hashes strings from UTF-8', () => {
    const a = new HashArena({ chunkKeys: 4, end: 65536 + 64 + 64 + 64 + 4 * 16 + 256 });
    const got = new Uint8Array(32);
    a.batch(['short', '王二'], BatchKind.Murmur128, 0, 0, got);
    expect(got).toEqual(oneByOne('murmur3_128', ['short', '王二'], 0));
  });
});

describe('packLines', () => {
  it('splits LF and CRLF lines without separators; final line without newline counts', () => {
    const p = packLines(Buffer.from('alpha\r\nbeta\n\n王伟\ngamma'));
    expect(p.count).toBe(5);
    expect([...Array(p.count).keys()].map((i) => Buffer.from(packedKey(p, i)).toString())).toEqual(['alpha', 'beta', '', '王伟', 'gamma']);
    expect(hashBatch(p)).toEqual(hashBatch(['alpha', 'beta', '', '王伟', 'gamma']));
    const q = packLines(new TextEncoder().encode('a\n\nb\n'), { skipEmpty: true });
    expect(q.count).toBe(2);
    expect(packLines(new Uint8Array(0)).count).toBe(0);
    expect(packLines(Buffer.from('a\r\n'), { stripCR: false }).bytes).toEqual(Buffer.from('a\r'));
  });
  it('property: packLines(lines.join("\\n")) hashes like the lines', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: 'grapheme' }).filter((s) => !s.includes('\n') && !s.includes('\r')), { minLength: 1, maxLength: 30 }), (lines) => {
        expect(hashBatch(packLines(Buffer.from(lines.map((l) => `${l}\n`).join(''))))).toEqual(hashBatch(lines));
      }),
      { numRuns: 100 },
    );
  });
});

describe('bucketsOf / jumpBucketsOf', () => {
  it('equal the single-key functions', () => {
    fc.assert(
      fc.property(fc.array(keyArb, { maxLength: 40 }), fc.integer({ min: 1, max: 0xffffffff }), (keys, buckets) => {
        const b = bucketsOf(keys, buckets);
        const j = jumpBucketsOf(keys, Math.min(buckets, 0x7fffffff));
        keys.forEach((k, i) => {
          expect(b[i]).toBe(bucketOf(k, buckets));
          expect(j[i]).toBe(jumpBucket(k, Math.min(buckets, 0x7fffffff)));
        });
        expect(bucketsOf(packKeys(keys), buckets)).toEqual(b);
      }),
      { numRuns: 100 },
    );
    const out = new Uint32Array(5);
    expect(bucketsOf(['a', 'b'], 10, out).buffer).toBe(out.buffer);
  });
});
