// Guava MURMUR128_MITZ_64 probe indexes in plain JS, without BigInt: 64-bit lanes kept as two
// u32 halves, `(combined & Long.MAX_VALUE) % m` evaluated in three exact double-precision steps
// (hi % m, then 16 bits at a time; every intermediate stays below 2^53 for m <= 2^37).
// Used by the counting filter and by BloomFilter's `engine: 'js'` reference path.

/** `digest` = Guava asBytes() of murmur3_128 (h1 LE, h2 LE). Writes k indexes into `out`. */
export function probeIndexes(digest: Uint8Array, k: number, m: number, out: Float64Array): void {
  let lo = u32le(digest, 0);
  let hi = u32le(digest, 4);
  const h2lo = u32le(digest, 8);
  const h2hi = u32le(digest, 12);
  for (let j = 0; j < k; j++) {
    let r = (hi & 0x7fffffff) % m;
    r = (r * 65536 + (lo >>> 16)) % m;
    out[j] = (r * 65536 + (lo & 0xffff)) % m;
    const sum = lo + h2lo;
    lo = sum >>> 0;
    hi = (hi + h2hi + (sum > 0xffffffff ? 1 : 0)) >>> 0;
  }
}

function u32le(b: Uint8Array, o: number): number {
  return (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
}
