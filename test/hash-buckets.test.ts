import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bucketOf, jumpBucket, jumpBucketsOf, murmur3_64 } from '../src/hash/index.js';
import { refJumpConsistentHash } from '../src/hash/reference.js';

describe('bucketOf', () => {
  it('is the unsigned remainder of asLong() (Java Long.remainderUnsigned)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 30 }), fc.integer({ min: 1, max: 0xffffffff }), (k, n) => {
        const b = bucketOf(k, n);
        expect(b).toBe(Number(murmur3_64(k) % BigInt(n)));
        expect(b).toBeGreaterThanOrEqual(0);
        expect(b).toBeLessThan(n);
      }),
      { numRuns: 500 },
    );
    // "hello".asLong() = 0xcbd8a7b341bd9b02 has the top bit set: a signed remainder would differ.
    expect(bucketOf('hello', 1000)).toBe(Number(0xcbd8a7b341bd9b02n % 1000n));
    expect(bucketOf('hello', 1)).toBe(0);
  });
});

describe('jumpBucket', () => {
  it('equals Guava consistentHash(asLong(), n) (BigInt oracle)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 30 }), fc.integer({ min: 1, max: 0x7fffffff }), (k, n) => {
        expect(jumpBucket(k, n)).toBe(refJumpConsistentHash(murmur3_64(k), n));
      }),
      { numRuns: 500 },
    );
    expect(jumpBucket('anything', 1)).toBe(0);
  });

  it('growing n -> n+1 moves about 1/(n+1) of the keys, all to the new bucket', () => {
    const keys = Array.from({ length: 20_000 }, (_, i) => `user-${i}`);
    for (const n of [1, 2, 3, 4, 7, 8, 15, 16, 99, 100, 1000]) {
      const before = jumpBucketsOf(keys, n);
      const after = jumpBucketsOf(keys, n + 1);
      let moved = 0;
      let movedElsewhere = 0;
      let outOfRange = 0;
      for (let i = 0; i < keys.length; i++) {
        if (after[i]! > n) outOfRange++;
        if (after[i] !== before[i]) {
          moved++;
          if (after[i] !== n) movedElsewhere++;
        }
      }
      expect(outOfRange).toBe(0);
      expect(movedElsewhere).toBe(0);
      // Binomial(20000, 1/(n+1)): 6 standard deviations is far outside any plausible fluke.
      const p = 1 / (n + 1);
      expect(Math.abs(moved - keys.length * p)).toBeLessThan(6 * Math.sqrt(keys.length * p * (1 - p)) + 1);
    }
  });

  it('uses every bucket roughly evenly', () => {
    const keys = Array.from({ length: 30_000 }, (_, i) => `k${i}`);
    const counts = new Array<number>(10).fill(0);
    for (const b of jumpBucketsOf(keys, 10)) counts[b]!++;
    for (const c of counts) expect(Math.abs(c - 3000)).toBeLessThan(6 * Math.sqrt(30_000 * 0.1 * 0.9));
  });
});
