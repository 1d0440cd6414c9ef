// The Bloom API's names for key types, and keyBytes for the one-key paths.
import type { PackedKeys } from '../hash/index.js';
import type { Key, Keys } from '../hash/keys.js';
import { invalidType } from '../errors.js';

const encoder = new TextEncoder();

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
