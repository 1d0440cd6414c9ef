// Shared checks for merged ids.upsert calls on every store: random interleavings of concurrent
// upserts must answer exactly like the same calls run one after another on a registry that does not merge.
import { expect } from 'vitest';
import fc from 'fast-check';
import { IdRegistry, type CustomIdHash, type IdStore, type UpsertPlan } from 'hashgate/ids';
import { type IdRegistryOptions } from 'hashgate';

/** Three logical ids for every record, so the property sees collisions in most runs. */
export const len3: CustomIdHash = { name: 'len%3', hash: (c) => `L${c.length % 3}` };

/** Records drawn by index: some equal after canonicalization, one refused by canonicalJson (NaN). */
export const POOL: unknown[] = [
  { a: 1 }, { a: 2 }, { b: 1, a: 1 }, { a: 1, b: 1 }, { z: 'x' }, { a: [1, 2] }, { q: 'yy' }, { a: NaN },
];

/** Counts batch sizes seen by the store's upsertMany (the real store still does the work). */
export function countBatches<T extends IdStore>(store: T): T & { batches: number[] } {
  const s = store as T & { batches: number[] };
  const orig = store.upsertMany!.bind(store);
  s.batches = [];
  s.upsertMany = (plans: readonly UpsertPlan[]) => {
    s.batches.push(plans.length);
    return orig(plans);
  };
  return s;
}

/** Deterministic ids and clock: the merged and the sequential run then create identical plans. */
export function deterministic(): Pick<IdRegistryOptions, 'newId' | 'now' | 'algorithm'> {
  let n = 0;
  return { newId: () => `p${++n}`, now: () => 1000, algorithm: len3 };
}

type Settled = { ok: true; v: unknown } | { ok: false; code: unknown };

/** gap before each call: 0 same tick, 1 a microtask, 2 an event-loop turn, 3 after the previous call settled. */
export async function interleave(reg: IdRegistry, calls: Array<{ rec: number; gap: number }>): Promise<Settled[]> {
  const ps: Promise<Settled>[] = [];
  for (const { rec, gap } of calls) {
    if (gap === 1) await Promise.resolve();
    else if (gap === 2) await new Promise((r) => setImmediate(r));
    else if (gap === 3 && ps.length > 0) await ps[ps.length - 1];
    ps.push(reg.upsert(POOL[rec]).then((v) => ({ ok: true as const, v }), (e: { code?: unknown }) => ({ ok: false as const, code: e.code })));
  }
  return Promise.all(ps);
}

export async function sequential(reg: IdRegistry, calls: Array<{ rec: number }>): Promise<Settled[]> {
  const out: Settled[] = [];
  for (const { rec } of calls) {
    out.push(await reg.upsert(POOL[rec]).then((v) => ({ ok: true as const, v }), (e: { code?: unknown }) => ({ ok: false as const, code: e.code })));
  }
  return out;
}

export const callsArb = (maxLength: number) =>
  fc.array(fc.record({ rec: fc.integer({ min: 0, max: POOL.length - 1 }), gap: fc.constantFrom(0, 0, 0, 1, 2, 3) }), { minLength: 1, maxLength });

/**
 * The property: `open(coalesce)` gives a registry on a fresh (empty) store; the merged run and the
 * sequential run must agree on every answer, every collision record and the final counts.
 * Resolves to all batch sizes seen, so callers can also assert that calls really were merged.
 */
export async function checkInterleavings(
  open: (coalesce: { maxKeys: number; maxDelayMs: number } | false) => IdRegistry & { store: { batches?: number[] } },
  numRuns: number,
  maxLength = 14,
): Promise<number[]> {
  const sizes: number[] = [];
  await fc.assert(
    fc.asyncProperty(callsArb(maxLength), fc.integer({ min: 1, max: 6 }), fc.constantFrom(0, 0, 1), async (calls, maxKeys, maxDelayMs) => {
      const merged = open({ maxKeys, maxDelayMs });
      const model = open(false);
      await merged.stats();
      await model.stats();
      const got = await interleave(merged, calls);
      const want = await sequential(model, calls);
      expect(got).toEqual(want);
      expect(await merged.collisions()).toEqual(await model.collisions());
      expect(await merged.stats()).toEqual(await model.stats());
      sizes.push(...(merged.store.batches ?? []));
      await merged.close();
      await model.close();
    }),
    // first, calls that certainly merge (four distinct records in one tick, up to 6 per batch),
    // so "some batch held more than one call" does not hang on what the random runs drew
    { numRuns, examples: [[[{ rec: 0, gap: 0 }, { rec: 1, gap: 0 }, { rec: 4, gap: 0 }, { rec: 6, gap: 0 }], 6, 0]] },
  );
  return sizes;
}
