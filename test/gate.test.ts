import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { execFileSync } from 'node:child_process';
// Crash tests reach the pool through the gate module's internal helpers, which the package does not export.
import { HashGate, gatePool, openWithTestHooks } from '../src/gate.js';
import { hashBatch, packKeys, bucketsOf } from '../src/hash/index.js';
import { BloomFilter } from '../src/bloom/index.js';
import { transactions } from '../src/demo/generator.js';

// Small chunks and a zero inline threshold force every batch through the workers in several
// chunks, so these tests exercise slot reuse, pipelining and result placement.
const POOLED = { threads: 2, inlineThreshold: 0, chunkKeys: 64, chunkBytes: 4096, lanes: 3 };

describe('HashGate options', () => {
  it('rejects bad options with errors naming the option', async () => {
    await expect(HashGate.open({ threads: -1 })).rejects.toMatchObject({ name: 'HashGateRangeError', message: expect.stringContaining('options.threads') });
    await expect(HashGate.open({ threads: 1.5 })).rejects.toBeInstanceOf(TypeError);
    await expect(HashGate.open({ maxQueue: 0 })).rejects.toThrow(/options\.maxQueue/);
    await expect(HashGate.open({ bloom: { expectedItems: 10, fpp: 2 } })).rejects.toThrow(/fpp/);
    await expect(HashGate.open({ nope: 1 } as never)).rejects.toMatchObject({ code: 'HG_ERR_INVALID_OPTION', message: expect.stringContaining('options.nope') });
    await expect(HashGate.open({ dedup: { layout: 'wide' as never } })).rejects.toThrow(/dedup\.layout/);
  });
});

describe('HashGate worker pool', () => {
  let gate: HashGate;
  beforeAll(async () => {
    gate = await openWithTestHooks({ ...POOLED, bloom: { expectedItems: 50_000, fpp: 0.01 } });
  });
  afterAll(async () => gate?.close());

  it('open() resolves once every worker thread has started and answered', () => {
    expect(gatePool(gate)!.readyThreads).toBe(2);
  });

  it('waiting for the workers never rejects and never hangs, even when the gate closes meanwhile', async () => {
    const g = await HashGate.open({ threads: 2 });
    const pool = gatePool(g)!;
    const waiting = pool.ready();
    await g.close();
    await expect(waiting).resolves.toBeLessThanOrEqual(2);
  });

  it('pooled hashBatch equals inline hashBatch for any keys, algorithms and seeds', async () => {
    const key = fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), fc.uint8Array({ maxLength: 70 }), fc.constant('张三110101199001011234'));
    await fc.assert(
      fc.asyncProperty(
        fc.array(key, { maxLength: 400 }),
        fc.constantFrom('murmur3_128' as const, 'murmur3_32' as const, 'xxh64' as const),
        fc.integer({ min: 0, max: 0xffffffff }),
        fc.boolean(),
        async (keys, algorithm, seed, packed) => {
          const input = packed ? packKeys(keys) : keys;
          const got = await gate.hashBatch(input, { algorithm, seed });
          expect(Buffer.from(got).equals(Buffer.from(hashBatch(keys, { algorithm, seed })))).toBe(true);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('hashes a key larger than a slot on the calling thread', async () => {
    const big = 'x'.repeat(10_000);
    const keys = ['a', big, 'b'];
    expect(Buffer.from(await gate.hashBatch(keys)).equals(Buffer.from(hashBatch(keys)))).toBe(true);
  });

  it('pooled bucketsOf equals bucketOf', async () => {
    const keys = Array.from({ length: 1000 }, (_, i) => `key-${i}`);
    expect(Array.from(await gate.bucketsOf(keys, 1000))).toEqual(Array.from(bucketsOf(keys, 1000)));
  });

  it('workers add into the shared filter concurrently and never lose a bit', async () => {
    const keys = Array.from({ length: 20_000 }, (_, i) => `姓名${i}|1101011990${String(i).padStart(8, '0')}`);
    // Two halves in flight at once: both workers OR into the same words.
    const [a, b] = await Promise.all([gate.bloomAdd(keys.slice(0, 10_000)), gate.bloomAdd(packKeys(keys.slice(10_000)))]);
    expect(a + b).toBeGreaterThan(19_000);
    const present = await gate.bloomCheck(keys);
    expect(present.every((x) => x === 1)).toBe(true);
    // The main thread's view of the same memory agrees, key by key.
    expect(gate.bloom!.mightContainAll(keys).every((x) => x === 1)).toBe(true);
    // A filter built on one thread from the same keys has the very same bits.
    const solo = BloomFilter.create({ expectedItems: 50_000, fpp: 0.01 });
    solo.addAll(keys);
    expect(Buffer.from(solo.writeTo()).equals(Buffer.from(gate.bloom!.writeTo()))).toBe(true);
    const absent = await gate.bloomCheck(Array.from({ length: 20_000 }, (_, i) => `absent-${i}`));
    const fp = absent.reduce((s, x) => s + x, 0) / absent.length;
    expect(fp).toBeLessThan(0.03);
  });

  it('a task that throws or a worker that dies rejects only that task; the pool keeps serving', async () => {
    const pool = gatePool(gate)!;
    await expect(pool.runRaw({ op: 'throw' })).rejects.toMatchObject({ code: 'HG_ERR_WORKER' });
    await expect(pool.runRaw({ op: 'exit' })).rejects.toMatchObject({ code: 'HG_ERR_WORKER' });
    const keys = Array.from({ length: 500 }, (_, i) => `after-crash-${i}`);
    expect(Buffer.from(await gate.hashBatch(keys)).equals(Buffer.from(hashBatch(keys)))).toBe(true);
    expect(gate.stats().pool!.failedTasks).toBeGreaterThanOrEqual(2);
  });

  it('bad keys inside a pooled batch reject with the index named', async () => {
    await expect(gate.hashBatch(['ok', 7 as never, 'ok'])).rejects.toThrow(/keys\[1\]/);
  });
});

describe('HashGate back-pressure and lifecycle', () => {
  it('rejects with HG_ERR_QUEUE_FULL past maxQueue instead of queueing without bound', async () => {
    const gate = await HashGate.open({ threads: 1, inlineThreshold: 0, chunkKeys: 16, maxQueue: 4, lanes: 1 });
    try {
      const keys = Array.from({ length: 16 * 4 }, (_, i) => `k${i}`);
      const first = gate.hashBatch(keys); // 4 chunks: fills the queue
      await expect(gate.hashBatch(['one more'].concat(keys))).rejects.toMatchObject({ code: 'HG_ERR_QUEUE_FULL' });
      expect((await first).length).toBe(64 * 16);
      // Once drained, the same call is accepted.
      expect((await gate.hashBatch(keys)).length).toBe(64 * 16);
    } finally {
      await gate.close();
    }
  });

  it('a closed gate rejects calls with HG_ERR_CLOSED', async () => {
    const gate = await HashGate.open({ threads: 0 });
    await gate.close();
    await expect(gate.hashBatch(['a'])).rejects.toMatchObject({ code: 'HG_ERR_CLOSED' });
    await gate.close(); // idempotent
  });

  it('methods that need a Bloom filter say so', async () => {
    const gate = await HashGate.open({ threads: 0 });
    try {
      await expect(gate.bloomCheck(['a'])).rejects.toThrow(/options\.bloom/);
    } finally {
      await gate.close();
    }
  });
});

describe('HashGate.firstSeen (embedded store, Bloom in front)', () => {
  for (const threads of [0, 1]) {
    it(`matches the generator's ground truth exactly (threads=${threads})`, async () => {
      const gate = await HashGate.open({
        threads, inlineThreshold: 100, chunkKeys: 256,
        bloom: { expectedItems: 1000, fpp: 0.01 }, firstSeenBloom: { expectedItems: 20_000, fpp: 0.01 },
      });
      await gate.bloomAdd(['blacklisted-1', 'blacklisted-2']);
      try {
        const seen = new Set<number>();
        let mismatches = 0;
        let dups = 0;
        for (const batch of transactions({ items: 20_000, duplicateRate: 0.4, seed: 7 }, 1000)) {
          const answers = await gate.firstSeen(batch.map((t) => t.key), { at: new Date(batch[0]!.at) });
          batch.forEach((t, i) => {
            const expected = seen.has(t.identity) ? 0 : 1;
            if (expected === 0) dups++;
            seen.add(t.identity);
            if (answers[i] !== expected) mismatches++;
          });
        }
        expect(mismatches).toBe(0);
        expect(dups).toBeGreaterThan(7000);
        const s = gate.stats();
        // Every first-seen key was sampled against the filter before it was added.
        expect(s.dedup.bloomFalsePositives + s.dedup.bloomTrueNegatives).toBe(20_000 - dups);
        expect(s.firstSeenBloom!.measuredFpp!).toBeLessThan(0.05);
        // the gate's own filter (a blacklist here) never learns the keys firstSeen answered
        expect(s.bloom!.bitCount).toBe(gate.bloom!.bitCount());
        expect(gate.bloom!.approximateElementCount()).toBeLessThanOrEqual(2);
        expect(Array.from(await gate.bloomCheck(['blacklisted-1', 'blacklisted-2']))).toEqual([1, 1]);
        const passed = transactions({ items: 2000, duplicateRate: 0, seed: 7 }, 2000).next().value!.map((t) => t.key);
        const maybe = await gate.bloomCheck(passed);
        expect(maybe.reduce((a, b) => a + b, 0)).toBeLessThan(100);
      } finally {
        await gate.close();
      }
    });
  }
});

describe('hashgate demo (CLI, built)', () => {
  it('prints one JSON object whose counts match the generator', () => {
    const out = execFileSync(process.execPath, ['dist/src/cli/main.js', 'demo', '--items', '30000', '--duplicate-rate', '0.25', '--json'], { encoding: 'utf8' });
    const r = JSON.parse(out) as Record<string, number>;
    expect(Object.keys(r)).toEqual(expect.arrayContaining(['items', 'firstSeen', 'duplicates', 'expectedDuplicates', 'mismatches', 'keysPerSec']));
    expect(r.items).toBe(30000);
    expect(r.mismatches).toBe(0);
    expect(r.duplicates).toBe(r.expectedDuplicates);
    expect(r.firstSeen + r.duplicates).toBe(30000);
    expect(r.duplicates / r.items).toBeGreaterThan(0.2);
  });

  it('rejects a bad flag with its name', () => {
    let stderr = '';
    try {
      execFileSync(process.execPath, ['dist/src/cli/main.js', 'demo', '--items', '-5'], { encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      stderr = String((e as { stderr: string }).stderr);
    }
    expect(stderr).toMatch(/--items/);
  });
});

describe('HashGate metrics', () => {
  it('counts each dedup key once and exposes Bloom and pool gauges', async () => {
    const { Registry } = await import('prom-client');
    const { parseExposition, sampleValue } = await import('./helpers/exposition.js');
    const registry = new Registry();
    const gate = await HashGate.open({ threads: 1, bloom: { expectedItems: 1000, fpp: 0.01 }, metrics: { registry } });
    try {
      await gate.firstSeen(['a', 'b', 'c', 'a']);
      await gate.firstSeen(['a', 'd']);
      const m = parseExposition(await registry.metrics());
      expect(sampleValue(m, 'hashgate_dedup_keys_checked_total')).toBe(6);
      expect(sampleValue(m, 'hashgate_duplicates_skipped_total')).toBe(2);
      expect(sampleValue(m, 'hashgate_bloom_bits', { filter: 'gate' })).toBe(gate.bloom!.bitSize);
      expect(sampleValue(m, 'hashgate_pool_threads', { pool: 'kernel' })).toBe(1);
    } finally {
      await gate.close();
    }
  });
});

describe('HashGate batch metrics', () => {
  it('ends a failed pooled batch as an error and records bucketsOf', async () => {
    const { Registry } = await import('prom-client');
    const { parseExposition, sampleValue } = await import('./helpers/exposition.js');
    const registry = new Registry();
    const gate = await HashGate.open({ ...POOLED, bloom: { expectedItems: 1000, fpp: 0.01 }, metrics: { registry } });
    try {
      const bad = ['a', 'b', 42 as unknown as string];
      await expect(gate.bloomAdd(bad)).rejects.toMatchObject({ code: 'HG_ERR_INVALID_ARG' });
      await expect(gate.bloomCheck(bad)).rejects.toMatchObject({ code: 'HG_ERR_INVALID_ARG' });
      await gate.bucketsOf(['x', 'y', 'z'], 7);
      const m = parseExposition(await registry.metrics());
      expect(sampleValue(m, 'hashgate_batch_errors_total', { op: 'bloom_add' })).toBe(1);
      expect(sampleValue(m, 'hashgate_batch_errors_total', { op: 'bloom_check' })).toBe(1);
      expect(sampleValue(m, 'hashgate_batch_keys_total', { op: 'buckets' })).toBe(3);
    } finally {
      await gate.close();
    }
  });
});

describe('HashGate index and ids', () => {
  it('exposes an embedded fingerprint index and logical-id registry', async () => {
    const gate = await HashGate.open({ threads: 0, index: true, ids: true });
    try {
      await gate.index!.put('dev-1', { canvas: 'c1', ua: 'ua-a' });
      await gate.index!.put('dev-2', { canvas: 'c1', ua: 'ua-b' });
      expect((await gate.index!.match({ canvas: 'c1', ua: 'ua-b' })).sort()).toEqual(['dev-2']);
      expect((await gate.index!.any({ ua: 'ua-a' })).sort()).toEqual(['dev-1']);
      const a = await gate.ids!.upsert({ a: 1, b: 2 });
      const b = await gate.ids!.upsert({ b: 2, a: 1 });
      expect(a.status).toBe('new');
      expect(b).toMatchObject({ status: 'duplicate', id: a.id });
    } finally {
      await gate.close();
    }
  });
});

describe('HashGate keys are checked once, the same way on every path', () => {
  it('a bad key is the same HashGateTypeError (code, index, no contents) inline and through the pool', async () => {
    const inline = await HashGate.open({ threads: 0, bloom: { expectedItems: 100, fpp: 0.01 } });
    const pooled = await HashGate.open({ ...POOLED, bloom: { expectedItems: 100, fpp: 0.01 } });
    try {
      const keys = ['a', 'b', 'c', { secret: 'do-not-print' }] as unknown as string[];
      for (const call of [(g: HashGate) => g.hashBatch(keys), (g: HashGate) => g.bloomAdd(keys), (g: HashGate) => g.bloomCheck(keys), (g: HashGate) => g.bucketsOf(keys, 8)]) {
        const errs = await Promise.all([inline, pooled].map((g) => call(g).then(() => undefined, (e: unknown) => e)));
        for (const e of errs) {
          expect(e).toMatchObject({ name: 'HashGateTypeError', code: 'HG_ERR_INVALID_ARG', details: { index: 3 } });
          expect((e as Error).message).toContain('keys[3]');
          expect((e as Error).message).not.toContain('do-not-print');
        }
      }
      // a PackedKeys whose offsets go backwards is refused before any work, on both paths
      const bad = { bytes: new Uint8Array(8), offsets: Uint32Array.from([0, 4, 2, 8]), count: 3 };
      for (const g of [inline, pooled]) await expect(g.hashBatch(bad)).rejects.toMatchObject({ name: 'HashGateRangeError', message: expect.stringContaining('keys.offsets[2]') });
    } finally {
      await Promise.all([inline.close(), pooled.close()]);
    }
  });

  it('firstSeen with a filter: packed keys and merged concurrent calls (digests concatenated) answer as arrays do', async () => {
    const plain = await HashGate.open({ threads: 0 });
    const filtered = await HashGate.open({ threads: 0, firstSeenBloom: { expectedItems: 5000, fpp: 0.01 } });
    try {
      const calls = Array.from({ length: 12 }, (_, c) => Array.from({ length: 7 }, (_, i) => `k${(c * 5 + i) % 40}`));
      const want = await Promise.all(calls.map((k) => plain.firstSeen(k)));
      const got = await Promise.all(calls.map((k, c) => filtered.firstSeen(c % 2 ? packKeys(k) : k)));
      expect(got.map((a) => Array.from(a))).toEqual(want.map((a) => Array.from(a)));
      // some calls were merged into one store batch (their digests concatenated)
      expect(filtered.dedup.counters.batches).toBeLessThan(calls.length);
      // the filter learned every key, once, through the shared digests
      for (let i = 0; i < 40; i++) expect(filtered.firstSeenBloom!.mightContain(`k${i}`)).toBe(true);
      const d = filtered.stats().dedup;
      expect(d.bloomFalsePositives + d.bloomTrueNegatives).toBe(want.reduce((a, w) => a + w.reduce((x, y) => x + y, 0), 0));
    } finally {
      await Promise.all([plain.close(), filtered.close()]);
    }
  });

  it('firstSeenBloom alone (no gate filter, no metrics) is still filled and sampled by firstSeen', async () => {
    const gate = await HashGate.open({ threads: 0, firstSeenBloom: { expectedItems: 1000, fpp: 0.01 } });
    try {
      expect(Array.from(await gate.firstSeen(['x', 'y', 'x']))).toEqual([1, 1, 0]);
      expect(gate.firstSeenBloom!.mightContain('x')).toBe(true);
      expect(gate.firstSeenBloom!.mightContain('y')).toBe(true);
      const s = gate.stats().dedup;
      expect(s.bloomFalsePositives + s.bloomTrueNegatives).toBe(2);
    } finally {
      await gate.close();
    }
  });
});
