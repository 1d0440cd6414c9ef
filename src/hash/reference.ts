// Plain-JS MurmurHash3 (BigInt for the 64-bit lanes). Deliberately simple and slow: it is the
// oracle the WASM kernel is tested against; nothing in src/ calls it (the kernel is required).
// Follows Austin Appleby's MurmurHash3.cpp; 128-bit output in Guava's asBytes() order.

const M64 = (1n << 64n) - 1n;
const C1_128 = 0x87c37b91114253d5n;
const C2_128 = 0x4cf5ad432745937fn;

const rotl64 = (x: bigint, r: bigint): bigint => ((x << r) | (x >> (64n - r))) & M64;

function fmix64(k: bigint): bigint {
  k ^= k >> 33n;
  k = (k * 0xff51afd7ed558ccdn) & M64;
  k ^= k >> 33n;
  k = (k * 0xc4ceb9fe1a85ec53n) & M64;
  k ^= k >> 33n;
  return k;
}

function u64le(b: Uint8Array, off: number): bigint {
  let v = 0n;
  for (let i = 7; i >= 0; i--) v = (v << 8n) | BigInt(b[off + i]!);
  return v;
}

/**
 * x64_128 lanes. `seed64` is the value both lanes start from: the C++ reference zero-extends a
 * uint32 seed, Guava sign-extends its int seed; callers choose (see murmur3_128 docs).
 */
export function refMurmur3x64_128(data: Uint8Array, seed64: bigint): [bigint, bigint] {
  const len = data.length;
  const nblocks = len >> 4;
  let h1 = seed64 & M64;
  let h2 = seed64 & M64;
  for (let i = 0; i < nblocks; i++) {
    let k1 = u64le(data, i * 16);
    let k2 = u64le(data, i * 16 + 8);
    k1 = (k1 * C1_128) & M64;
    k1 = rotl64(k1, 31n);
    k1 = (k1 * C2_128) & M64;
    h1 ^= k1;
    h1 = rotl64(h1, 27n);
    h1 = (h1 + h2) & M64;
    h1 = (h1 * 5n + 0x52dce729n) & M64;
    k2 = (k2 * C2_128) & M64;
    k2 = rotl64(k2, 33n);
    k2 = (k2 * C1_128) & M64;
    h2 ^= k2;
    h2 = rotl64(h2, 31n);
    h2 = (h2 + h1) & M64;
    h2 = (h2 * 5n + 0x38495ab5n) & M64;
  }
  const tail = nblocks * 16;
  const rem = len & 15;
  let k1 = 0n;
  let k2 = 0n;
  for (let i = rem - 1; i >= 8; i--) k2 |= BigInt(data[tail + i]!) << BigInt((i - 8) * 8);
  if (rem > 8) {
    k2 = (k2 * C2_128) & M64;
    k2 = rotl64(k2, 33n);
    k2 = (k2 * C1_128) & M64;
    h2 ^= k2;
  }
  for (let i = Math.min(rem, 8) - 1; i >= 0; i--) k1 |= BigInt(data[tail + i]!) << BigInt(i * 8);
  if (rem > 0) {
    k1 = (k1 * C1_128) & M64;
    k1 = rotl64(k1, 31n);
    k1 = (k1 * C2_128) & M64;
    h1 ^= k1;
  }
  const blen = BigInt(len);
  h1 ^= blen;
  h2 ^= blen;
  h1 = (h1 + h2) & M64;
  h2 = (h2 + h1) & M64;
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 = (h1 + h2) & M64;
  h2 = (h2 + h1) & M64;
  return [h1, h2];
}

/** 16 bytes: h1 little-endian then h2 little-endian (Guava HashCode.asBytes()). */
export function refMurmur3x64_128Bytes(data: Uint8Array, seed64: bigint): Uint8Array {
  const [h1, h2] = refMurmur3x64_128(data, seed64);
  const out = new Uint8Array(16);
  const dv = new DataView(out.buffer);
  dv.setBigUint64(0, h1, true);
  dv.setBigUint64(8, h2, true);
  return out;
}

const rotl32 = (x: number, r: number): number => (x << r) | (x >>> (32 - r));

export function refMurmur3x86_32(data: Uint8Array, seed: number): number {
  const c1 = 0xcc9e2d51;
  const c2 = 0x1b873593;
  const len = data.length;
  const nblocks = len >> 2;
  let h1 = seed | 0;
  for (let i = 0; i < nblocks; i++) {
    const o = i * 4;
    let k1 = data[o]! | (data[o + 1]! << 8) | (data[o + 2]! << 16) | (data[o + 3]! << 24);
    k1 = Math.imul(k1, c1);
    k1 = rotl32(k1, 15);
    k1 = Math.imul(k1, c2);
    h1 ^= k1;
    h1 = rotl32(h1, 13);
    h1 = (Math.imul(h1, 5) + 0xe6546b64) | 0;
  }
  const tail = nblocks * 4;
  const rem = len & 3;
  let k1 = 0;
  for (let i = rem - 1; i >= 0; i--) k1 |= data[tail + i]! << (i * 8);
  if (rem > 0) {
    k1 = Math.imul(k1, c1);
    k1 = rotl32(k1, 15);
    k1 = Math.imul(k1, c2);
    h1 ^= k1;
  }
  h1 ^= len;
  h1 ^= h1 >>> 16;
  h1 = Math.imul(h1, 0x85ebca6b);
  h1 ^= h1 >>> 13;
  h1 = Math.imul(h1, 0xc2b2ae35);
  h1 ^= h1 >>> 16;
  return h1 >>> 0;
}

/**
 * Guava Hashing.consistentHash(long, int) (Lamping & Veach jump hash with Guava's LCG and double
 * division), BigInt for the 64-bit state. Oracle for the kernel's jump.
 */
export function refJumpConsistentHash(input: bigint, buckets: number): number {
  let state = input & M64;
  let candidate = 0;
  for (;;) {
    state = (2862933555777941757n * state + 1n) & M64;
    const nextDouble = (Number(state >> 33n) + 1) / 0x80000000;
    const next = Math.trunc((candidate + 1) / nextDouble);
    if (next >= 0 && next < buckets) candidate = next;
    else return candidate;
  }
}
