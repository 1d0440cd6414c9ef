// XXH64 over raw memory: hashBatch({ algorithm: 'xxh64' }) runs a whole batch in one call without
// a BigInt per key, and xxh64() hashes one key with xxh64One. Same packed-key convention as
// murmur.ts. Tests hold it equal to @node-rs/xxhash and to the published empty-input value.

const P1: u64 = 11400714785074694791;
const P2: u64 = 14029467366897019727;
const P3: u64 = 1609587929392839161;
const P4: u64 = 9650029242287828579;
const P5: u64 = 2870177450012600261;

// @ts-ignore: decorator
@inline function round(acc: u64, input: u64): u64 {
  acc += input * P2;
  acc = rotl<u64>(acc, 31);
  return acc * P1;
}

// @ts-ignore: decorator
@inline function mergeRound(acc: u64, val: u64): u64 {
  acc ^= round(0, val);
  return acc * P1 + P4;
}

/** XXH64 of `len` bytes at `ptr` with a 64-bit seed. */
// @ts-ignore: decorator
@inline export function xxh64At(ptr: usize, len: i32, seed: u64): u64 {
  const n = <usize>(<u32>len);
  const end = ptr + n;
  let p = ptr;
  let h: u64;
  if (n >= 32) {
    const limit = end - 32;
    let v1 = seed + P1 + P2;
    let v2 = seed + P2;
    let v3 = seed;
    let v4 = seed - P1;
    do {
      v1 = round(v1, load<u64>(p));
      v2 = round(v2, load<u64>(p, 8));
      v3 = round(v3, load<u64>(p, 16));
      v4 = round(v4, load<u64>(p, 24));
      p += 32;
    } while (p <= limit);
    h = rotl<u64>(v1, 1) + rotl<u64>(v2, 7) + rotl<u64>(v3, 12) + rotl<u64>(v4, 18);
    h = mergeRound(h, v1);
    h = mergeRound(h, v2);
    h = mergeRound(h, v3);
    h = mergeRound(h, v4);
  } else {
    h = seed + P5;
  }
  h += <u64>n;
  while (p + 8 <= end) {
    h ^= round(0, load<u64>(p));
    h = rotl<u64>(h, 27) * P1 + P4;
    p += 8;
  }
  if (p + 4 <= end) {
    h ^= <u64>load<u32>(p) * P1;
    h = rotl<u64>(h, 23) * P2 + P3;
    p += 4;
  }
  while (p < end) {
    h ^= <u64>load<u8>(p) * P5;
    h = rotl<u64>(h, 11) * P1;
    p++;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

/** 8 bytes (little-endian u64) per key. The seed arrives as two u32 halves (no BigInt in JS). */
export function xxh64Batch(bytes: usize, offsets: usize, count: i32, seedLo: u32, seedHi: u32, out: usize): void {
  const seed = (<u64>seedHi << 32) | <u64>seedLo;
  let start = load<u32>(offsets);
  for (let i = 0; i < count; i++) {
    offsets += 4;
    const end = load<u32>(offsets);
    store<u64>(out, xxh64At(bytes + <usize>start, <i32>(end - start), seed));
    out += 8;
    start = end;
  }
}

/**
 * XXH64 of one key, returned as i64: JS receives it as one (signed) BigInt, which is cheaper than
 * storing 8 bytes and rebuilding the BigInt from them (measured about 1.5x on shape-A keys).
 */
export function xxh64One(ptr: usize, len: i32, seedLo: u32, seedHi: u32): u64 {
  return xxh64At(ptr, len, (<u64>seedHi << 32) | <u64>seedLo);
}
