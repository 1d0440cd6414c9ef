// The Guava layout of a Redis-held filter: the Redis string holds hashgate's BloomFilter bits byte
// for byte (Guava's LockFreeBitArray as little-endian longs), so a replica loads GETRANGE chunks
// straight into a BloomFilter's memory and a Guava snapshot of it is writeTo() away. Guava bit i
// sits in byte i >> 3 under mask 1 << (i & 7); Redis SETBIT numbers bits from the top of a byte
// (mask 0x80 >> (j & 7)), so Guava bit i is Redis bit i ^ 7. Indexes are Guava MURMUR128_MITZ_64
// with seed 0, as Guava hashes. No I/O here.
import { hashBatch } from '../hash/index.js';
import { outOfRange } from '../errors.js';
import { probeIndexes } from './indexes.js';
import { bloomShape, MAX_BIT_SIZE, type BloomShape } from './sizing.js';
import { redissonSuffixKey } from './redisson.js';

/** Redis strings stop at 512 MiB and scripts read u32 indexes: 2^32 bits at most. */
export const GUAVA_REDIS_MAX_BITS = Math.min(2 ** 32, MAX_BIT_SIZE);

/**
 * The config hash of a Guava-layout filter. It is not Redisson's `{name}:config`, so Redisson
 * (which would hash keys its own way) finds no config and refuses the filter instead of misreading it.
 */
export function guavaConfigKey(name: string): string {
  return redissonSuffixKey(name, 'hg:guava');
}

/** Guava's sizing for a Redis-held filter (whole 64-bit words), refused past GUAVA_REDIS_MAX_BITS. */
export function guavaRedisShape(expectedItems: number, fpp: number, prefix = 'options'): BloomShape {
  const s = bloomShape({ expectedItems, fpp }, prefix);
  if (s.bitSize > GUAVA_REDIS_MAX_BITS) throw outOfRange(`${prefix}.expectedItems`, `a filter of at most ${GUAVA_REDIS_MAX_BITS} bits in the guava layout`, expectedItems);
  return s;
}

/** Redis bit offsets (u32 little-endian, k per key in key order) of keys[from, from + n). */
export function guavaIndexBlob(keys: ReadonlyArray<string | Uint8Array>, from: number, n: number, k: number, bitSize: number): Buffer {
  const digests = hashBatch(keys.slice(from, from + n) as Array<string | Uint8Array>, { algorithm: 'murmur3_128' });
  const out = Buffer.allocUnsafe(n * k * 4);
  const idx = new Float64Array(k);
  for (let j = 0; j < n; j++) {
    probeIndexes(digests.subarray(j * 16, j * 16 + 16), k, bitSize, idx);
    for (let i = 0; i < k; i++) out.writeUInt32LE((idx[i]! ^ 7) >>> 0, (j * k + i) * 4);
  }
  return out;
}

/** One byte per key: 1 when all its bits are set in `bitmap` (the Redis string; bytes past its end read 0). */
export function guavaContainsAll(keys: ReadonlyArray<string | Uint8Array>, k: number, bitSize: number, bitmap: Uint8Array, chunk = 8192): Uint8Array {
  const out = new Uint8Array(keys.length);
  for (let from = 0; from < keys.length; from += chunk) {
    const n = Math.min(chunk, keys.length - from);
    const blob = guavaIndexBlob(keys, from, n, k, bitSize);
    for (let j = 0; j < n; j++) {
      let ok = 1;
      for (let i = 0; i < k; i++) {
        const ix = blob.readUInt32LE((j * k + i) * 4);
        if (((bitmap[ix >>> 3] ?? 0) & (0x80 >>> (ix & 7))) === 0) {
          ok = 0;
          break;
        }
      }
      out[from + j] = ok;
    }
  }
  return out;
}

/**
 * The slice of each of keys[from, from + n) in a filter of 2^bits slices (bits <= 16): the top
 * `bits` bits of Guava's second hash half (upperEight). Guava's index math masks bit 63 off every
 * step and reduces the rest modulo a slice size far below 2^48, so choosing the slice by these
 * bits leaves the indexes inside a slice as uniform as in a filter of its own.
 */
export function guavaSlices(keys: ReadonlyArray<string | Uint8Array>, from: number, n: number, bits: number, out: Uint16Array): void {
  if (bits === 0) {
    out.fill(0, 0, n);
    return;
  }
  const digests = hashBatch(keys.slice(from, from + n) as Array<string | Uint8Array>, { algorithm: 'murmur3_128' });
  const shift = 16 - bits;
  for (let j = 0; j < n; j++) out[j] = ((digests[j * 16 + 15]! << 8) | digests[j * 16 + 14]!) >>> shift;
}
