// Pure functions that make a Redis-held filter bit-compatible with Redisson's RBloomFilter (used
// with StringCodec, or ByteArrayCodec for raw bytes): key names, sizing, the config strings Java
// writes, the string encoding Netty applies, and the bit-index sequence. No I/O here.
import { outOfRange } from '../errors.js';
import { highway128Into } from '../hash/highway.js';
import { highwayKernel } from '../hash/highway-kernel.js';

/** Redisson refuses bitmaps larger than this many bits (twice Java's Integer.MAX_VALUE). */
export const REDISSON_MAX_BITS = 4294967294;

/** Config key next to the bitmap: `{name}:config`, or `name:config` when the name already has a `{`. */
export function redissonConfigKey(name: string): string {
  return name.includes('{') ? `${name}:config` : `{${name}}:config`;
}

/** A hashgate key next to the filter, in its slot: `{name}:suffix`, or `name:suffix` when tagged. */
export function redissonSuffixKey(name: string, suffix: string): string {
  return name.includes('{') ? `${name}:${suffix}` : `{${name}}:${suffix}`;
}

/** The part of a key Redis Cluster hashes: the first non-empty `{...}`, else the whole key. */
export function hashTagOf(key: string): string {
  const a = key.indexOf('{');
  if (a < 0) return key;
  const b = key.indexOf('}', a + 1);
  return b < 0 || b === a + 1 ? key : key.slice(a + 1, b);
}

/** True when the bitmap and config keys of `name` map to one cluster slot (needed by the scripts). */
export function redissonKeysShareSlot(name: string): boolean {
  return hashTagOf(name) === hashTagOf(redissonConfigKey(name));
}

export interface RedissonShape {
  /** Bits in the bitmap. */
  size: number;
  /** Bit indexes per key. */
  hashIterations: number;
}

/**
 * Redisson's sizing: size = trunc(-n ln p / ln^2 2), k = max(1, round(size / n * ln 2)), in the same
 * double operations and order, so the same inputs give the same shape. p = 0 becomes the smallest
 * double, as in Java.
 */
export function redissonShape(expectedItems: number, fpp: number): RedissonShape {
  const p = fpp === 0 ? Number.MIN_VALUE : fpp;
  const size = Math.trunc((-expectedItems * Math.log(p)) / (Math.LN2 * Math.LN2));
  if (size <= 0) throw outOfRange('options.fpp', 'a value giving a non-empty filter (Redisson computes 0 bits)', fpp);
  if (size > REDISSON_MAX_BITS) {
    throw outOfRange('options.expectedItems', `small enough for at most ${REDISSON_MAX_BITS} bits (needs ${size})`, expectedItems);
  }
  const hashIterations = Math.max(1, Math.round((size / expectedItems) * Math.LN2));
  return { size, hashIterations };
}

/**
 * Java's Double.toString: shortest round-trip digits, plain between 1e-3 and 1e7 ("0.01",
 * "100.0"), otherwise "d.dddE[-]x" ("1.0E-4"). Redisson stores falseProbability this way.
 */
export function javaDoubleToString(d: number): string {
  if (Number.isNaN(d)) return 'NaN';
  if (d === Infinity) return 'Infinity';
  if (d === -Infinity) return '-Infinity';
  if (d === 0) return Object.is(d, -0) ? '-0.0' : '0.0';
  const sign = d < 0 ? '-' : '';
  const a = Math.abs(d);
  const [mant, expPart] = a.toExponential().split('e') as [string, string];
  const digits = mant.replace('.', '');
  const exp = Number(expPart);
  if (a >= 1e-3 && a < 1e7) {
    if (exp >= 0) {
      const int = digits.slice(0, exp + 1).padEnd(exp + 1, '0');
      const frac = digits.slice(exp + 1);
      return `${sign}${int}.${frac.length > 0 ? frac : '0'}`;
    }
    return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
  }
  const frac = digits.slice(1);
  return `${sign}${digits[0]}.${frac.length > 0 ? frac : '0'}E${exp}`;
}

/** Java's String.valueOf(long) for a safe integer: plain digits. */
export function javaLongToString(n: number): string {
  return String(n);
}

type Utf8Writer = Buffer & { utf8Write(s: string, offset: number): number };
const isWellFormed = (String.prototype as unknown as { isWellFormed?: () => boolean }).isWellFormed;

/**
 * UTF-8 of `s` as Redisson's StringCodec (Netty's writeCharSequence) writes it into `buf` at
 * `pos`; returns the end. Differs from TextEncoder only on ill-formed UTF-16: a lone surrogate is
 * '?' (not U+FFFD), and a high surrogate followed by a non-surrogate c writes '?' and then c
 * truncated to its low byte (c is consumed); two high surrogates in a row write "??". The caller
 * guarantees 3 * s.length bytes of room.
 */
export function encodeRedissonString(s: string, buf: Buffer, pos: number): number {
  const n = s.length;
  if (n > 16 && (isWellFormed === undefined || isWellFormed.call(s))) return pos + (buf as Utf8Writer).utf8Write(s, pos);
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) buf[pos++] = c;
    else if (c < 0x800) {
      buf[pos++] = 0xc0 | (c >> 6);
      buf[pos++] = 0x80 | (c & 63);
    } else if (c < 0xd800 || c > 0xdfff) {
      buf[pos++] = 0xe0 | (c >> 12);
      buf[pos++] = 0x80 | ((c >> 6) & 63);
      buf[pos++] = 0x80 | (c & 63);
    } else if (c > 0xdbff) {
      buf[pos++] = 63; // lone low surrogate
    } else if (++i === n) {
      buf[pos++] = 63; // high surrogate at the end
    } else {
      const d = s.charCodeAt(i);
      if (d < 0xdc00 || d > 0xdfff) {
        buf[pos++] = 63;
        buf[pos++] = d >= 0xd800 && d <= 0xdbff ? 63 : d & 0xff;
      } else {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        buf[pos++] = 0xf0 | (cp >> 18);
        buf[pos++] = 0x80 | ((cp >> 12) & 63);
        buf[pos++] = 0x80 | ((cp >> 6) & 63);
        buf[pos++] = 0x80 | (cp & 63);
      }
    }
  }
  return pos;
}

const TWO32 = 4294967296;

/** (hi * 2^32 + lo) mod size with hi < 2^31, exactly, in doubles. */
function mod63(lo: number, hi: number, size: number): number {
  if (size <= 0x200000) return ((hi % size) * TWO32 + lo) % size;
  const t = ((hi % size) * 65536 + (lo >>> 16)) % size;
  return (t * 65536 + (lo & 0xffff)) % size;
}

/**
 * Redisson's index sequence from the 128-bit hash (h0, h1 given as 32-bit halves in h[o..o+3]):
 * starting from h = h0, index i is (h & Long.MAX_VALUE) % size, then h += h1 after an even i and
 * h += h0 after an odd one, with 64-bit wrap-around.
 */
export function redissonIndexesInto(h: Uint32Array, o: number, k: number, size: number, out: Uint32Array, at: number): void {
  const l0 = h[o]!;
  const h0 = h[o + 1]!;
  const l1 = h[o + 2]!;
  const h1 = h[o + 3]!;
  let lo = l0;
  let hi = h0;
  for (let i = 0; i < k; i++) {
    out[at + i] = mod63(lo, hi & 0x7fffffff, size);
    const addLo = (i & 1) === 0 ? l1 : l0;
    const addHi = (i & 1) === 0 ? h1 : h0;
    const s = lo + addLo;
    lo = s >>> 0;
    hi = (hi + addHi + (s >= TWO32 ? 1 : 0)) >>> 0;
  }
}

const HASH = new Uint32Array(4);

/**
 * Encodes `key` (strings as StringCodec, bytes as they are) into `scratch`, hashes it and writes
 * its k indexes to out[at..]. `scratch` must hold 3 * key.length bytes (grown by the caller).
 */
export function redissonKeyIndexes(key: string | Uint8Array, scratch: Buffer, k: number, size: number, out: Uint32Array, at: number): void {
  if (typeof key === 'string') {
    const len = encodeRedissonString(key, scratch, 0);
    highway128Into(scratch, 0, len, HASH, 0);
  } else {
    highway128Into(key, 0, key.length, HASH, 0);
  }
  redissonIndexesInto(HASH, 0, k, size, out, at);
}

let view: Buffer | undefined;

type Kernel = ReturnType<typeof highwayKernel>;

/** Upper bound of the bytes keys[from, from + n) take once encoded (3 per UTF-16 unit at most). */
function encodedBound(keys: ReadonlyArray<string | Uint8Array>, from: number, n: number): number {
  let bytes = 0;
  for (let j = 0; j < n; j++) {
    const key = keys[from + j]!;
    bytes += typeof key === 'string' ? key.length * 3 : key.length;
  }
  return bytes;
}

/** A Buffer over the kernel's memory, grown first to hold `need` bytes (the view is kept while the memory is unchanged). */
function kernelMemory(kern: Kernel, need: number): Buffer {
  const have = kern.memory.buffer.byteLength;
  if (need > have) kern.memory.grow(Math.ceil((need - have) / 65536));
  if (view === undefined || view.buffer !== kern.memory.buffer) view = Buffer.from(kern.memory.buffer);
  return view;
}

/** Encodes keys[from, from + n) from `dataAt` as Redisson does, and their n + 1 offsets (u32 LE) at `offAt`. */
function stageKeys(mem: Buffer, keys: ReadonlyArray<string | Uint8Array>, from: number, n: number, offAt: number, dataAt: number): void {
  let pos = dataAt;
  for (let j = 0; j < n; j++) {
    mem.writeUInt32LE(pos - dataAt, offAt + 4 * j);
    const key = keys[from + j]!;
    if (typeof key === 'string') pos = encodeRedissonString(key, mem, pos);
    else {
      mem.set(key, pos);
      pos += key.length;
    }
  }
  mem.writeUInt32LE(pos - dataAt, offAt + 4 * n);
}

/**
 * The bit indexes of keys[from, from + n) as one buffer of little-endian u32 (k per key, in key
 * order): what RedisBloom's scripts read. Keys are encoded straight into the wasm kernel's memory
 * and hashed there in one call (a missing kernel is HG_ERR_WASM, as everywhere).
 */
export function redissonIndexBlob(keys: ReadonlyArray<string | Uint8Array>, from: number, n: number, k: number, size: number): Buffer {
  const kern = highwayKernel();
  const offAt = kern.reserved;
  const dataAt = (offAt + 4 * (n + 1) + 7) & ~7;
  const outAt = (dataAt + encodedBound(keys, from, n) + 7) & ~7;
  const mem = kernelMemory(kern, outAt + n * k * 4);
  stageKeys(mem, keys, from, n, offAt, dataAt);
  kern.redissonIndexes(dataAt, offAt, n, k, size, outAt);
  return Buffer.from(mem.subarray(outAt, outAt + n * k * 4));
}

/**
 * One byte per key: 1 when all its bits are set in `bitmap` (Redis bit order; bytes past its end
 * read as 0). The wasm kernel copies the bitmap into its memory once and tests keys chunk by chunk
 * where they are hashed.
 */
export function redissonContainsAll(keys: ReadonlyArray<string | Uint8Array>, k: number, size: number, bitmap: Uint8Array, chunk = 8192): Uint8Array {
  const out = new Uint8Array(keys.length);
  const kern = highwayKernel();
  const bitsAt = kern.reserved;
  const offAt = (bitsAt + bitmap.length + 7) & ~7;
  for (let from = 0; from < keys.length; from += chunk) {
    const n = Math.min(chunk, keys.length - from);
    const dataAt = (offAt + 4 * (n + 1) + 7) & ~7;
    const outAt = dataAt + encodedBound(keys, from, n);
    const mem = kernelMemory(kern, outAt + n);
    if (from === 0) mem.set(bitmap, bitsAt);
    stageKeys(mem, keys, from, n, offAt, dataAt);
    kern.redissonContains(dataAt, offAt, n, k, size, bitsAt, bitmap.length, outAt);
    out.set(mem.subarray(outAt, outAt + n), from);
  }
  return out;
}

/**
 * The slice of each of keys[from, from + n) in a filter of 2^bits slices (bits <= 16): the top
 * `bits` bits of the key's second hash half h1. Redisson's index math masks bit 63 off every step
 * and reduces the rest modulo a slice size far below 2^48, so choosing the slice by these bits
 * leaves the indexes inside a slice as uniform as in a filter of its own.
 */
export function redissonSlices(keys: ReadonlyArray<string | Uint8Array>, from: number, n: number, bits: number, out: Uint16Array): void {
  if (bits === 0) {
    out.fill(0, 0, n);
    return;
  }
  const kern = highwayKernel();
  const offAt = kern.reserved;
  const dataAt = (offAt + 4 * (n + 1) + 7) & ~7;
  const outAt = (dataAt + encodedBound(keys, from, n) + 7) & ~7;
  const mem = kernelMemory(kern, outAt + 16);
  stageKeys(mem, keys, from, n, offAt, dataAt);
  const shift = 16 - bits;
  for (let j = 0; j < n; j++) {
    const s = mem.readUInt32LE(offAt + 4 * j);
    const e = mem.readUInt32LE(offAt + 4 * j + 4);
    kern.highway128(dataAt + s, e - s, outAt);
    out[j] = ((mem[outAt + 15]! << 8) | mem[outAt + 14]!) >>> shift;
  }
}
