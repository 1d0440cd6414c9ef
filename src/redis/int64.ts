// Decimal of a signed 64-bit little-endian integer: the compact layout's member ("-4242...").
//
// The one conversion for every compact write (dedup store, journal replay, loader). As a string:
// BigInt's own toString. Into a RESP buffer: int64Digits, which long-divides the magnitude's four
// 16-bit limbs by 1e8 in doubles (every intermediate stays below 2^53, so exact) and writes the
// digits straight into the buffer: no BigInt and no string per member, which in a 10k-key batch
// were most of the garbage the young generation had to collect.

/** Signed decimal of the 8 little-endian bytes at `o` of `dv`; canonical, so Redis keeps it in an intset. */
export function int64Decimal(dv: DataView, o: number): string {
  return dv.getBigInt64(o, true).toString();
}

const E8 = 100_000_000;

/** "00".."99": two digits per division in `fixed`. */
const PAIRS = new Uint8Array(200);
for (let i = 0; i < 100; i++) {
  PAIRS[2 * i] = 48 + ((i / 10) | 0);
  PAIRS[2 * i + 1] = 48 + (i % 10);
}

/** Decimal digits of 0 <= v < 1e8, exactly `len` of them (leading zeros), ending before `end`. */
function fixed(buf: Uint8Array, end: number, v: number, len: number): void {
  let x = v | 0;
  for (; len >= 2; len -= 2) {
    const q = (x / 100) | 0;
    const r = (x - q * 100) << 1;
    buf[--end] = PAIRS[r + 1]!;
    buf[--end] = PAIRS[r]!;
    x = q;
  }
  if (len === 1) buf[end - 1] = 48 + x;
}

const digitsOf = (v: number): number =>
  v < 10 ? 1 : v < 100 ? 2 : v < 1000 ? 3 : v < 10_000 ? 4 : v < 100_000 ? 5 : v < 1_000_000 ? 6 : v < 10_000_000 ? 7 : 8;

/**
 * Writes int64Decimal(dv, o) as a RESP bulk string ($len CRLF digits CRLF) into `buf` at `p`
 * (caller guarantees 28 bytes of room); returns the position after it. Same bytes as writing the
 * string int64Decimal returns.
 */
export function int64Bulk(buf: Uint8Array, p: number, dv: DataView, o: number): number {
  let lo = dv.getUint32(o, true);
  let hi = dv.getUint32(o + 4, true);
  const neg = hi >= 0x8000_0000;
  if (neg) {
    // magnitude of the two's complement: ~v + 1 over both words
    lo = (~lo + 1) >>> 0;
    hi = (~hi + (lo === 0 ? 1 : 0)) >>> 0;
  }
  // magnitude = top * 1e16 + mid * 1e8 + low
  let r = hi >>> 16;
  r = r * 65536 + (hi & 0xffff);
  const q2 = Math.floor(r / E8);
  r -= q2 * E8;
  r = r * 65536 + (lo >>> 16);
  const q1 = Math.floor(r / E8);
  r -= q1 * E8;
  r = r * 65536 + (lo & 0xffff);
  const q0 = Math.floor(r / E8);
  const low = r - q0 * E8;
  const q = (q2 * 65536 + q1) * 65536 + q0; // < 1.85e11
  const top = Math.floor(q / E8);
  const mid = q - top * E8;
  // Every digit count and both comparisons worked out for every member, and the three parts
  // written by the same calls (a part of no digits writes none): members below 1e16 in magnitude
  // come about once in a thousand, so a path of their own first ran long after this was compiled
  // and sent the write path back to the interpreter.
  const hasTop = top > 0;
  const hasMid = mid > 0;
  const dTop = digitsOf(top);
  const dMid = digitsOf(mid);
  const dLow = digitsOf(low);
  const lenTop = hasTop ? dTop : 0;
  const lenMid = hasTop ? 8 : hasMid ? dMid : 0;
  const lenLow = hasTop || hasMid ? 8 : dLow;
  const n = lenTop + lenMid + lenLow + (neg ? 1 : 0);
  buf[p++] = 36; // '$'
  if (n >= 10) buf[p++] = 48 + ((n / 10) | 0);
  buf[p++] = 48 + (n % 10);
  buf[p++] = 13;
  buf[p++] = 10;
  const end = p + n;
  if (neg) buf[p] = 45; // '-'
  fixed(buf, end, low, lenLow);
  fixed(buf, end - lenLow, mid, lenMid);
  fixed(buf, end - lenLow - lenMid, top, lenTop);
  buf[end] = 13;
  buf[end + 1] = 10;
  return end + 2;
}
