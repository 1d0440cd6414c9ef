// hashgate's MurmurHash3 against real Guava (harness in test/helpers/java.ts, owned by the Bloom
// suite): every seed convention, including seeds >= 2^31 where Guava's sign-extended int seed and
// the C++ reference's zero-extended one disagree.
import { beforeAll, describe, expect, it } from 'vitest';
import { bucketOf, hashBatch, murmur3_128Hex, murmur3_32, murmur3_64 } from '../src/hash/index.js';
import { createKernelMemory, instantiateKernel } from '../src/hash/kernel.js';
import { guavaHarness, type GuavaHarness } from './helpers/java.js';

const CI = process.env.CI === 'true';
let java: GuavaHarness | null = null;

beforeAll(async () => {
  java = await guavaHarness();
  if (java === null) {
    if (CI) throw new Error('java/javac not found: the Guava hash compatibility suite must run in CI');
    console.warn('\n\n!!! java/javac not found: SKIPPING the Guava MurmurHash3 compatibility suite !!!\n\n');
  }
}, 300_000);

function keys(): (string | Uint8Array)[] {
  let s = 0x9e3779b9;
  const r = (n: number): number => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s % n;
  };
  const out: (string | Uint8Array)[] = ['', 'hello', 'The quick brown fox jumps over the lazy dog'];
  const names = '王李张刘陈杨欧阳司马伟芳娜敏静';
  for (let i = 0; i < 300; i++) {
    let k = names[r(names.length)]! + names[r(names.length)]!;
    for (let j = 0; j < 18; j++) k += r(10);
    out.push(k);
  }
  for (let len = 0; len < 40; len++) out.push(new Uint8Array(len).map(() => r(256))); // every tail, bytes >= 0x80
  for (let i = 0; i < 100; i++) {
    let k = '';
    const len = r(60);
    for (let j = 0; j < len; j++) k += String.fromCharCode(r(4) === 0 ? 0x4e00 + r(0x5000) : 32 + r(95));
    out.push(k);
  }
  out.push('😀𝄞 astral');
  return out;
}

/**
 * The kernel's UTF-16 route (string keys as code units, transcoded to UTF-8 while hashing):
 * mm128Batch16 and mm128One16 digests of the string keys, hex, in key order.
 */
function viaCodeUnits(ks: ReadonlyArray<string | Uint8Array>, seed: number): { batch: string[]; one: string[] } {
  const strs = ks.filter((k): k is string => typeof k === 'string');
  const mem = createKernelMemory(64);
  const k = instantiateKernel(mem);
  const u16 = new Uint16Array(mem.buffer);
  const u32 = new Uint32Array(mem.buffer);
  const units = 1 << 20, offs = 1536 << 10, out = 1 << 21, tmp = 3 << 20;
  let p = 0;
  strs.forEach((s, i) => {
    for (let j = 0; j < s.length; j++) u16[(units >> 1) + p + j] = s.charCodeAt(j);
    p += s.length;
    u32[(offs >> 2) + i + 1] = p;
  });
  k.mm128Batch16(units, offs, strs.length, seed, out, tmp);
  const hex = (at: number): string => Buffer.from(mem.buffer, at, 16).toString('hex');
  const batch = strs.map((_, i) => hex(out + 16 * i));
  const one = strs.map((s, i) => {
    k.mm128One16(units + 2 * u32[(offs >> 2) + i]!, s.length, seed, out, tmp);
    return hex(out);
  });
  return { batch, one };
}

describe('MurmurHash3 vs Guava', () => {
  const ks = keys();
  for (const seed of [0, 1, 42, 0x7fffffff, 0x80000000, 0xdeadbeef, 0xffffffff]) {
    it(`murmur3_128 / murmur3_32_fixed / asLong / bucketOf, seed ${seed}`, async (ctx) => {
      if (java === null) return ctx.skip();
      const rows = await java.hash(ks, { seed });
      expect(rows.length).toBe(ks.length);
      const batch = hashBatch(ks, { seed });
      const batch32 = new DataView(hashBatch(ks, { seed, algorithm: 'murmur3_32' }).buffer);
      const units = viaCodeUnits(ks, seed);
      const guavaOfStrings = rows.filter((_, i) => typeof ks[i] === 'string').map((g) => g.hex128);
      expect(units.batch).toEqual(guavaOfStrings);
      expect(units.one).toEqual(guavaOfStrings);
      ks.forEach((k, i) => {
        const g = rows[i]!;
        expect(murmur3_128Hex(k, seed)).toBe(g.hex128);
        expect(Buffer.from(batch.subarray(i * 16, i * 16 + 16)).toString('hex')).toBe(g.hex128);
        expect(murmur3_32(k, seed)).toBe(g.mm32);
        expect(batch32.getUint32(i * 4, true)).toBe(g.mm32);
        expect(BigInt.asIntN(64, murmur3_64(k, seed))).toBe(g.asLong);
        if (seed === 0) {
          // Java: (int) Long.remainderUnsigned(hashCode.asLong(), n)
          for (const n of [1, 7, 1000, 0x7fffffff, 0xffffffff]) expect(bucketOf(k, n)).toBe(Number(BigInt.asUintN(64, g.asLong) % BigInt(n)));
        }
      });
    }, 120_000);
  }
});
