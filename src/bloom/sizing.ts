// Guava's BloomFilter.create sizing (33.x), reproduced operation for operation so the same
// (n, p) gives the same bit array and k as Java: Guava's readFrom/putAll refuse any other shape.
import { checkNumber, ErrorCodes, HashGateRangeError, invalidType, outOfRange } from '../errors.js';

import { KERNEL_RESERVED_BYTES } from '../hash/kernel.js';

const LOG_TWO = Math.log(2);
const SQUARED_LOG_TWO = LOG_TWO * LOG_TWO;

/** Bloom header after the kernel area: id + per-thread scratch lease table (see attach.ts). */
export const FILTER_HEADER_BYTES = 4096;
/** Byte offset of the bits in a filter's memory. */
export const BITS_OFFSET = KERNEL_RESERVED_BYTES + FILTER_HEADER_BYTES;
/** Room kept at the top of the 4 GiB wasm32 memory for per-thread key scratch regions. */
export const SCRATCH_HEADROOM_BYTES = 64 * 1024 * 1024;
const WASM_MAX_BYTES = 65536 * 65536;

/**
 * Largest bit array a filter can hold: the bits share one wasm32 memory (4 GiB) with the kernel
 * statics, the header and every attached thread's scratch: 33,822,310,400 bits (3.94 GiB).
 */
export const MAX_BIT_SIZE = (WASM_MAX_BYTES - BITS_OFFSET - SCRATCH_HEADROOM_BYTES) * 8;

/** Guava optimalNumOfBits: (long) (-n * Math.log(p) / (Math.log(2) * Math.log(2))). */
export function optimalNumOfBits(n: number, p: number): number {
  if (p === 0) p = Number.MIN_VALUE;
  return Math.trunc((-n * Math.log(p)) / SQUARED_LOG_TWO);
}

/** Guava 33.x optimalNumOfHashFunctions(p): max(1, (int) Math.round(-Math.log(p) / Math.log(2))). */
export function optimalNumOfHashFunctions(p: number): number {
  return Math.max(1, javaRound(-Math.log(p) / LOG_TWO));
}

/** Java Math.round(double): floor(x + 1/2) with ties toward positive infinity. */
function javaRound(x: number): number {
  const f = Math.floor(x);
  return x - f >= 0.5 ? f + 1 : f;
}

export interface BloomShape {
  /** Guava's numBits (before rounding up to whole words). */
  numBits: number;
  /** Bits actually used for indexing: whole 64-bit words, as Guava's LockFreeBitArray. */
  bitSize: number;
  words: number;
  hashFunctions: number;
}

export interface BloomSizeOptions {
  expectedItems: number;
  fpp: number;
}

/** Validates options the way Guava's checkArgument does, naming the option on failure. */
export function bloomShape(options: BloomSizeOptions, prefix = 'options'): BloomShape {
  if (options === null || typeof options !== 'object') throw invalidType(prefix, 'an object', options);
  const n = options.expectedItems;
  const name = `${prefix}.expectedItems`;
  if (typeof n !== 'number' || !Number.isInteger(n)) throw invalidType(name, 'an integer', n);
  if (n < 0 || n > Number.MAX_SAFE_INTEGER) throw outOfRange(name, `in [0, ${Number.MAX_SAFE_INTEGER}]`, n);
  const p = checkNumber(`${prefix}.fpp`, options.fpp, 0, 1, true);
  const numBits = optimalNumOfBits(n === 0 ? 1 : n, p);
  return shapeFor(numBits, optimalNumOfHashFunctions(p), `${prefix}.expectedItems`);
}

export function shapeFor(numBits: number, hashFunctions: number, what = 'bitSize'): BloomShape {
  // Guava: checkArgument(bits > 0) in LockFreeBitArray.
  const words = Math.max(1, Math.ceil(numBits / 64));
  const bitSize = words * 64;
  if (bitSize > MAX_BIT_SIZE) {
    throw new HashGateRangeError(
      ErrorCodes.CAPACITY,
      `${what}: a Bloom filter of ${bitSize} bits (${(bitSize / 8 / 2 ** 30).toFixed(2)} GiB) exceeds ` +
        `the ceiling of ${MAX_BIT_SIZE} bits (${(MAX_BIT_SIZE / 8 / 2 ** 30).toFixed(2)} GiB, one wasm32 memory)`,
      { name: what, bitSize, max: MAX_BIT_SIZE },
    );
  }
  if (!Number.isInteger(hashFunctions) || hashFunctions < 1 || hashFunctions > 255) {
    throw outOfRange('hashFunctions', 'an integer in [1, 255]', hashFunctions);
  }
  return { numBits, bitSize, words, hashFunctions };
}
