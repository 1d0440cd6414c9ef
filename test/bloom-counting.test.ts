import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { BloomFilter, CountingBloomFilter, SwappableBloom, rebuild } from '../src/bloom/index.js';
import { ErrorCodes } from '../src/errors.js';

describe('CountingBloomFilter', () => {
  it('add / remove / mightContain; shape and bits match BloomFilter', () => {
    const c = CountingBloomFilter.create({ expectedItems: 1000, fpp: 0.01 });
    const b = BloomFilter.create({ expectedItems: 1000, fpp: 0.01 });
    expect([c.size, c.hashFunctions]).toEqual([b.bitSize, b.hashFunctions]);
    expect(c.byteLength).toBe(b.byteLength * 4);
    const keys = Array.from({ length: 500 }, (_, i) => `k${i}`);
    c.addAll(keys);
    b.addAll(keys);
    expect(Buffer.from(c.toBloomFilter().bitsView()).equals(Buffer.from(b.bitsView()))).toBe(true);
    expect(c.mightContainAll(keys).every((v) => v === 1)).toBe(true);
    for (const k of keys.slice(0, 250)) expect(c.remove(k)).toBe(true);
    // Remaining keys never become false negatives.
    expect(c.mightContainAll(keys.slice(250)).every((v) => v === 1)).toBe(true);
    // Removed keys are (almost all) gone.
    const still = c.mightContainAll(keys.slice(0, 250)).reduce((a, v) => a + v, 0);
    expect(still).toBeLessThan(10);
    for (const k of keys.slice(250)) c.remove(k);
    expect(c.nonZeroCount()).toBe(0);
    expect(c.remove('never-added-' + Math.random())).toBe(false);
  });

  it('counters saturate at 15, never wrap, and a saturated counter survives remove', () => {
    const c = CountingBloomFilter.create({ expectedItems: 100, fpp: 0.01 });
    for (let i = 0; i < 40; i++) c.add('hot');
    expect(c.count('hot')).toBe(15);
    expect(c.saturatedCount()).toBe(c.hashFunctions); // distinct indexes for this key
    for (let i = 0; i < 40; i++) c.remove('hot');
    // Saturated counters stay at 15: the key is still reported present (a false positive at
    // worst) rather than risking false negatives for other keys sharing those counters.
    expect(c.count('hot')).toBe(15);
    expect(c.mightContain('hot')).toBe(true);
    // Below saturation, counts are exact for a lone key.
    c.add('warm');
    c.add('warm');
    c.add('warm');
    expect(c.count('warm')).toBe(3);
    c.remove('warm');
    expect(c.count('warm')).toBe(2);
  });

  it('no false negatives under random add/remove of multisets (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.string({ maxLength: 12 }), fc.integer({ min: 1, max: 3 })), { maxLength: 150 }),
        fc.array(fc.nat(), { maxLength: 100 }),
        (adds, removes) => {
          const c = CountingBloomFilter.create({ expectedItems: 200, fpp: 0.01 });
          const live = new Map<string, number>();
          for (const [k, n] of adds) {
            for (let i = 0; i < n; i++) c.add(k);
            live.set(k, (live.get(k) ?? 0) + n);
          }
          const names = [...live.keys()];
          for (const r of removes) {
            if (names.length === 0) break;
            const k = names[r % names.length]!;
            const n = live.get(k)!;
            if (n === 0) continue;
            expect(c.remove(k)).toBe(true);
            live.set(k, n - 1);
          }
          for (const [k, n] of live) if (n > 0) expect(c.mightContain(k)).toBe(true);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('fromShared sees the same counters', () => {
    const c = CountingBloomFilter.create({ expectedItems: 100, fpp: 0.05 });
    const d = structuredClone(c.toShared());
    const other = CountingBloomFilter.fromShared(d);
    other.add('x');
    expect(c.mightContain('x')).toBe(true);
    c.remove('x');
    expect(other.mightContain('x')).toBe(false);
  });
});

describe('rebuild + atomic swap', () => {
  it('readers never see a half-built filter; mid-rebuild adds survive the swap', async () => {
    const initial = BloomFilter.create({ expectedItems: 10_000, fpp: 0.01 });
    const oldKeys = Array.from({ length: 5000 }, (_, i) => `old${i}`);
    initial.addAll(oldKeys);
    const gate = new SwappableBloom(initial);
    const newKeys = Array.from({ length: 20_000 }, (_, i) => `new${i}`);
    let produced = 0;
    const seen: number[] = [];
    async function* source() {
      for (let i = 0; i < newKeys.length; i += 1000) {
        // Between chunks, readers still get the complete old filter.
        seen.push(gate.mightContainAll(oldKeys).reduce((a, v) => a + v, 0));
        yield newKeys.slice(i, i + 1000);
        produced += 1000;
        await new Promise((r) => setImmediate(r));
      }
    }
    let swappedTo: BloomFilter | undefined;
    const p = rebuild(gate, source(), { expectedItems: 25_000, fpp: 0.01, onSwap: (n) => (swappedTo = n) });
    expect(gate.rebuilding).toBe(true);
    await expect(gate.rebuild([], { expectedItems: 1, fpp: 0.1 })).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG });
    await new Promise((r) => setImmediate(r));
    gate.add('added-during-rebuild');
    expect(gate.current).toBe(initial);
    const previous = await p;
    expect(produced).toBe(20_000);
    expect(previous).toBe(initial);
    expect(gate.current).toBe(swappedTo);
    expect(gate.generation).toBe(1);
    expect(seen.every((n) => n === oldKeys.length)).toBe(true);
    expect(gate.mightContainAll(newKeys).every((v) => v === 1)).toBe(true);
    expect(gate.mightContain('added-during-rebuild')).toBe(true);
    // Keys not in the new source are gone (deletion by rebuild), up to false positives.
    const stale = gate.mightContainAll(oldKeys).reduce((a, v) => a + v, 0);
    expect(stale).toBeLessThan(200);
  });

  it('a failing source leaves the current filter in place', async () => {
    const initial = BloomFilter.create({ expectedItems: 100, fpp: 0.01 });
    initial.add('keep');
    const gate = new SwappableBloom(initial);
    async function* bad() {
      yield 'a';
      throw new Error('source broke');
    }
    await expect(gate.rebuild(bad(), { expectedItems: 100, fpp: 0.01 })).rejects.toThrow('source broke');
    expect(gate.current).toBe(initial);
    expect(gate.rebuilding).toBe(false);
    await expect(gate.rebuild(42 as never, { expectedItems: 100, fpp: 0.01 })).rejects.toThrow(TypeError);
  });
});
