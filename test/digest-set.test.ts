// DigestSet (the seen-cache's table): a growable table answers exactly like a preallocated one
// and like a Set of the digests, across its doublings.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DigestSet, SeenCache } from '../src/dedup/cache.js';

describe('DigestSet', () => {
  it('growable and preallocated tables agree with a Set (property, across doublings)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 30_000 }), { minLength: 1, maxLength: 20_000 }), (ids) => {
        // digest i = 4 words derived from ids[i]; repeats of an id repeat the digest
        const d = new Uint32Array(ids.length * 4);
        ids.forEach((v, i) => d.set([Math.imul(v, 0x9e3779b1) >>> 0, v, v ^ 0x5bd1e995, 7], i * 4));
        const cap = new Set(ids).size;
        const grow = new DigestSet(cap, true);
        const pre = new DigestSet(cap);
        const ref = new Set<number>();
        for (let i = 0; i < ids.length; i++) {
          const want = !ref.has(ids[i]!);
          ref.add(ids[i]!);
          expect(grow.add(d, i)).toBe(want);
          expect(pre.add(d, i)).toBe(want);
        }
        expect(grow.size).toBe(ref.size);
        for (let i = 0; i < ids.length; i++) expect(grow.has(d, i)).toBe(true);
        const other = new Uint32Array([1, 2, 3, 4]);
        expect(grow.has(other, 0)).toBe(pre.has(other, 0));
      }),
      { numRuns: 30 },
    );
  });

  it('the all-zero digest is a member like any other, across doublings and clear()', () => {
    const d = new Uint32Array(4 * 6000);
    for (let i = 1; i < 6000; i++) d.set([i, 0, 0, i === 5 ? 0 : 9], i * 4); // digest 0 is all zero
    const s = new DigestSet(6000, true);
    expect(s.has(d, 0)).toBe(false);
    expect(s.add(d, 0)).toBe(true);
    expect(s.add(d, 0)).toBe(false);
    // doublings past the first 4096 cells keep it, and it counts once
    for (let i = 1; i < 6000; i++) expect(s.add(d, i)).toBe(true);
    expect(s.has(d, 0)).toBe(true);
    expect(s.size).toBe(6000);
    s.clear();
    expect(s.has(d, 0)).toBe(false);
    expect(s.has(d, 5)).toBe(false);
    expect(s.add(d, 0)).toBe(true);
    expect(s.size).toBe(1);
  });

  it('SeenCache stays within max entries while its tables grow', () => {
    const c = new SeenCache(10_000);
    const d = new Uint32Array(4 * 50_000);
    for (let i = 0; i < 50_000; i++) d.set([i, i * 3, ~i >>> 0, 1], i * 4);
    for (let i = 0; i < 50_000; i++) c.add(d, i);
    expect(c.size).toBeLessThanOrEqual(10_000);
    expect(c.has(d, 49_999)).toBe(true);
    expect(c.has(d, 0)).toBe(false);
  });

  it('SeenCache answers like two generations of Sets across turns (its filter never hides a member)', () => {
    const half = 500;
    const c = new SeenCache(2 * half);
    // the reference: a young and an old Set, turned when young holds half
    let young = new Set<number>();
    let old = new Set<number>();
    const add = (k: number): void => {
      if (young.size >= half) {
        old = young;
        young = new Set();
      }
      young.add(k);
    };
    const has = (k: number): boolean => {
      if (young.has(k)) return true;
      if (!old.has(k)) return false;
      add(k);
      return true;
    };
    const n = 5000;
    const d = new Uint32Array(4 * n);
    // word 1 (the filter's) repeats every 64 keys, so filter bits are shared by many digests
    for (let i = 1; i < n; i++) d.set([Math.imul(i, 0x9e3779b1) >>> 0, i % 64, i, 3], i * 4);
    let hits = 0;
    for (let i = 0; i < n; i++) {
      c.add(d, i);
      add(i);
      for (let j = Math.max(0, i - 1200); j <= i; j += 37) {
        const want = has(j);
        expect(c.has(d, j)).toBe(want);
        if (want) hits++;
      }
    }
    expect(hits).toBeGreaterThan(n);
    c.add(d, 0); // digest 0 is all zero
    expect(c.has(d, 0)).toBe(true);
    c.clear();
    expect(c.has(d, 0)).toBe(false);
    expect(c.has(d, n - 1)).toBe(false);
  });

  it('SeenCache keeps the all-zero digest through a turn of its generations (the rebuilt filter marks it)', () => {
    const c = new SeenCache(8); // generations of 4
    const d = new Uint32Array(4 * 6);
    // digest 0 is all zero; the others never share its filter bit (word 1 is odd)
    for (let i = 1; i < 6; i++) d.set([i, 2 * i + 1, 7, 9], i * 4);
    c.add(d, 0);
    for (let i = 1; i < 4; i++) c.add(d, i);
    // the fifth add turns the generations: the young one (digest 0 among them) becomes the old
    c.add(d, 4);
    expect(c.has(d, 0)).toBe(true);
    expect(c.has(d, 5)).toBe(false);
  });
});
