// TieredCache's optional persistent local tier (local.path, LMDB): a restarted instance answers
// from it; TTL, invalidate, "absent is never persisted", bounds and option errors.
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TieredCache } from '../src/cache/index.js';
import { MemoryColdStore } from '../src/cache/memory-cold.js';
import { encodeValue } from '../src/cache/codec.js';
import { ErrorCodes } from '../src/errors.js';

const root = mkdtempSync(join(tmpdir(), 'hg-l2-test-'));
let seq = 0;
const dir = (): string => join(root, `l${seq++}`);
afterAll(() => rmSync(root, { recursive: true, force: true }));

const coldWith = async (entries: Record<string, object>): Promise<MemoryColdStore> => {
  const c = new MemoryColdStore();
  await c.mput('risk', Object.entries(entries).map(([key, v]) => ({ key, value: encodeValue(v), ts: 1 })));
  return c;
};
/** lmdb-js commits the tier's writes in the background; wait until they are visible. */
const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 50));

describe('persistent local tier (local.path)', () => {
  it('a restarted instance answers from disk without reaching the lower tiers', async () => {
    const path = dir();
    const cold = await coldWith({ a: { score: 1 }, b: { score: 2 } });
    const c1 = new TieredCache({ local: { path }, cold });
    expect(await c1.lookup('risk', ['a', 'b', 'zz'])).toEqual([{ score: 1 }, { score: 2 }, undefined]);
    await settle();
    await c1.close();
    const empty = new MemoryColdStore();
    const c2 = new TieredCache({ local: { path }, cold: empty });
    expect(await c2.lookup('risk', ['a', 'b'])).toEqual([{ score: 1 }, { score: 2 }]);
    expect(empty.counters.mgetCalls).toBe(0);
    expect(c2.persistentLocal!.stats()).toMatchObject({ hits: 2 });
    // other tables are separate
    expect(await c2.lookup('other', ['a'])).toEqual([undefined]);
    await c2.close();
  });

  it('never persists an absent answer', async () => {
    const path = dir();
    const c1 = new TieredCache({ local: { path }, cold: new MemoryColdStore() });
    expect(await c1.lookup('risk', ['late'])).toEqual([undefined]);
    await settle();
    await c1.close();
    const c2 = new TieredCache({ local: { path }, cold: await coldWith({ late: { v: 9 } }) });
    expect(await c2.lookup('risk', ['late'])).toEqual([{ v: 9 }]);
    await c2.close();
  });

  it('entries expire after persistTtlMs (injected clock) and invalidate() removes them', async () => {
    const path = dir();
    let now = 1_000_000;
    const clock = (): number => now;
    const c1 = new TieredCache({ local: { path, persistTtlMs: 10_000 }, cold: await coldWith({ a: { v: 1 }, b: { v: 2 } }), now: clock });
    await c1.lookup('risk', ['a', 'b']);
    await settle();
    c1.invalidate('risk', ['b']);
    await settle();
    await c1.close();
    const empty = new MemoryColdStore();
    const c2 = new TieredCache({ local: { path, persistTtlMs: 10_000 }, cold: empty, now: clock });
    expect(await c2.lookup('risk', ['a', 'b'])).toEqual([{ v: 1 }, undefined]);
    await c2.close();
    now += 10_001;
    const c3 = new TieredCache({ local: { path, persistTtlMs: 10_000 }, cold: empty, now: clock });
    expect(await c3.lookup('risk', ['a'])).toEqual([undefined]);
    expect(c3.persistentLocal!.stats().expired).toBe(1);
    await c3.close();
  });

  it('stays within persistMaxEntries', async () => {
    const path = dir();
    const entries: Record<string, object> = {};
    for (let i = 0; i < 400; i++) entries[`k${i}`] = { i };
    const c = new TieredCache({ local: { path, persistMaxEntries: 100, maxEntries: 1000 }, cold: await coldWith(entries) });
    for (let i = 0; i < 400; i += 50) await c.lookup('risk', Object.keys(entries).slice(i, i + 50));
    const deadline = Date.now() + 10_000;
    while (c.persistentLocal!.stats().writes < 400 && Date.now() < deadline) await settle();
    expect(c.persistentLocal!.stats().writes).toBe(400);
    while (c.persistentLocal!.stats().entries > 100 && Date.now() < deadline) await settle();
    const st = c.persistentLocal!.stats();
    expect(st.entries).toBeLessThanOrEqual(100);
    expect(st.evicted).toBeGreaterThanOrEqual(300);
    await c.close();
  });

  it('option errors name the option', () => {
    expect(() => new TieredCache({ local: { persistTtlMs: 5 } })).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_OPTION, message: expect.stringMatching(/local\.persistTtlMs needs local\.path/) }));
    expect(() => new TieredCache({ local: { path: 42 as unknown as string } })).toThrow(/local\.path/);
    expect(() => new TieredCache({ local: { path: dir(), persistMaxEntries: 0 } })).toThrow(/local\.persistMaxEntries/);
  });
});
