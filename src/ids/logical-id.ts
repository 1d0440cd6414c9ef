// Logical ids: canonical JSON -> hash. A logical id only *finds* candidates;
// identity is the physical id plus a raw comparison.
import { createHash } from 'node:crypto';
import { canonicalJson, murmur3_128Hex } from '../hash/index.js';
import { checkOneOf, invalidType } from '../errors.js';

export type BuiltinIdAlgorithm = 'murmur3_128' | 'murmur3_128+len' | 'sha256';
/** A user-supplied hash of the canonical string (tests use deliberately weak ones). */
export interface CustomIdHash {
  name: string;
  hash(canonical: string): string;
}
export type IdAlgorithm = BuiltinIdAlgorithm | CustomIdHash;

export const ID_ALGORITHMS: readonly BuiltinIdAlgorithm[] = ['murmur3_128', 'murmur3_128+len', 'sha256'];

export function checkAlgorithm(name: string, a: unknown): IdAlgorithm {
  if (typeof a === 'string') return checkOneOf(name, a, ID_ALGORITHMS);
  if (a !== null && typeof a === 'object' && typeof (a as CustomIdHash).hash === 'function' && typeof (a as CustomIdHash).name === 'string') {
    return a as CustomIdHash;
  }
  throw invalidType(name, `one of ${ID_ALGORITHMS.join(', ')} or { name, hash(canonical) }`, a);
}

export const algorithmName = (a: IdAlgorithm): string => (typeof a === 'string' ? a : a.name);

/**
 * - murmur3_128: 32 lowercase hex digits (x64 variant, seed 0, Guava byte order).
 * - murmur3_128+len: `<32 hex>_<UTF-8 byte length of the canonical JSON>` (the length suffix): two
 *   colliding inputs must also agree on length, which costs nothing to check.
 * - sha256: 64 hex digits, the escalation target.
 */
export function hashCanonical(canonical: string, algorithm: IdAlgorithm = 'murmur3_128'): string {
  switch (algorithm) {
    case 'murmur3_128':
      return murmur3_128Hex(canonical);
    case 'murmur3_128+len':
      return `${murmur3_128Hex(canonical)}_${Buffer.byteLength(canonical)}`;
    case 'sha256':
      return createHash('sha256').update(canonical).digest('hex');
    default: {
      const h = algorithm.hash(canonical);
      if (typeof h !== 'string' || h.length === 0) throw invalidType(`algorithm ${algorithm.name} hash()`, 'a non-empty string', h);
      return h;
    }
  }
}

/** canonicalJson -> hash: `{a:1,b:2}` and `{b:2,a:1}` get one id. */
export function logicalId(record: unknown, algorithm: IdAlgorithm = 'murmur3_128'): string {
  return hashCanonical(canonicalJson(record), algorithm);
}
