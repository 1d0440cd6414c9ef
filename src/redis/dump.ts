// Redis DUMP payloads of integer sets: reading the sorted members out of one and building the payloads that RESTORE two halves of it.
//
// Why: a compact sub-bucket splits by member value (growth.ts), and its members sit in Redis as an
// intset, sorted. Moving them as members (SMEMBERS into Lua strings and SADD back) cost Redis
// about 0.6 us per member; cutting the DUMP payload in two and RESTOREing the halves costs it a
// memcpy and two checksums. The payload format (RDB object type, length-prefixed intset blob,
// RDB version, CRC-64/Jones) has been stable since Redis 2.6; anything else (a hashtable set, a
// compressed blob) is refused here and the caller splits member by member instead.

/** RDB object type of a set stored as an intset. */
const RDB_TYPE_SET_INTSET = 11;

/**
 * CRC-64/Jones (reflected, init 0), as Redis checks a RESTORE payload with, eight bytes a step
 * ("slicing by 8"): table k, entry i is the CRC of byte i followed by k zero bytes, each 64-bit
 * entry as two 32-bit halves (LO and HI at k * 256 + i). Hand-written because every split
 * checksums both its payloads on the writer's main thread: measured about three times faster
 * than a byte a step.
 */
const CRC_LO = new Uint32Array(8 * 256);
const CRC_HI = new Uint32Array(8 * 256);
{
  const POLY_LO = 0xac4bc9b5; // 0x95ac9329ac4bc9b5: the reflected polynomial 0xad93d23594c935a9
  const POLY_HI = 0x95ac9329;
  for (let i = 0; i < 256; i++) {
    let lo = i;
    let hi = 0;
    for (let k = 0; k < 8; k++) {
      const odd = lo & 1;
      lo = ((lo >>> 1) | ((hi & 1) << 31)) >>> 0;
      hi >>>= 1;
      if (odd) {
        lo = (lo ^ POLY_LO) >>> 0;
        hi = (hi ^ POLY_HI) >>> 0;
      }
    }
    CRC_LO[i] = lo;
    CRC_HI[i] = hi;
  }
  for (let k = 1; k < 8; k++) {
    for (let i = 0; i < 256; i++) {
      const plo = CRC_LO[(k - 1) * 256 + i]!;
      const phi = CRC_HI[(k - 1) * 256 + i]!;
      const x = plo & 0xff;
      CRC_LO[k * 256 + i] = (((plo >>> 8) | (phi << 24)) ^ CRC_LO[x]!) >>> 0;
      CRC_HI[k * 256 + i] = ((phi >>> 8) ^ CRC_HI[x]!) >>> 0;
    }
  }
}

/** CRC-64/Jones of buf[s..e), written little endian at out[at..at+8). */
export function crc64Into(buf: Uint8Array, s: number, e: number, out: Uint8Array, at: number): void {
  const L = CRC_LO;
  const H = CRC_HI;
  let lo = 0;
  let hi = 0;
  let i = s;
  for (const end8 = e - 7; i < end8; i += 8) {
    const a = lo ^ (buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24));
    const b = hi ^ (buf[i + 4]! | (buf[i + 5]! << 8) | (buf[i + 6]! << 16) | (buf[i + 7]! << 24));
    const x0 = 1792 + (a & 0xff);
    const x1 = 1536 + ((a >>> 8) & 0xff);
    const x2 = 1280 + ((a >>> 16) & 0xff);
    const x3 = 1024 + (a >>> 24);
    const x4 = 768 + (b & 0xff);
    const x5 = 512 + ((b >>> 8) & 0xff);
    const x6 = 256 + ((b >>> 16) & 0xff);
    const x7 = b >>> 24;
    lo = L[x0]! ^ L[x1]! ^ L[x2]! ^ L[x3]! ^ L[x4]! ^ L[x5]! ^ L[x6]! ^ L[x7]!;
    hi = H[x0]! ^ H[x1]! ^ H[x2]! ^ H[x3]! ^ H[x4]! ^ H[x5]! ^ H[x6]! ^ H[x7]!;
  }
  for (; i < e; i++) {
    const x = (lo ^ buf[i]!) & 0xff;
    lo = ((lo >>> 8) | (hi << 24)) ^ L[x]!;
    hi = (hi >>> 8) ^ H[x]!;
  }
  out[at] = lo;
  out[at + 1] = lo >>> 8;
  out[at + 2] = lo >>> 16;
  out[at + 3] = lo >>> 24;
  out[at + 4] = hi;
  out[at + 5] = hi >>> 8;
  out[at + 6] = hi >>> 16;
  out[at + 7] = hi >>> 24;
}

/** The members of an intset DUMP payload: `count` integers of `width` bytes, little endian, ascending, at payload[at..). */
export interface IntsetDump {
  payload: Uint8Array;
  width: 2 | 4 | 8;
  count: number;
  at: number;
  /** The payload's RDB version (two bytes before the checksum), copied into the payloads built from it. */
  version: number;
}

/**
 * Reads an intset DUMP payload; undefined for anything else (another encoding, a compressed blob,
 * with `verify` a bad checksum). The payload's own checksum needs no check when it comes straight
 * from the server's DUMP reply: the halves built from it get checksums of their own.
 */
export function readIntsetDump(payload: Uint8Array, verify = false): IntsetDump | undefined {
  const n = payload.length;
  if (n < 1 + 1 + 8 + 10 || payload[0] !== RDB_TYPE_SET_INTSET) return undefined;
  // the blob's RDB length prefix: 6, 14 or 32 bits (the 0b11 forms are special encodings, e.g. LZF)
  const b = payload[1]!;
  let len: number;
  let p: number;
  switch (b >> 6) {
    case 0:
      len = b & 0x3f;
      p = 2;
      break;
    case 1:
      len = ((b & 0x3f) << 8) | payload[2]!;
      p = 3;
      break;
    case 2:
      if (b !== 0x80) return undefined;
      len = ((payload[2]! << 24) | (payload[3]! << 16) | (payload[4]! << 8) | payload[5]!) >>> 0;
      p = 6;
      break;
    default:
      return undefined;
  }
  if (p + len + 10 !== n || len < 8) return undefined;
  const width = payload[p]! | (payload[p + 1]! << 8) | (payload[p + 2]! << 16) | (payload[p + 3]! << 24);
  const count = (payload[p + 4]! | (payload[p + 5]! << 8) | (payload[p + 6]! << 16) | (payload[p + 7]! << 24)) >>> 0;
  if ((width !== 2 && width !== 4 && width !== 8) || 8 + count * width !== len) return undefined;
  if (verify) {
    const crc = new Uint8Array(8);
    crc64Into(payload, 0, n - 8, crc, 0);
    for (let i = 0; i < 8; i++) if (crc[i] !== payload[n - 8 + i]) return undefined;
  }
  return { payload, width, count, at: p + 8, version: payload[n - 10]! | (payload[n - 9]! << 8) };
}

/**
 * Index of the first member >= the signed 64-bit value (hi, lo) (hi signed, lo unsigned 32-bit
 * words), by binary search over the sorted members.
 */
export function lowerBound(d: IntsetDump, hi: number, lo: number): number {
  const dv = new DataView(d.payload.buffer, d.payload.byteOffset, d.payload.byteLength);
  let a = 0;
  let z = d.count;
  while (a < z) {
    const m = (a + z) >>> 1;
    const o = d.at + m * d.width;
    let mh: number;
    let ml: number;
    if (d.width === 8) {
      ml = dv.getUint32(o, true);
      mh = dv.getInt32(o + 4, true);
    } else {
      const v = d.width === 4 ? dv.getInt32(o, true) : dv.getInt16(o, true);
      mh = v < 0 ? -1 : 0;
      ml = v >>> 0;
    }
    if (mh < hi || (mh === hi && ml < lo)) a = m + 1;
    else z = m;
  }
  return a;
}

/** Bytes of the RDB length prefix of a blob of `len` bytes. */
const prefixBytes = (len: number): number => (len < 64 ? 1 : len < 16384 ? 2 : 5);

/** Bytes of the RESTORE payload of members [s, e) of `d` (0 when the range is empty). */
export function intsetPayloadSize(d: IntsetDump, s: number, e: number): number {
  const count = e - s;
  if (count <= 0) return 0;
  const blob = 8 + count * d.width;
  return 1 + prefixBytes(blob) + blob + 10;
}

/**
 * Writes the RESTORE payload of members [s, e) of `d` (same width) at out[at..), nothing when the
 * range is empty; returns where it ended. Straight into the buffer of the command that carries it:
 * a split sends two payloads a few KiB each, and a buffer of their own cost an allocation and a
 * copy each.
 */
export function writeIntsetPayload(d: IntsetDump, s: number, e: number, out: Uint8Array, at: number): number {
  const count = e - s;
  if (count <= 0) return at;
  const blob = 8 + count * d.width;
  let p = at;
  out[p++] = RDB_TYPE_SET_INTSET;
  if (blob < 64) out[p++] = blob;
  else if (blob < 16384) {
    out[p++] = 0x40 | (blob >> 8);
    out[p++] = blob & 0xff;
  } else {
    out[p++] = 0x80;
    out[p++] = blob >>> 24;
    out[p++] = (blob >>> 16) & 0xff;
    out[p++] = (blob >>> 8) & 0xff;
    out[p++] = blob & 0xff;
  }
  out[p] = d.width;
  out[p + 1] = 0;
  out[p + 2] = 0;
  out[p + 3] = 0;
  out[p + 4] = count;
  out[p + 5] = count >>> 8;
  out[p + 6] = count >>> 16;
  out[p + 7] = count >>> 24;
  p += 8;
  out.set(d.payload.subarray(d.at + s * d.width, d.at + e * d.width), p);
  p += count * d.width;
  out[p++] = d.version & 0xff;
  out[p++] = d.version >>> 8;
  crc64Into(out, at, p, out, p);
  return p + 8;
}

/** The RESTORE payload of members [s, e) of `d` as a command argument (encodeCommand's ArgWriter). */
export class IntsetSlice {
  readonly length: number;
  constructor(
    private readonly d: IntsetDump,
    private readonly s: number,
    private readonly e: number,
  ) {
    this.length = intsetPayloadSize(d, s, e);
  }
  writeTo(out: Uint8Array, at: number): number {
    return writeIntsetPayload(this.d, this.s, this.e, out, at);
  }
  /** The payload in a buffer of its own (for a client that takes arguments as buffers). */
  buffer(): Buffer {
    return intsetPayload(this.d, this.s, this.e);
  }
}

/** A RESTORE payload of members [s, e) of `d` (same width), or an empty buffer when the range is empty. */
export function intsetPayload(d: IntsetDump, s: number, e: number): Buffer {
  const out = Buffer.allocUnsafe(intsetPayloadSize(d, s, e));
  writeIntsetPayload(d, s, e, out, 0);
  return out;
}
