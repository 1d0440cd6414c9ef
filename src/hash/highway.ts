// HighwayHash (the 2018 portable algorithm) in the variant Redisson's Bloom filter uses: its fixed
// 256-bit key and the early 128-bit finalisation (six permute rounds, then v0+mul0+v1'+mul1' of
// lanes 0/2 and 1/3). The npm `highwayhash` packages implement the later, changed 128-bit output,
// so they do not give Redisson's bit indexes.
//
// Hand-written on 32-bit halves because V8 has no fast 64-bit integers: BigInt arithmetic measured
// ~40x slower for this mix of adds, 32x32->64 multiplies and byte shuffles. All state lives in one
// module-level Uint32Array, so hashing a key allocates nothing.

/** Redisson's key, as [lo, hi] 32-bit halves of its four 64-bit words. */
export const REDISSON_HIGHWAY_KEY: readonly number[] = [
  0x7f4a7c15, 0x9e3779b9, 0x5cedc834, 0xf39cc060, 0xf3a27251, 0x1082276b, 0xd0c18e95, 0xf86c6a11,
];

// Initial mul0/mul1 values of the algorithm, [lo, hi] per lane.
const INIT_MUL0 = [0xfe4cce2f, 0xdbe6d5d5, 0x299f31d0, 0xa4093822, 0x03707344, 0x13198a2e, 0x85a308d3, 0x243f6a88];
const INIT_MUL1 = [0xcb0ef593, 0x3bd39e10, 0xb5f18a8c, 0xc0acf169, 0x34e90c6c, 0xbe5466cf, 0x38d01377, 0x452821e6];

// State: lane i of each vector is [lo, hi] at (base + 2i, base + 2i + 1).
const V0 = 0;
const V1 = 8;
const M0 = 16;
const M1 = 24;
const S = new Uint32Array(32);
/** One 32-byte packet as eight little-endian 32-bit words. */
const P = new Uint32Array(8);
const TAIL = new Uint8Array(32);
const TWO32 = 4294967296;

/** s[i..i+1] += (lo, hi) modulo 2^64. */
function add(i: number, lo: number, hi: number): void {
  const l = S[i]! + lo;
  S[i] = l;
  S[i + 1] = S[i + 1]! + hi + (l >= TWO32 ? 1 : 0);
}

/** s[i..i+1] ^= a * b (full 64-bit product of two uint32). */
function xorMul(i: number, a: number, b: number): void {
  const lo = Math.imul(a, b) >>> 0;
  // The double product is within 2^11 of the exact one; subtracting the exact low word leaves a
  // multiple of 2^32 up to that error, so rounding recovers the exact high word.
  const hi = Math.round((a * b - lo) / TWO32);
  S[i] = S[i]! ^ lo;
  S[i + 1] = S[i + 1]! ^ hi;
}

/** Adds zipperMerge0(src lane h, src lane l) to dst lane d, and zipperMerge1 to lane d + 1. */
function zipper(d: number, src: number, l: number, h: number): void {
  const xl = S[src + 2 * l]!; // bytes x0..x3 of the lower lane
  const xh = S[src + 2 * l + 1]!; // x4..x7
  const yl = S[src + 2 * h]!; // y0..y3 of the higher lane
  const yh = S[src + 2 * h + 1]!; // y4..y7
  // merge0 bytes (low to high): x3 y4 x2 x5 y6 x1 y7 x0
  const m0l = (xl >>> 24) | ((yh & 0xff) << 8) | (xl & 0xff0000) | (((xh >>> 8) & 0xff) << 24);
  const m0h = ((yh >>> 16) & 0xff) | (xl & 0xff00) | ((yh >>> 24) << 16) | ((xl & 0xff) << 24);
  // merge1 bytes (low to high): y3 x4 y2 y5 y1 x6 y0 x7
  const m1l = (yl >>> 24) | ((xh & 0xff) << 8) | (yl & 0xff0000) | (((yh >>> 8) & 0xff) << 24);
  const m1h = ((yl >>> 8) & 0xff) | (xh & 0xff0000) >>> 8 | ((yl & 0xff) << 16) | (xh & 0xff000000);
  add(d, m0l >>> 0, m0h >>> 0);
  add(d + 2, m1l >>> 0, m1h >>> 0);
}

function update(): void {
  for (let i = 0; i < 8; i += 2) {
    add(V1 + i, S[M0 + i]!, S[M0 + i + 1]!);
    add(V1 + i, P[i]!, P[i + 1]!);
  }
  for (let i = 0; i < 8; i += 2) {
    xorMul(M0 + i, S[V1 + i]!, S[V0 + i + 1]!);
    add(V0 + i, S[M1 + i]!, S[M1 + i + 1]!);
    xorMul(M1 + i, S[V0 + i]!, S[V1 + i + 1]!);
  }
  zipper(V0, V1, 0, 1);
  zipper(V0 + 4, V1, 2, 3);
  zipper(V1, V0, 0, 1);
  zipper(V1 + 4, V0, 2, 3);
}

function reset(key: readonly number[]): void {
  for (let i = 0; i < 8; i += 2) {
    const kl = key[i]!;
    const kh = key[i + 1]!;
    S[M0 + i] = INIT_MUL0[i]!;
    S[M0 + i + 1] = INIT_MUL0[i + 1]!;
    S[M1 + i] = INIT_MUL1[i]!;
    S[M1 + i + 1] = INIT_MUL1[i + 1]!;
    S[V0 + i] = INIT_MUL0[i]! ^ kl;
    S[V0 + i + 1] = INIT_MUL0[i + 1]! ^ kh;
    // v1 starts as mul1 xor the key word with its halves swapped
    S[V1 + i] = INIT_MUL1[i]! ^ kh;
    S[V1 + i + 1] = INIT_MUL1[i + 1]! ^ kl;
  }
}

function word(b: Uint8Array, o: number): number {
  return (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
}

function packet(b: Uint8Array, o: number): void {
  for (let i = 0; i < 8; i++) P[i] = word(b, o + 4 * i);
  update();
}

function remainder(b: Uint8Array, o: number, n: number): void {
  const mod4 = n & 3;
  const whole = n & ~3;
  for (let i = 0; i < 8; i += 2) add(V0 + i, n, n);
  // rotate each 32-bit half of v1 left by n (1..31)
  for (let i = V1; i < V1 + 8; i++) {
    const x = S[i]!;
    S[i] = (x << n) | (x >>> (32 - n));
  }
  TAIL.fill(0);
  for (let i = 0; i < whole; i++) TAIL[i] = b[o + i]!;
  if ((n & 16) !== 0) {
    for (let i = 0; i < 4; i++) TAIL[28 + i] = b[o + whole + i + mod4 - 4]!;
  } else if (mod4 !== 0) {
    TAIL[16] = b[o + whole]!;
    TAIL[17] = b[o + whole + (mod4 >>> 1)]!;
    TAIL[18] = b[o + whole + mod4 - 1]!;
  }
  packet(TAIL, 0);
}

function permuteAndUpdate(): void {
  // lanes 2, 3, 0, 1 of v0 with their 32-bit halves swapped
  P[0] = S[V0 + 5]!;
  P[1] = S[V0 + 4]!;
  P[2] = S[V0 + 7]!;
  P[3] = S[V0 + 6]!;
  P[4] = S[V0 + 1]!;
  P[5] = S[V0 + 0]!;
  P[6] = S[V0 + 3]!;
  P[7] = S[V0 + 2]!;
  update();
}

/**
 * 128-bit HighwayHash of b[off, off + len) in Redisson's variant, written to out[o..o+3] as
 * [h0 lo, h0 hi, h1 lo, h1 hi] (h0, h1 = the two Java longs Redisson's hash128 returns).
 */
export function highway128Into(b: Uint8Array, off: number, len: number, out: Uint32Array, o = 0, key: readonly number[] = REDISSON_HIGHWAY_KEY): void {
  reset(key);
  let i = 0;
  for (; i + 32 <= len; i += 32) packet(b, off + i);
  if ((len & 31) !== 0) remainder(b, off + i, len & 31);
  for (let r = 0; r < 6; r++) permuteAndUpdate();
  // h0 = v0[0] + mul0[0] + v1[2] + mul1[2]; h1 = the same of lanes 1 and 3
  let lo = S[V0]! + S[M0]! + S[V1 + 4]! + S[M1 + 4]!;
  let hi = S[V0 + 1]! + S[M0 + 1]! + S[V1 + 5]! + S[M1 + 5]! + Math.floor(lo / TWO32);
  out[o] = lo;
  out[o + 1] = hi;
  lo = S[V0 + 2]! + S[M0 + 2]! + S[V1 + 6]! + S[M1 + 6]!;
  hi = S[V0 + 3]! + S[M0 + 3]! + S[V1 + 7]! + S[M1 + 7]! + Math.floor(lo / TWO32);
  out[o + 2] = lo;
  out[o + 3] = hi;
}

const ONE = new Uint32Array(4);

/** The two 64-bit halves as signed bigints (as Java prints them); for tests and tools, not hot paths. */
export function highway128(bytes: Uint8Array, key: readonly number[] = REDISSON_HIGHWAY_KEY): [bigint, bigint] {
  highway128Into(bytes, 0, bytes.length, ONE, 0, key);
  const h0 = BigInt.asIntN(64, (BigInt(ONE[1]!) << 32n) | BigInt(ONE[0]!));
  const h1 = BigInt.asIntN(64, (BigInt(ONE[3]!) << 32n) | BigInt(ONE[2]!));
  return [h0, h1];
}
