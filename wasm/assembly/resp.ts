// RESP of the compact layout's one-member SADDs, built in the kernel: a firstSeen batch sends one
// `SADD <sub-bucket key> <member>` per key, and writing those ~70 bytes a key byte by byte in JS
// (decimal digits of the table, sub-bucket, depth and the signed 64-bit member) was the largest
// single item of the batch path's Node CPU. Measured on 2,500-key chunks: 160 ns a key in JS, about
// 50 through this kernel (the four words per key written in JS and the copy out included).
//
// Input: `count` records of 16 bytes at `inp`: the member (digest bytes 0..7, a little-endian
// i64), the table t (u32) and the table's sub-bucket count n (u32). Output at `out`, per record:
//   *3 CRLF $4 CRLF SADD CRLF $<klen> CRLF <head><t>}<s>.<d> CRLF $<mlen> CRLF <member> CRLF
// with s, d the member's sub-bucket and depth by the placement rule of src/dedup/growth.ts
// (s = d = 0 when n <= 1) and the member in canonical signed decimal. `head` (`${base}:c{`) is
// `headLen` bytes at `head`. Returns the bytes written: at most count * (headLen + 80).

/** "00".."99". */
const PAIRS = memory.data<u8>([
  48, 48, 48, 49, 48, 50, 48, 51, 48, 52, 48, 53, 48, 54, 48, 55, 48, 56, 48, 57,
  49, 48, 49, 49, 49, 50, 49, 51, 49, 52, 49, 53, 49, 54, 49, 55, 49, 56, 49, 57,
  50, 48, 50, 49, 50, 50, 50, 51, 50, 52, 50, 53, 50, 54, 50, 55, 50, 56, 50, 57,
  51, 48, 51, 49, 51, 50, 51, 51, 51, 52, 51, 53, 51, 54, 51, 55, 51, 56, 51, 57,
  52, 48, 52, 49, 52, 50, 52, 51, 52, 52, 52, 53, 52, 54, 52, 55, 52, 56, 52, 57,
  53, 48, 53, 49, 53, 50, 53, 51, 53, 52, 53, 53, 53, 54, 53, 55, 53, 56, 53, 57,
  54, 48, 54, 49, 54, 50, 54, 51, 54, 52, 54, 53, 54, 54, 54, 55, 54, 56, 54, 57,
  55, 48, 55, 49, 55, 50, 55, 51, 55, 52, 55, 53, 55, 54, 55, 55, 55, 56, 55, 57,
  56, 48, 56, 49, 56, 50, 56, 51, 56, 52, 56, 53, 56, 54, 56, 55, 56, 56, 56, 57,
  57, 48, 57, 49, 57, 50, 57, 51, 57, 52, 57, 53, 57, 54, 57, 55, 57, 56, 57, 57,
]);

// @ts-ignore: decorator
@inline function digits32(v: u32): u32 {
  if (v < 10) return 1;
  if (v < 100) return 2;
  if (v < 1000) return 3;
  if (v < 10000) return 4;
  if (v < 100000) return 5;
  if (v < 1000000) return 6;
  if (v < 10000000) return 7;
  if (v < 100000000) return 8;
  if (v < 1000000000) return 9;
  return 10;
}

/** Writes exactly `len` decimal digits of v (leading zeros) ending before `end`. */
// @ts-ignore: decorator
@inline function fixed(end: usize, v: u32, len: u32): void {
  while (len >= 2) {
    const q = v / 100;
    store<u16>(end - 2, load<u16>(PAIRS + ((v - q * 100) << 1)));
    end -= 2;
    v = q;
    len -= 2;
  }
  if (len == 1) store<u8>(end - 1, <u8>(48 + v));
}

/** v's decimal digits at p; returns the position after them. */
// @ts-ignore: decorator
@inline function putU32(p: usize, v: u32): usize {
  const n = digits32(v);
  fixed(p + n, v, n);
  return p + n;
}

/** Bit reversal of a 20-bit value. */
// @ts-ignore: decorator
@inline function rev20(x: u32): u32 {
  x = ((x >>> 1) & 0x55555555) | ((x & 0x55555555) << 1);
  x = ((x >>> 2) & 0x33333333) | ((x & 0x33333333) << 2);
  x = ((x >>> 4) & 0x0f0f0f0f) | ((x & 0x0f0f0f0f) << 4);
  x = ((x >>> 8) & 0x00ff00ff) | ((x & 0x00ff00ff) << 8);
  x = (x >>> 16) | (x << 16);
  return x >>> 12;
}

export function saddCompactBatch(inp: usize, count: u32, head: usize, headLen: u32, out: usize): u32 {
  let p = out;
  for (let i: u32 = 0; i < count; i++) {
    const r = inp + (<usize>i << 4);
    const m = load<i64>(r);
    const t = load<u32>(r, 8);
    const n = load<u32>(r, 12);
    // sub-bucket and depth (linear hashing over the address: the top 20 bits of the member as
    // an unsigned value, reversed)
    let s: u32 = 0;
    let d: u32 = 0;
    if (n > 1) {
      const a = rev20((<u32>(<u64>m >>> 32) ^ 0x80000000) >>> 12);
      const lg: u32 = 31 - clz<u32>(n);
      const l2: u32 = 1 << lg;
      s = a & (2 * l2 - 1);
      if (s >= n) s = a & (l2 - 1);
      d = s < n - l2 || s >= l2 ? lg + 1 : lg;
    }
    // the member's magnitude as hi * 1e16 + mid * 1e8 + lo
    const neg = m < 0;
    const u: u64 = neg ? <u64>(0 - m) : <u64>m;
    const hi = <u32>(u / 10000000000000000);
    const rest = u % 10000000000000000;
    const mid = <u32>(rest / 100000000);
    const lo = <u32>(rest % 100000000);
    const mlen: u32 = (neg ? 1 : 0) + (hi > 0 ? digits32(hi) + 16 : mid > 0 ? digits32(mid) + 8 : digits32(lo));
    const klen: u32 = headLen + digits32(t) + 1 + digits32(s) + 1 + digits32(d);
    // *3\r\n$4\r\nSADD\r\n$
    store<u64>(p, 0x0a0d34240a0d332a);
    store<u32>(p, 0x44444153, 8);
    store<u16>(p, 0x0a0d, 12);
    store<u8>(p, 36, 14);
    p = putU32(p + 15, klen);
    store<u16>(p, 0x0a0d);
    p += 2;
    memory.copy(p, head, headLen);
    p = putU32(p + headLen, t);
    store<u8>(p, 125); // '}'
    p = putU32(p + 1, s);
    store<u8>(p, 46); // '.'
    p = putU32(p + 1, d);
    store<u16>(p, 0x0a0d);
    store<u8>(p, 36, 2);
    p = putU32(p + 3, mlen);
    store<u16>(p, 0x0a0d);
    p += 2;
    if (neg) {
      store<u8>(p, 45); // '-'
      p++;
    }
    if (hi > 0) {
      p = putU32(p, hi);
      fixed(p + 8, mid, 8);
      fixed(p + 16, lo, 8);
      p += 16;
    } else if (mid > 0) {
      p = putU32(p, mid);
      fixed(p + 8, lo, 8);
      p += 8;
    } else p = putU32(p, lo);
    store<u16>(p, 0x0a0d);
    p += 2;
  }
  return <u32>(p - out);
}
