// Public hashing API. TEMPORARY: backed by the plain-JS reference until the WASM kernel lands
// (issue 2); signatures here are the contract other modules build on.
import { checkUint32, checkInt, invalidType } from '../errors.js';
import { refMurmur3x64_128Bytes, refMurmur3x86_32 } from './reference.js';

const encoder = new TextEncoder();

export function toBytes(input: string | Uint8Array, name = 'input'): Uint8Array {
  if (typeof input === 'string') return encoder.encode(input);
  if (input instanceof Uint8Array) return input;
  throw invalidType(name, 'a string or Uint8Array', input);
}

/** Guava sign-extends its int seed into both 64-bit lanes; we match Guava byte for byte. */
const seed64 = (seed: number): bigint => BigInt.asUintN(64, BigInt(seed | 0));

export function murmur3_128(input: string | Uint8Array, seed = 0): Uint8Array {
  checkUint32('seed', seed);
  return refMurmur3x64_128Bytes(toBytes(input), seed64(seed));
}

export function murmur3_128Hex(input: string | Uint8Array, seed = 0): string {
  return Buffer.from(murmur3_128(input, seed)).toString('hex');
}

export function murmur3_32(input: string | Uint8Array, seed = 0): number {
  checkUint32('seed', seed);
  return refMurmur3x86_32(toBytes(input), seed);
}

/** First 8 digest bytes little-endian = Guava HashCode.asLong(), as an unsigned 64-bit value. */
export function murmur3_64(input: string | Uint8Array, seed = 0): bigint {
  const d = murmur3_128(input, seed);
  return new DataView(d.buffer, d.byteOffset, 16).getBigUint64(0, true);
}

export function bucketOf(key: string | Uint8Array, buckets: number): number {
  checkInt('buckets', buckets, 1, 0xffff_ffff);
  return Number(murmur3_64(key) % BigInt(buckets));
}

export function jumpBucket(key: string | Uint8Array, buckets: number): number {
  checkInt('buckets', buckets, 1, 0x7fff_ffff);
  let k = murmur3_64(key);
  let b = -1n;
  let j = 0n;
  const n = BigInt(buckets);
  while (j < n) {
    b = j;
    k = BigInt.asUintN(64, k * 2862933555777941757n + 1n);
    j = BigInt(Math.floor(Number(b + 1n) * (2 ** 31 / Number((k >> 33n) + 1n))));
  }
  return Number(b);
}

/**
 * Keys already in bytes: `bytes[offsets[i] .. offsets[i+1])` is key i, so `offsets` has count+1
 * entries. Lets file loaders hand lines to the kernel without creating JS strings.
 */
export interface PackedKeys {
  bytes: Uint8Array;
  offsets: Uint32Array;
  count: number;
}

export type HashAlgorithm = 'murmur3_128' | 'murmur3_32' | 'xxh64';

export interface HashBatchOptions {
  algorithm?: HashAlgorithm;
  seed?: number;
}

export const digestSize = (a: HashAlgorithm): number => (a === 'murmur3_128' ? 16 : a === 'xxh64' ? 8 : 4);

/** Digests packed back to back (16 B for murmur3_128, 4 B LE for murmur3_32, 8 B LE for xxh64). */
export function hashBatch(
  keys: ReadonlyArray<string | Uint8Array> | PackedKeys,
  options: HashBatchOptions = {},
): Uint8Array {
  const algorithm = options.algorithm ?? 'murmur3_128';
  const seed = options.seed ?? 0;
  if (algorithm === 'xxh64') throw new Error('xxh64 not yet implemented');
  const n = Array.isArray(keys) ? keys.length : (keys as PackedKeys).count;
  const size = digestSize(algorithm);
  const out = new Uint8Array(n * size);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < n; i++) {
    const k = Array.isArray(keys)
      ? (keys[i] as string | Uint8Array)
      : (keys as PackedKeys).bytes.subarray((keys as PackedKeys).offsets[i], (keys as PackedKeys).offsets[i + 1]);
    if (algorithm === 'murmur3_128') out.set(murmur3_128(k, seed), i * 16);
    else dv.setUint32(i * 4, murmur3_32(k, seed), true);
  }
  return out;
}
