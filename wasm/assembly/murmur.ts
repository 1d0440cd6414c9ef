// MurmurHash3 (x64_128, x86_32, x86_128) over raw memory. No AS heap: every export takes
// pointers into the imported shared memory, whose layout JS owns (see src/hash/kernel.ts).
// Below RESERVED_BYTES the memory belongs to this module (statics start at --memoryBase 4096).
//
// Packed-key convention shared by every batch export: key i is the bytes
// [bytes + offsets[i], bytes + offsets[i + 1]) where `offsets` is `count + 1` little-endian u32.
//
// 128-bit seeds follow Guava: the 32-bit seed is sign-extended into both 64-bit lanes
// (the C++ reference zero-extends; the two agree for seeds < 2^31).

import { C1, C2, fmix64 } from './murmur-mix';

/** JS must not place anything below this offset: it holds kernel statics and scratch. */
export const RESERVED_BYTES: u32 = 65536;

/** Lanes of the last mm3x64_128 call (h1 = Guava asLong()). Per instance, so per thread. */
export let mmH1: u64 = 0;
export let mmH2: u64 = 0;

// @ts-ignore: decorator
@inline function fmix32(h: u32): u32 {
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  h *= 0xc2b2ae35;
  h ^= h >> 16;
  return h;
}

/** n (0..7) bytes at p as a little-endian u64, never reading past p + n. */
// @ts-ignore: decorator
@inline function loadPartial64(p: usize, n: u32): u64 {
  let v: u64 = 0;
  let s: u64 = 0;
  if (n & 4) {
    v = <u64>load<u32>(p);
    p += 4;
    s = 32;
  }
  if (n & 2) {
    v |= <u64>load<u16>(p) << s;
    p += 2;
    s += 16;
  }
  if (n & 1) v |= <u64>load<u8>(p) << s;
  return v;
}

/** n (0..3) bytes at p as a little-endian u32. */
// @ts-ignore: decorator
@inline function loadPartial32(p: usize, n: u32): u32 {
  let v: u32 = 0;
  if (n & 2) {
    v = <u32>load<u16>(p);
    if (n & 1) v |= <u32>load<u8>(p, 2) << 16;
  } else if (n & 1) {
    v = <u32>load<u8>(p);
  }
  return v;
}

/**
 * MurmurHash3_x64_128 of `len` bytes at `ptr`, starting both lanes at `seed` (pass
 * `<u64><i64><i32>seed32` for Guava semantics). Result in mmH1/mmH2. Stable API: bloom.ts uses it.
 */
// @ts-ignore: decorator
@inline export function mm3x64_128(ptr: usize, len: i32, seed: u64): void {
  let h1 = seed;
  let h2 = seed;
  const n = <usize>(<u32>len);
  const end = ptr + (n & ~(<usize>15));
  let p = ptr;
  while (p < end) {
    let k1 = load<u64>(p);
    let k2 = load<u64>(p, 8);
    k1 *= C1;
    k1 = rotl<u64>(k1, 31);
    k1 *= C2;
    h1 ^= k1;
    h1 = rotl<u64>(h1, 27);
    h1 += h2;
    h1 = h1 * 5 + 0x52dce729;
    k2 *= C2;
    k2 = rotl<u64>(k2, 33);
    k2 *= C1;
    h2 ^= k2;
    h2 = rotl<u64>(h2, 31);
    h2 += h1;
    h2 = h2 * 5 + 0x38495ab5;
    p += 16;
  }
  const rem = <u32>len & 15;
  if (rem != 0) {
    let k1: u64;
    if (rem >= 8) {
      k1 = load<u64>(p);
      if (rem > 8) {
        let k2 = loadPartial64(p + 8, rem - 8);
        k2 *= C2;
        k2 = rotl<u64>(k2, 33);
        k2 *= C1;
        h2 ^= k2;
      }
    } else {
      k1 = loadPartial64(p, rem);
    }
    k1 *= C1;
    k1 = rotl<u64>(k1, 31);
    k1 *= C2;
    h1 ^= k1;
  }
  h1 ^= <u64>n;
  h2 ^= <u64>n;
  h1 += h2;
  h2 += h1;
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 += h2;
  h2 += h1;
  mmH1 = h1;
  mmH2 = h2;
}

/** MurmurHash3_x86_32 (Guava murmur3_32_fixed) of `len` bytes at `ptr`. */
// @ts-ignore: decorator
@inline export function mm3x86_32(ptr: usize, len: i32, seed: u32): u32 {
  const c1: u32 = 0xcc9e2d51;
  const c2: u32 = 0x1b873593;
  let h1 = seed;
  const n = <usize>(<u32>len);
  const end = ptr + (n & ~(<usize>3));
  let p = ptr;
  while (p < end) {
    let k1 = load<u32>(p);
    k1 *= c1;
    k1 = rotl<u32>(k1, 15);
    k1 *= c2;
    h1 ^= k1;
    h1 = rotl<u32>(h1, 13);
    h1 = h1 * 5 + 0xe6546b64;
    p += 4;
  }
  const rem = <u32>len & 3;
  if (rem != 0) {
    let k1 = loadPartial32(p, rem);
    k1 *= c1;
    k1 = rotl<u32>(k1, 15);
    k1 *= c2;
    h1 ^= k1;
  }
  h1 ^= <u32>len;
  return fmix32(h1);
}

/** MurmurHash3_x86_128 of `len` bytes at `ptr`; 16 bytes (h1..h4, each LE) stored at `out`. */
// @ts-ignore: decorator
@inline function mm3x86_128To(ptr: usize, len: i32, seed: u32, out: usize): void {
  const c1: u32 = 0x239b961b;
  const c2: u32 = 0xab0e9789;
  const c3: u32 = 0x38b34ae5;
  const c4: u32 = 0xa1e38b93;
  let h1 = seed;
  let h2 = seed;
  let h3 = seed;
  let h4 = seed;
  const n = <usize>(<u32>len);
  const end = ptr + (n & ~(<usize>15));
  let p = ptr;
  while (p < end) {
    let k1 = load<u32>(p);
    let k2 = load<u32>(p, 4);
    let k3 = load<u32>(p, 8);
    let k4 = load<u32>(p, 12);
    k1 *= c1; k1 = rotl<u32>(k1, 15); k1 *= c2; h1 ^= k1;
    h1 = rotl<u32>(h1, 19); h1 += h2; h1 = h1 * 5 + 0x561ccd1b;
    k2 *= c2; k2 = rotl<u32>(k2, 16); k2 *= c3; h2 ^= k2;
    h2 = rotl<u32>(h2, 17); h2 += h3; h2 = h2 * 5 + 0x0bcaa747;
    k3 *= c3; k3 = rotl<u32>(k3, 17); k3 *= c4; h3 ^= k3;
    h3 = rotl<u32>(h3, 15); h3 += h4; h3 = h3 * 5 + 0x96cd1c35;
    k4 *= c4; k4 = rotl<u32>(k4, 18); k4 *= c1; h4 ^= k4;
    h4 = rotl<u32>(h4, 13); h4 += h1; h4 = h4 * 5 + 0x32ac3b17;
    p += 16;
  }
  const rem = <u32>len & 15;
  if (rem > 12) {
    let k4 = loadPartial32(p + 12, rem - 12);
    k4 *= c4; k4 = rotl<u32>(k4, 18); k4 *= c1; h4 ^= k4;
  }
  if (rem > 8) {
    let k3 = rem >= 12 ? load<u32>(p, 8) : loadPartial32(p + 8, rem - 8);
    k3 *= c3; k3 = rotl<u32>(k3, 17); k3 *= c4; h3 ^= k3;
  }
  if (rem > 4) {
    let k2 = rem >= 8 ? load<u32>(p, 4) : loadPartial32(p + 4, rem - 4);
    k2 *= c2; k2 = rotl<u32>(k2, 16); k2 *= c3; h2 ^= k2;
  }
  if (rem > 0) {
    let k1 = rem >= 4 ? load<u32>(p) : loadPartial32(p, rem);
    k1 *= c1; k1 = rotl<u32>(k1, 15); k1 *= c2; h1 ^= k1;
  }
  const l = <u32>len;
  h1 ^= l; h2 ^= l; h3 ^= l; h4 ^= l;
  h1 += h2; h1 += h3; h1 += h4;
  h2 += h1; h3 += h1; h4 += h1;
  h1 = fmix32(h1); h2 = fmix32(h2); h3 = fmix32(h3); h4 = fmix32(h4);
  h1 += h2; h1 += h3; h1 += h4;
  h2 += h1; h3 += h1; h4 += h1;
  store<u32>(out, h1);
  store<u32>(out, h2, 4);
  store<u32>(out, h3, 8);
  store<u32>(out, h4, 12);
}

// @ts-ignore: decorator
@inline function guavaSeed(seed: u32): u64 {
  return <u64><i64><i32>seed;
}

/**
 * Jump consistent hash (Lamping & Veach) of a 64-bit key, written exactly as Guava's
 * Hashing.consistentHash so results match Java: next = (int)((b + 1) / (((int)(s >>> 33) + 1) / 2^31)).
 */
// @ts-ignore: decorator
@inline function jump(key: u64, buckets: i32): i32 {
  let s = key;
  let b: i32 = 0;
  while (true) {
    s = s * 2862933555777941757 + 1;
    const d = <f64>(<i32>(s >> 33) + 1) / 2147483648.0;
    const next = <f64>(b + 1) / d;
    // Guava casts to int (saturating); anything >= buckets ends the walk.
    if (next >= <f64>buckets) return b;
    b = <i32>next;
  }
}

// ---- single-key exports: 16-byte digests go to `out` (a caller-owned region, so threads
// sharing the memory never race on a common scratch) ----

export function mm128One(ptr: usize, len: i32, seed: u32, out: usize): void {
  mm3x64_128(ptr, len, guavaSeed(seed));
  store<u64>(out, mmH1);
  store<u64>(out, mmH2, 8);
}

/** Zero-extended seed, as the C++ reference does (only differs from Guava for seeds >= 2^31). */
export function mm128OneRef(ptr: usize, len: i32, seed: u32, out: usize): void {
  mm3x64_128(ptr, len, <u64>seed);
  store<u64>(out, mmH1);
  store<u64>(out, mmH2, 8);
}

export function mm32One(ptr: usize, len: i32, seed: u32): u32 {
  return mm3x86_32(ptr, len, seed);
}

export function mm86_128One(ptr: usize, len: i32, seed: u32, out: usize): void {
  mm3x86_128To(ptr, len, seed, out);
}

/** h1 mod buckets (unsigned), i.e. Java Long.remainderUnsigned(asLong(), buckets). */
export function mm128BucketOne(ptr: usize, len: i32, seed: u32, buckets: u32): u32 {
  mm3x64_128(ptr, len, guavaSeed(seed));
  return <u32>(mmH1 % <u64>buckets);
}

export function mm128JumpOne(ptr: usize, len: i32, seed: u32, buckets: i32): i32 {
  mm3x64_128(ptr, len, guavaSeed(seed));
  return jump(mmH1, buckets);
}

// ---- batch exports over packed keys ----

export function mm128Batch(bytes: usize, offsets: usize, count: i32, seed: u32, out: usize): void {
  const s = guavaSeed(seed);
  let start = load<u32>(offsets);
  for (let i = 0; i < count; i++) {
    offsets += 4;
    const end = load<u32>(offsets);
    mm3x64_128(bytes + <usize>start, <i32>(end - start), s);
    store<u64>(out, mmH1);
    store<u64>(out, mmH2, 8);
    out += 16;
    start = end;
  }
}

export function mm32Batch(bytes: usize, offsets: usize, count: i32, seed: u32, out: usize): void {
  let start = load<u32>(offsets);
  for (let i = 0; i < count; i++) {
    offsets += 4;
    const end = load<u32>(offsets);
    store<u32>(out, mm3x86_32(bytes + <usize>start, <i32>(end - start), seed));
    out += 4;
    start = end;
  }
}

export function mm86_128Batch(bytes: usize, offsets: usize, count: i32, seed: u32, out: usize): void {
  let start = load<u32>(offsets);
  for (let i = 0; i < count; i++) {
    offsets += 4;
    const end = load<u32>(offsets);
    mm3x86_128To(bytes + <usize>start, <i32>(end - start), seed, out);
    out += 16;
    start = end;
  }
}

/** u32 per key: unsigned h1 % buckets (buckets >= 1). */
export function mm128BucketBatch(
  bytes: usize, offsets: usize, count: i32, seed: u32, buckets: u32, out: usize,
): void {
  const s = guavaSeed(seed);
  const m = <u64>buckets;
  let start = load<u32>(offsets);
  for (let i = 0; i < count; i++) {
    offsets += 4;
    const end = load<u32>(offsets);
    mm3x64_128(bytes + <usize>start, <i32>(end - start), s);
    store<u32>(out, <u32>(mmH1 % m));
    out += 4;
    start = end;
  }
}

/** i32 per key: jump consistent hash of h1 into [0, buckets). */
export function mm128JumpBatch(
  bytes: usize, offsets: usize, count: i32, seed: u32, buckets: i32, out: usize,
): void {
  const s = guavaSeed(seed);
  let start = load<u32>(offsets);
  for (let i = 0; i < count; i++) {
    offsets += 4;
    const end = load<u32>(offsets);
    mm3x64_128(bytes + <usize>start, <i32>(end - start), s);
    store<i32>(out, jump(mmH1, buckets));
    out += 4;
    start = end;
  }
}
