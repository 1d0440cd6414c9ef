// HighwayHash in Redisson's variant (fixed key, early 128-bit finalisation) and Redisson's Bloom
// index sequence, for wasm/highway.wasm (built by wasm/build-highway.mjs). Native 64-bit lanes:
// measured ~10x the plain-JS version in src/hash/highway.ts, which stays as the readable
// reference and the fallback.
//
// Memory (exported, owned by the JS side): [0, 32) scratch packet for a key's last bytes; callers
// place keys, offsets and the index output above RESERVED.

export const HIGHWAY_ABI: i32 = 2;
export const RESERVED: i32 = 64;

// Redisson's key
const K0: u64 = 0x9e3779b97f4a7c15;
const K1: u64 = 0xf39cc0605cedc834;
const K2: u64 = 0x1082276bf3a27251;
const K3: u64 = 0xf86c6a11d0c18e95;
// initial multiplier lanes of the algorithm
const I00: u64 = 0xdbe6d5d5fe4cce2f;
const I01: u64 = 0xa4093822299f31d0;
const I02: u64 = 0x13198a2e03707344;
const I03: u64 = 0x243f6a8885a308d3;
const I10: u64 = 0x3bd39e10cb0ef593;
const I11: u64 = 0xc0acf169b5f18a8c;
const I12: u64 = 0xbe5466cf34e90c6c;
const I13: u64 = 0x452821e638d01377;

let v00: u64 = 0, v01: u64 = 0, v02: u64 = 0, v03: u64 = 0;
let v10: u64 = 0, v11: u64 = 0, v12: u64 = 0, v13: u64 = 0;
let m00: u64 = 0, m01: u64 = 0, m02: u64 = 0, m03: u64 = 0;
let m10: u64 = 0, m11: u64 = 0, m12: u64 = 0, m13: u64 = 0;
let out0: u64 = 0, out1: u64 = 0;

@inline function swap32(x: u64): u64 {
  return rotl<u64>(x, 32);
}

@inline function b(x: u64, i: u64): u64 {
  return (x >> (i << 3)) & 0xff;
}

// bytes of the result, low to high, from lanes x (lower) and y (higher): x3 y4 x2 x5 y6 x1 y7 x0
@inline function merge0(y: u64, x: u64): u64 {
  return b(x, 3) | (b(y, 4) << 8) | (b(x, 2) << 16) | (b(x, 5) << 24) | (b(y, 6) << 32) | (b(x, 1) << 40) | (b(y, 7) << 48) | (b(x, 0) << 56);
}

// y3 x4 y2 y5 y1 x6 y0 x7
@inline function merge1(y: u64, x: u64): u64 {
  return b(y, 3) | (b(x, 4) << 8) | (b(y, 2) << 16) | (b(y, 5) << 24) | (b(y, 1) << 32) | (b(x, 6) << 40) | (b(y, 0) << 48) | (b(x, 7) << 56);
}

function reset(): void {
  m00 = I00; m01 = I01; m02 = I02; m03 = I03;
  m10 = I10; m11 = I11; m12 = I12; m13 = I13;
  v00 = I00 ^ K0; v01 = I01 ^ K1; v02 = I02 ^ K2; v03 = I03 ^ K3;
  v10 = I10 ^ swap32(K0); v11 = I11 ^ swap32(K1); v12 = I12 ^ swap32(K2); v13 = I13 ^ swap32(K3);
}

function update(a0: u64, a1: u64, a2: u64, a3: u64): void {
  v10 += m00 + a0;
  v11 += m01 + a1;
  v12 += m02 + a2;
  v13 += m03 + a3;
  m00 ^= (v10 & 0xffffffff) * (v00 >> 32);
  v00 += m10;
  m10 ^= (v00 & 0xffffffff) * (v10 >> 32);
  m01 ^= (v11 & 0xffffffff) * (v01 >> 32);
  v01 += m11;
  m11 ^= (v01 & 0xffffffff) * (v11 >> 32);
  m02 ^= (v12 & 0xffffffff) * (v02 >> 32);
  v02 += m12;
  m12 ^= (v02 & 0xffffffff) * (v12 >> 32);
  m03 ^= (v13 & 0xffffffff) * (v03 >> 32);
  v03 += m13;
  m13 ^= (v03 & 0xffffffff) * (v13 >> 32);
  v00 += merge0(v11, v10);
  v01 += merge1(v11, v10);
  v02 += merge0(v13, v12);
  v03 += merge1(v13, v12);
  v10 += merge0(v01, v00);
  v11 += merge1(v01, v00);
  v12 += merge0(v03, v02);
  v13 += merge1(v03, v02);
}

@inline function rot32x2(x: u64, n: u32): u64 {
  const lo = rotl<u32>(<u32>x, n);
  const hi = rotl<u32>(<u32>(x >> 32), n);
  return (<u64>hi << 32) | <u64>lo;
}

function hashAt(p: usize, len: i32): void {
  reset();
  let i = 0;
  for (; i + 32 <= len; i += 32) {
    const q = p + <usize>i;
    update(load<u64>(q), load<u64>(q, 8), load<u64>(q, 16), load<u64>(q, 24));
  }
  const n = len & 31;
  if (n != 0) {
    const q = p + <usize>i;
    const nn = <u64>n;
    v00 += (nn << 32) + nn;
    v01 += (nn << 32) + nn;
    v02 += (nn << 32) + nn;
    v03 += (nn << 32) + nn;
    v10 = rot32x2(v10, n);
    v11 = rot32x2(v11, n);
    v12 = rot32x2(v12, n);
    v13 = rot32x2(v13, n);
    memory.fill(0, 0, 32);
    const whole = n & ~3;
    const mod4 = n & 3;
    memory.copy(0, q, <usize>whole);
    if ((n & 16) != 0) {
      // the last four bytes of the key, wherever they start
      store<u32>(28, <u32>load<u8>(q + <usize>(whole + mod4 - 4)) | (<u32>load<u8>(q + <usize>(whole + mod4 - 3)) << 8) |
        (<u32>load<u8>(q + <usize>(whole + mod4 - 2)) << 16) | (<u32>load<u8>(q + <usize>(whole + mod4 - 1)) << 24));
    } else if (mod4 != 0) {
      store<u8>(16, load<u8>(q + <usize>whole));
      store<u8>(17, load<u8>(q + <usize>(whole + (mod4 >> 1))));
      store<u8>(18, load<u8>(q + <usize>(whole + mod4 - 1)));
    }
    update(load<u64>(0), load<u64>(8), load<u64>(16), load<u64>(24));
  }
  for (let r = 0; r < 6; r++) update(swap32(v02), swap32(v03), swap32(v00), swap32(v01));
  out0 = v00 + m00 + v12 + m12;
  out1 = v01 + m01 + v13 + m13;
}

/** Writes h0, h1 (little-endian u64) of bytes [p, p + len) at out. */
export function highway128(p: usize, len: i32, out: usize): void {
  hashAt(p, len);
  store<u64>(out, out0);
  store<u64>(out, out1, 8);
}

/**
 * For `count` keys at bytes + offsets[j] .. bytes + offsets[j + 1] (u32 offsets), writes each
 * key's k bit indexes as u32 at out: from h = h0, (h & i64 max) % size, then h += h1 after an even
 * step and h += h0 after an odd one.
 */
export function redissonIndexes(bytes: usize, offsets: usize, count: i32, k: i32, size: f64, out: usize): void {
  const m = <u64>size;
  let o = out;
  for (let j = 0; j < count; j++) {
    const s = load<u32>(offsets + (<usize>j << 2));
    const e = load<u32>(offsets + (<usize>(j + 1) << 2));
    hashAt(bytes + <usize>s, <i32>(e - s));
    let h = out0;
    for (let i = 0; i < k; i++) {
      store<u32>(o, <u32>((h & 0x7fffffffffffffff) % m));
      o += 4;
      h += (i & 1) == 0 ? out1 : out0;
    }
  }
}

/**
 * For `count` keys laid out as for redissonIndexes: out[j] = 1 when all k bits of key j are set in
 * the Redis-order bitmap at bits (bitsLen bytes; bits past its end read as 0), else 0. Stops at a
 * key's first zero bit.
 */
export function redissonContains(bytes: usize, offsets: usize, count: i32, k: i32, size: f64, bits: usize, bitsLen: i32, out: usize): void {
  const m = <u64>size;
  const len = <u64>bitsLen;
  for (let j = 0; j < count; j++) {
    const s = load<u32>(offsets + (<usize>j << 2));
    const e = load<u32>(offsets + (<usize>(j + 1) << 2));
    hashAt(bytes + <usize>s, <i32>(e - s));
    let h = out0;
    let r: u8 = 1;
    for (let i = 0; i < k; i++) {
      const ix = (h & 0x7fffffffffffffff) % m;
      const byte = ix >> 3;
      if (byte >= len || (load<u8>(bits + <usize>byte) & (<u8>0x80 >> <u8>(ix & 7))) == 0) {
        r = 0;
        break;
      }
      h += (i & 1) == 0 ? out1 : out0;
    }
    store<u8>(out + <usize>j, r);
  }
}
