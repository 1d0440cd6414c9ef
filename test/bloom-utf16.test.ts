// String keys reach the kernel as UTF-16 code units (the kernel transcodes to UTF-8 while it
// hashes): the new path must give exactly the digests, bits and answers of the UTF-8 path, for
// any string, CJK, emoji (surrogate pairs) and lone surrogates (U+FFFD, as TextEncoder) included.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { HashGate, hashBatch, packKeys } from 'hashgate';
import { BloomFilter } from 'hashgate/bloom';
import { createKernelMemory, instantiateKernel, type KernelExports } from '../src/hash/kernel.js';
import { UTF16_TMP_BYTES } from '../src/bloom/kernel.js';

const enc = new TextEncoder();
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

/** One code unit or pair, weighted towards what breaks a transcoder: every UTF-8 length and bad surrogates. */
const unit = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0x30, max: 0x39 }).map((c) => String.fromCharCode(c)) },
  { weight: 4, arbitrary: fc.integer({ min: 0x4e00, max: 0x9fff }).map((c) => String.fromCharCode(c)) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 0x7f }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0x7ff }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.integer({ min: 0xe000, max: 0xffff }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.integer({ min: 0x10000, max: 0x10ffff }).map((c) => String.fromCodePoint(c)) },
  { weight: 1, arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)) },
);
const str = (maxLength: number) => fc.string({ unit, maxLength });

/** A kernel on its own memory, with UTF-16 and UTF-8 staging helpers. */
function kernel(): { k: KernelExports; u8: Uint8Array; u16: Uint16Array; u32: Uint32Array; tmp: number } {
  const mem = createKernelMemory(64);
  const k = instantiateKernel(mem);
  return { k, u8: new Uint8Array(mem.buffer), u16: new Uint16Array(mem.buffer), u32: new Uint32Array(mem.buffer), tmp: 3 << 20 };
}

const UNITS = 1 << 20; // byte address of the code units
const OFFS = 2 << 20; // offsets (u32)
const OUT = (3 << 20) - 65536; // digests
const BYTES = 3 << 20; // UTF-8 bytes (also tmp for single keys: separate calls)
const TMP = 3_900_000;

describe('kernel UTF-16 exports', () => {
  it('UTF16_TMP_BYTES is what the Bloom scratch reserves; the exports exist', () => {
    const { k } = kernel();
    expect((k.UTF16_TMP_BYTES as WebAssembly.Global).value).toBe(UTF16_TMP_BYTES);
    for (const n of ['mm128One16', 'mm128Batch16', 'utf8Length16', 'utf16ToUtf8', 'bloomCheckBatch16', 'bloomAddBatch16', 'bloomAddFlags16', 'bloomCheckOne16', 'bloomAddOne16']) {
      expect(typeof (k as unknown as Record<string, unknown>)[n], n).toBe('function');
    }
  });

  it('known answers: Guava murmur3_128 of UTF-8 from code units', () => {
    const { k, u8, u16 } = kernel();
    // Guava Hashing.murmur3_128(0).hashString(s, UTF_8).toString() (asBytes order); the same
    // strings are among those test/hash-guava.test.ts runs through real Guava, both paths.
    const vectors: Array<[string, number, string]> = [
      ['', 0, '00000000000000000000000000000000'],
      ['hello', 0, '029bbd41b3a7d8cb191dae486a901e5b'],
      ['The quick brown fox jumps over the lazy dog', 0, '6c1b07bc7bbc4be347939ac4a93c437a'],
    ];
    for (const [s, seed, want] of vectors) {
      for (let i = 0; i < s.length; i++) u16[(UNITS >> 1) + i] = s.charCodeAt(i);
      k.mm128One16(UNITS, s.length, seed, OUT, TMP);
      expect(hex(u8.slice(OUT, OUT + 16)), s).toBe(want);
    }
  });

  it('property: mm128One16 / mm128Batch16 / utf16ToUtf8 / utf8Length16 equal the UTF-8 path (TextEncoder bytes)', () => {
    const { k, u8, u16, u32 } = kernel();
    fc.assert(
      fc.property(fc.array(str(60), { minLength: 1, maxLength: 150 }), fc.integer({ min: 0, max: 0xffff_ffff }), (keys, seed) => {
        let p = 0;
        u32[OFFS >> 2] = 0;
        keys.forEach((s, i) => {
          for (let j = 0; j < s.length; j++) u16[(UNITS >> 1) + p + j] = s.charCodeAt(j);
          p += s.length;
          u32[(OFFS >> 2) + i + 1] = p;
        });
        k.mm128Batch16(UNITS, OFFS, keys.length, seed, OUT, TMP);
        const batch16 = u8.slice(OUT, OUT + 16 * keys.length);
        const packed = packKeys(keys);
        u8.set(packed.bytes, BYTES);
        u32.set(packed.offsets, OFFS >> 2);
        k.mm128Batch(BYTES, OFFS, keys.length, seed, OUT);
        expect(hex(batch16)).toBe(hex(u8.slice(OUT, OUT + 16 * keys.length)));
        keys.forEach((s, i) => {
          const bytes = enc.encode(s);
          for (let j = 0; j < s.length; j++) u16[(UNITS >> 1) + j] = s.charCodeAt(j);
          expect(k.utf8Length16(UNITS, s.length)).toBe(bytes.length);
          const n = k.utf16ToUtf8(UNITS, s.length, BYTES);
          expect(hex(u8.slice(BYTES, BYTES + n))).toBe(hex(bytes));
          k.mm128One16(UNITS, s.length, seed, OUT, TMP);
          expect(hex(u8.slice(OUT, OUT + 16)), JSON.stringify(s)).toBe(hex(batch16.subarray(i * 16, i * 16 + 16)));
        });
      }),
      { numRuns: 300 },
    );
  });

  it('keys longer than the transcoding buffer (1024 code units) stream to the same digest', () => {
    const { k, u8, u16 } = kernel();
    fc.assert(
      fc.property(fc.string({ unit, minLength: 1000, maxLength: 1100 }), fc.integer({ min: 0, max: 0xffff_ffff }), (s, seed) => {
        for (let j = 0; j < s.length; j++) u16[(UNITS >> 1) + j] = s.charCodeAt(j);
        k.mm128One16(UNITS, s.length, seed, OUT, TMP);
        const got = hex(u8.slice(OUT, OUT + 16));
        const bytes = enc.encode(s);
        u8.set(bytes, BYTES);
        k.mm128One(BYTES, bytes.length, seed, OUT);
        expect(got).toBe(hex(u8.slice(OUT, OUT + 16)));
      }),
      { numRuns: 60 },
    );
  });
});

describe('BloomFilter string keys (code units) vs byte keys (UTF-8)', () => {
  it('property: same bits, counts, flags and answers for addAll / mightContainAll / add / mightContain', () => {
    fc.assert(
      fc.property(fc.array(str(40), { maxLength: 300 }), fc.array(str(40), { maxLength: 300 }), fc.integer({ min: 0, max: 0xffff_ffff }), (added, asked, seed) => {
        const a = BloomFilter.create({ expectedItems: 200, fpp: 0.05, seed });
        const b = BloomFilter.create({ expectedItems: 200, fpp: 0.05, seed });
        const bytes = (list: string[]) => list.map((s) => enc.encode(s));
        expect(a.addAll(added)).toBe(b.addAll(bytes(added)));
        expect(hex(a.bitsView())).toBe(hex(b.bitsView()));
        expect(a.bitCount()).toBe(b.bitCount());
        const all = [...added, ...asked];
        expect(Array.from(a.mightContainAll(all))).toEqual(Array.from(b.mightContainAll(packKeys(all))));
        for (const s of asked.slice(0, 20)) expect(a.mightContain(s)).toBe(b.mightContain(enc.encode(s)));
        for (const s of asked.slice(0, 20)) expect(a.add(s)).toBe(b.add(enc.encode(s)));
        expect(hex(a.bitsView())).toBe(hex(b.bitsView()));
        expect(a.bitCount()).toBe(b.countBits());
      }),
      { numRuns: 150 },
    );
  });

  it('batches larger than one scratch chunk and keys too long for the scratch region', () => {
    const keys = Array.from({ length: 9000 }, (_, i) => (i % 7 === 0 ? `😀${i}\ud800` : `王伟${110101199003074518 + i}`));
    keys.push('长'.repeat(200_000)); // longer than the scratch region: the slow path
    const a = BloomFilter.create({ expectedItems: 10_000, fpp: 0.01 });
    const b = BloomFilter.create({ expectedItems: 10_000, fpp: 0.01 });
    expect(a.addAll(keys)).toBe(b.addAll(packKeys(keys)));
    expect(hex(a.bitsView())).toBe(hex(b.bitsView()));
    const asked = keys.map((k, i) => (i % 2 === 0 ? k : `${k}#`));
    expect(Array.from(a.mightContainAll(asked))).toEqual(Array.from(b.mightContainAll(packKeys(asked))));
  });
});

describe('gate Bloom calls on worker lanes as code units', () => {
  it('a pool of 2: bloomAdd / bloomCheck of strings answer as the inline UTF-8 path', async () => {
    const keys = Array.from({ length: 30_000 }, (_, i) => (i % 11 === 0 ? `\udc00${i}😀` : `李娜${110101199003074518 + i}`));
    const asked = keys.map((k, i) => (i % 3 === 0 ? `${k}x` : k));
    // chunkKeys 1024: 30k keys go in tasks of 3750 keys (a batch this large takes larger tasks)
    const gate = await HashGate.open({ threads: 2, bloom: { expectedItems: 40_000, fpp: 0.001 }, inlineThreshold: 0, chunkKeys: 1024 });
    try {
      const ref = BloomFilter.create({ expectedItems: 40_000, fpp: 0.001 });
      expect(await gate.bloomAdd(keys)).toBe(ref.addAll(packKeys(keys)));
      expect(hex(gate.bloom!.bitsView())).toBe(hex(ref.bitsView()));
      expect(Array.from(await gate.bloomCheck(asked))).toEqual(Array.from(ref.mightContainAll(packKeys(asked))));
      // merged calls (flags per key) take the same lanes
      const more = asked.map((k) => `${k}+`);
      const [n1, n2] = await Promise.all([gate.bloomAdd(more.slice(0, 15_000)), gate.bloomAdd(more.slice(15_000))]);
      expect(n1 + n2).toBe(ref.addAll(packKeys(more)));
      expect(hex(gate.bloom!.bitsView())).toBe(hex(ref.bitsView()));
      // hashing ops take the same larger tasks, as UTF-8
      expect(hex(await gate.hashBatch(keys))).toBe(hex(hashBatch(keys)));
      expect(gate.stats().pool!.tasks).toBeGreaterThan(0);
    } finally {
      await gate.close();
    }
  });
});
