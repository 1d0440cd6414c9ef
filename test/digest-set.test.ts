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

  it('SeenCache stays within max entries while its tables grow', () => {
    const c = new SeenCache(10_000);
    const d = new Uint32Array(4 * 50_000);
    for (let i = 0; i < 50_000; i++) d.set([i, i * 3, ~i >>> 0, 1], i * 4);
    for (let i = 0; i < 50_000; i++) c.add(d, i);
    expect(c.size).toBeLessThanOrEqual(10_000);
    expect(c.has(d, 49_999)).toBe(true);
    expect(c.has(d, 0)).toBe(false);
  });
});
