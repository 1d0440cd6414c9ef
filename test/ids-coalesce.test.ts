// Merged ids.upsert calls on the embedded store: answers equal the sequential model, bad
// records reject alone, store failures reject the whole batch, HashGate passes its coalesce option.
import { describe, expect, it } from 'vitest';
import { ErrorCodes, HashGate, HashGateError } from 'hashgate';
import { IdRegistry, MemoryIdStore, type IdStore, type UpsertPlan } from 'hashgate/ids';
import { checkInterleavings, countBatches, deterministic } from './ids-coalesce-scenarios.js';

const open = (coalesce: { maxKeys: number; maxDelayMs: number } | false) =>
  new IdRegistry({ store: countBatches(new MemoryIdStore()), coalesce, ...deterministic() }) as IdRegistry & { store: { batches: number[] } };

describe('ids.upsert coalescing (memory store)', () => {
  it('random interleavings of concurrent upserts answer like the same upserts run one after another', async () => {
    const sizes = await checkInterleavings(open, 150);
    // the property must have exercised real merging, not only one-call batches
    expect(Math.max(...sizes)).toBeGreaterThan(1);
  });

  it('two concurrent upserts of one new record: the first is new, the second its duplicate, in one batch', async () => {
    const reg = open({ maxKeys: 128, maxDelayMs: 0 });
    await reg.stats();
    const [a, b, c] = await Promise.all([reg.upsert({ x: 1 }), reg.upsert({ x: 1 }), reg.upsert({ x: 1 })]);
    expect([a.status, b.status, c.status]).toEqual(['new', 'duplicate', 'duplicate']);
    expect(b.physicalId).toBe(a.physicalId);
    expect(c.physicalId).toBe(a.physicalId);
    expect(reg.store.batches).toEqual([3]);
  });

  it('maxKeys bounds a batch; coalesce: false sends one store call per upsert', async () => {
    const reg = open({ maxKeys: 4, maxDelayMs: 0 });
    await reg.stats();
    await Promise.all(Array.from({ length: 10 }, (_, i) => reg.upsert({ i })));
    expect(reg.store.batches).toEqual([4, 4, 2]);
    const off = open(false);
    await Promise.all(Array.from({ length: 10 }, (_, i) => off.upsert({ i })));
    expect(off.store.batches).toEqual([]);
    expect((await off.stats()).docs).toBe(10);
  });

  it('a bad record among good ones rejects only its own call', async () => {
    const reg = open({ maxKeys: 128, maxDelayMs: 0 });
    await reg.stats();
    const got = await Promise.allSettled([reg.upsert({ a: 1 }), reg.upsert({ a: NaN }), reg.upsert({ bb: 2 }), reg.upsert({ a: 1 })]);
    expect(got.map((g) => g.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((got[1] as PromiseRejectedResult).reason).toMatchObject({ code: 'HG_ERR_CANONICAL_JSON' });
    expect(got.map((g) => (g.status === 'fulfilled' ? g.value.status : 'x'))).toEqual(['new', 'x', 'new', 'duplicate']);
    expect(reg.store.batches).toEqual([3]);
    const odd = new IdRegistry({ canonicalize: () => 42 as unknown as string });
    await expect(odd.upsert({ a: 1 })).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG });
  });

  it('a store failure rejects every caller of the batch with that error', async () => {
    const store: IdStore = new MemoryIdStore();
    const boom = new HashGateError(ErrorCodes.STORE, 'ids upsert failed: store down');
    let fail = true;
    const real = store.upsertMany!.bind(store);
    store.upsertMany = (plans: readonly UpsertPlan[]) => (fail ? Promise.reject(boom) : real(plans));
    const reg = new IdRegistry({ store });
    await reg.stats();
    const got = await Promise.allSettled([reg.upsert({ a: 1 }), reg.upsert({ b: 1 }), reg.upsert({ c: 1 })]);
    for (const g of got) expect(g).toMatchObject({ status: 'rejected', reason: { code: ErrorCodes.STORE } });
    fail = false;
    // nothing was written, and the registry works once the store answers again
    expect((await reg.upsert({ a: 1 })).status).toBe('new');
  });

  it('with a shared gate: ids reach the gate before the store, and batches reach the store in flush order', async () => {
    const seen = new Set<string>();
    let calls = 0;
    // the first batch's gate write finishes last: the second batch must still wait for it
    const gate = {
      addAll: async (ids: string[]) => {
        if (++calls === 1) await new Promise((r) => setTimeout(r, 20));
        for (const i of ids) seen.add(i);
      },
      containsAll: async (ids: string[]) => ids.map((i) => (seen.has(i) ? 1 : 0)),
    };
    const store = countBatches(new MemoryIdStore());
    const real = store.upsertMany.bind(store);
    const order: string[] = [];
    store.upsertMany = (plans: readonly UpsertPlan[]) => {
      for (const p of plans) {
        expect(p.lids.every((l) => seen.has(l))).toBe(true);
        order.push(p.physicalId);
      }
      return real(plans);
    };
    const reg = new IdRegistry({ store, gate, coalesce: { maxKeys: 2 }, ...deterministic() });
    await reg.stats();
    const out = await Promise.all([reg.upsert({ r: 1 }), reg.upsert({ r: 1 }), reg.upsert({ r: 1 })]);
    expect(out.map((o) => o.status)).toEqual(['new', 'duplicate', 'duplicate']);
    expect(order).toEqual(['p1', 'p3', 'p5']);
    expect(await reg.find({ r: 1 })).toMatchObject({ physicalId: 'p1' });
    expect(await reg.find({ never: 1 })).toBeUndefined();
  });

  it('validates ids.coalesce and HashGate passes its coalesce option to the registry', async () => {
    expect(() => new IdRegistry({ coalesce: { maxKeys: 0 } })).toThrow(/ids\.coalesce\.maxKeys/);
    expect(() => new IdRegistry({ coalesce: { maxKey: 3 } as never })).toThrow(/ids\.coalesce\.maxKey/);
    const g = await HashGate.open({ threads: 0, coalesce: false, ids: { store: countBatches(new MemoryIdStore()) } });
    await Promise.all([g.ids!.upsert({ a: 1 }), g.ids!.upsert({ a: 2 })]);
    expect((g.ids!.store as unknown as { batches: number[] }).batches).toEqual([]);
    await g.close();
    const on = await HashGate.open({ threads: 0, coalesce: { maxKeys: 2 }, ids: { store: countBatches(new MemoryIdStore()) } });
    await on.ids!.stats();
    await Promise.all([on.ids!.upsert({ a: 1 }), on.ids!.upsert({ a: 2 }), on.ids!.upsert({ a: 3 })]);
    expect((on.ids!.store as unknown as { batches: number[] }).batches).toEqual([2, 1]);
    await on.close();
  });
});
