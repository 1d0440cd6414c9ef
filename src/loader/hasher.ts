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
