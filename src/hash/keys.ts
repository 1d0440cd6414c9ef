// The one key-batch type (`Keys`) and its one validation: checkKeys returns a CheckedKeys that carries
// the count (and for PackedKeys the checked offsets), and every later stage (hashing arena, Bloom
// filter, dedup, gate, worker pool) takes it as proof instead of checking the batch again.
// encodeUtf8 is hand-written because it is the per-key hot path of every copy into kernel memory
// (arena and Bloom scratch): for short keys a JS loop beats a native call per key.
import { ErrorCodes, HashGateRangeError, HashGateTypeError, checkInt, describe, invalidType, outOfRange } from '../errors.js';
import type { PackedKeys } from './packed.js';

const encoder = new TextEncoder();

type Utf8Writer = Buffer & { utf8Write(s: string, offset: number): number };

/** Strings longer than this go to Buffer#utf8Write (native); shorter ones to the JS loop. */
export const NATIVE_UTF8_FROM = 16;

/**
 * UTF-8 of `s` into `u8` at `pos` (caller guarantees 3 * s.length bytes of room). Identical to
 * TextEncoder: lone surrogates become U+FFFD. Returns the end position. Measured on shape-A and
 * 56-byte keys: the JS loop wins for short strings (no native call), Buffer#utf8Write (same
 * bytes, `buf` views the same memory) for longer ones.
 */
export function encodeUtf8(s: string, u8: Uint8Array, pos: number, buf?: Buffer): number {
  const n = s.length;
  if (n > NATIVE_UTF8_FROM) {
    if (buf !== undefined) return pos + (buf as Utf8Writer).utf8Write(s, pos);
    return pos + encoder.encodeInto(s, u8.subarray(pos, pos + 3 * n)).written;
  }
  for (let i = 0; i < n; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      u8[pos++] = c;
    } else if (c < 0x800) {
      u8[pos++] = 0xc0 | (c >> 6);
      u8[pos++] = 0x80 | (c & 63);
    } else if (c < 0xd800 || c > 0xdfff) {
      u8[pos++] = 0xe0 | (c >> 12);
      u8[pos++] = 0x80 | ((c >> 6) & 63);
      u8[pos++] = 0x80 | (c & 63);
    } else {
      const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
      if (c < 0xdc00 && d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
        u8[pos++] = 0xf0 | (c >> 18);
        u8[pos++] = 0x80 | ((c >> 12) & 63);
        u8[pos++] = 0x80 | ((c >> 6) & 63);
        u8[pos++] = 0x80 | (c & 63);
      } else {
        u8[pos++] = 0xef;
        u8[pos++] = 0xbf;
        u8[pos++] = 0xbd;
      }
    }
  }
  return pos;
}

/**
 * Bytes encodeUtf8 (and TextEncoder) writes for `s`: a lone surrogate counts as U+FFFD, 3 bytes.
 * Counted in JS: for keys of a few dozen units it costs less than Buffer.byteLength's native call.
 */
export function utf8Length(s: string): number {
  const n = s.length;
  let len = n;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) len += 1;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < n && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      len += 2; // a pair: 4 bytes for its 2 units
      i++;
    } else len += 2;
  }
  return len;
}

type Ucs2Writer = Buffer & { ucs2Write(s: string, offset: number): number };

/** Strings longer than this go to Buffer#ucs2Write (native); shorter ones to the JS loop. */
export const NATIVE_UTF16_FROM = 48;

/**
 * The UTF-16 code units of `s` into `u16` from index `at` (caller guarantees s.length units of
 * room); returns the end index. `buf` must view the same memory as `u16` (for long strings, one
 * native copy beats a loop). The kernel's *16 exports hash these units as TextEncoder's UTF-8.
 * The batch copies (the Bloom filter's and the worker lanes') inline this loop, four units a
 * step: measured faster on shape-A keys than one unit a step (less loop overhead per
 * charCodeAt).
 */
export function putUnits(s: string, u16: Uint16Array, at: number, buf: Buffer): number {
  const n = s.length;
  if (n > NATIVE_UTF16_FROM) return at + ((buf as Ucs2Writer).ucs2Write(s, at << 1) >>> 1);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    u16[at + i] = s.charCodeAt(i);
    u16[at + i + 1] = s.charCodeAt(i + 1);
    u16[at + i + 2] = s.charCodeAt(i + 2);
    u16[at + i + 3] = s.charCodeAt(i + 3);
  }
  for (; i < n; i++) u16[at + i] = s.charCodeAt(i);
  return at + n;
}

export type Key = string | Uint8Array;
/** A batch of keys: strings (hashed as UTF-8) and byte keys, or PackedKeys. */
export type Keys = ReadonlyArray<Key> | PackedKeys;

/** Per-key limits a caller (dedup) adds to the structural check; empty keys are then refused. */
export interface KeyLimits {
  /** Most keys in one batch, and the option that sets it (named in the error). */
  maxKeys: number;
  maxKeysOption: string;
  /** Most UTF-8 bytes per key, and its option. */
  maxKeyBytes: number;
  maxKeyBytesOption: string;
}

/** The error for key i of the wrong type: names the index, never the key's contents. */
export function badKey(name: string, i: number, got: unknown): HashGateTypeError {
  return new HashGateTypeError(ErrorCodes.INVALID_ARG, `${name}[${i}] must be a string or Uint8Array, got ${describe(got, true)}`, { name, index: i });
}

/** A validated batch; only checkKeys and slice create one, so holding it means "already checked". */
export class CheckedKeys {
  private constructor(
    readonly keys: Keys,
    readonly count: number,
    /** The PackedKeys when the batch is packed (offsets checked non-decreasing and inside bytes). */
    readonly packed: PackedKeys | undefined,
    /**
     * True when the batch is an array of strings only: the Bloom paths then hand the kernel the
     * strings' UTF-16 code units (no UTF-8 encoding in JS). False is always safe.
     */
    readonly strings = false,
  ) {}

  /** @internal Use checkKeys. */
  static trusted(keys: Keys, count: number, packed: PackedKeys | undefined, strings = false): CheckedKeys {
    return new CheckedKeys(keys, count, packed, strings);
  }

  /** keys[from..to) without copying key bytes (packed offsets stay absolute into `bytes`). */
  slice(from: number, to: number): CheckedKeys {
    if (from === 0 && to === this.count) return this;
    const p = this.packed;
    if (p === undefined) return new CheckedKeys((this.keys as ReadonlyArray<Key>).slice(from, to), to - from, undefined, this.strings);
    const q: PackedKeys = { bytes: p.bytes, offsets: p.offsets.subarray(from, to + 1), count: to - from };
    return new CheckedKeys(q, to - from, q);
  }

  /** Key i (a view into `bytes` for packed keys). */
  at(i: number): Key {
    const p = this.packed;
    return p === undefined ? (this.keys as ReadonlyArray<Key>)[i]! : p.bytes.subarray(p.offsets[i]!, p.offsets[i + 1]!);
  }
}

/**
 * Validates `keys` once. Arrays: every element a string or Uint8Array. PackedKeys: shape, and
 * offsets non-decreasing and inside `bytes`. With `limits`, also batch size, empty and too-long
 * keys (strings measured in UTF-8 bytes only when they could exceed the limit). A CheckedKeys
 * passes through unchanged unless limits are asked for.
 */
export function checkKeys(keys: unknown, name = 'keys', limits?: KeyLimits): CheckedKeys {
  if (keys instanceof CheckedKeys) return limits === undefined ? keys : checkKeys(keys.keys, name, limits);
  if (Array.isArray(keys)) {
    const n = keys.length;
    if (limits !== undefined && n > limits.maxKeys) tooMany(name, n, limits);
    const max = limits?.maxKeyBytes ?? Infinity;
    let strings = true;
    for (let i = 0; i < n; i++) {
      const k: unknown = keys[i];
      let len: number;
      if (typeof k === 'string') {
        len = k.length;
        if (len * 3 > max) len = Buffer.byteLength(k, 'utf8');
      } else if (k instanceof Uint8Array) {
        len = k.byteLength;
        strings = false;
      } else throw badKey(name, i, k);
      if (limits !== undefined) checkLength(name, i, len, limits);
    }
    return CheckedKeys.trusted(keys as ReadonlyArray<Key>, n, undefined, strings);
  }
  const pk = checkPackedShape(keys, name);
  const { offsets, count } = pk;
  if (limits !== undefined && count > limits.maxKeys) tooMany(name, count, limits);
  let prev = offsets[0]!;
  for (let i = 0; i < count; i++) {
    const end = offsets[i + 1]!;
    if (end < prev) throw outOfRange(`${name}.offsets[${i + 1}]`, `>= ${name}.offsets[${i}] (${prev})`, end);
    if (limits !== undefined) checkLength(name, i, end - prev, limits);
    prev = end;
  }
  return CheckedKeys.trusted(pk, count, pk);
}

/** The structural part of a PackedKeys check (not the per-key offsets order). */
function checkPackedShape(keys: unknown, name: string): PackedKeys {
  if (keys === null || typeof keys !== 'object') throw invalidType(name, 'an array of keys or PackedKeys', keys);
  const k = keys as Partial<PackedKeys>;
  if (!(k.bytes instanceof Uint8Array)) throw invalidType(`${name}.bytes`, 'a Uint8Array', k.bytes);
  if (!(k.offsets instanceof Uint32Array)) throw invalidType(`${name}.offsets`, 'a Uint32Array', k.offsets);
  const count = checkInt(`${name}.count`, k.count, 0, 0xffff_fffe);
  if (k.offsets.length < count + 1) throw outOfRange(`${name}.offsets`, `at least count + 1 (${count + 1}) entries`, k.offsets.length);
  if (k.offsets[count]! > k.bytes.length) {
    throw outOfRange(`${name}.offsets[${count}]`, `<= ${name}.bytes.length (${k.bytes.length})`, k.offsets[count]);
  }
  if (k.offsets[0]! > k.offsets[count]!) throw outOfRange(`${name}.offsets[0]`, `<= ${name}.offsets[${count}]`, k.offsets[0]);
  return k as PackedKeys;
}

function tooMany(name: string, n: number, l: KeyLimits): never {
  throw new HashGateRangeError(ErrorCodes.INVALID_ARG, `${name} has ${n} entries; ${l.maxKeysOption} is ${l.maxKeys}`, { name });
}

function checkLength(name: string, i: number, len: number, l: KeyLimits): void {
  if (len === 0) throw new HashGateRangeError(ErrorCodes.EMPTY_KEY, `${name}[${i}] is empty`, { name, index: i });
  if (len > l.maxKeyBytes) {
    throw new HashGateRangeError(ErrorCodes.KEY_TOO_LONG, `${name}[${i}] is ${len} bytes; ${l.maxKeyBytesOption} is ${l.maxKeyBytes}`, { name, index: i, bytes: len });
  }
}
