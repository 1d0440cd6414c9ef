// Tier logic against the in-process cold store: fake clock, no servers.
import { describe, expect, it } from 'vitest';
import diagnostics_channel from 'node:diagnostics_channel';
import fc from 'fast-check';
import { BloomFilter } from '../src/bloom/index.js';
import { MemoryColdStore, TieredCache, encodeValue, type ColdCell, type ColdEntry, type ColdStore } from '../src/cache/index.js';

const rec = (v: Record<string, unknown>): Buffer => encodeValue(v);

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

/** A cold store that can be switched to fail, counting calls (stands in for a dead HBase in unit tests only). */
class SwitchableCold implements ColdStore {
  readonly inner = new MemoryColdStore();
  down = false;
  calls = 0;
  async mget(table: string, keys: readonly string[]): Promise<(ColdCell | undefined)[]> {
    this.calls++;
    if (this.down) throw Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' });
    return this.inner.mget(table, keys);
  }
  async mput(table: string, entries: readonly ColdEntry[]): Promise<void> {
    return this.inner.mput(table, entries);
  }
}

class SetBloom {
  readonly keys = new Set<string>();
  checks = 0;
  add(k: string) {
    this.keys.add(k);
  }
  mightContain(k: string) {
    this.checks++;
    return this.keys.has(k);
  }
}

describe('TieredCache (memory cold tier)', () => {
  it('loads from the cold tier once, then answers from the local tier', async () => {
    const cold = new MemoryColdStore();
    await cold.mput('risk', [{ key: 'u1', value: rec({ level: 3 }), ts: 5 }]);
    const c = new TieredCache({ cold });
    expect(await c.lookup('risk', ['u1', 'u2'])).toEqual([{ level: 3 }, undefined]);
    expect(cold.counters.mgetCalls).toBe(1);
    expect(await c.lookup('risk', ['u1', 'u2'])).toEqual([{ level: 3 }, undefined]);
    expect(cold.counters.mgetCalls).toBe(1);
    const s = c.stats();
    expect(s.local).toMatchObject({ hits: 1, misses: 2, negativeHits: 1, entries: 2 });
    expect(s.cold).toMatchObject({ hits: 1, misses: 1, errors: 0, healthy: true });
    expect(s.cold!.latency.calls).toBe(1);
  });

  it('round-trips binary values', async () => {
    const cold = new MemoryColdStore();
    const bin = Uint8Array.of(0, 1, 2, 255);
    await cold.mput('t', [{ key: 'b', value: encodeValue(bin), ts: 1 }]);
    const [v] = await new TieredCache({ cold }).lookup('t', ['b']);
    expect(v).toBeInstanceOf(Uint8Array);
    expect([...(v as Uint8Array)]).toEqual([0, 1, 2, 255]);
  });

  it('expires negative entries after negativeTtlMs and positive ones after local.ttlMs', async () => {
    const clk = clock();
    const cold = new MemoryColdStore();
    const c = new TieredCache({ cold, now: clk.now, negativeTtlMs: 1_000, local: { ttlMs: 10_000 } });
    expect(await c.lookup('t', ['late'])).toEqual([undefined]);
    await cold.mput('t', [{ key: 'late', value: rec({ x: 1 }), ts: 1 }]);
    clk.advance(500);
    expect(await c.lookup('t', ['late'])).toEqual([undefined]); // still negatively cached
    expect(cold.counters.mgetCalls).toBe(1);
    clk.advance(600);
    expect(await c.lookup('t', ['late'])).toEqual([{ x: 1 }]);
    expect(cold.counters.mgetCalls).toBe(2);
    await cold.mput('t', [{ key: 'late', value: rec({ x: 2 }), ts: 2 }]);
    clk.advance(9_000);
    expect(await c.lookup('t', ['late'])).toEqual([{ x: 1 }]); // local copy still fresh
    clk.advance(1_001);
    expect(await c.lookup('t', ['late'])).toEqual([{ x: 2 }]);
  });

  it('shares one load among 100 concurrent lookups of the same key (and duplicates in a batch)', async () => {
    const cold = new MemoryColdStore();
    await cold.mput('t', [{ key: 'k', value: rec({ v: 1 }), ts: 1 }]);
    const c = new TieredCache({ cold });
    const all = await Promise.all(Array.from({ length: 100 }, () => c.lookup('t', ['k', 'k'])));
    for (const r of all) expect(r).toEqual([{ v: 1 }, { v: 1 }]);
    expect(cold.counters.mgetCalls).toBe(1);
    expect(cold.counters.keysRead).toBe(1);
    expect(c.stats().singleFlight).toEqual({ loads: 1, shared: 199 });
  });

  it('a Bloom-gated absent key costs no tier call at all', async () => {
    const cold = new SwitchableCold();
    const bloom = new SetBloom();
    bloom.add('present');
    await cold.mput('t', [{ key: 'present', value: rec({ ok: true }), ts: 1 }]);
    const c = new TieredCache({ cold, bloom });
    expect(await c.lookup('t', ['absent1', 'absent2'])).toEqual([undefined, undefined]);
    expect(cold.calls).toBe(0);
    expect(c.stats().bloom).toEqual({ rejected: 2, passed: 0 });
    expect(c.stats().local.misses).toBe(0);
    expect(await c.lookup('t', ['present'])).toEqual([{ ok: true }]);
    expect(cold.calls).toBe(1);
  });

  it('accepts a per-table Bloom function', async () => {
    const cold = new SwitchableCold();
    const b = new SetBloom();
    const c = new TieredCache({ cold, bloom: (t) => (t === 'gated' ? b : undefined) });
    await c.lookup('gated', ['x']);
    expect(cold.calls).toBe(0);
    await c.lookup('open', ['x']);
    expect(cold.calls).toBe(1);
  });

  it('cold tier down: local answers stay, failures are counted and surfaced, misses are not negatively cached', async () => {
    const clk = clock();
    const cold = new SwitchableCold();
    await cold.mput('t', [{ key: 'a', value: rec({ a: 1 }), ts: 1 }]);
    const seen: string[] = [];
    const c = new TieredCache({
      cold, now: clk.now, breaker: { failures: 2, cooldownMs: 1_000 },
      onTierError: (e) => {
        seen.push(`${e.tier}:${e.code}`);
        throw new Error('observer bug'); // must not break the lookup
      },
    });
    expect(await c.lookup('t', ['a'])).toEqual([{ a: 1 }]);
    cold.down = true;
    const r = await c.lookupDetailed('t', ['a', 'b']);
    expect(r.values).toEqual([{ a: 1 }, undefined]);
    expect(r.unknown).toEqual([1]); // 'b' could not be checked: unknown, not absent
    expect(r.degraded).toBe(true);
    expect(r.errors[0]).toMatchObject({ tier: 'cold', code: 'ECONNREFUSED' });
    await expect(c.lookup('t', ['b'])).rejects.toMatchObject({ code: 'HG_ERR_TIER_UNAVAILABLE', details: { tier: 'cold', indexes: [0] } });
    let s = c.stats();
    expect(s.cold!.errors).toBe(2);
    expect(s.cold!.breakerOpen).toBe(true);
    expect(s.degraded).toBe(true);
    expect(seen).toEqual(['cold:ECONNREFUSED', 'cold:ECONNREFUSED']);
    // breaker open: the tier is skipped, not called, and the key is still unknown
    await expect(c.lookup('t', ['b'])).rejects.toMatchObject({ code: 'HG_ERR_TIER_UNAVAILABLE' });
    expect(cold.calls).toBe(3);
    expect(c.stats().cold!.skipped).toBe(1);
    // recovery: after cooldown the tier is tried again, and 'b' was never negatively cached
    cold.down = false;
    await cold.mput('t', [{ key: 'b', value: rec({ b: 2 }), ts: 1 }]);
    clk.advance(1_001);
    expect(await c.lookup('t', ['b'])).toEqual([{ b: 2 }]);
    s = c.stats();
    expect(s.cold!.healthy).toBe(true);
    expect(s.degraded).toBe(false);
    expect(s.cold!.lastError?.code).toBe('ECONNREFUSED');
  });

  it('bounds the local tier by entries and by bytes', async () => {
    const cold = new MemoryColdStore();
    const keys = Array.from({ length: 50 }, (_, i) => `k${i}`);
    await cold.mput('t', keys.map((key) => ({ key, value: rec({ pad: 'x'.repeat(200) }), ts: 1 })));
    const byCount = new TieredCache({ cold, local: { maxEntries: 10 } });
    await byCount.lookup('t', keys);
    expect(byCount.stats().local.entries).toBe(10);
    const byBytes = new TieredCache({ cold, local: { maxBytes: 4096 } });
    await byBytes.lookup('t', keys);
    const s = byBytes.stats().local;
    expect(s.bytes).toBeLessThanOrEqual(4096);
    expect(s.entries).toBeGreaterThan(0);
    expect(s.entries).toBeLessThan(50);
  });

  it('validates options and arguments, naming them', async () => {
    expect(() => new TieredCache({ local: { maxEntries: 0 } })).toThrow(/local\.maxEntries/);
    expect(() => new TieredCache({ negativeTtlMs: -1 })).toThrow(RangeError);
    expect(() => new TieredCache({ redis: {} })).toThrow(/redis\.client/);
    const c = new TieredCache({ maxKeysPerLookup: 2 });
    await expect(c.lookup('bad:table', ['a'])).rejects.toThrow(/table/);
    await expect(c.lookup('t', ['a', 'b', 'c'])).rejects.toThrow(/maxKeysPerLookup/);
    await expect(c.lookup('t', [''])).rejects.toMatchObject({ code: 'HG_ERR_EMPTY_KEY' });
    await c.close();
    await expect(c.lookup('t', ['a'])).rejects.toMatchObject({ code: 'HG_ERR_CLOSED' });
  });

  it('invalidate() drops a negative entry so a write is visible at once', async () => {
    const cold = new MemoryColdStore();
    const c = new TieredCache({ cold, negativeTtlMs: 60_000 });
    expect(await c.lookup('t', ['n'])).toEqual([undefined]);
    await cold.mput('t', [{ key: 'n', value: rec({ n: 1 }), ts: 1 }]);
    c.invalidate('t', ['n']);
    expect(await c.lookup('t', ['n'])).toEqual([{ n: 1 }]);
  });

  it('uses the batch Bloom call (mightContainAll) of a real BloomFilter for batches', async () => {
    const cold = new SwitchableCold();
    const bloom = BloomFilter.create({ expectedItems: 1_000, fpp: 0.001 });
    const present = Array.from({ length: 10 }, (_, i) => `p${i}`);
    for (const k of present) bloom.add(k);
    await cold.mput('t', present.map((key) => ({ key, value: rec({ key }), ts: 1 })));
    let batchCalls = 0;
    const counting = {
      mightContain: (k: string) => bloom.mightContain(k),
      mightContainAll: (ks: string[]) => (batchCalls++, bloom.mightContainAll(ks)),
    };
    const c = new TieredCache({ cold, bloom: counting });
    const keys = [...present, ...Array.from({ length: 30 }, (_, i) => `a${i}`)];
    const vals = await c.lookup('t', keys);
    expect(batchCalls).toBe(1);
    expect(vals.slice(0, 10)).toEqual(present.map((key) => ({ key })));
    expect(vals.slice(10).every((v) => v === undefined)).toBe(true);
    expect(c.stats().bloom.rejected).toBeGreaterThanOrEqual(29);
    expect(cold.calls).toBe(1);
  });

  it('keeps one local LRU per table and bounds the number of tables', async () => {
    const cold = new MemoryColdStore();
    await cold.mput('a', [{ key: 'k', value: rec({ t: 'a' }), ts: 1 }]);
    await cold.mput('b', [{ key: 'k', value: rec({ t: 'b' }), ts: 1 }]);
    const c = new TieredCache({ cold, local: { maxTables: 2 } });
    expect(await c.lookup('a', ['k'])).toEqual([{ t: 'a' }]);
    expect(await c.lookup('b', ['k'])).toEqual([{ t: 'b' }]);
    expect(await c.lookup('a', ['k'])).toEqual([{ t: 'a' }]);
    expect(c.stats().local.entries).toBe(2);
    await expect(c.lookup('c', ['k'])).rejects.toMatchObject({ code: 'HG_ERR_CAPACITY' });
  });

  it('a load racing with invalidate() does not cache what it read', async () => {
    const cold = new MemoryColdStore();
    await cold.mput('t', [{ key: 'r', value: rec({ v: 'old' }), ts: 1 }]);
    const c = new TieredCache({ cold });
    const pending = c.lookup('t', ['r']);
    await null; // the load starts once this synchronous run ends (merged with the lookups of the run)
    await cold.mput('t', [{ key: 'r', value: rec({ v: 'new' }), ts: 2 }]);
    c.invalidate('t', ['r']); // the write lands while the load is in flight
    expect(await pending).toEqual([{ v: 'old' }]);
    expect(await c.lookup('t', ['r'])).toEqual([{ v: 'new' }]);
  });

  it("publishes tier failures on diagnostics_channel 'hashgate:store:error' with the store kind", async () => {
    const cold = new SwitchableCold();
    cold.down = true;
    const got: { store: string; kind: string }[] = [];
    const sub = (m: unknown): void => void got.push(m as { store: string; kind: string });
    diagnostics_channel.subscribe('hashgate:store:error', sub);
    try {
      await expect(new TieredCache({ cold }).lookup('t', ['x'])).rejects.toMatchObject({ code: 'HG_ERR_TIER_UNAVAILABLE' });
    } finally {
      diagnostics_channel.unsubscribe('hashgate:store:error', sub);
    }
    expect(got).toEqual([expect.objectContaining({ store: 'cold', kind: 'connection' })]);
  });

  it('graceMs: a value past its TTL is served stale (with its age) only while the tier fails; a write voids it', async () => {
    const clk = clock();
    const cold = new SwitchableCold();
    await cold.mput('t', [{ key: 'a', value: rec({ a: 1 }), ts: 1 }, { key: 'b', value: rec({ b: 1 }), ts: 1 }]);
    const c = new TieredCache({ cold, now: clk.now, local: { ttlMs: 1_000 }, graceMs: 10_000, breaker: { failures: 1000 } });
    expect(await c.lookup('t', ['a', 'b'])).toEqual([{ a: 1 }, { b: 1 }]);
    clk.advance(999);
    cold.down = true;
    expect(await c.lookup('t', ['a'])).toEqual([{ a: 1 }]); // still fresh: a local hit, no tier asked
    expect(cold.calls).toBe(1);
    clk.advance(1_001);
    expect(await c.lookupDetailed('t', ['a', 'b', 'c'])).toMatchObject({
      values: [{ a: 1 }, { b: 1 }, undefined],
      unknown: [2],
      stale: [{ index: 0, ageMs: 2_000 }, { index: 1, ageMs: 2_000 }],
      degraded: true,
    });
    expect(await c.lookup('t', ['b'])).toEqual([{ b: 1 }]);
    c.invalidate('t', ['b']); // a write: the old value must not stand in any more
    await expect(c.lookup('t', ['b'])).rejects.toMatchObject({ code: 'HG_ERR_TIER_UNAVAILABLE', details: { tier: 'cold', indexes: [0] } });
    clk.advance(9_001); // past ttl + grace
    await expect(c.lookup('t', ['a'])).rejects.toMatchObject({ code: 'HG_ERR_TIER_UNAVAILABLE' });
    cold.down = false;
    expect(await c.lookupDetailed('t', ['a'])).toEqual({ values: [{ a: 1 }], errors: [], degraded: false, unknown: [], stale: [] });
    expect(() => new TieredCache({ graceMs: -1 })).toThrow(/graceMs/);
  });

  it('property: concurrent lookups never resolve "absent" for a present key, whatever the tier does', async () => {
    const PRESENT = 8; // k0..k7 are stored, k8..k15 are not
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            keys: fc.array(fc.integer({ min: 0, max: 15 }), { minLength: 1, maxLength: 6 }),
            down: fc.boolean(),
            advance: fc.integer({ min: 0, max: 2_000 }),
            callers: fc.integer({ min: 1, max: 4 }),
          }),
          { minLength: 1, maxLength: 12 },
        ),
        fc.boolean(),
        fc.boolean(),
        async (steps, grace, coalesce) => {
          const clk = clock();
          const cold = new SwitchableCold();
          await cold.mput('t', Array.from({ length: PRESENT }, (_, k) => ({ key: `k${k}`, value: rec({ k }), ts: 1 })));
          const c = new TieredCache({
            cold, now: clk.now, local: { ttlMs: 1_000 }, negativeTtlMs: 500, ...(grace ? { graceMs: 3_000 } : {}),
            breaker: { failures: 2, cooldownMs: 700 }, ...(coalesce ? {} : { coalesce: false }),
          });
          for (const s of steps) {
            cold.down = s.down;
            clk.advance(s.advance);
            const names = s.keys.map((k) => `k${k}`);
            const runs = Array.from({ length: s.callers }, (_, j) =>
              j % 2 === 0
                ? c.lookup('t', names).then((values) => ({ values, unknown: [] as number[] }), (err: unknown) => err as Error & { code: string; details: { indexes: number[] } })
                : c.lookupDetailed('t', names),
            );
            for (const r of await Promise.all(runs)) {
              if (r instanceof Error) {
                expect(r.code).toBe('HG_ERR_TIER_UNAVAILABLE');
                expect(r.details.indexes.length).toBeGreaterThan(0);
                continue;
              }
              s.keys.forEach((k, i) => {
                if (r.unknown.includes(i)) expect(r.values[i]).toBeUndefined();
                else expect(r.values[i]).toEqual(k < PRESENT ? { k } : undefined);
              });
            }
          }
          await c.close();
        },
      ),
      { numRuns: 150 },
    );
  });

  it('property: lookups merged into one load each get their own keys\' answers and only their own gaps', async () => {
    const PRESENT = 12; // k0..k11 are stored, k12..k23 are not
    const KEYS = 24;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            // a key order to deal out to the callers (each leads its own keys), and the keys the cold tier fails for
            order: fc.shuffledSubarray(Array.from({ length: KEYS }, (_, k) => k), { minLength: 2 }),
            callers: fc.integer({ min: 2, max: 5 }),
            bad: fc.uniqueArray(fc.integer({ min: 0, max: KEYS - 1 }), { maxLength: 6 }),
            // keys of an extra caller that follows the others' loads of them
            follow: fc.array(fc.integer({ min: 0, max: KEYS - 1 }), { maxLength: 4 }),
          }),
          { minLength: 1, maxLength: 5 },
        ),
        async (steps) => {
          const bad = new Set<string>();
          // fails the whole call when it holds a bad key; one key per call makes that key's gap its own
          const cold: ColdStore = {
            async mget(table, keys) {
              if (keys.some((k) => bad.has(k))) throw Object.assign(new Error('region offline'), { code: 'ECONNRESET' });
              return inner.mget(table, keys);
            },
            mput: (table, entries) => inner.mput(table, entries),
          };
          const inner = new MemoryColdStore();
          await inner.mput('t', Array.from({ length: PRESENT }, (_, k) => ({ key: `k${k}`, value: rec({ k }), ts: 1 })));
          const c = new TieredCache({ cold, coldOptions: { batchSize: 1 }, breaker: { failures: 1_000, cooldownMs: 1 } });
          // keys some earlier step answered: the local tier answers them now, whatever the cold tier does
          const known = new Set<number>();
          for (const s of steps) {
            bad.clear();
            for (const k of s.bad) bad.add(`k${k}`);
            const lists: number[][] = Array.from({ length: s.callers }, () => []);
            s.order.forEach((k, i) => lists[i % s.callers]!.push(k));
            lists.push(s.follow);
            // all in one turn: the leads' loads merge into one, the last caller follows theirs
            const runs = lists.map((ks, j) =>
              j % 2 === 0
                ? c.lookupDetailed('t', ks.map((k) => `k${k}`))
                : c.lookup('t', ks.map((k) => `k${k}`)).then(
                    (values) => ({ values, unknown: [] as number[], degraded: false }),
                    (err: unknown) => err as Error & { code: string; details: { indexes: number[] } },
                  ),
            );
            const got = await Promise.all(runs);
            got.forEach((r, j) => {
              const ks = lists[j]!;
              const unknown = ks.flatMap((k, i) => (bad.has(`k${k}`) && !known.has(k) ? [i] : []));
              if (r instanceof Error) {
                expect(r.code).toBe('HG_ERR_TIER_UNAVAILABLE');
                expect(r.details.indexes).toEqual(unknown);
                return;
              }
              expect(r.unknown).toEqual(unknown);
              expect(r.degraded).toBe(unknown.length > 0);
              ks.forEach((k, i) => expect(r.values[i]).toEqual(unknown.includes(i) ? undefined : k < PRESENT ? { k } : undefined));
            });
            for (const ks of lists) for (const k of ks) if (!bad.has(`k${k}`)) known.add(k);
          }
          await c.close();
        },
      ),
      { numRuns: 150 },
    );
  });
});
