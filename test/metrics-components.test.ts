// Metrics fed by real components (embedded dedup store, a real Bloom filter), not just the API.
import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMetrics, bloomStats, journalDirStats, piscinaStats, noopMetrics, cacheTierTotals } from '../src/metrics/index.js';
import { MemoryColdStore, TieredCache, encodeValue, type ColdCell, type ColdEntry, type ColdStore } from '../src/cache/index.js';
import { DedupService } from '../src/dedup/index.js';
import { BloomFilter } from '../src/bloom/index.js';
import { IdRegistry } from '../src/ids/index.js';
import { weak16, records } from './ids-scenarios.js';
import { parseExposition, sampleValue } from './helpers/exposition.js';

const NOW = Date.parse('2026-06-01T00:00:00Z');

describe('metrics from real components', () => {
  it('a known number of duplicates through the in-memory dedup store', async () => {
    const m = createMetrics();
    const svc = new DedupService({ now: () => NOW });
    const off = m.dedupSource('main', () => svc.counters);
    const unique = Array.from({ length: 300 }, (_, i) => `张三${String(i).padStart(18, '0')}`);
    // 300 new, then 120 repeats across batches, plus 5 repeats inside one batch
    const a = await svc.firstSeen(unique);
    const b = await svc.firstSeen([...unique.slice(0, 120), 'x1', 'x2', 'x3', 'x4', 'x5', 'x1', 'x2', 'x3', 'x4', 'x5']);
    const expectFirst = [...a, ...b].reduce((s, v) => s + v, 0);
    expect(expectFirst).toBe(305);
    let f = parseExposition(await m.text());
    expect(sampleValue(f, 'hashgate_dedup_keys_checked_total')).toBe(430);
    expect(sampleValue(f, 'hashgate_dedup_first_seen_total')).toBe(305);
    expect(sampleValue(f, 'hashgate_duplicates_skipped_total')).toBe(125);
    expect(sampleValue(f, 'hashgate_dedup_rate')).toBeCloseTo(125 / 430, 12);
    // per-batch pushes from another component add to the source
    m.dedup(10, 5);
    f = parseExposition(await m.text());
    expect(sampleValue(f, 'hashgate_duplicates_skipped_total')).toBe(130);
    // closing the service: the last reading is kept, the counter never goes backwards
    off();
    await svc.close();
    f = parseExposition(await m.text());
    expect(sampleValue(f, 'hashgate_dedup_keys_checked_total')).toBe(445);
    expect(sampleValue(f, 'hashgate_duplicates_skipped_total')).toBe(130);
  });

  it('Bloom gauges and measured FPP from a real filter', async () => {
    const m = createMetrics();
    const filter = BloomFilter.create({ expectedItems: 2000, fpp: 0.01 });
    m.bloomSource('dedup', () => bloomStats(filter));
    for (let i = 0; i < 1000; i++) filter.add(`present-${i}`);
    // FPP sample: 20,000 keys known absent (never added); count what the filter lets through
    let fp = 0;
    const N = 20_000;
    for (let i = 0; i < N; i++) if (filter.mightContain(`absent-${i}`)) fp++;
    m.bloomSample('dedup', N, fp);
    const f = parseExposition(await m.text());
    const bits = sampleValue(f, 'hashgate_bloom_bits', { filter: 'dedup' }) as number;
    const set = sampleValue(f, 'hashgate_bloom_bits_set', { filter: 'dedup' }) as number;
    expect(bits).toBe(filter.bitSize);
    expect(set).toBe(filter.bitCount());
    expect(set).toBeGreaterThan(0);
    expect(sampleValue(f, 'hashgate_bloom_fill_ratio', { filter: 'dedup' })).toBeCloseTo(set / bits, 12);
    expect(sampleValue(f, 'hashgate_bloom_hash_functions', { filter: 'dedup' })).toBe(filter.hashFunctions);
    expect(sampleValue(f, 'hashgate_bloom_expected_fpp', { filter: 'dedup' })).toBeCloseTo(filter.expectedFpp(), 12);
    expect(sampleValue(f, 'hashgate_bloom_measured_fpp', { filter: 'dedup' })).toBeCloseTo(fp / N, 12);
    expect(sampleValue(f, 'hashgate_bloom_approximate_elements', { filter: 'dedup' })).toBe(filter.approximateElementCount());
  });

  it('forced collisions through a real IdRegistry (16-bit hash) show in collisions and collision rate', async () => {
    const m = createMetrics();
    const reg = new IdRegistry({ algorithm: weak16 });
    let events = 0;
    reg.on('collision', () => {
      events++;
    });
    // Wiring as a component would do it: one metrics call per batch of upserts.
    const recs = records(1500);
    const counts = { new: 0, duplicate: 0, collision: 0 };
    for (let o = 0; o < recs.length; o += 500) {
      const batch = { new: 0, duplicate: 0, collision: 0 };
      for (const r of recs.slice(o, o + 500)) batch[(await reg.upsert(r)).status]++;
      for (const r of recs.slice(o, o + 10)) batch[(await reg.upsert(r)).status]++; // re-upserts: duplicates
      m.ids(weak16.name, batch.new, batch.duplicate, batch.collision);
      counts.new += batch.new;
      counts.duplicate += batch.duplicate;
      counts.collision += batch.collision;
    }
    expect(counts.collision).toBeGreaterThan(3); // birthday bound: ~17 of 1500 in 65536 buckets
    expect(events).toBe(counts.collision);
    expect(counts.duplicate).toBe(30);
    const f = parseExposition(await m.text());
    expect(sampleValue(f, 'hashgate_hash_collisions_total', { hash_function: weak16.name })).toBe(counts.collision);
    expect(sampleValue(f, 'hashgate_id_upserts_total', { status: 'duplicate' })).toBe(30);
    expect(sampleValue(f, 'hashgate_documents_hashed_total', { hash_function: weak16.name })).toBe(1530);
    expect(sampleValue(f, 'hashgate_collision_rate', { hash_function: weak16.name })).toBeCloseTo(counts.collision / 1530, 12);
    // far above the 1e-6 alert threshold, as it should be with a 16-bit hash
    expect(sampleValue(f, 'hashgate_collision_rate', { hash_function: weak16.name })).toBeGreaterThan(1e-6);
  });

  it('per-tier hits/misses/errors and tier health from a real TieredCache', async () => {
    const m = createMetrics();
    const inner = new MemoryColdStore();
    let down = false;
    const cold: ColdStore = {
      async mget(table: string, keys: readonly string[]): Promise<(ColdCell | undefined)[]> {
        if (down) throw Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' });
        return inner.mget(table, keys);
      },
      async mput(table: string, entries: readonly ColdEntry[]): Promise<void> {
        return inner.mput(table, entries);
      },
    };
    await inner.mput('risk', [{ key: 'u1', value: encodeValue({ level: 3 }), ts: 1 }]);
    const cache = new TieredCache({ cold });
    m.cacheSource('lookup', () => cacheTierTotals(cache.stats()));
    m.tier('redis', 5, 1, 0, 0.001); // pushed by another component: adds to the source's totals
    expect(await cache.lookup('risk', ['u1', 'u2'])).toEqual([{ level: 3 }, undefined]); // cold: 1 hit, 1 miss
    expect(await cache.lookup('risk', ['u1'])).toEqual([{ level: 3 }]); // lru hit
    let f = parseExposition(await m.text());
    expect(sampleValue(f, 'hashgate_cache_hits_total', { tier: 'hbase' })).toBe(1);
    expect(sampleValue(f, 'hashgate_cache_misses_total', { tier: 'hbase' })).toBe(1);
    expect(sampleValue(f, 'hashgate_cache_hits_total', { tier: 'lru' })).toBe(cache.stats().local.hits + cache.stats().local.negativeHits);
    expect(sampleValue(f, 'hashgate_cache_hits_total', { tier: 'redis' })).toBe(5);
    expect(sampleValue(f, 'hashgate_cache_tier_up', { tier: 'hbase' })).toBe(1);
    down = true;
    // a key no tier could check rejects (unknown, never "absent"); the failure is counted
    await expect(cache.lookup('risk', ['u3'])).rejects.toMatchObject({ code: 'HG_ERR_TIER_UNAVAILABLE', details: { tier: 'cold' } });
    f = parseExposition(await m.text());
    expect(sampleValue(f, 'hashgate_cache_errors_total', { tier: 'hbase' })).toBe(cache.stats().cold!.errors);
    expect(sampleValue(f, 'hashgate_cache_errors_total', { tier: 'hbase' })).toBeGreaterThan(0);
    expect(sampleValue(f, 'hashgate_cache_tier_up', { tier: 'hbase' })).toBe(0);
  });

  it('piscinaStats and journalDirStats read what the gauges need', () => {
    expect(piscinaStats({ threads: [1, 2], queueSize: 3, utilization: 0.5, completed: 9 })).toEqual({ threads: 2, queueDepth: 3, utilization: 0.5, completedTasks: 9 });
    const dir = mkdtempSync(join(tmpdir(), 'hg-metrics-journal-'));
    try {
      expect(journalDirStats(join(dir, 'missing'))).toMatchObject({ bytes: 0, segments: 0 });
      writeFileSync(join(dir, 'seg-000001.hgj'), Buffer.alloc(100));
      writeFileSync(join(dir, 'seg-000002.open'), Buffer.alloc(20));
      writeFileSync(join(dir, 'checkpoint.json'), '{}');
      const s = journalDirStats(dir, () => Date.now() + 10_000);
      expect(s.bytes).toBe(120);
      expect(s.segments).toBe(2);
      expect(s.oldestAgeSeconds).toBeGreaterThanOrEqual(9);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('NoopMetrics accepts every call and registers nothing', () => {
    const off = noopMetrics.bloomSource('x', () => {
      throw new Error('never read');
    });
    off();
    noopMetrics.dedupSource('x', () => ({ keys: 1, firstSeen: 1 }))();
    noopMetrics.dedup(1, 2);
    noopMetrics.tier('redis', 1, 1, 1, 0.1);
    expect(noopMetrics.enabled).toBe(false);
    // no subscriber: no clock read, nothing to time
    expect(noopMetrics.batchStart('hash', 1)).toBe(0);
  });
});
