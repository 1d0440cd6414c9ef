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
