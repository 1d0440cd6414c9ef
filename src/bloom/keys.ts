// Encoding keys straight into a filter's scratch region: no per-key Uint8Array for strings.
import type { PackedKeys } from '../hash/index.js';
import type { Key, Keys } from '../hash/keys.js';
import { invalidType } from '../errors.js';

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

export type { Key } from '../hash/keys.js';
/** The same type as `Keys` (src/hash/keys.ts), under the name the Bloom API has always used. */
export type KeyBatch = Keys;

export function isPacked(keys: unknown): keys is PackedKeys {
  return (
    typeof keys === 'object' &&
    keys !== null &&
    !Array.isArray(keys) &&
    (keys as PackedKeys).bytes instanceof Uint8Array &&
    (keys as PackedKeys).offsets instanceof Uint32Array &&
    typeof (keys as PackedKeys).count === 'number'
  );
}

export function keyBytes(key: Key, name: string): Uint8Array {
  if (typeof key === 'string') return encoder.encode(key);
  if (key instanceof Uint8Array) return key;
  throw invalidType(name, 'a string or Uint8Array', key);
}
