// Merged bloomAdd/bloomCheck calls: answers and counts equal running the calls one after another
// (fast-check over random interleavings, inline and on a worker), bad-key isolation, the
// coalesce:false path, and the kernel's per-key "changed" flags.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { BloomFilter } from '../src/entries/bloom.js';
import { ErrorCodes, HashGate, packKeys } from '../src/index.js';
import { addFlagsChecked } from '../src/bloom/bloom-filter.js';
import { checkKeys } from '../src/hash/keys.js';

// Small and crowded on purpose: keys share bits, so a count or check that skipped an earlier
// add (or saw a later one) shows up as a wrong answer.
const SHAPE = { bitSize: 256, hashFunctions: 3 };

/** What running the calls one after another gives, on a fresh filter of the same shape. */
function sequential(calls: Call[]): Array<number | number[]> {
  const model = BloomFilter.withShape(SHAPE);
  return calls.map((c) => {
    if (!c.add) return Array.from(model.mightContainAll(c.keys));
    let changed = 0;
    for (const k of c.keys) changed += model.addAll([k]);
    return changed;
  });
}

interface Call {
  add: boolean;
  keys: string[];
  /** Let the event loop turn before issuing this call (splits merged batches differently). */
  yieldBefore: 'none' | 'micro' | 'turn';
}

const key = fc.integer({ min: 0, max: 60 }).map((i) => `k${i}`);
const call = fc.record({
  add: fc.boolean(),
  keys: fc.oneof({ weight: 4, arbitrary: fc.array(key, { minLength: 0, maxLength: 3 }) }, { weight: 1, arbitrary: fc.array(key, { minLength: 10, maxLength: 40 }) }),
  yieldBefore: fc.constantFrom<Call['yieldBefore']>('none', 'none', 'none', 'micro', 'turn'),
});

async function issue(gate: HashGate, calls: Call[]): Promise<Array<number | number[]>> {
  const pending: Array<Promise<number | number[]>> = [];
  for (const c of calls) {
    if (c.yieldBefore === 'micro') await Promise.resolve();
    else if (c.yieldBefore === 'turn') await new Promise((r) => setImmediate(r));
    pending.push(c.add ? gate.bloomAdd(c.keys) : gate.bloomCheck(c.keys).then((a) => Array.from(a)));
  }
  return Promise.all(pending);
}

function reset(gate: HashGate): void {
  gate.bloom!.loadBitsLE(new Uint8Array(SHAPE.bitSize / 8));
}

describe('merged bloomAdd/bloomCheck equal sequential calls', () => {
  const configs = [
    { name: 'threads 0', opts: { threads: 0 } },
    { name: 'threads 0, maxKeys 8 (big calls run alone)', opts: { threads: 0, coalesce: { maxKeys: 8 } } },
    // inlineThreshold 4 and chunkKeys 8: merged batches go to the worker, several chunks each
    { name: 'threads 1, merged batches on the worker', opts: { threads: 1, inlineThreshold: 4, chunkKeys: 8, coalesce: { maxKeys: 64 } } },
  ] as const;
  const gates: HashGate[] = [];
  beforeAll(async () => {
    for (const c of configs) gates.push(await HashGate.open({ ...c.opts, bloom: BloomFilter.withShape(SHAPE) }));
  });
  afterAll(async () => {
    for (const g of gates) await g.close();
  });

  configs.forEach((cfg, i) => {
    it(`${cfg.name}: random interleavings of adds and checks`, async () => {
      const gate = gates[i]!;
      await fc.assert(
        fc.asyncProperty(fc.array(call, { minLength: 1, maxLength: 30 }), async (calls) => {
          reset(gate);
          const got = await issue(gate, calls);
          expect(got).toEqual(sequential(calls));
        }),
        { numRuns: cfg.opts.threads === 0 ? 60 : 30 },
      );
    });
  });

  it('two callers adding the same new key: the earlier counts it, the later does not', async () => {
    const gate = gates[0]!;
    reset(gate);
    const [a, b, seen] = await Promise.all([gate.bloomAdd(['same']), gate.bloomAdd(['same']), gate.bloomCheck(['same', 'other'])]);
    expect([a, b]).toEqual([1, 0]);
    expect(Array.from(seen)).toEqual([1, 0]);
  });

  it('merges the calls of one turn into one worker task (coalesce:false sends one per call)', async () => {
    const opts = { threads: 1, inlineThreshold: 0, bloom: { expectedItems: 1000, fpp: 0.01 } } as const;
    const merged = await HashGate.open(opts);
    const alone = await HashGate.open({ ...opts, coalesce: false });
    try {
      for (const gate of [merged, alone]) {
        await gate.bloomAdd(['warm']);
        const before = gate.stats().pool!.tasks;
        const keys = Array.from({ length: 10 }, (_, i) => `key-${i}`);
        const adds = await Promise.all(keys.slice(0, 5).map((k) => gate.bloomAdd([k])));
        const checks = await Promise.all(keys.map((k) => gate.bloomCheck([k])));
        expect(adds).toEqual([1, 1, 1, 1, 1]);
        expect(checks.map((c) => c[0])).toEqual([1, 1, 1, 1, 1, 0, 0, 0, 0, 0]);
        const tasks = gate.stats().pool!.tasks - before;
        if (gate === merged) expect(tasks).toBe(2);
        else expect(tasks).toBe(15);
      }
    } finally {
      await merged.close();
      await alone.close();
    }
  });
});

describe('merged Bloom calls: errors stay with their caller', () => {
  it('a bad key rejects only its own call; the others are answered', async () => {
    const gate = await HashGate.open({ threads: 0, bloom: { expectedItems: 1000, fpp: 0.01 } });
    try {
      const results = await Promise.allSettled([
        gate.bloomAdd(['a', 'b']),
        gate.bloomAdd(['c', 42 as never]),
        gate.bloomCheck(['a', 'c']),
        gate.bloomCheck([null as never]),
        gate.bloomAdd(['b', 'd']),
      ]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled']);
      expect((results[0] as PromiseFulfilledResult<number>).value).toBe(2);
      expect(Array.from((results[2] as PromiseFulfilledResult<Uint8Array>).value)).toEqual([1, 0]);
      expect((results[4] as PromiseFulfilledResult<number>).value).toBe(1);
      const err = (results[1] as PromiseRejectedResult).reason as TypeError & { code: string };
      expect(err).toBeInstanceOf(TypeError);
      expect(err.code).toBe(ErrorCodes.INVALID_ARG);
      expect(err.message).toContain('keys[1]');
      expect(Array.from(await gate.bloomCheck(['c', 'd']))).toEqual([0, 1]);
    } finally {
      await gate.close();
    }
  });

  it('coalesce:false answers each call on its own path, with the same answers', async () => {
    const gate = await HashGate.open({ threads: 0, coalesce: false, bloom: BloomFilter.withShape(SHAPE) });
    try {
      const calls: Call[] = [
        { add: true, keys: ['x', 'y'], yieldBefore: 'none' },
        { add: false, keys: ['x', 'z'], yieldBefore: 'none' },
        { add: true, keys: ['y', 'z'], yieldBefore: 'none' },
      ];
      expect(await issue(gate, calls)).toEqual(sequential(calls));
      await expect(gate.bloomAdd([1 as never])).rejects.toBeInstanceOf(TypeError);
    } finally {
      await gate.close();
    }
  });

  it('one add split into several worker chunks counts like a sequential add (chunks run in order), merged or not', async () => {
    // A later chunk finishing first used to mark keys of an earlier chunk as "changed nothing":
    // these keys gave 4 instead of 5 with unordered chunks.
    const keys = ['k21', ...Array(13).fill('k0'), 'k52', 'k0', 'k0', 'k0', 'k37', ...Array(5).fill('k0'), 'k9'];
    const calls: Call[] = [{ add: true, keys, yieldBefore: 'none' }];
    for (const coalesce of [false, { maxKeys: 8 }] as const) {
      const gate = await HashGate.open({ threads: 1, inlineThreshold: 4, chunkKeys: 8, coalesce, bloom: BloomFilter.withShape(SHAPE) });
      try {
        for (let rep = 0; rep < 5; rep++) {
          gate.bloom!.loadBitsLE(new Uint8Array(SHAPE.bitSize / 8));
          expect(await issue(gate, calls)).toEqual(sequential(calls));
        }
      } finally {
        await gate.close();
      }
    }
  });

  it('calls queued before close() are still answered', async () => {
    const gate = await HashGate.open({ threads: 0, coalesce: { maxKeys: 64, maxDelayMs: 50 }, bloom: { expectedItems: 100, fpp: 0.01 } });
    const add = gate.bloomAdd(['q']);
    const check = gate.bloomCheck(['q']);
    await gate.close();
    expect(await add).toBe(1);
    expect(Array.from(await check)).toEqual([1]);
    await expect(gate.bloomCheck(['q'])).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
  });
});

describe('kernel bloomAddFlags', () => {
  it('flags equal mightContain-before-add, key by key; bits and counter match sequential adds', () => {
    fc.assert(
      fc.property(fc.array(key, { minLength: 0, maxLength: 200 }), fc.boolean(), (keys, packed) => {
        const f = BloomFilter.withShape(SHAPE);
        const model = BloomFilter.withShape(SHAPE);
        const flags = new Uint8Array(keys.length);
        const changed = addFlagsChecked(f, checkKeys(packed ? packKeys(keys) : keys), flags);
        const want = keys.map((k) => {
          const before = model.mightContain(k);
          model.add(k);
          return before ? 0 : 1;
        });
        expect(Array.from(flags)).toEqual(want);
        expect(changed).toBe(want.reduce((a, b) => a + b, 0));
        expect(f.writeTo()).toEqual(model.writeTo());
        expect(f.bitCount()).toBe(model.countBits());
      }),
      { numRuns: 100 },
    );
  });

  it('the js engine reports the same flags', () => {
    const keys = Array.from({ length: 300 }, (_, i) => `k${i % 90}`);
    const a = BloomFilter.withShape(SHAPE);
    const b = BloomFilter.withShape(SHAPE, 0, 'js');
    const fa = new Uint8Array(keys.length);
    const fb = new Uint8Array(keys.length);
    expect(addFlagsChecked(a, checkKeys(keys), fa)).toBe(addFlagsChecked(b, checkKeys(keys), fb));
    expect(fa).toEqual(fb);
    expect(fa.includes(0) && fa.includes(1)).toBe(true);
  });
});
