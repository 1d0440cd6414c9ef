// PackedKeys: many keys already in bytes (lines of a file, a network buffer) handed to the kernel
// without creating a JS string per key.
import { invalidType, outOfRange } from '../errors.js';

/**
 * Keys already in bytes: `bytes[offsets[i] .. offsets[i+1])` is key i, so `offsets` has count+1
 * entries. Lets file loaders hand lines to the kernel without creating JS strings.
 */
export interface PackedKeys {
  bytes: Uint8Array;
  offsets: Uint32Array;
  count: number;
}

/** Packs strings (UTF-8) and byte keys back to back into one buffer. */
export function packKeys(keys: ReadonlyArray<string | Uint8Array>, name = 'keys'): PackedKeys {
  if (!Array.isArray(keys)) throw invalidType(name, 'an array of strings or Uint8Arrays', keys);
  const n = keys.length;
  const offsets = new Uint32Array(n + 1);
  let bound = 0;
  for (let i = 0; i < n; i++) {
    const k = keys[i];
    if (typeof k === 'string') bound += k.length * 3;
    else if (k instanceof Uint8Array) bound += k.length;
    else throw invalidType(`${name}[${i}]`, 'a string or Uint8Array', k);
  }
  if (bound > 0xffff_ffff) throw outOfRange(name, 'at most 4 GiB of key bytes', bound);
  const bytes = Buffer.allocUnsafe(bound) as Buffer & { utf8Write(s: string, offset: number): number };
  let p = 0;
  for (let i = 0; i < n; i++) {
    const k = keys[i]!;
    if (typeof k === 'string') p += bytes.utf8Write(k, p);
    else {
      bytes.set(k, p);
      p += k.length;
    }
    offsets[i + 1] = p;
  }
  return { bytes: bytes.subarray(0, p), offsets, count: n };
}

export interface PackLinesOptions {
  /** Drop one trailing '\r' per line (CRLF files). Default true. */
  stripCR?: boolean;
  /** Skip empty lines. Default false: an empty line is an empty key. */
  skipEmpty?: boolean;
}

/**
 * Splits newline-separated text into PackedKeys (one copy of the bytes, without separators; no
 * strings). A final line without '\n' counts; a trailing '\n' does not start another key.
 */
export function packLines(text: Uint8Array, options: PackLinesOptions = {}, name = 'text'): PackedKeys {
  if (!(text instanceof Uint8Array)) throw invalidType(name, 'a Uint8Array', text);
  const stripCR = options.stripCR ?? true;
  const skipEmpty = options.skipEmpty ?? false;
  const src = Buffer.isBuffer(text) ? text : Buffer.from(text.buffer, text.byteOffset, text.byteLength);
  const len = src.length;
  // Count lines first so offsets are sized once.
  let lines = 0;
  for (let at = 0; at < len; ) {
    const nl = src.indexOf(10, at);
    lines++;
    if (nl < 0) break;
    at = nl + 1;
  }
  const offsets = new Uint32Array(lines + 1);
  const bytes = Buffer.allocUnsafe(len);
  let p = 0;
  let count = 0;
  for (let at = 0; at < len; ) {
    let nl = src.indexOf(10, at);
    const next = nl < 0 ? len : nl + 1;
    if (nl < 0) nl = len;
    let end = nl;
    if (stripCR && end > at && src[end - 1] === 13) end--;
    if (end > at || !skipEmpty) {
      p += src.copy(bytes, p, at, end);
      offsets[++count] = p;
    }
    at = next;
  }
  return { bytes: bytes.subarray(0, p), offsets: offsets.subarray(0, count + 1), count };
}

/** Key i of a PackedKeys as a view (no copy). */
export function packedKey(keys: PackedKeys, i: number): Uint8Array {
  return keys.bytes.subarray(keys.offsets[i], keys.offsets[i + 1]);
}
