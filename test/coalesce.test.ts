// Coalescing of concurrent small calls: option validation, and merged answers equal to the
// answers of the same calls run one after another (fast-check over random interleavings).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { HashGate, GATE_DEFAULTS as DEFAULTS, ErrorCodes } from '../src/index.js';
import { TieredCache, encodeValue } from '../src/entries/cache.js';
import { DedupService } from '../src/dedup/index.js';
import { COALESCE_DEFAULTS, Coalescer, parseCoalesceOptions } from '../src/util/coalescer.js';

const Y2025 = new Date('2025-06-01T00:00:00Z');
const Y2026 = new Date('2026-06-01T00:00:00Z');

describe('coalesce option', () => {
  it('defaults live with the other defaults and can be turned off', () => {
    expect(DEFAULTS.coalesce).toEqual({ maxKeys: 128, maxDelayMs: 0 });
    expect(parseCoalesceOptions(undefined)).toEqual(COALESCE_DEFAULTS);
    expect(parseCoalesceOptions(false)).toBe(false);
    expect(parseCoalesceOptions({ maxKeys: 10 })).toEqual({ maxKeys: 10, maxDelayMs: 0 });
  });

  it('rejects bad values with coded TypeError/RangeError naming the option', async () => {
    const cases: Array<[unknown, ErrorConstructor, string]> = [
      [{ maxKeys: 0 }, RangeError, 'options.coalesce.maxKeys'],
      [{ maxKeys: 1.5 }, TypeError, 'options.coalesce.maxKeys'],
      [{ maxKeys: '8' }, TypeError, 'options.coalesce.maxKeys'],
      [{ maxDelayMs: -1 }, RangeError, 'options.coalesce.maxDelayMs'],
      [{ maxDelayMs: 1e9 }, RangeError, 'options.coalesce.maxDelayMs'],
      [{ maxKey: 3 }, TypeError, 'options.coalesce.maxKey'],
      [true, TypeError, 'options.coalesce'],
      [null, TypeError, 'options.coalesce'],
    ];
    for (const [v, cls, name] of cases) {
      const err = await HashGate.open({ threads: 0, coalesce: v as never }).catch((e: unknown) => e);
      expect(err, JSON.stringify(v)).toBeInstanceOf(cls);
      expect((err as Error).message).toContain(name);
      expect((err as { code: string }).code).toMatch(/^HG_ERR_INVALID_(ARG|OPTION)$/);
    }
    expect(() => new TieredCache({ coalesce: { maxKeys: -2 } })).toThrow(/coalesce\.maxKeys/);
    expect(() => new DedupService({ coalesce: { maxDelayMs: 'x' as never } })).toThrow(/coalesce\.maxDelayMs/);
  });
});

describe('Coalescer', () => {
  it('idle: flushes from a microtask (no turn waited); busy: merges the rest of the turn; bounds batches by maxKeys', async () => {
    const batches: number[][] = [];
    const co: Coalescer<number> = new Coalescer<number>({ maxKeys: 5, maxDelayMs: 0 }, (items) => {
      batches.push(items);
      setImmediate(co.done);
    });
    co.add(1, 1); // idle: flushed once this synchronous run ends
    co.add(2, 1);
    expect(batches).toEqual([]);
    await Promise.resolve();
    expect(batches).toEqual([[1, 2]]);
    for (let i = 3; i <= 9; i++) co.add(i, 1);
    expect(batches).toEqual([[1, 2], [3, 4, 5, 6, 7]]); // 5 keys reached: flushed without waiting
    await new Promise((r) => setImmediate(r));
    expect(batches).toEqual([[1, 2], [3, 4, 5, 6, 7], [8, 9]]);
    await co.drain();
    expect(co.inFlight).toBe(0);
  });

  it('callers woken by one reply re-merge: a closed loop keeps full batches (no one-key batch split off)', async () => {
    const sizes: number[] = [];
    const co: Coalescer<() => void> = new Coalescer<() => void>({ maxKeys: 8, maxDelayMs: 0 }, (items) => {
      sizes.push(items.length);
      // a store reply: done first, then every caller of the batch is woken (like a socket read)
      setImmediate(() => {
        co.done();
        for (const wake of items) wake();
      });
    });
    const call = (): Promise<void> => new Promise<void>((resolve) => co.add(resolve, 1));
    const loop = async (): Promise<void> => {
      for (let i = 0; i < 20; i++) await call();
    };
    await Promise.all(Array.from({ length: 16 }, loop));
    // 16 callers x 20 calls, maxKeys 8: every batch full, never the first woken caller alone
    expect(sizes.length).toBe(40);
    expect(sizes.every((n) => n === 8)).toBe(true);
  });

  it('maxDelayMs holds even a lone call for the delay', async () => {
    const batches: number[][] = [];
    const co: Coalescer<number> = new Coalescer<number>({ maxKeys: 100, maxDelayMs: 20 }, (items) => {
      batches.push(items);
      co.done();
    });
    co.add(1, 1);
    await new Promise((r) => setImmediate(r));
    co.add(2, 1);
    expect(batches).toEqual([]);
    await new Promise((r) => setTimeout(r, 40));
    expect(batches).toEqual([[1, 2]]);
  });
});

/** One generated call: keys from a small alphabet (so repeats happen), '' = a bad key. */
interface Op {
  keys: string[];
  year: 2025 | 2026;
  /** What happens before the call is made. */
  gap: 'sync' | 'tick' | 'turn' | 'settle';
}

const opArb: fc.Arbitrary<Op> = fc.record({
  keys: fc.array(fc.oneof({ weight: 12, arbitrary: fc.constantFrom('a', 'b', 'c', 'd', '张三110101199003071234', 'e', 'f') }, { weight: 1, arbitrary: fc.constant('') }), { minLength: 0, maxLength: 6 }),
  year: fc.constantFrom(2025 as const, 2026 as const),
  gap: fc.constantFrom('sync' as const, 'sync' as const, 'tick' as const, 'turn' as const, 'settle' as const),
});

type Outcome = number[] | string;

/** The sequential model: each call alone, in call order; a call with a bad key changes nothing. */
export function model(ops: Op[]): Outcome[] {
  const seen = new Map<number, Set<string>>();
  return ops.map((op) => {
    if (op.keys.some((k) => k === '')) return ErrorCodes.EMPTY_KEY;
    let s = seen.get(op.year);
    if (s === undefined) seen.set(op.year, (s = new Set()));
    return op.keys.map((k) => {
      if (s!.has(k)) return 0;
      s!.add(k);
      return 1;
    });
  });
}

/** Makes the calls with their gaps, concurrently where the gaps allow, and collects outcomes. */
export async function drive(firstSeen: (keys: string[], at: Date) => Promise<Uint8Array>, ops: Op[]): Promise<Outcome[]> {
  const pending: Promise<Outcome>[] = [];
  for (const op of ops) {
    if (op.gap === 'tick') await Promise.resolve();
    else if (op.gap === 'turn') await new Promise((r) => setImmediate(r));
    else if (op.gap === 'settle') await Promise.allSettled(pending);
    pending.push(
      firstSeen(op.keys, op.year === 2025 ? Y2025 : Y2026).then(
        (a) => [...a],
        (e: { code?: string }) => e.code ?? String(e),
      ),
    );
  }
  return Promise.all(pending);
}

describe('merged firstSeen == sequential model (embedded store)', () => {
  for (const layout of ['compact', 'sets'] as const) {
    it(`${layout}: random interleavings, maxKeys and maxDelayMs`, async () => {
      let merged = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(opArb, { minLength: 1, maxLength: 40 }),
          fc.constantFrom<false | { maxKeys: number; maxDelayMs: number }>(false, { maxKeys: 1, maxDelayMs: 0 }, { maxKeys: 3, maxDelayMs: 0 }, { maxKeys: 4096, maxDelayMs: 0 }, { maxKeys: 8, maxDelayMs: 1 }),
          fc.boolean(),
          async (ops, coalesce, cache) => {
            const svc = new DedupService({ dedup: { layout, buckets: 4, cacheMaxEntries: cache ? 1000 : 0 }, coalesce });
            try {
              const got = await drive((k, at) => svc.firstSeen(k, { at }), ops);
              expect(got).toEqual(model(ops));
              const c = svc.counters;
              if (c.batches < c.calls) merged++;
            } finally {
              await svc.close();
            }
          },
        ),
        { numRuns: 150 },
      );
      expect(merged).toBeGreaterThan(10); // the property really exercised merged batches
    });
  }

  it('two concurrent calls with the same new key: the earlier gets 1, the later 0; one batch', async () => {
    const gate = await HashGate.open({ threads: 0 });
    const [a, b, c] = await Promise.all([gate.firstSeen(['k1', 'k2']), gate.firstSeen(['k2', 'k1', 'k3']), gate.firstSeen(['k3'])]);
    expect([...a]).toEqual([1, 1]);
    expect([...b]).toEqual([0, 0, 1]);
    expect([...c]).toEqual([0]);
    // all three were made in one synchronous run: one batch
    expect(gate.dedup.counters.calls).toBe(3);
    expect(gate.dedup.counters.batches).toBe(1);
    await gate.close();
  });

  it('a bad key rejects only its own call; the others of the turn are answered', async () => {
    const gate = await HashGate.open({ threads: 0 });
    const r = await Promise.allSettled([gate.firstSeen(['x']), gate.firstSeen(['y', 'z']), gate.firstSeen(['ok', 7 as never]), gate.firstSeen(['y', 'q'])]);
    expect(r[0]).toMatchObject({ status: 'fulfilled' });
    expect(r[1]).toMatchObject({ status: 'fulfilled' });
    expect(r[2]).toMatchObject({ status: 'rejected', reason: { code: ErrorCodes.INVALID_ARG, details: { index: 1 } } });
    expect(r[2].status === 'rejected' && r[2].reason).toBeInstanceOf(TypeError);
    expect([...(r[3] as PromiseFulfilledResult<Uint8Array>).value]).toEqual([0, 1]);
    expect([...(await gate.firstSeen(['ok']))]).toEqual([1]); // the rejected call wrote nothing
    await gate.close();
  });

  it('a store error rejects every caller of the merged batch', async () => {
    const svc = new DedupService({ dedup: { memoryMaxKeys: 3 } });
    await svc.firstSeen(['warm']);
    const a = await svc.firstSeen(['a']);
    expect([...a]).toEqual([1]);
    const r = await Promise.allSettled([svc.firstSeen(['b']), svc.firstSeen(['c', 'd'])]);
    // b, c, d were merged and do not fit: every caller of that batch sees CAPACITY
    expect(r.map((x) => x.status)).toEqual(['rejected', 'rejected']);
    for (const x of r) expect((x as PromiseRejectedResult).reason.code).toBe(ErrorCodes.CAPACITY);
    await svc.close();
  });

  it('calls queued when close() starts are still answered', async () => {
    const svc = new DedupService({});
    const ps = [svc.firstSeen(['a']), svc.firstSeen(['b']), svc.firstSeen(['a'])];
    await svc.close();
    expect((await Promise.all(ps)).map((x) => [...x])).toEqual([[1], [1], [0]]);
    await expect(svc.firstSeen(['c'])).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
  });

  it('256 concurrent one-key callers are answered in a handful of batches', async () => {
    const gate = await HashGate.open({ threads: 0 });
    const keys = Array.from({ length: 256 }, (_, i) => `k${i % 200}`);
    const got = await Promise.all(keys.map((k) => gate.firstSeen([k])));
    expect(got.map((a) => a[0])).toEqual(keys.map((_, i) => (i < 200 ? 1 : 0)));
    // batches of at most maxKeys (128), none split off for the first caller
    expect(gate.dedup.counters.batches).toBe(Math.ceil(256 / 128));
    await gate.close();
  });
});

describe('merged lookups', () => {
  it('misses of concurrent lookups share one load; per-caller values are right', async () => {
    const loads: string[][] = [];
    const cold = {
      async mget(_t: string, keys: string[]) {
        loads.push(keys);
        return keys.map((k) => (k.startsWith('p') ? { value: encodeValue({ k }), ts: 1 } : undefined));
      },
      async mput() {},
    };
    const cache = new TieredCache({ cold: cold as never });
    const calls = [['p1', 'n1'], ['p2'], ['p1', 'p3'], ['n2']];
    const got = await Promise.all(calls.map((c) => cache.lookup('t', c)));
    expect(got).toEqual([[{ k: 'p1' }, undefined], [{ k: 'p2' }], [{ k: 'p1' }, { k: 'p3' }], [undefined]]);
    // the four lookups of one synchronous run share one load; p1 is loaded once
    expect(loads).toEqual([['p1', 'n1', 'p2', 'p3', 'n2']]);
    await cache.close();
  });
});
