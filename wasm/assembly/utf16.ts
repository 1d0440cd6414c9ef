// MurmurHash3 x64_128 of a JS string's UTF-8 bytes, read from its UTF-16 code units. JS copies a
// string's code units into memory far cheaper than it encodes UTF-8 (no native call per key for
// short keys), so the kernel transcodes as part of hashing. The bytes hashed are exactly the
// UTF-8 bytes TextEncoder writes (a lone surrogate is U+FFFD, EF BF BD), so every digest equals
// mm3x64_128 over TextEncoder's output: Guava's, for well-formed text.
//
// Two routes, same digest: a key of at most TMP16_UNITS code units is transcoded into the
// caller's `tmp` region (UTF16_TMP_BYTES, private to the calling thread: memory is shared) and
// hashed there by the byte kernel: fewer unpredictable branches than streaming, measured faster
// on short keys. A longer key streams its UTF-8 bytes through a 64-bit accumulator into Murmur
// blocks, using no memory. (Transcoding a whole group of keys before hashing any was slower.)
//
// Packed UTF-16 convention of the *16 batch exports: key i is the code units
// [units + 2 * offsets[i], units + 2 * offsets[i + 1]) with `offsets` count + 1 LE u32 (in units).
import { mm3x64_128, mmH1, mmH2 } from './murmur';
import { C1, C2, fmix64 } from './murmur-mix';

/** Keys of at most this many code units are transcoded into `tmp`; longer ones stream. */
export const TMP16_UNITS: u32 = 1024;
/** Keys hashed per group (see hashGroup16). */
export const GROUP16: i32 = 64;
/** One key's UTF-8 (3 bytes per unit at most, plus slack for whole-word stores). */
const TEXT_BYTES: u32 = 3 * TMP16_UNITS + 16;
/** Then the digests of one group. */
const DIGESTS_AT: u32 = TEXT_BYTES;
/**
 * Bytes the `tmp` argument must provide (private to the calling thread: memory is shared): one
 * key's UTF-8, then a group's digests and two index lists (bloomCheckBatch16).
 */
export const UTF16_TMP_BYTES: u32 = DIGESTS_AT + <u32>GROUP16 * 16 + 2 * <u32>GROUP16;

/** Four code units all below 0x80: one load answers it. */
const NON_ASCII4: u64 = 0xff80ff80ff80ff80;

/**
 * UTF-8 (TextEncoder's) of `units` code units at `src` to `dst`; returns the byte count. Writes
 * up to 3 bytes past it (whole-word stores). ASCII runs go 8 or 4 units a step.
 */
// @ts-ignore: decorator
@inline function transcode(src: usize, units: u32, dst: usize): u32 {
  let p = src;
  let q = dst;
  const end = src + (<usize>units << 1);
  while (p < end) {
    const c = <u32>load<u16>(p);
    if (c < 0x80) {
      // In an ASCII run: take it 8 or 4 units a step while it lasts.
      if (p + 16 <= end) {
        const v = v128.load(p);
        if (!v128.any_true(v128.and(v, i16x8.splat(<i16>0xff80)))) {
          store<u64>(q, i64x2.extract_lane(i8x16.narrow_i16x8_u(v, v), 0));
          p += 16;
          q += 8;
          continue;
        }
      }
      if (p + 8 <= end) {
        const w = load<u64>(p);
        if ((w & NON_ASCII4) == 0) {
          store<u32>(q, <u32>((w & 0xff) | ((w >> 8) & 0xff00) | ((w >> 16) & 0xff0000) | ((w >> 24) & 0xff000000)));
          p += 8;
          q += 4;
          continue;
        }
      }
      store<u8>(q, <u8>c);
      p += 2;
      q += 1;
      continue;
    }
    p += 2;
    if (c < 0x800) {
      store<u16>(q, <u16>((0xc0 | (c >> 6)) | ((0x80 | (c & 63)) << 8)));
      q += 2;
    } else if ((c & 0xf800) != 0xd800) {
      store<u32>(q, (0xe0 | (c >> 12)) | ((0x80 | ((c >> 6) & 63)) << 8) | ((0x80 | (c & 63)) << 16));
      q += 3;
    } else {
      const d = p < end ? <u32>load<u16>(p) : 0;
      if (c < 0xdc00 && (d & 0xfc00) == 0xdc00) {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        p += 2;
        store<u32>(q, (0xf0 | (cp >> 18)) | ((0x80 | ((cp >> 12) & 63)) << 8) | ((0x80 | ((cp >> 6) & 63)) << 16) | ((0x80 | (cp & 63)) << 24));
        q += 4;
      } else {
        // lone surrogate: U+FFFD, as TextEncoder
        store<u32>(q, 0xbdbfef);
        q += 3;
      }
    }
  }
  return <u32>(q - dst);
}

/**
 * MurmurHash3_x64_128 of the UTF-8 encoding of `units` UTF-16 code units at `ptr` (little-endian),
 * both lanes starting at `seed`; `tmp` holds UTF16_TMP_BYTES. Result in mmH1/mmH2, as
 * mm3x64_128 leaves it. One key: batches go through hashGroup16.
 */
// @ts-ignore: decorator
@inline export function mm3x64_128u16(ptr: usize, units: u32, seed: u64, tmp: usize): void {
  if (units <= TMP16_UNITS) mm3x64_128(tmp, <i32>transcode(ptr, units, tmp), seed);
  else mm3x64_128u16Stream(ptr, units, seed);
}

/**
 * Digests (16 bytes: h1, h2 LE) of the next keys of a packed UTF-16 batch: `offsets` points at
 * the first key's start offset, `count` keys are left. Hashes up to GROUP16 of them to `dig` and
 * returns how many. `tmp`: UTF16_TMP_BYTES.
 */
// @ts-ignore: decorator
@inline export function hashGroup16(units: usize, offsets: usize, count: i32, seed: u64, tmp: usize, dig: usize): i32 {
  const g = min(GROUP16, count);
  let start = load<u32>(offsets);
  for (let i = 0; i < g; i++) {
    offsets += 4;
    const end = load<u32>(offsets);
    mm3x64_128u16(units + (<usize>start << 1), end - start, seed, tmp);
    store<u64>(dig, mmH1);
    store<u64>(dig, mmH2, 8);
    dig += 16;
    start = end;
  }
  return g;
}

/** Where hashGroup16's callers keep a group's digests inside `tmp`. */
// @ts-ignore: decorator
@inline export function groupDigests(tmp: usize): usize {
  return tmp + <usize>DIGESTS_AT;
}

/** The streaming route of mm3x64_128u16 (any length, no memory). */
function mm3x64_128u16Stream(ptr: usize, units: u32, seed: u64): void {
  let h1 = seed;
  let h2 = seed;
  // Pending UTF-8 bytes: `acc` holds `nb` bits (a multiple of 8, < 64), low byte first. A full
  // word goes to k1, or with k1 to one block.
  let acc: u64 = 0;
  let nb: u64 = 0;
  let k1: u64 = 0;
  let half = false;
  let bits: u64 = 0;
  let p = ptr;
  const end = ptr + (<usize>units << 1);
  while (p < end) {
    let v: u64;
    let n: u64;
    const w = p + 8 <= end ? load<u64>(p) : NON_ASCII4;
    if ((w & NON_ASCII4) == 0) {
      // four ASCII units: their low bytes, in order
      v = (w & 0xff) | ((w >> 8) & 0xff00) | ((w >> 16) & 0xff0000) | ((w >> 24) & 0xff000000);
      n = 32;
      p += 8;
    } else {
      const c = <u32>load<u16>(p);
      p += 2;
      if (c < 0x80) {
        v = <u64>c;
        n = 8;
      } else if (c < 0x800) {
        v = <u64>((0xc0 | (c >> 6)) | ((0x80 | (c & 63)) << 8));
        n = 16;
      } else if ((c & 0xf800) != 0xd800) {
        v = <u64>((0xe0 | (c >> 12)) | ((0x80 | ((c >> 6) & 63)) << 8) | ((0x80 | (c & 63)) << 16));
        n = 24;
      } else {
        const d = p < end ? <u32>load<u16>(p) : 0;
        if (c < 0xdc00 && (d & 0xfc00) == 0xdc00) {
          const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          p += 2;
          v = <u64>((0xf0 | (cp >> 18)) | ((0x80 | ((cp >> 12) & 63)) << 8) | ((0x80 | ((cp >> 6) & 63)) << 16) | ((0x80 | (cp & 63)) << 24));
          n = 32;
        } else {
          // lone surrogate: U+FFFD, as TextEncoder
          v = 0xbdbfef;
          n = 24;
        }
      }
    }
    bits += n;
    acc |= v << nb;
    nb += n;
    if (nb >= 64) {
      // acc is a full word; the bits of v that did not fit start the next one (nb was > 0, so
      // the shift is 1..63).
      nb -= 64;
      if (half) {
        let a = k1 * C1;
        a = rotl<u64>(a, 31);
        a *= C2;
        h1 ^= a;
        h1 = rotl<u64>(h1, 27);
        h1 += h2;
        h1 = h1 * 5 + 0x52dce729;
        let b = acc * C2;
        b = rotl<u64>(b, 33);
        b *= C1;
        h2 ^= b;
        h2 = rotl<u64>(h2, 31);
        h2 += h1;
        h2 = h2 * 5 + 0x38495ab5;
        half = false;
      } else {
        k1 = acc;
        half = true;
      }
      acc = v >> (n - nb);
    }
  }
  // Tail: fewer than 16 bytes left, the pending word (if any) first, zero-padded little-endian.
  let t1: u64 = 0;
  let t2: u64 = 0;
  let tail = false;
  if (half) {
    t1 = k1;
    tail = true;
    if (nb != 0) {
      t2 = acc * C2;
      t2 = rotl<u64>(t2, 33);
      t2 *= C1;
      h2 ^= t2;
    }
  } else if (nb != 0) {
    t1 = acc;
    tail = true;
  }
  if (tail) {
    t1 *= C1;
    t1 = rotl<u64>(t1, 31);
    t1 *= C2;
    h1 ^= t1;
  }
  const len = bits >> 3;
  h1 ^= len;
  h2 ^= len;
  h1 += h2;
  h2 += h1;
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 += h2;
  h2 += h1;
  mmH1 = h1;
  mmH2 = h2;
}

/** UTF-8 byte length of `units` code units at `ptr` (TextEncoder's: a lone surrogate is 3). */
export function utf8Length16(ptr: usize, units: u32): u32 {
  let n: u32 = 0;
  const end = ptr + (<usize>units << 1);
  let p = ptr;
  while (p < end) {
    const c = <u32>load<u16>(p);
    p += 2;
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c < 0xd800 || c >= 0xdc00 || p >= end || (<u32>load<u16>(p) & 0xfc00) != 0xdc00) n += 3;
    else {
      n += 4;
      p += 2;
    }
  }
  return n;
}

/** mm128One over UTF-16 code units (Guava seed semantics): 16 digest bytes to `out`. */
export function mm128One16(ptr: usize, units: u32, seed: u32, out: usize, tmp: usize): void {
  mm3x64_128u16(ptr, units, <u64><i64><i32>seed, tmp);
  store<u64>(out, mmH1);
  store<u64>(out, mmH2, 8);
}

/** mm128Batch over packed UTF-16 keys (offsets in code units): 16 bytes per key to `out`. */
export function mm128Batch16(units: usize, offsets: usize, count: i32, seed: u32, out: usize, tmp: usize): void {
  const s = <u64><i64><i32>seed;
  for (let i = 0; i < count; ) {
    const g = hashGroup16(units, offsets, count - i, s, tmp, out);
    offsets += <usize>g << 2;
    out += <usize>g << 4;
    i += g;
  }
}

/** UTF-8 (TextEncoder's) of `units` code units at `src` to `dst`; returns the byte count. */
export function utf16ToUtf8(src: usize, units: u32, dst: usize): u32 {
  return transcode(src, units, dst);
}
