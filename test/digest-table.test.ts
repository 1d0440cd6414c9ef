import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DigestTable } from '../src/dedup/digest-table.js';

describe('DigestTable (embedded compact store)', () => {
  it('behaves like a Set of (lo, hi, bucket) through growth, with colliding lo/hash values', () => {
    // Small value ranges force equal `lo` with different hi/bucket and long probe runs.
    const entry = fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 5 }));
    const big = fc.tuple(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 0xfffffffe }));
    fc.assert(
      fc.property(fc.array(fc.oneof(entry, big), { maxLength: 3000 }), (entries) => {
        const t = new DigestTable();
        const model = new Set<string>();
        for (const [lo, hi, b] of entries) {
          const k = `${lo}:${hi}:${b}`;
          expect(t.add(lo, hi, b)).toBe(!model.has(k));
          model.add(k);
        }
        expect(t.size).toBe(model.size);
        // Everything added is still found after every growth.
        for (const [lo, hi, b] of entries) expect(t.add(lo, hi, b)).toBe(false);
        expect(t.capacity).toBeGreaterThanOrEqual(t.size * 2);
      }),
      { numRuns: 50 },
    );
  });

  it('keeps 200k random members exact', () => {
    const t = new DigestTable();
    let x = 0x12345678;
    const next = () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0);
    const seen: Array<[number, number, number]> = [];
    for (let i = 0; i < 200_000; i++) {
      const e: [number, number, number] = [next(), next(), next() % 65536];
      seen.push(e);
      expect(t.add(...e)).toBe(true);
    }
    expect(seen.every((e) => t.add(...e) === false)).toBe(true);
    expect(t.size).toBe(200_000);
  });
});
