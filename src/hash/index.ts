// Public hashing API, backed by the WebAssembly kernel (wasm/hashgate.wasm) through this thread's
// HashArena. Digests are byte-for-byte Guava / reference-C++ MurmurHash3 of the UTF-8 bytes.
//
// Seeds: every `seed` is a uint32. For the 128-bit hashes it is sign-extended into both 64-bit
// lanes as Guava's `Hashing.murmur3_128(int seed)` does; the C++ reference zero-extends, so the two
// differ for seeds >= 2^31 (murmur3_128Ref gives the C++ behaviour).
//
// Strings are encoded as UTF-8 the WHATWG way: a lone surrogate becomes U+FFFD (EF BF BD), while
// Java's String.getBytes(UTF_8) writes '?' for it. Well-formed strings hash identically.
import { checkInt, checkOneOf, checkUint32, invalidType, outOfRange } from '../errors.js';
import { BatchKind, arena } from './arena.js';
import { checkKeys, type CheckedKeys, type Keys } from './keys.js';

export type { PackedKeys, PackLinesOptions } from './packed.js';
export { packKeys, packLines, packedKey } from './packed.js';
export { CheckedKeys, badKey, checkKeys } from './keys.js';
export type { Key, KeyLimits, Keys } from './keys.js';
export { canonicalJson } from './canonical-json.js';
export type { CanonicalJsonOptions } from './canonical-json.js';
export {
  KERNEL_MAX_PAGES,
  KERNEL_RESERVED_BYTES,
  WASM_PAGE,
  createKernelMemory,
  instantiateKernel,
  kernelModule,
  kernelPath,
} from './kernel.js';
export type { KernelExports } from './kernel.js';
export { HashArena, ARENA_DEFAULTS } from './arena.js';
export type { HashArenaOptions } from './arena.js';

const encoder = new TextEncoder();

export function toBytes(input: string | Uint8Array, name = 'input'): Uint8Array {
  if (typeof input === 'string') return encoder.encode(input);
  if (input instanceof Uint8Array) return input;
  throw invalidType(name, 'a string or Uint8Array', input);
}

/** 16 bytes in Guava HashCode.asBytes() order: h1 little-endian, then h2 little-endian. */
export function murmur3_128(input: string | Uint8Array, seed = 0): Uint8Array {
  checkUint32('seed', seed);
  return arena().murmur128(input, seed);
}

/** Guava `Hashing.murmur3_128(seed).hashString(s, UTF_8).toString()`. */
export function murmur3_128Hex(input: string | Uint8Array, seed = 0): string {
  checkUint32('seed', seed);
  return arena().murmur128Hex(input, seed);
}

/** MurmurHash3_x64_128 with the seed zero-extended, as the C++ reference (and murmurhash-native) do. */
export function murmur3_128Ref(input: string | Uint8Array, seed = 0): Uint8Array {
  checkUint32('seed', seed);
  return arena().murmur128Ref(input, seed);
}

/** Unsigned MurmurHash3_x86_32 (Guava murmur3_32_fixed). */
export function murmur3_32(input: string | Uint8Array, seed = 0): number {
  checkUint32('seed', seed);
  return arena().murmur32(input, seed);
}

/** MurmurHash3_x86_128 (reference C++ layout: h1..h4, each little-endian). Not in Guava. */
export function murmur3_x86_128(input: string | Uint8Array, seed = 0): Uint8Array {
  checkUint32('seed', seed);
  return arena().murmur86_128(input, seed);
}

/** First 8 digest bytes little-endian = Guava HashCode.asLong(), as an unsigned 64-bit value. */
export function murmur3_64(input: string | Uint8Array, seed = 0): bigint {
  checkUint32('seed', seed);
  return arena().murmur64(input, seed);
}

/**
 * XXH64 of the UTF-8 bytes, in the hashgate kernel (the same code hashBatch({ algorithm: 'xxh64' })
 * runs per batch). `seed` is a uint32 number or a uint64 bigint.
 */
export function xxh64(input: string | Uint8Array, seed: number | bigint = 0): bigint {
  if (typeof seed === 'bigint') {
    if (seed < 0n || seed > 0xffff_ffff_ffff_ffffn) throw outOfRange('seed', 'in [0, 2^64-1]', seed);
    return arena().xxh64(input, Number(seed & 0xffff_ffffn), Number(seed >> 32n));
  }
  return arena().xxh64(input, checkUint32('seed', seed), 0);
}

/**
 * Java-compatible bucket: Long.remainderUnsigned(Guava murmur3_128().hashString(key, UTF_8).asLong(), buckets).
 */
export function bucketOf(key: string | Uint8Array, buckets: number): number {
  checkInt('buckets', buckets, 1, 0xffff_ffff);
  return arena().bucket(key, buckets, 0);
}

/**
 * Jump consistent hash (Lamping & Veach) of asLong(), computed exactly as Guava's
 * `Hashing.consistentHash(hashCode, buckets)`: growing buckets n -> n+1 moves ~1/(n+1) of the keys,
 * all of them to the new bucket n.
 */
export function jumpBucket(key: string | Uint8Array, buckets: number): number {
  checkInt('buckets', buckets, 1, 0x7fff_ffff);
  return arena().jump(key, buckets, 0);
}

export type HashAlgorithm = 'murmur3_128' | 'murmur3_32' | 'xxh64';
const ALGORITHMS: readonly HashAlgorithm[] = ['murmur3_128', 'murmur3_32', 'xxh64'];

export interface HashBatchOptions {
  algorithm?: HashAlgorithm;
  seed?: number;
  /**
   * Reuse this buffer for the digests (at least count * digestSize bytes). The result is a view of
   * its first count * digestSize bytes. Saves one allocation per batch on hot loops.
   */
  out?: Uint8Array;
}

export const digestSize = (a: HashAlgorithm): number => (a === 'murmur3_128' ? 16 : a === 'xxh64' ? 8 : 4);

function outBytes(out: unknown, need: number, name: string): Uint8Array {
  if (out === undefined) return new Uint8Array(need);
  if (!(out instanceof Uint8Array)) throw invalidType(name, 'a Uint8Array', out);
  if (out.length < need) throw outOfRange(`${name}.length`, `>= ${need}`, out.length);
  return out.length === need ? out : out.subarray(0, need);
}

/** Digests packed back to back (16 B for murmur3_128, 4 B LE for murmur3_32, 8 B LE for xxh64). */
export function hashBatch(keys: Keys, options: HashBatchOptions = {}): Uint8Array {
  const o = batchOptions(options);
  return hashInto(checkKeys(keys), o.kind, o.seed, o.size, options.out);
}

/** hashBatch of a batch validated already (internal callers: gate, dedup, Bloom). */
export function hashChecked(batch: CheckedKeys, options: HashBatchOptions = {}): Uint8Array {
  const o = batchOptions(options);
  return hashInto(batch, o.kind, o.seed, o.size, options.out);
}

/** murmur3_128 digests (16 B per key) of a validated batch: the internal hot path, no options object. `out`: where they go (exactly 16 B per key). */
export function digests128(batch: CheckedKeys, seed: number, out?: Uint8Array): Uint8Array {
  return hashInto(batch, BatchKind.Murmur128, seed, 16, out);
}

function batchOptions(options: HashBatchOptions): { kind: BatchKind; seed: number; size: number } {
  if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options);
  const algorithm = checkOneOf('options.algorithm', options.algorithm ?? 'murmur3_128', ALGORITHMS);
  const seed = checkUint32('options.seed', options.seed ?? 0);
  const kind = algorithm === 'murmur3_128' ? BatchKind.Murmur128 : algorithm === 'murmur3_32' ? BatchKind.Murmur32 : BatchKind.Xxh64;
  return { kind, seed, size: digestSize(algorithm) };
}

function hashInto(batch: CheckedKeys, kind: BatchKind, seed: number, size: number, out: unknown): Uint8Array {
  const dest = outBytes(out, batch.count * size, 'options.out');
  arena().batch(batch, kind, seed, 0, dest);
  return dest;
}

function outU32(out: unknown, n: number, name: string): Uint32Array {
  if (out === undefined) return new Uint32Array(n);
  if (!(out instanceof Uint32Array)) throw invalidType(name, 'a Uint32Array', out);
  if (out.length < n) throw outOfRange(`${name}.length`, `>= ${n}`, out.length);
  return out.length === n ? out : out.subarray(0, n);
}

/** bucketOf for every key (one kernel pass per chunk): Uint32Array of buckets. */
export function bucketsOf(keys: Keys, buckets: number, out?: Uint32Array): Uint32Array {
  checkInt('buckets', buckets, 1, 0xffff_ffff);
  return bucketsChecked(checkKeys(keys), buckets, out);
}

/** bucketsOf of a batch validated already (`buckets` checked by the caller too). */
export function bucketsChecked(batch: CheckedKeys, buckets: number, out?: Uint32Array): Uint32Array {
  const n = batch.count;
  const res = outU32(out, n, 'out');
  arena().batch(batch, BatchKind.Bucket, 0, buckets, new Uint8Array(res.buffer, res.byteOffset, n * 4));
  return res;
}

/** jumpBucket for every key: Uint32Array of buckets. */
export function jumpBucketsOf(keys: Keys, buckets: number, out?: Uint32Array): Uint32Array {
  checkInt('buckets', buckets, 1, 0x7fff_ffff);
  const batch = checkKeys(keys);
  const n = batch.count;
  const res = outU32(out, n, 'out');
  arena().batch(batch, BatchKind.Jump, 0, buckets, new Uint8Array(res.buffer, res.byteOffset, n * 4));
  return res;
}
