import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FingerprintIndex } from '../src/fingerprint/index.js';

// Brute-force model: device -> attribute map; queries scan every device.
type Model = Map<string, Map<string, string>>;
const modelMatch = (m: Model, q: Record<string, string>): string[] =>
  [...m].filter(([, a]) => Object.entries(q).every(([k, v]) => a.get(k) === v)).map(([d]) => d).sort();
const modelAny = (m: Model, q: Record<string, string>): string[] =>
  [...m].filter(([, a]) => Object.entries(q).some(([k, v]) => a.get(k) === v)).map(([d]) => d).sort();

const LONG = 'L'.repeat(80);
const attrName = fc.constantFrom('canvas', 'ua', 'ip');
const attrValue = fc.constantFrom('v0', 'v1', 'v2', LONG, `${LONG}x`, '#h');
const attrs = fc.dictionary(attrName, attrValue, { maxKeys: 3 });
const query = fc.dictionary(attrName, attrValue, { minKeys: 1, maxKeys: 3 });
const op = fc.oneof(
  fc.record({ t: fc.constant('put' as const), d: fc.nat(5), a: attrs }),
  fc.record({ t: fc.constant('update' as const), d: fc.nat(5), a: attrs }),
  fc.record({ t: fc.constant('remove' as const), d: fc.nat(5) }),
  fc.record({ t: fc.constant('match' as const), q: query, limit: fc.integer({ min: 1, max: 8 }) }),
  fc.record({ t: fc.constant('any' as const), q: query, limit: fc.integer({ min: 1, max: 8 }) }),
);


describe('FingerprintIndex (in-memory)', () => {
  it('match/any/remove/update agree with a brute-force model', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 40 }), async (ops) => {
        const idx = new FingerprintIndex();
        const m: Model = new Map();
        for (const o of ops) {
          if (o.t === 'put' || o.t === 'update') {
            const id = `d${o.d}`;
            if (o.t === 'put' && Object.keys(o.a).length === 0) continue;
            if (o.t === 'update' && Object.keys(o.a).length === 0) continue;
            await idx[o.t](id, o.a);
            const cur = o.t === 'put' ? new Map<string, string>() : (m.get(id) ?? new Map<string, string>());
            for (const [k, v] of Object.entries(o.a)) cur.set(k, v);
            m.set(id, cur);
          } else if (o.t === 'remove') {
            const id = `d${o.d}`;
            expect(await idx.remove(id)).toBe(m.has(id));
            m.delete(id);
          } else {
            const want = o.t === 'match' ? modelMatch(m, o.q) : modelAny(m, o.q);
            const full = (await idx[o.t](o.q)).sort();
            expect(full).toEqual(want);
            const lim = await idx[o.t](o.q, { limit: o.limit });
            expect(lim.length).toBe(Math.min(o.limit, want.length));
            for (const d of lim) expect(want).toContain(d);
          }
        }
        for (const [id, a] of m) expect(await idx.get(id)).toEqual(Object.fromEntries(a));
      }),
      { numRuns: 150 },
    );
  });

  it('put replaces old values: the device leaves the old value set', async () => {
    const idx = new FingerprintIndex();
    await idx.put('dev1', { canvas: 'abc', ua: 'chrome' });
    await idx.put('dev2', { canvas: 'abc', ua: 'firefox' });
    expect((await idx.match({ canvas: 'abc' })).sort()).toEqual(['dev1', 'dev2']);
    await idx.put('dev1', { canvas: 'zzz' });
    expect(await idx.match({ canvas: 'abc' })).toEqual(['dev2']);
    expect(await idx.match({ ua: 'chrome' })).toEqual([]);
    expect(await idx.get('dev1')).toEqual({ canvas: 'zzz' });
    await idx.update('dev1', { ip: 1234 });
    expect(await idx.get('dev1')).toEqual({ canvas: 'zzz', ip: '1234' });
    expect(await idx.remove('dev1')).toBe(true);
    expect(await idx.remove('dev1')).toBe(false);
    expect(await idx.any({ canvas: 'zzz', ip: '1234' })).toEqual([]);
  });

  it('the Bloom gate answers never-indexed values without asking the backend', async () => {
    const idx = new FingerprintIndex({ bloom: { expectedItems: 1000, fpp: 0.001 } });
    await idx.put('dev1', { canvas: 'abc', ua: 'chrome' });
    expect(await idx.match({ canvas: 'abc', ua: 'never-seen' })).toEqual([]);
    expect(await idx.any({ canvas: 'nope', ua: 'never-seen' })).toEqual([]);
    expect(await idx.any({ canvas: 'abc', ua: 'never-seen' })).toEqual(['dev1']);
    const s = idx.stats();
    expect(s.gateShortCircuits).toBe(2);
    expect(s.backendQueries).toBe(1);
    expect(s.gateDroppedTerms).toBe(3);
  });

  it('validates options and arguments, naming them', async () => {
    expect(() => new FingerprintIndex({ defaultLimit: 0 })).toThrow(/index\.defaultLimit/);
    expect(() => new FingerprintIndex({ bloom: { fpp: 2 } })).toThrow(/index\.bloom\.fpp/);
    expect(() => new FingerprintIndex({ maxValueLength: -1 })).toThrow(RangeError);
    expect(() => new FingerprintIndex({ directQueries: 'yes' as never })).toThrow(/index\.directQueries/);
    const idx = new FingerprintIndex();
    await expect(idx.match({})).rejects.toThrow(RangeError);
    await expect(idx.put('', { a: 'b' })).rejects.toThrow(/deviceId/);
    await expect(idx.put('d', { 'bad:name': 'x' })).rejects.toThrow(/attribute name/);
    await expect(idx.match({ a: 'x' }, { limit: 0 })).rejects.toThrow(/options\.limit/);
    const many = Object.fromEntries(Array.from({ length: 257 }, (_, i) => [`a${i}`, 'v']));
    await expect(idx.put('d', many)).rejects.toThrow(/at most 256 attributes/);
    await idx.close();
    await expect(idx.match({ a: 'x' })).rejects.toMatchObject({ code: 'HG_ERR_CLOSED' });
  });
});
