import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../src/hash/index.js';
import { HashGateError } from '../src/errors.js';

function shuffleKeys(v: unknown, r: () => number): unknown {
  if (Array.isArray(v)) return v.map((x) => shuffleKeys(x, r));
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v);
    for (let i = entries.length - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [entries[i], entries[j]] = [entries[j]!, entries[i]!];
    }
    return Object.fromEntries(entries.map(([k, x]) => [k, shuffleKeys(x, r)]));
  }
  return v;
}

const expectError = (fn: () => unknown, path: string): void => {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(HashGateError);
    expect((e as HashGateError).code).toBe('HG_ERR_CANONICAL_JSON');
    expect((e as HashGateError).details?.['path']).toBe(path);
    expect((e as Error).message).toContain(path);
    return;
  }
  expect.fail('expected canonicalJson to throw');
};

describe('canonicalJson', () => {
  it('sorts keys at every depth, no whitespace, non-ASCII as is', () => {
    expect(canonicalJson({ b: 1, a: [{ d: true, c: null }, '王伟'], é: 'ü' })).toBe('{"a":[{"c":null,"d":true},"王伟"],"b":1,"é":"ü"}');
    expect(canonicalJson('x\n"y"')).toBe('"x\\n\\"y\\""');
    expect(canonicalJson([])).toBe('[]');
    expect(canonicalJson({})).toBe('{}');
    expect(canonicalJson(-0)).toBe('0');
    expect(canonicalJson(1e21)).toBe('1e+21');
    expect(canonicalJson({ a: undefined, b: 2 })).toBe('{"b":2}');
    expect(canonicalJson({ d: new Date(0) })).toBe('{"d":"1970-01-01T00:00:00.000Z"}');
  });

  it('orders keys by code point, not UTF-16 unit', () => {
    // U+FF61 (one unit, 0xFF61) < U+1F600 (units 0xD83D 0xDE00) by code point, the reverse by unit.
    expect(canonicalJson({ '😀': 1, '｡': 2 })).toBe('{"｡":2,"😀":1}');
    expect(canonicalJson({ b: 1, a: 2, B: 3, '': 4, aa: 5 })).toBe('{"":4,"B":3,"a":2,"aa":5,"b":1}');
  });

  it('is independent of key order and equals JSON.parse round trips', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer(), (v, seed) => {
        let s = seed >>> 0;
        const r = (): number => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
        const c = canonicalJson(v);
        expect(canonicalJson(shuffleKeys(v, r))).toBe(c);
        expect(canonicalJson(JSON.parse(c))).toBe(c);
        expect(JSON.parse(c)).toEqual(JSON.parse(JSON.stringify(v)));
      }),
      { numRuns: 300 },
    );
  });

  it('allows shared (non-cyclic) references', () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: [shared, shared] })).toBe('{"a":{"x":1},"b":[{"x":1},{"x":1}]}');
  });

  it('rejects bad values with HG_ERR_CANONICAL_JSON naming the path', () => {
    const cyc: Record<string, unknown> = { a: { b: [] } };
    ((cyc['a'] as Record<string, unknown>)['b'] as unknown[]).push(cyc);
    expectError(() => canonicalJson(cyc), '$.a.b[0]');
    expectError(() => canonicalJson({ n: 1n }), '$.n');
    expectError(() => canonicalJson({ x: [1, NaN] }), '$.x[1]');
    expectError(() => canonicalJson({ 'a b': Infinity }), '$["a b"]');
    expectError(() => canonicalJson([undefined]), '$[0]');
    // eslint-disable-next-line no-sparse-arrays
    expectError(() => canonicalJson([1, , 3]), '$[1]');
    expectError(() => canonicalJson({ f: () => 1 }), '$.f');
    expectError(() => canonicalJson({ s: Symbol('x') }), '$.s');
    expectError(() => canonicalJson({ m: new Map() }), '$.m');
    expectError(() => canonicalJson({ t: new Uint8Array(2) }), '$.t');
    expectError(() => canonicalJson(undefined), '$');
    let deep: unknown = 1;
    for (let i = 0; i < 20; i++) deep = [deep];
    expectError(() => canonicalJson(deep, { maxDepth: 10 }), '$[0][0][0][0][0][0][0][0][0][0]');
    expect(() => canonicalJson({}, { bigint: 'nope' as never })).toThrow(TypeError);
  });

  it('BigInt with a rule', () => {
    expect(canonicalJson({ n: 12345678901234567890n }, { bigint: 'string' })).toBe('{"n":"12345678901234567890"}');
    expect(canonicalJson({ n: 12345678901234567890n }, { bigint: 'number' })).toBe('{"n":12345678901234567890}');
  });
});
