// Bloom filter kernels (Guava MURMUR128_MITZ_64 indexing) over bits that live in the imported
// shared memory. JS owns the layout: `bits` is an 8-byte-aligned array of little-endian u64
// words, so bit i is byte i >> 3, bit i & 7 (the same bit Guava's long[] holds at word i >> 6).
//
// Index for probe j: (combined & Long.MAX_VALUE) % bitSize, with combined = h1 + j * h2
// (wrapping u64), exactly as BloomFilterStrategies.MURMUR128_MITZ_64 does.
//
// bitSize arrives as f64 (exact below 2^53; JS caps it far lower) so JS never builds a BigInt
// per call. Seeds are Guava's int seed, sign-extended into both lanes. The *Digests exports take
// murmur3_128 digests the caller already has (16 bytes each: h1 LE, h2 LE), so a key hashed once
// for another purpose is not hashed again here.
import { mm3x64_128, mmH1, mmH2 } from './murmur';
import { GROUP16, groupDigests, hashGroup16, mm3x64_128u16 } from './utf16';

const MAX63: u64 = 0x7fffffffffffffff;

/** Bumped whenever an export's signature or meaning changes; src/bloom/kernel.ts checks it. */
export const BLOOM_ABI: i32 = 5;

/** Set the k bits of the digest (h1, h2); returns how many of them were 0 before. */
// @ts-ignore: decorator
@inline function addHashed(bits: usize, m: u64, k: i32, h1: u64, h2: u64): u32 {
  let c = h1;
  let changed: u32 = 0;
  for (let j = 0; j < k; j++) {
    const idx = (c & MAX63) % m;
    const addr = bits + <usize>((idx >> 6) << 3);
    const mask: u64 = (<u64>1) << (idx & 63);
    // Bits are never cleared while threads share the filter, so a set bit seen by a plain
    // load stays set: skip the (much dearer) atomic RMW for it.
    if ((load<u64>(addr) & mask) == 0) {
      // Only the thread whose OR flipped the bit counts it, so shared bit counts stay exact.
      const old = atomic.or<u64>(addr, mask);
      if ((old & mask) == 0) changed++;
    }
    c += h2;
  }
  return changed;
}

// @ts-ignore: decorator
@inline function checkHashed(bits: usize, m: u64, k: i32, h1: u64, h2: u64): i32 {
  let c = h1;
  for (let j = 0; j < k; j++) {
    const idx = (c & MAX63) % m;
    if ((load<u8>(bits + <usize>(idx >> 3)) & (<u32>1 << <u32>(idx & 7))) == 0) return 0;
    c += h2;
  }
  return 1;
}

// @ts-ignore: decorator
@inline function addKey(bits: usize, m: u64, k: i32, ptr: usize, len: i32, seed: u64): u32 {
  mm3x64_128(ptr, len, seed);
  return addHashed(bits, m, k, mmH1, mmH2);
}

// @ts-ignore: decorator
@inline function addKey16(bits: usize, m: u64, k: i32, ptr: usize, units: u32, seed: u64, tmp: usize): u32 {
  mm3x64_128u16(ptr, units, seed, tmp);
  return addHashed(bits, m, k, mmH1, mmH2);
}

// @ts-ignore: decorator
@inline function checkKey16(bits: usize, m: u64, k: i32, ptr: usize, units: u32, seed: u64, tmp: usize): i32 {
  mm3x64_128u16(ptr, units, seed, tmp);
  return checkHashed(bits, m, k, mmH1, mmH2);
}

// @ts-ignore: decorator
@inline function checkKey(bits: usize, m: u64, k: i32, ptr: usize, len: i32, seed: u64): i32 {
  mm3x64_128(ptr, len, seed);
  return checkHashed(bits, m, k, mmH1, mmH2);
}

/** Returns how many bits this call set (0 = the key changed nothing). */
export function bloomAddOne(bits: usize, bitSize: f64, k: i32, seed: i32, ptr: usize, len: i32): i32 {
  return <i32>addKey(bits, <u64>bitSize, k, ptr, len, <u64><i64>seed);
}

export function bloomCheckOne(bits: usize, bitSize: f64, k: i32, seed: i32, ptr: usize, len: i32): i32 {
  return checkKey(bits, <u64>bitSize, k, ptr, len, <u64><i64>seed);
}

/** Bits set by the last addPacked call (a wasm global: private to each thread's instance). */
let packedBitsSet: u32 = 0;

/**
 * Adds packed keys in order; returns how many changed at least one bit and leaves the bits set in
 * packedBitsSet. With `flags` != 0 (never a real output: address 0 is kernel statics) it also
 * writes 1 or 0 per key there. Inlined, so the flag-less caller carries no per-key branch.
 */
// @ts-ignore: decorator
@inline function addPacked(
  bits: usize, bitSize: f64, k: i32, seed: i32, bytes: usize, offsets: usize, count: i32, flags: usize,
): i32 {
  const m = <u64>bitSize;
  const s = <u64><i64>seed;
  let changed = 0;
  let set: u32 = 0;
  let start = load<u32>(offsets);
  for (let i = 0; i < count; i++) {
    offsets += 4;
    const end = load<u32>(offsets);
    const n = addKey(bits, m, k, bytes + <usize>start, <i32>(end - start), s);
    set += n;
    const c = n != 0 ? 1 : 0;
    changed += c;
    if (flags != 0) store<u8>(flags + <usize>i, <u8>c);
    start = end;
  }
  packedBitsSet = set;
  return changed;
}

/**
 * Packed keys (offsets: count + 1 LE u32). Returns how many keys changed at least one bit and
 * stores the number of bits set by this call as a u32 at `bitsSetOut`.
 */
export function bloomAddBatch(
  bits: usize, bitSize: f64, k: i32, seed: i32, bytes: usize, offsets: usize, count: i32, bitsSetOut: usize,
): i32 {
  const changed = addPacked(bits, bitSize, k, seed, bytes, offsets, count, 0);
  store<u32>(bitsSetOut, packedBitsSet);
  return changed;
}

/**
 * bloomAddBatch that also says which keys changed: writes 1 (the key set at least one bit) or 0
 * per key to `flags`, and returns the number of bits this call set. Keys are added in order, so
 * a key's flag is exactly "was not yet contained" after every earlier key of the call: merged
 * callers get the counts they would get running one after another.
 */
export function bloomAddFlags(
  bits: usize, bitSize: f64, k: i32, seed: i32, bytes: usize, offsets: usize, count: i32, flags: usize,
): i32 {
  addPacked(bits, bitSize, k, seed, bytes, offsets, count, flags);
  return <i32>packedBitsSet;
}

/** Writes 1 (might contain) or 0 per key to `out`; returns how many were 1. */
export function bloomCheckBatch(
  bits: usize, bitSize: f64, k: i32, seed: i32, bytes: usize, offsets: usize, count: i32, out: usize,
): i32 {
  const m = <u64>bitSize;
  const s = <u64><i64>seed;
  let hits = 0;
  let start = load<u32>(offsets);
  for (let i = 0; i < count; i++) {
    offsets += 4;
    const end = load<u32>(offsets);
    const r = checkKey(bits, m, k, bytes + <usize>start, <i32>(end - start), s);
    store<u8>(out + <usize>i, <u8>r);
    hits += r;
    start = end;
  }
  return hits;
}

/**
 * `count` digests of 16 bytes at `digests` (h1 LE, h2 LE: murmur3_128 with the filter's seed).
 * Returns how many keys changed at least one bit; the number of bits set goes to `bitsSetOut`.
 */
export function bloomAddDigests(bits: usize, bitSize: f64, k: i32, digests: usize, count: i32, bitsSetOut: usize): i32 {
  const m = <u64>bitSize;
  let changed = 0;
  let set: u32 = 0;
  for (let i = 0; i < count; i++) {
    const n = addHashed(bits, m, k, load<u64>(digests), load<u64>(digests, 8));
    set += n;
    changed += n != 0 ? 1 : 0;
    digests += 16;
  }
  store<u32>(bitsSetOut, set);
  return changed;
}

/** Writes 1 (might contain) or 0 per digest to `out`; returns how many were 1. */
export function bloomCheckDigests(bits: usize, bitSize: f64, k: i32, digests: usize, count: i32, out: usize): i32 {
  const m = <u64>bitSize;
  let hits = 0;
  for (let i = 0; i < count; i++) {
    const r = checkHashed(bits, m, k, load<u64>(digests), load<u64>(digests, 8));
    store<u8>(out + <usize>i, <u8>r);
    hits += r;
    digests += 16;
  }
  return hits;
}

/** Set bits in `words` u64 words at `ptr` (8-byte aligned). f64: the count can exceed 2^32. */
export function bloomPopcount(ptr: usize, words: u32): f64 {
  let n: u64 = 0;
  const end = ptr + (<usize>words << 3);
  while (ptr < end) {
    n += popcnt<u64>(load<u64>(ptr));
    ptr += 8;
  }
  return <f64>n;
}

// ---- UTF-16 keys (a JS string's code units; see utf16.ts): the same bits and answers as the
// UTF-8 exports above given TextEncoder's bytes of the same strings. `units` + 2 * offsets[i]
// is key i's first code unit; offsets count + 1 LE u32, in code units. `tmp`: UTF16_TMP_BYTES
// of the calling thread's own (the kernel transcodes short keys there).

export function bloomAddOne16(bits: usize, bitSize: f64, k: i32, seed: i32, ptr: usize, units: u32, tmp: usize): i32 {
  return <i32>addKey16(bits, <u64>bitSize, k, ptr, units, <u64><i64>seed, tmp);
}

export function bloomCheckOne16(bits: usize, bitSize: f64, k: i32, seed: i32, ptr: usize, units: u32, tmp: usize): i32 {
  return checkKey16(bits, <u64>bitSize, k, ptr, units, <u64><i64>seed, tmp);
}

/** addPacked over UTF-16 keys (flags as there: 0 = none), hashed a group at a time. */
// @ts-ignore: decorator
@inline function addPacked16(
  bits: usize, bitSize: f64, k: i32, seed: i32, units: usize, offsets: usize, count: i32, flags: usize, tmp: usize,
): i32 {
  const m = <u64>bitSize;
  const s = <u64><i64>seed;
  const dig = groupDigests(tmp);
  let changed = 0;
  let set: u32 = 0;
  for (let i = 0; i < count; ) {
    const g = hashGroup16(units, offsets, count - i, s, tmp, dig);
    let d = dig;
    for (let j = 0; j < g; j++) {
      const n = addHashed(bits, m, k, load<u64>(d), load<u64>(d, 8));
      set += n;
      const c = n != 0 ? 1 : 0;
      changed += c;
      if (flags != 0) store<u8>(flags + <usize>(i + j), <u8>c);
      d += 16;
    }
    offsets += <usize>g << 2;
    i += g;
  }
  packedBitsSet = set;
  return changed;
}

/** bloomAddBatch over UTF-16 keys. */
export function bloomAddBatch16(
  bits: usize, bitSize: f64, k: i32, seed: i32, units: usize, offsets: usize, count: i32, bitsSetOut: usize, tmp: usize,
): i32 {
  const changed = addPacked16(bits, bitSize, k, seed, units, offsets, count, 0, tmp);
  store<u32>(bitsSetOut, packedBitsSet);
  return changed;
}

/** bloomAddFlags over UTF-16 keys. */
export function bloomAddFlags16(
  bits: usize, bitSize: f64, k: i32, seed: i32, units: usize, offsets: usize, count: i32, flags: usize, tmp: usize,
): i32 {
  addPacked16(bits, bitSize, k, seed, units, offsets, count, flags, tmp);
  return <i32>packedBitsSet;
}

/**
 * bloomCheckBatch over UTF-16 keys, a group at a time: the group is hashed first, then probed
 * round by round. Round j tests probe j of every key still possibly present and keeps those
 * whose bit is set (a branch-free append to a list), so the loads of one round are independent
 * of each other and many cache misses overlap, where a per-key early-exit loop waits on each
 * key's misses and mispredicts its exit. Answers are those of checkHashed.
 */
export function bloomCheckBatch16(
  bits: usize, bitSize: f64, k: i32, seed: i32, units: usize, offsets: usize, count: i32, out: usize, tmp: usize,
): i32 {
  const m = <u64>bitSize;
  const s = <u64><i64>seed;
  const dig = groupDigests(tmp);
  // two lists of group indexes (u8: GROUP16 <= 256), after the digests
  const listA = dig + (<usize>GROUP16 << 4);
  const listB = listA + <usize>GROUP16;
  let hits = 0;
  for (let i = 0; i < count; ) {
    const g = hashGroup16(units, offsets, count - i, s, tmp, dig);
    for (let j = 0; j < g; j++) store<u8>(listA + <usize>j, <u8>j);
    let from = listA;
    let to = listB;
    let alive = g;
    for (let r = 0; r < k && alive > 0; r++) {
      let n = 0;
      for (let t = 0; t < alive; t++) {
        const j = <usize>load<u8>(from + <usize>t);
        const d = dig + (j << 4);
        const c = load<u64>(d);
        const idx = (c & MAX63) % m;
        const bit = (<u32>load<u8>(bits + <usize>(idx >> 3)) >> <u32>(idx & 7)) & 1;
        store<u64>(d, c + load<u64>(d, 8));
        store<u8>(to + <usize>n, <u8>j);
        n += <i32>bit;
      }
      alive = n;
      const x = from;
      from = to;
      to = x;
    }
    const o = out + <usize>i;
    for (let j = 0; j < g; j++) store<u8>(o + <usize>j, 0);
    for (let t = 0; t < alive; t++) store<u8>(o + <usize>load<u8>(from + <usize>t), 1);
    hits += alive;
    offsets += <usize>g << 2;
    i += g;
  }
  return hits;
}
