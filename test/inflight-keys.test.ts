// InFlightKeys (the keys a TieredCache is loading, per table) answers like a Map of key -> (load, index), even when every key
// shares a probe chain, and gives back a burst's memory; concurrent lookups of overlapping keys load each key once.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { InFlightKeys, keyHash } from '../src/cache/inflight-keys.js';
import { MemoryColdStore, TieredCache, encodeValue } from '../src/cache/index.js';

type Op = { add: boolean; key: number };

/** Runs `ops` on a table and on a Map, hashing key k with `hash(k)`, and checks they agree after every step. */
const agrees = (ops: readonly Op[], hash: (k: number) => number, keySpace = 64): void => {
  const t = new InFlightKeys<string>();
  const model = new Map<string, [string, number]>();
  ops.forEach(({ add, key }, step) => {
    const k = `k${key}`;
    const h = hash(key);
    const held = model.get(k);
    if (add && held === undefined) {
      expect(t.find(k, h)).toBe(-1);
      t.add(k, h, `load${step}`, step);
      model.set(k, [`load${step}`, step]);
    } else if (!add) {
      expect(t.delete(k, h)).toBe(held !== undefined);
      model.delete(k);
    }
    expect(t.size).toBe(model.size);
  });
  for (let key = 0; key < keySpace; key++) {
    const k = `k${key}`;
    const slot = t.find(k, hash(key));
    const held = model.get(k);
    if (held === undefined) expect(slot).toBe(-1);
    else expect([t.loadAt(slot), t.indexAt(slot)]).toEqual(held);
  }
};

const opsOver = (keys: number, maxLength: number) => fc.array(fc.record({ add: fc.boolean(), key: fc.integer({ min: 0, max: keys - 1 }) }), { maxLength });
const ops = opsOver(64, 400);

describe('InFlightKeys', () => {
  it('agrees with a Map (property)', () => {
    fc.assert(fc.property(ops, (o) => agrees(o, (k) => keyHash(`k${k}`))), { numRuns: 300 });
  });

  it('agrees with a Map when hashes collide: one chain, chains that wrap the table, equal hashes (property)', () => {
    // deletes must pull back the later keys of a run without cutting another key's chain
    fc.assert(fc.property(ops, (o) => agrees(o, () => 7)), { numRuns: 200 });
    fc.assert(fc.property(ops, (o) => agrees(o, (k) => 60 + (k % 5))), { numRuns: 200 });
    // home slots at the table's end: runs wrap around to slot 0
    fc.assert(fc.property(ops, (o) => agrees(o, (k) => (0xfffffff0 + (k % 16)) >>> 0)), { numRuns: 200 });
  });

  it('agrees with a Map across growths and shrinks, hashes colliding in runs (property)', () => {
    // adds biased 3:1 so the table fills past its first size, then drains
    const grow = fc.array(fc.record({ add: fc.constantFrom(true, true, true, false), key: fc.integer({ min: 0, max: 1999 }) }), { minLength: 1500, maxLength: 4000 });
    const wave = fc.tuple(grow, fc.array(fc.integer({ min: 0, max: 1999 }), { maxLength: 2000 })).map(([g, d]) => [...g, ...d.map((key) => ({ add: false, key }))]);
    fc.assert(fc.property(wave, (o) => agrees(o, (k) => keyHash(`k${k >> 2}`), 2000)), { numRuns: 40 });
  });

  it('grows past its first size and, once a smaller wave empties it, shrinks back', () => {
    const t = new InFlightKeys<number>();
    const first = t.slots;
    const keys = Array.from({ length: 10_000 }, (_, i) => `key-${i}`);
    keys.forEach((k, i) => t.add(k, keyHash(k), 1, i));
    expect(t.slots).toBeGreaterThanOrEqual(2 * keys.length);
    const big = t.slots;
    keys.forEach((k, i) => expect(t.indexAt(t.find(k, keyHash(k)))).toBe(i));
    for (const k of keys) expect(t.delete(k, keyHash(k))).toBe(true);
    // the same wave again would fit: the table keeps its size
    expect(t.slots).toBe(big);
    t.add('a', keyHash('a'), 2, 0);
    t.delete('a', keyHash('a'));
    expect(t.slots).toBe(first);
    expect(t.size).toBe(0);
  });

  it('hashes every code unit: keys differing in one character anywhere land apart', () => {
    const base = '张三110101199001011234';
    const hashes = new Set<number>();
    for (let i = 0; i < base.length; i++) hashes.add(keyHash(base.slice(0, i) + 'x' + base.slice(i + 1)));
    expect(hashes.size).toBe(base.length);
  });
});

describe('TieredCache single flight under many overlapping lookups', () => {
  it('loads every key once and answers every caller as one lookup at a time would (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(fc.integer({ min: 0, max: 300 }), { minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 60 }), async (calls) => {
        const cold = new MemoryColdStore();
        // even keys exist, odd keys are absent
        await cold.mput('t', Array.from({ length: 151 }, (_, i) => ({ key: `k${2 * i}`, value: encodeValue({ v: 2 * i }), ts: 1 })));
        const c = new TieredCache({ cold, negativeTtlMs: 60_000 });
        const got = await Promise.all(calls.map((ks) => c.lookup('t', ks.map((k) => `k${k}`))));
        got.forEach((vals, i) => expect(vals).toEqual(calls[i]!.map((k) => (k % 2 === 0 ? { v: k } : undefined))));
        expect(cold.counters.keysRead).toBe(new Set(calls.flat()).size);
        await c.close();
      }),
      { numRuns: 60 },
    );
  });
});
