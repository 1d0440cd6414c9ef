// Canonical JSON for hashing structured keys: equal for logically equal values whatever the key
// order. Object keys are sorted by Unicode code point (not UTF-16 unit: the two differ once
// astral characters meet U+E000..U+FFFF) at every depth, no whitespace, non-ASCII kept as is,
// strings and numbers formatted exactly as JSON.stringify does.
//
// Anything JSON.stringify would silently drop or mangle is an error instead, naming the path:
// cycles, BigInt (unless options.bigint gives a rule), NaN/Infinity, undefined/functions/symbols
// inside arrays, functions/symbols as property values, Map/Set/typed arrays and other exotic
// objects. `undefined` property values are omitted, as in JSON. Objects with toJSON() use it.
import { ErrorCodes, HashGateError, checkInt, checkOneOf } from '../errors.js';

export interface CanonicalJsonOptions {
  /** 'error' (default), 'string' ("123") or 'number' (123, digits as is). */
  bigint?: 'error' | 'string' | 'number';
  /** Nesting limit (objects + arrays). Default 512. */
  maxDepth?: number;
}

const DEFAULTS = { bigint: 'error', maxDepth: 512 } as const;
const BIGINT_RULES = ['error', 'string', 'number'] as const;

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const child = (path: string, key: string): string => (IDENT.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`);

function fail(path: string, what: string, value?: unknown): never {
  throw new HashGateError(ErrorCodes.CANONICAL_JSON, `canonicalJson: ${what} at ${path}`, {
    details: { path, type: value === null ? 'null' : typeof value },
  });
}

/** Code point order; equal to UTF-16 order except when a surrogate meets U+E000..U+FFFF. */
function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (D800-DFFF) encode code points above FFFF, so they sort after E000-FFFF.
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys && x >= 0xd800 && y >= 0xd800) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

const EXOTIC = [Map, Set, WeakMap, WeakSet, ArrayBuffer, SharedArrayBuffer, Promise, RegExp];

export function canonicalJson(value: unknown, options: CanonicalJsonOptions = {}): string {
  const bigint = checkOneOf('options.bigint', options.bigint ?? DEFAULTS.bigint, BIGINT_RULES);
  const maxDepth = checkInt('options.maxDepth', options.maxDepth ?? DEFAULTS.maxDepth, 1, 100_000);
  const ancestors = new Set<object>();
  const parts: string[] = [];

  // Returns false when the value is "absent" (undefined / omitted): only legal as a property value.
  const emit = (v: unknown, key: string, path: string, depth: number): boolean => {
    if (v !== null && typeof v === 'object' && typeof (v as { toJSON?: unknown }).toJSON === 'function') {
      v = (v as { toJSON(k: string): unknown }).toJSON(key);
    }
    switch (typeof v) {
      case 'string':
        parts.push(JSON.stringify(v));
        return true;
      case 'number':
        if (!Number.isFinite(v)) fail(path, `non-finite number ${v}`, v);
        parts.push(JSON.stringify(v)); // -0 -> "0", as JSON does
        return true;
      case 'boolean':
        parts.push(v ? 'true' : 'false');
        return true;
      case 'bigint':
        if (bigint === 'error') fail(path, 'BigInt without a rule (set options.bigint)', v);
        parts.push(bigint === 'string' ? `"${v}"` : `${v}`);
        return true;
      case 'undefined':
        return false;
      case 'function':
      case 'symbol':
        fail(path, `${typeof v} is not JSON`, v);
    }
    if (v === null) {
      parts.push('null');
      return true;
    }
    const obj = v as object;
    if (ancestors.has(obj)) fail(path, 'cycle', obj);
    if (depth >= maxDepth) fail(path, `nesting deeper than ${maxDepth}`, obj);
    if (obj instanceof Number || obj instanceof String || obj instanceof Boolean) {
      return emit(obj.valueOf(), key, path, depth);
    }
    if (ArrayBuffer.isView(obj) || EXOTIC.some((C) => obj instanceof C)) {
      fail(path, `${obj.constructor?.name ?? 'exotic object'} has no canonical JSON form`, obj);
    }
    ancestors.add(obj);
    if (Array.isArray(obj)) {
      parts.push('[');
      for (let i = 0; i < obj.length; i++) {
        if (i > 0) parts.push(',');
        const p = `${path}[${i}]`;
        if (!emit(obj[i], String(i), p, depth + 1)) fail(p, 'undefined in an array', undefined);
      }
      parts.push(']');
    } else {
      const keys = Object.keys(obj).sort(compareCodePoints);
      parts.push('{');
      let first = true;
      for (const k of keys) {
        const val = (obj as Record<string, unknown>)[k];
        if (val === undefined) continue;
        const at = parts.length;
        parts.push(first ? '' : ',', JSON.stringify(k), ':');
        if (!emit(val, k, child(path, k), depth + 1)) {
          parts.length = at; // toJSON returned undefined: omit like JSON.stringify
          continue;
        }
        first = false;
      }
      parts.push('}');
    }
    ancestors.delete(obj);
    return true;
  };

  if (!emit(value, '', '$', 0)) fail('$', 'undefined has no JSON form', undefined);
  return parts.join('');
}
