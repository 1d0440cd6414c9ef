// hashgate's Bloom filter against real Guava (com.google.guava:guava, see test/helpers/java.ts):
// same sizing, same bits, same answers, in both directions.
import { describe, it, expect, beforeAll } from 'vitest';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BloomFilter, optimalNumOfBits, optimalNumOfHashFunctions, bloomShape } from '../src/bloom/index.js';
import { murmur3_128Hex, murmur3_32, murmur3_64 } from '../src/hash/index.js';
import { guavaHarness, type GuavaHarness } from './helpers/java.js';

const CI = process.env.CI === 'true';
let java: GuavaHarness | null = null;
let dir = '';

beforeAll(async () => {
  java = await guavaHarness();
  if (java === null) {
    if (CI) throw new Error('java/javac not found: the Guava compatibility suite must run in CI');
    console.warn('\n\n!!! java/javac not found: SKIPPING the Guava Bloom compatibility suite !!!\n\n');
  }
  dir = mkdtempSync(join(tmpdir(), 'hg-guava-'));
  return () => rmSync(dir, { recursive: true, force: true });
}, 300_000);

const itJava = (name: string, fn: (j: GuavaHarness) => Promise<void>, timeout = 120_000) =>
  it(name, async (ctx) => {
    if (java === null) return ctx.skip();
    await fn(java);
  }, timeout);

/** Shape-A style keys (Chinese name + ID) and plain ASCII ones; no newlines (one per line). */
function keySet(prefix: string, n: number): string[] {
  const names = ['张伟', '王芳', '李娜', '刘洋', '陈静', '杨磊', '赵敏', '黄勇'];
  const out: string[] = new Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = i % 3 === 0 ? `${prefix}${names[i % 8]}|11010119${String(900000 + i).padStart(10, '0')}` : `${prefix}key-${i}`;
  }
  return out;
}

describe('Guava interop', () => {
  itJava('sizing table equals Guava (numBits, k, rounded bitSize)', async (j) => {
    const ns = [0, 1, 2, 10, 100, 1000, 12_345, 100_000, 1_000_000, 10_000_000, 123_456_789, 1_000_000_000, 2_000_000_000];
    const ps = [0.5, 0.3, 0.1, 0.05, 0.03, 0.01, 0.005, 0.001, 0.0001, 1e-5, 1e-7, 1e-9, 1e-12];
    const pairs: Array<[number, number]> = [];
    for (const n of ns) for (const p of ps) pairs.push([n, p]);
    const text = await j.run(['sizing'], pairs.map(([n, p]) => `${n} ${p}`).join('\n') + '\n');
    const rows = text.trim().split('\n');
    expect(rows).toHaveLength(pairs.length);
    let checkedRounding = 0;
    pairs.forEach(([n, p], i) => {
      const [bits, k, bitSize] = rows[i]!.split(' ').map(Number);
      expect([optimalNumOfBits(n === 0 ? 1 : n, p), optimalNumOfHashFunctions(p)], `n=${n} p=${p}`).toEqual([bits, k]);
      if (bitSize! > 0) {
        checkedRounding++;
        const s = bloomShape({ expectedItems: n, fpp: p });
        expect([s.bitSize, s.hashFunctions], `n=${n} p=${p}`).toEqual([bitSize, k]);
      }
    });
    expect(checkedRounding).toBeGreaterThan(50);
  });

  itJava('murmur3 digests match Guava (helper self-check)', async (j) => {
    const keys = ['', 'a', 'hello world', '张伟|110101199003071234', 'x'.repeat(37)];
    const rows = await j.hash(keys);
    keys.forEach((k, i) => {
      expect(murmur3_128Hex(k)).toBe(rows[i]!.hex128);
      expect(murmur3_32(k)).toBe(rows[i]!.mm32);
      expect(BigInt.asIntN(64, murmur3_64(k))).toBe(rows[i]!.asLong);
    });
  });

  itJava('Guava writes 100k keys, hashgate reads and agrees on 200k keys', async (j) => {
    const present = keySet('p', 100_000);
    const absent = keySet('a', 100_000);
    const file = join(dir, 'guava.bf');
    const meta = await j.run(['build', file, '100000', '0.01'], present.join('\n') + '\n');
    const [gk, gBits] = meta.trim().split(' ').map(Number);
    const bytes = readFileSync(file);
    const f = BloomFilter.readFrom(bytes);
    expect([f.hashFunctions, f.bitSize]).toEqual([gk, gBits]);
    // Same shape as create() would choose, and byte-identical when hashgate adds the same keys.
    const ours = BloomFilter.create({ expectedItems: 100_000, fpp: 0.01 });
    ours.addAll(present);
    expect(Buffer.from(ours.writeTo()).equals(bytes)).toBe(true);

    const all = [...present, ...absent];
    const guava = (await j.run(['check', file], all.join('\n') + '\n')).trim();
    expect(guava.length).toBe(all.length);
    const mine = f.mightContainAll(all);
    let diff = 0;
    let fp = 0;
    for (let i = 0; i < all.length; i++) {
      if (String(mine[i]) !== guava[i]) diff++;
      if (i >= present.length && mine[i] === 1) fp++;
    }
    expect(diff).toBe(0);
    expect(mine.subarray(0, present.length).every((v) => v === 1)).toBe(true);
    expect(fp).toBeGreaterThan(0); // absent keys do produce some false positives: the check is not vacuous
    // Single-key path agrees too (sample).
    for (let i = 0; i < all.length; i += 997) expect(f.mightContain(all[i]!) ? '1' : '0').toBe(guava[i]);
  });

  itJava('hashgate writes 100k keys, Guava reads and agrees on 200k keys', async (j) => {
    const present = keySet('q', 100_000);
    const absent = keySet('b', 100_000);
    const f = BloomFilter.create({ expectedItems: 100_000, fpp: 0.001 });
    expect(f.addAll(present)).toBeGreaterThan(99_000);
    const file = join(dir, 'hashgate.bf');
    writeFileSync(file, f.writeTo());
    const all = [...present, ...absent];
    const guava = (await j.run(['check', file], all.join('\n') + '\n')).trim();
    const mine = f.mightContainAll(all);
    expect(guava.length).toBe(all.length);
    let diff = 0;
    for (let i = 0; i < all.length; i++) if (String(mine[i]) !== guava[i]) diff++;
    expect(diff).toBe(0);
    expect(guava.slice(0, present.length)).toBe('1'.repeat(present.length));
  });

  itJava('binary keys (Uint8Array) match Guava byte-array funnel', async (j) => {
    const keys: Uint8Array[] = [];
    for (let i = 0; i < 2000; i++) {
      const k = new Uint8Array(i % 70);
      for (let b = 0; b < k.length; b++) k[b] = (i * 31 + b * 7) & 255;
      keys.push(k);
    }
    const file = join(dir, 'bin.bf');
    const hex = keys.map((k) => Buffer.from(k).toString('hex'));
    await j.run(['build', file, '1000', '0.05', '--hex'], hex.slice(0, 1000).join('\n') + '\n');
    const f = BloomFilter.readFrom(readFileSync(file));
    const guava = (await j.run(['check', file, '--hex'], hex.join('\n') + '\n')).trim();
    expect(Array.from(f.mightContainAll(keys)).join('')).toBe(guava);
  });
});
