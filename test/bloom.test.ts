import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { BloomFilter, bloomShape, MAX_BIT_SIZE } from '../src/bloom/index.js';
import { probeIndexes } from '../src/bloom/indexes.js';
import { refMurmur3x64_128Bytes } from '../src/hash/reference.js';
import { ErrorCodes } from '../src/errors.js';
import { hashBatch, type PackedKeys } from '../src/hash/index.js';

/** The plain-JS reference MurmurHash3 (Guava seed semantics): independent of the wasm kernels. */
function murmur3_128(key: string | Uint8Array, seed = 0): Uint8Array {
  const bytes = typeof key === 'string' ? new TextEncoder().encode(key) : key;
  return refMurmur3x64_128Bytes(bytes, BigInt.asUintN(64, BigInt(seed | 0)));
}

/** Guava MURMUR128_MITZ_64 with BigInt, straight from the Java source: the oracle. */
function guavaIndexes(key: string | Uint8Array, k: number, bitSize: number, seed = 0): number[] {
  const d = murmur3_128(key, seed);
  const dv = new DataView(d.buffer, d.byteOffset, 16);
  const h1 = dv.getBigInt64(0, true);
  const h2 = dv.getBigInt64(8, true);
  const out: number[] = [];
  let combined = h1;
  for (let i = 0; i < k; i++) {
    out.push(Number((combined & 0x7fffffffffffffffn) % BigInt(bitSize)));
    combined = BigInt.asIntN(64, combined + h2);
  }
  return out;
}

function pack(keys: ReadonlyArray<string | Uint8Array>): PackedKeys {
  const bufs = keys.map((k) => (typeof k === 'string' ? Buffer.from(k) : k));
  const offsets = new Uint32Array(keys.length + 1);
  let total = 0;
  bufs.forEach((b, i) => {
    offsets[i] = total;
    total += b.length;
  });
  offsets[keys.length] = total;
  const bytes = new Uint8Array(total);
  bufs.forEach((b, i) => bytes.set(b, offsets[i]!));
  return { bytes, offsets, count: keys.length };
}

function bitSet(f: BloomFilter, i: number): boolean {
  return (f.bitsView()[Math.floor(i / 8)]! & (1 << (i % 8))) !== 0;
}

describe('BloomFilter basics', () => {
  it('uses the wasm kernel', () => {
    expect(BloomFilter.create({ expectedItems: 10, fpp: 0.1 }).engine).toBe('wasm');
  });

  it('sets exactly the Guava bits, including huge bitSize where 64-bit math matters', () => {
    for (const bitSize of [64, 6400, 2 ** 31 + 64 * 7, 2 ** 34 + 64]) {
      const js = probeIndexes; // JS index math vs BigInt oracle
      for (const key of ['', 'a', '张伟|110101199003071234', 'x'.repeat(100)]) {
        const want = guavaIndexes(key, 13, bitSize);
        const got = new Float64Array(13);
        js(murmur3_128(key), 13, bitSize, got);
        expect(Array.from(got)).toEqual(want);
      }
    }
    const f = BloomFilter.create({ expectedItems: 500, fpp: 0.01 });
    for (const key of ['a', 'b', '张伟', 'zzz']) {
      f.add(key);
      for (const i of guavaIndexes(key, f.hashFunctions, f.bitSize)) expect(bitSet(f, i)).toBe(true);
    }
    expect(f.bitCount()).toBeLessThanOrEqual(4 * f.hashFunctions);
    expect(f.bitCount()).toBeGreaterThan(3 * f.hashFunctions - 3);
  });

  it('no false negatives, string/bytes/packed, wasm and js engines agree (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), fc.uint8Array({ maxLength: 80 })), { maxLength: 200 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.constantFrom(0.5, 0.1, 0.01, 0.001),
        fc.integer({ min: 0, max: 0xffffffff }),
        (keys, n, fpp, seed) => {
          const a = BloomFilter.create({ expectedItems: n, fpp, seed });
          const b = BloomFilter.create({ expectedItems: n, fpp, seed, engine: 'js' });
          expect(b.engine).toBe('js');
          a.addAll(keys);
          for (const k of keys) b.add(k);
          expect(Buffer.from(a.bitsView()).equals(Buffer.from(b.bitsView()))).toBe(true);
          expect(a.bitCount()).toBe(a.countBits());
          expect(b.bitCount()).toBe(a.countBits());
          expect(a.mightContainAll(keys).every((v) => v === 1)).toBe(true);
          expect(a.mightContainAll(pack(keys)).every((v) => v === 1)).toBe(true);
          for (const k of keys) expect(a.mightContain(k) && b.mightContain(k)).toBe(true);
          const probe = keys.map((k) => (typeof k === 'string' ? k + '~' : Uint8Array.of(...k, 1)));
          expect(Array.from(a.mightContainAll(probe))).toEqual(probe.map((k) => (b.mightContain(k) ? 1 : 0)));
        },
      ),
      { numRuns: 60 },
    );
  });

  it('string encoding equals TextEncoder on both encoder paths (short JS loop, long native), lone surrogates included', () => {
    const f = BloomFilter.create({ expectedItems: 1000, fpp: 0.01 });
    const odd = ['\ud800', 'a\udc00b', '\ud83d\ude00', 'x\ud83d', '张伟€𝄞', '\u007f\u0080\u07ff\u0800\uffff'];
    const keys = [...odd, ...odd.map((k) => k + '-padded-beyond-sixteen-chars-' + k), 'y'.repeat(17)];
    f.addAll(keys);
    const enc = new TextEncoder();
    for (const k of keys) {
      expect(f.mightContain(enc.encode(k)), JSON.stringify(k)).toBe(true);
      for (const i of guavaIndexes(k, f.hashFunctions, f.bitSize)) expect(bitSet(f, i)).toBe(true);
    }
    const g = BloomFilter.create({ expectedItems: 1000, fpp: 0.01 });
    for (const k of keys) g.add(k);
    expect(Buffer.from(g.bitsView()).equals(Buffer.from(f.bitsView()))).toBe(true);
  });

  it('addAll counts keys that changed a bit; add returns whether a bit changed', () => {
    const f = BloomFilter.create({ expectedItems: 10_000, fpp: 0.01 });
    expect(f.addAll(['a', 'b', 'c', 'a'])).toBe(3);
    expect(f.add('a')).toBe(false);
    expect(f.add('d')).toBe(true);
    expect(f.addAll(pack(['a', 'e']))).toBe(1);
    const out = new Uint8Array(10).fill(9);
    const r = f.mightContainAll(['a', 'zz-absent', 'e'], out);
    expect(Array.from(out.subarray(0, 4))).toEqual([1, 0, 1, 9]);
    expect(r.length).toBe(3);
    expect(() => f.mightContainAll(['a', 'b'], new Uint8Array(1))).toThrow(/out/);
  });

  it('batches larger than one kernel call and keys larger than the scratch region', () => {
    const f = BloomFilter.create({ expectedItems: 20_000, fpp: 0.01 });
    const keys = Array.from({ length: 10_000 }, (_, i) => `k${i}`);
    const big = 'y'.repeat(400_000);
    const bigBytes = new Uint8Array(700_000).fill(7);
    const all = [...keys.slice(0, 5000), big, bigBytes, ...keys.slice(5000)];
    // Same order through the reference engine one key at a time gives the same "changed" count.
    const ref = BloomFilter.create({ expectedItems: 20_000, fpp: 0.01, engine: 'js' });
    let refChanged = 0;
    for (const k of all) if (ref.add(k)) refChanged++;
    expect(f.addAll(all)).toBe(refChanged);
    expect(refChanged).toBeGreaterThan(all.length - 50);
    expect(Buffer.from(f.bitsView()).equals(Buffer.from(ref.bitsView()))).toBe(true);
    expect(f.mightContainAll(all).every((v) => v === 1)).toBe(true);
    expect(f.mightContainAll(pack(all)).every((v) => v === 1)).toBe(true);
    const g = BloomFilter.create({ expectedItems: 20_000, fpp: 0.01, engine: 'js' });
    g.add(big);
    g.add(bigBytes);
    for (const i of guavaIndexes(big, g.hashFunctions, g.bitSize)) expect(bitSet(f, i)).toBe(true);
    expect(f.mightContain(big) && f.mightContain(bigBytes)).toBe(true);
  });

  it('expectedFpp and approximateElementCount follow Guava', () => {
    const f = BloomFilter.create({ expectedItems: 100_000, fpp: 0.01 });
    expect(f.expectedFpp()).toBe(0);
    expect(f.approximateElementCount()).toBe(0);
    const keys = Array.from({ length: 50_000 }, (_, i) => `item:${i}`);
    f.addAll(keys);
    const c = f.bitCount();
    expect(f.expectedFpp()).toBeCloseTo(Math.pow(c / f.bitSize, f.hashFunctions), 15);
    const approx = f.approximateElementCount();
    expect(Math.abs(approx - 50_000)).toBeLessThan(1000);
  });

  it('putAll unions equal shapes and refuses others with a typed error', () => {
    const a = BloomFilter.create({ expectedItems: 1000, fpp: 0.01 });
    const b = BloomFilter.create({ expectedItems: 1000, fpp: 0.01 });
    a.addAll(['x', 'y']);
    b.addAll(['z']);
    a.putAll(b);
    expect(a.bitCount()).toBe(a.countBits());
    expect(BloomFilter.readFrom(a.writeTo()).bitCount()).toBe(a.countBits());
    expect(a.mightContainAll(['x', 'y', 'z'])).toEqual(Uint8Array.of(1, 1, 1));
    const bad = [
      BloomFilter.create({ expectedItems: 2000, fpp: 0.01 }),
      BloomFilter.create({ expectedItems: 1000, fpp: 0.001 }),
      BloomFilter.create({ expectedItems: 1000, fpp: 0.01, seed: 1 }),
      a,
    ];
    for (const o of bad) {
      expect(() => a.putAll(o)).toThrow(expect.objectContaining({ code: ErrorCodes.BLOOM_SHAPE_MISMATCH }));
    }
  });

  it('bad options name the option', () => {
    const cases: Array<[unknown, RegExp, typeof TypeError | typeof RangeError]> = [
      [{ expectedItems: -1, fpp: 0.01 }, /options\.expectedItems/, RangeError],
      [{ expectedItems: 1.5, fpp: 0.01 }, /options\.expectedItems/, TypeError],
      [{ expectedItems: '10', fpp: 0.01 }, /options\.expectedItems/, TypeError],
      [{ expectedItems: 10, fpp: 0 }, /options\.fpp/, RangeError],
      [{ expectedItems: 10, fpp: 1 }, /options\.fpp/, RangeError],
      [{ expectedItems: 10, fpp: NaN }, /options\.fpp/, TypeError],
      [{ expectedItems: 10, fpp: 0.1, seed: -1 }, /options\.seed/, RangeError],
      [{ expectedItems: 10, fpp: 0.1, engine: 'gpu' }, /options\.engine/, TypeError],
      [null, /options/, TypeError],
    ];
    for (const [opts, re, cls] of cases) {
      let err: unknown;
      try {
        BloomFilter.create(opts as never);
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(opts)).toBeInstanceOf(cls);
      expect((err as Error).message).toMatch(re);
    }
    const f = BloomFilter.create({ expectedItems: 10, fpp: 0.1 });
    expect(() => f.add(42 as never)).toThrow(TypeError);
    expect(() => f.addAll(['a', 7 as never])).toThrow(/keys\[1\]/);
    expect(() => f.mightContainAll('abc' as never)).toThrow(TypeError);
  });

  it('fromShared attaches in-thread and refuses forged descriptors', () => {
    const f = BloomFilter.create({ expectedItems: 1000, fpp: 0.01 });
    f.add('shared');
    const d = structuredClone(f.toShared());
    const g = BloomFilter.fromShared(d);
    expect(g.id).toBe(f.id);
    expect(g.mightContain('shared')).toBe(true);
    g.add('from-g');
    expect(f.mightContain('from-g')).toBe(true);
    expect(f.bitCount()).toBe(f.countBits());
    expect(() => BloomFilter.fromShared({ ...d, kind: 'nope' } as never)).toThrow(TypeError);
    expect(() => BloomFilter.fromShared({ ...d, memory: new ArrayBuffer(8) } as never)).toThrow(/descriptor\.memory/);
    expect(() => BloomFilter.fromShared({ ...d, bitsOffset: 0 })).toThrow(expect.objectContaining({ code: ErrorCodes.BLOOM_SHAPE_MISMATCH }));
    expect(() => BloomFilter.fromShared({ ...d, bitSize: d.bitSize * 1024 })).toThrow(expect.objectContaining({ code: ErrorCodes.BLOOM_SHAPE_MISMATCH }));
    const plain = new WebAssembly.Memory({ initial: 2, maximum: 4, shared: true });
    expect(() => BloomFilter.fromShared({ ...d, memory: plain, bitSize: 64 })).toThrow(/header/);
  });

  it('refuses filters above the ceiling with a RangeError (HG_ERR_CAPACITY), never a crash', () => {
    // n = 3e9 at p = 0.001 is ~5.4 GB of bits: above one wasm32 memory.
    let err: unknown;
    try {
      BloomFilter.create({ expectedItems: 3_000_000_000, fpp: 0.001 });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RangeError);
    expect(err).toMatchObject({ code: ErrorCodes.CAPACITY });
    expect((err as Error).message).toMatch(/options\.expectedItems/);
    // 1e9 @ 0.001 (the design point) fits under the ceiling.
    expect(bloomShape({ expectedItems: 1e9, fpp: 0.001 }).bitSize).toBeLessThan(MAX_BIT_SIZE);
    const forged = new Uint8Array(6);
    forged.set([1, 5, 0x7f, 0xff, 0xff, 0xff]);
    expect(() => BloomFilter.readFrom(forged)).toThrow(RangeError);
  });

  it('the design point n = 1e9, p = 0.001 (~1.8 GB of bits, pages committed lazily) works allocates, adds and reads back at high bit indexes', () => {
    const f = BloomFilter.create({ expectedItems: 1_000_000_000, fpp: 0.001 });
    expect(f.byteLength).toBe(1_797_198_448);
    expect(f.hashFunctions).toBe(10);
    const keys = Array.from({ length: 1000 }, (_, i) => `m${i}`);
    f.addAll(keys);
    expect(f.mightContainAll(keys).every((v) => v === 1)).toBe(true);
    let high = 0;
    for (const k of keys) for (const i of guavaIndexes(k, f.hashFunctions, f.bitSize)) if (i > 2 ** 32) high++;
    expect(high).toBeGreaterThan(0);
  });
});

describe('BloomFilter digest batches (keys hashed once by the caller)', () => {
  for (const engine of ['wasm', 'js'] as const) {
    it(`addDigests/mightContainDigests set and read exactly the bits addAll/mightContainAll do (${engine}, seeds 0 and 7)`, () => {
      for (const seed of [0, 7]) {
        const keys = Array.from({ length: 9000 }, (_, i) => (i % 3 === 0 ? new TextEncoder().encode(`b${i}`) : `key-\u00e9-${i}`));
        const byKeys = BloomFilter.create({ expectedItems: 5000, fpp: 0.01, seed, engine });
        const byDigests = BloomFilter.create({ expectedItems: 5000, fpp: 0.01, seed, engine });
        const d = hashBatch(keys.slice(0, 6000), { seed });
        expect(byDigests.addDigests(d)).toBe(byKeys.addAll(keys.slice(0, 6000)));
        expect(Buffer.from(byDigests.bitsView()).equals(Buffer.from(byKeys.bitsView()))).toBe(true);
        expect(byDigests.bitCount()).toBe(byKeys.bitCount());
        const all = hashBatch(keys, { seed });
        const out = new Uint8Array(keys.length + 5);
        expect(Array.from(byDigests.mightContainDigests(all, out))).toEqual(Array.from(byKeys.mightContainAll(keys)));
        expect(byDigests.addDigests(d)).toBe(0);
      }
    });
  }

  it('refuses digests that are not whole 16-byte digests, naming the argument', () => {
    const f = BloomFilter.create({ expectedItems: 100, fpp: 0.01 });
    expect(() => f.addDigests(new Uint8Array(15))).toThrow(expect.objectContaining({ name: 'HashGateTypeError', message: expect.stringContaining('digests') }));
    expect(() => f.mightContainDigests('x' as never)).toThrow(/digests/);
  });
});

describe('BloomFilter ceiling', () => {
  it('a filter of exactly MAX_BIT_SIZE bits (3.94 GiB) allocates and works; one word more is refused', () => {
    expect(MAX_BIT_SIZE % 64).toBe(0);
    const f = BloomFilter.withShape({ bitSize: MAX_BIT_SIZE, hashFunctions: 4 });
    const keys = ['ceiling-a', 'ceiling-b', 'ceiling-c'];
    f.addAll(keys);
    expect(f.mightContainAll(keys)).toEqual(Uint8Array.of(1, 1, 1));
    for (const k of keys) for (const i of guavaIndexes(k, 4, MAX_BIT_SIZE)) expect(bitSet(f, i)).toBe(true);
    expect(f.bitCount()).toBeGreaterThan(9);
    let err: unknown;
    try {
      BloomFilter.withShape({ bitSize: MAX_BIT_SIZE + 64, hashFunctions: 4 });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RangeError);
    expect(err).toMatchObject({ code: ErrorCodes.CAPACITY });
  });
});

describe('BloomFilter measured false-positive rate', () => {
  for (const p of [0.01, 0.001]) {
    it(`1M absent keys at p=${p} land in [0.5p, 1.5p]`, () => {
      const n = 200_000;
      const f = BloomFilter.create({ expectedItems: n, fpp: p });
      const present: string[] = new Array(n);
      for (let i = 0; i < n; i++) present[i] = `present-${i}-张`;
      f.addAll(present);
      let fp = 0;
      const batch: string[] = new Array(100_000);
      for (let b = 0; b < 10; b++) {
        for (let i = 0; i < batch.length; i++) batch[i] = `absent-${b}-${i}`;
        const r = f.mightContainAll(batch);
        for (let i = 0; i < r.length; i++) fp += r[i]!;
      }
      const rate = fp / 1_000_000;
      expect(rate).toBeGreaterThanOrEqual(0.5 * p);
      expect(rate).toBeLessThanOrEqual(1.5 * p);
    });
  }
});
