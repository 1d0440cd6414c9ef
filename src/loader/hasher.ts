// The loader's private view of the WASM MurmurHash3 kernel: the parser writes keys straight into
// kernel memory, so hashing a region is one call with no copy and no JS string per key.
import { KERNEL_RESERVED_BYTES, WASM_PAGE, createKernelMemory, instantiateKernel, type KernelExports } from '../hash/kernel.js';

const align = (n: number, a: number): number => Math.ceil(n / a) * a;

export class RegionHasher {
  readonly keyBytes: Uint8Array;
  readonly keyOffsets: Uint32Array;
  /** bucket of key i after `buckets()`; digest i (16 B) after `digests()`. */
  readonly bucketOut: Uint32Array;
  readonly digestOut: Uint8Array;
  private readonly k: KernelExports;
  private readonly pKeys: number;
  private readonly pOffsets: number;
  private readonly pBuckets: number;
  private readonly pDigests: number;

  constructor(maxKeyBytes: number, maxRows: number) {
    this.pKeys = KERNEL_RESERVED_BYTES;
    this.pOffsets = align(this.pKeys + maxKeyBytes + 16, 64);
    this.pBuckets = align(this.pOffsets + (maxRows + 1) * 4, 64);
    this.pDigests = align(this.pBuckets + maxRows * 4, 64);
    const total = this.pDigests + maxRows * 16;
    const pages = Math.ceil(total / WASM_PAGE) + 1;
    const memory = createKernelMemory(pages, pages);
    this.k = instantiateKernel(memory);
    const buf = memory.buffer;
    this.keyBytes = new Uint8Array(buf, this.pKeys, maxKeyBytes);
    this.keyOffsets = new Uint32Array(buf, this.pOffsets, maxRows + 1);
    this.bucketOut = new Uint32Array(buf, this.pBuckets, maxRows);
    this.digestOut = new Uint8Array(buf, this.pDigests, maxRows * 16);
  }

  /** bucketOf(key, n) for the first `count` packed keys (murmur3_128 h1 mod n, as Guava/seed). */
  buckets(count: number, n: number): Uint32Array {
    if (count > 0) this.k.mm128BucketBatch(this.pKeys, this.pOffsets, count, 0, n, this.pBuckets);
    return this.bucketOut;
  }

  /** jumpBucket(key, n) (Lamping & Veach jump consistent hash over murmur3_128 h1). */
  jump(count: number, n: number, out: Uint32Array): Uint32Array {
    if (count > 0) {
      this.k.mm128JumpBatch(this.pKeys, this.pOffsets, count, 0, n, this.pBuckets);
      out.set(this.bucketOut.subarray(0, count));
    }
    return out;
  }

  /** murmur3_128 digests (16 B each) for the first `count` packed keys. */
  digests(count: number): Uint8Array {
    if (count > 0) this.k.mm128Batch(this.pKeys, this.pOffsets, count, 0, this.pDigests);
    return this.digestOut;
  }
}

const TWO32 = 4294967296;

/**
 * The compact layout's bucket of each of the first `count` 16-byte digests: digest bytes 8..15
 * as an unsigned 64-bit integer mod `buckets`, the same answer as bucketsOfDigests(d, 'compact')
 * (src/dedup/layout.ts; checked in test/loader-parse.test.ts) without a floating-point remainder
 * per row: a power of two is a mask of the low word (2^32 is a multiple of it); up to 2^21
 * buckets, t = (hi mod n) * (2^32 mod n) + (lo mod n) is below n * (n + 1), so t / n is below
 * n + 1 <= 2^21 + 1, where a double's rounding error (< 2^-31) is far below the 1/n >= 2^-21 by
 * which a non-integer quotient misses an integer: floor(t / n) is exact, and so is the rest.
 */
export function compactBuckets(digests: Uint8Array, count: number, buckets: number, out: Uint32Array): Uint32Array {
  const dv = new DataView(digests.buffer, digests.byteOffset, digests.byteLength);
  const n = buckets;
  if (n <= 2 ** 30 && (n & (n - 1)) === 0) {
    const mask = n - 1;
    for (let i = 0; i < count; i++) out[i] = dv.getInt32((i << 4) + 8, true) & mask;
    return out;
  }
  if (n > 2 ** 21) {
    const b = BigInt(n);
    for (let i = 0; i < count; i++) out[i] = Number(dv.getBigUint64((i << 4) + 8, true) % b);
    return out;
  }
  const m = TWO32 % n;
  for (let i = 0; i < count; i++) {
    const o = (i << 4) + 8;
    const lo = dv.getUint32(o, true);
    const hi = dv.getUint32(o + 4, true);
    const t = (hi % n) * m + (lo % n);
    out[i] = t - Math.floor(t / n) * n;
  }
  return out;
}
