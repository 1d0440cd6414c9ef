import { describe, expect, it, afterEach } from 'vitest';
import diagnostics_channel from 'node:diagnostics_channel';
import { Counter, Registry } from 'prom-client';
import {
  CHANNEL_BATCH_END,
  CHANNEL_BATCH_START,
  CHANNEL_STORE_ERROR,
  batchStartChannel,
  createMetrics,
  errorKind,
  metricsHandler,
  noopMetrics,
  resolveMetrics,
  serveMetrics,
} from '../src/metrics/index.js';
import type { BatchEndMessage, BatchStartMessage, StoreErrorMessage } from '../src/metrics/index.js';
import { parseExposition, sampleValue } from './helpers/exposition.js';

async function scrape(m: ReturnType<typeof createMetrics>) {
  return parseExposition(await m.text());
}

describe('metrics: counters after known operations', () => {
  it('dedup: first-seen, duplicates and dedup rate', async () => {
    const m = createMetrics();
    m.dedup(70, 30);
    m.dedup(0, 100);
    m.dedupFailOpen(5);
    const f = await scrape(m);
    expect(sampleValue(f, 'hashgate_dedup_keys_checked_total')).toBe(200);
    expect(sampleValue(f, 'hashgate_dedup_first_seen_total')).toBe(70);
    expect(sampleValue(f, 'hashgate_duplicates_skipped_total')).toBe(130);
    expect(sampleValue(f, 'hashgate_dedup_rate')).toBeCloseTo(0.65, 12);
    expect(sampleValue(f, 'hashgate_dedup_fail_open_total')).toBe(5);
    expect(f.get('hashgate_duplicates_skipped_total')?.type).toBe('counter');
  });

  it('ids: collisions by hash function and collision rate', async () => {
    const m = createMetrics();
    m.ids('mmh3_128', 999_990, 8, 2);
    m.ids('sha256', 10, 0, 0);
    m.collision('mmh3_128', 1); // found later by the repair job
    const f = await scrape(m);
    expect(sampleValue(f, 'hashgate_hash_collisions_total', { hash_function: 'mmh3_128' })).toBe(3);
    expect(sampleValue(f, 'hashgate_hash_collisions_total', { hash_function: 'sha256' })).toBeUndefined();
    expect(sampleValue(f, 'hashgate_documents_hashed_total', { hash_function: 'mmh3_128' })).toBe(1_000_000);
    expect(sampleValue(f, 'hashgate_id_upserts_total', { status: 'collision' })).toBe(2);
    expect(sampleValue(f, 'hashgate_id_upserts_total', { status: 'new' })).toBe(1_000_000);
    expect(sampleValue(f, 'hashgate_collision_rate', { hash_function: 'mmh3_128' })).toBeCloseTo(3e-6, 15);
    expect(sampleValue(f, 'hashgate_collision_rate', { hash_function: 'sha256' })).toBe(0);
  });

  it('batches: histogram count/sum and keys per op, errors counted', async () => {
    const m = createMetrics();
    const t = m.batchStart('hash', 8192);
    m.batchEnd('hash', 8192, t);
    m.batchEnd('hash', 100, m.batchStart('hash', 100), new Error('boom'));
    m.observeBatch('bloom_check', 50, 0.0015);
    const f = await scrape(m);
    expect(sampleValue(f, 'hashgate_batch_keys_total', { op: 'hash' })).toBe(8292);
    expect(sampleValue(f, 'hashgate_batch_duration_seconds_count', { op: 'hash' })).toBe(2);
    expect(sampleValue(f, 'hashgate_batch_errors_total', { op: 'hash' })).toBe(1);
    expect(sampleValue(f, 'hashgate_batch_duration_seconds_bucket', { op: 'bloom_check', le: '0.001' })).toBe(0);
    expect(sampleValue(f, 'hashgate_batch_duration_seconds_bucket', { op: 'bloom_check', le: '0.002' })).toBe(1);
    expect(sampleValue(f, 'hashgate_batch_duration_seconds_sum', { op: 'bloom_check' })).toBeCloseTo(0.0015, 12);
  });

  it('tiers, store errors, loader and journal counters', async () => {
    const m = createMetrics();
    m.tier('lru', 90, 10, 0, 0.0001);
    m.tier('redis', 8, 2, 0, 0.002);
    m.tier('hbase', 0, 0, 2, 0.05);
    m.storeError('redis', 'timeout', 3);
    m.storeError('redis', 'connection');
    m.loader(1000, 64_000, 3, 7);
    m.loader(500, 32_000);
    m.journalAppended(10, 400);
    m.journalReplayed(4, 160);
    const f = await scrape(m);
    expect(sampleValue(f, 'hashgate_cache_hits_total', { tier: 'lru' })).toBe(90);
    expect(sampleValue(f, 'hashgate_cache_misses_total', { tier: 'redis' })).toBe(2);
    expect(sampleValue(f, 'hashgate_cache_errors_total', { tier: 'hbase' })).toBe(2);
    expect(sampleValue(f, 'hashgate_cache_batch_duration_seconds_count', { tier: 'hbase' })).toBe(1);
    expect(sampleValue(f, 'hashgate_store_errors_total', { store: 'redis', kind: 'timeout' })).toBe(3);
    expect(sampleValue(f, 'hashgate_store_errors_total', { store: 'redis', kind: 'connection' })).toBe(1);
    expect(sampleValue(f, 'hashgate_loader_rows_total', { outcome: 'loaded' })).toBe(1500);
    expect(sampleValue(f, 'hashgate_loader_rows_total', { outcome: 'rejected' })).toBe(3);
    expect(sampleValue(f, 'hashgate_loader_rows_total', { outcome: 'failed' })).toBe(7);
    expect(sampleValue(f, 'hashgate_loader_bytes_total')).toBe(96_000);
    expect(sampleValue(f, 'hashgate_journal_appended_records_total')).toBe(10);
    expect(sampleValue(f, 'hashgate_journal_replayed_bytes_total')).toBe(160);
    expect(sampleValue(f, 'hashgate_journal_last_replay_timestamp_seconds')).toBeGreaterThan(1.7e9);
  });
});

describe('metrics: gauges read on scrape only', () => {
  it('bloom source is called per scrape, not per operation, and unregisters', async () => {
    const m = createMetrics();
    let reads = 0;
    const off = m.bloomSource('dedup', () => {
      reads++;
      return { bitSize: 1000, bitsSet: 250, hashFunctions: 7, expectedFpp: 0.25 ** 7, approximateElements: 40 };
    });
    m.bloomSample('dedup', 10_000, 1);
    expect(reads).toBe(0);
    let f = await scrape(m);
    expect(reads).toBeGreaterThan(0);
    expect(sampleValue(f, 'hashgate_bloom_fill_ratio', { filter: 'dedup' })).toBe(0.25);
    expect(sampleValue(f, 'hashgate_bloom_bits_set', { filter: 'dedup' })).toBe(250);
    expect(sampleValue(f, 'hashgate_bloom_hash_functions', { filter: 'dedup' })).toBe(7);
    expect(sampleValue(f, 'hashgate_bloom_expected_fpp', { filter: 'dedup' })).toBeCloseTo(0.25 ** 7, 15);
    expect(sampleValue(f, 'hashgate_bloom_measured_fpp', { filter: 'dedup' })).toBeCloseTo(1e-4, 15);
    expect(sampleValue(f, 'hashgate_bloom_false_positives_total', { filter: 'dedup' })).toBe(1);
    off();
    const before = reads;
    f = await scrape(m);
    expect(reads).toBe(before);
    expect(sampleValue(f, 'hashgate_bloom_fill_ratio', { filter: 'dedup' })).toBeUndefined();
  });

  it('two components registering the same name are both kept; unregister is idempotent', async () => {
    const m = createMetrics();
    const offA = m.dedupSource('gate', () => ({ keys: 10, firstSeen: 6 }));
    const offB = m.dedupSource('gate', () => ({ keys: 5, firstSeen: 5 }));
    m.poolSource('kernel', () => ({ threads: 1, queueDepth: 0, utilization: 0 }));
    m.poolSource('kernel', () => ({ threads: 3, queueDepth: 0, utilization: 0 }));
    let f = await scrape(m);
    expect(sampleValue(f, 'hashgate_dedup_keys_checked_total')).toBe(15);
    expect(sampleValue(f, 'hashgate_duplicates_skipped_total')).toBe(4);
    expect(sampleValue(f, 'hashgate_pool_threads', { pool: 'kernel' })).toBe(1);
    expect(sampleValue(f, 'hashgate_pool_threads', { pool: 'kernel-2' })).toBe(3);
    offA();
    offA();
    offB();
    f = await scrape(m);
    expect(sampleValue(f, 'hashgate_dedup_keys_checked_total')).toBe(15);
  });

  it('pool and journal sources; journalBacklog goes to 0 after replay', async () => {
    const m = createMetrics();
    let backlog = { records: 1200, bytes: 48_000, oldestAgeSeconds: 4000 };
    m.poolSource('main', () => ({ threads: 2, queueDepth: 5, utilization: 0.75, completedTasks: 42 }));
    m.journalSource('local', () => backlog);
    let f = await scrape(m);
    expect(sampleValue(f, 'hashgate_pool_queue_depth', { pool: 'main' })).toBe(5);
    expect(sampleValue(f, 'hashgate_pool_utilization', { pool: 'main' })).toBe(0.75);
    expect(sampleValue(f, 'hashgate_pool_threads', { pool: 'main' })).toBe(2);
    expect(sampleValue(f, 'hashgate_journal_backlog_records', { journal: 'local' })).toBe(1200);
    expect(sampleValue(f, 'hashgate_journal_oldest_record_age_seconds', { journal: 'local' })).toBe(4000);
    backlog = { records: 0, bytes: 0, oldestAgeSeconds: 0 };
    f = await scrape(m);
    expect(sampleValue(f, 'hashgate_journal_backlog_records', { journal: 'local' })).toBe(0);

    m.journalBacklog(7, 70);
    f = await scrape(m);
    expect(sampleValue(f, 'hashgate_journal_backlog_records', { journal: 'default' })).toBe(7);
    expect(sampleValue(f, 'hashgate_journal_backlog_bytes', { journal: 'default' })).toBe(70);
  });

  it('a throwing or nonsensical source does not break the scrape', async () => {
    const m = createMetrics();
    m.dedupSource('odd', () => ({ keys: 1, firstSeen: 3 }));
    m.cacheSource('odd', () => ({ redis: { hits: -1, misses: NaN, errors: 0 } }));
    m.poolSource('bad', () => {
      throw new Error('closed');
    });
    m.poolSource('good', () => ({ threads: 1, queueDepth: 0, utilization: 0 }));
    const f = await scrape(m);
    expect(sampleValue(f, 'hashgate_pool_threads', { pool: 'good' })).toBe(1);
    expect(sampleValue(f, 'hashgate_pool_threads', { pool: 'bad' })).toBeUndefined();
  });
});

describe('metrics: registries and prefixes', () => {
  it("uses the user's registry beside their own metrics, one instance per (registry, prefix)", async () => {
    const registry = new Registry();
    const mine = new Counter({ name: 'app_requests_total', help: 'app', registers: [registry] });
    mine.inc(3);
    const a = createMetrics({ registry });
    const b = createMetrics({ registry });
    expect(b).toBe(a);
    a.dedup(1, 1);
    const f = parseExposition(await registry.metrics());
    expect(sampleValue(f, 'app_requests_total')).toBe(3);
    expect(sampleValue(f, 'hashgate_dedup_keys_checked_total')).toBe(2);
    const custom = createMetrics({ registry, prefix: 'risk_' });
    expect(custom).not.toBe(a);
    custom.dedup(0, 4);
    const g = parseExposition(await registry.metrics());
    expect(sampleValue(g, 'risk_duplicates_skipped_total')).toBe(4);
    expect(sampleValue(g, 'hashgate_duplicates_skipped_total')).toBe(1);
  });

  it('every metric name carries the prefix and the whole text parses', async () => {
    const m = createMetrics({ collectDefaultMetrics: true });
    m.dedup(1, 0);
    const f = await scrape(m);
    expect(f.size).toBeGreaterThan(30);
    for (const name of f.keys()) expect(name.startsWith('hashgate_')).toBe(true);
    expect(f.has('hashgate_process_cpu_user_seconds_total')).toBe(true);
  });

  it('validates options and resolves the metrics option', () => {
    expect(() => createMetrics({ prefix: 'bad-prefix' })).toThrow(TypeError);
    expect(() => createMetrics({ prefix: 'bad-prefix' })).toThrow(/metrics\.prefix/);
    expect(() => createMetrics({ registry: {} as Registry })).toThrow(/metrics\.registry/);
    expect(resolveMetrics(undefined)).toBe(noopMetrics);
    expect(resolveMetrics(false)).toBe(noopMetrics);
    expect(resolveMetrics(true).enabled).toBe(true);
    const m = createMetrics();
    expect(resolveMetrics(m)).toBe(m);
    expect(() => resolveMetrics('yes', 'options.metrics')).toThrow(/options\.metrics/);
  });
});

describe('metrics: HTTP exposition', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });

  it('serveMetrics serves valid exposition text with the right content type', async () => {
    const m = createMetrics();
    m.dedup(3, 2);
    m.storeError('hbase', 'connection');
    const srv = await serveMetrics(m, { port: 0 });
    closers.push(srv.close);
    const res = await fetch(srv.url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const f = parseExposition(await res.text());
    expect(sampleValue(f, 'hashgate_duplicates_skipped_total')).toBe(2);
    expect(sampleValue(f, 'hashgate_store_errors_total', { store: 'hbase', kind: 'connection' })).toBe(1);
    expect((await fetch(srv.url.replace('/metrics', '/nope'))).status).toBe(404);
    expect((await fetch(srv.url, { method: 'POST' })).status).toBe(405);
  });

  it('metricsHandler mounts on a user server and accepts a bare Registry', async () => {
    const { createServer } = await import('node:http');
    const registry = new Registry();
    createMetrics({ registry }).loader(10, 100);
    const handler = metricsHandler(registry);
    const server = createServer((req, res) => (req.url === '/m' ? handler(req, res) : res.writeHead(404).end()));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => server.close(() => r())));
    const port = (server.address() as { port: number }).port;
    const f = parseExposition(await (await fetch(`http://127.0.0.1:${port}/m`)).text());
    expect(sampleValue(f, 'hashgate_loader_rows_total', { outcome: 'loaded' })).toBe(10);
    expect(() => metricsHandler({} as Registry)).toThrow(TypeError);
  });
});

describe('diagnostics_channel', () => {
  it('publishes batch and store events only when someone subscribes', () => {
    const start: BatchStartMessage[] = [];
    const end: BatchEndMessage[] = [];
    const errs: StoreErrorMessage[] = [];
    // Count publish calls: with no subscriber the message must never be built or published.
    // Node swaps the channel's prototype when it gains subscribers, so delegate to whatever
    // prototype is current rather than a bound copy of the inactive no-op.
    let publishes = 0;
    batchStartChannel.publish = function (this: typeof batchStartChannel, msg: unknown) {
      publishes++;
      (Object.getPrototypeOf(batchStartChannel) as typeof batchStartChannel).publish.call(batchStartChannel, msg);
    };
    try {
      for (const m of [createMetrics(), noopMetrics]) {
        expect(batchStartChannel.hasSubscribers).toBe(false);
        m.batchEnd('dedup', 10, m.batchStart('dedup', 10));
        expect(publishes).toBe(0);
      }
      const onStart = (msg: unknown) => start.push(msg as BatchStartMessage);
      const onEnd = (msg: unknown) => end.push(msg as BatchEndMessage);
      const onErr = (msg: unknown) => errs.push(msg as StoreErrorMessage);
      diagnostics_channel.subscribe(CHANNEL_BATCH_START, onStart);
      diagnostics_channel.subscribe(CHANNEL_BATCH_END, onEnd);
      diagnostics_channel.subscribe(CHANNEL_STORE_ERROR, onErr);
      try {
        for (const m of [createMetrics(), noopMetrics]) {
          const t = m.batchStart('bloom_check', 4096);
          m.batchEnd('bloom_check', 4096, t, new Error('x'));
          m.storeError('redis', 'oom', 1, new Error('OOM command not allowed'));
        }
      } finally {
        diagnostics_channel.unsubscribe(CHANNEL_BATCH_START, onStart);
        diagnostics_channel.unsubscribe(CHANNEL_BATCH_END, onEnd);
        diagnostics_channel.unsubscribe(CHANNEL_STORE_ERROR, onErr);
      }
      expect(publishes).toBe(2);
      expect(start).toHaveLength(2);
      expect(start[0]).toMatchObject({ op: 'bloom_check', keys: 4096 });
      expect(end).toHaveLength(2);
      expect(end[0]?.durationMs).toBeGreaterThanOrEqual(0);
      expect((end[0]?.error as Error).message).toBe('x');
      expect(errs.map((e) => `${e.store}/${e.kind}`)).toEqual(['redis/oom', 'redis/oom']);
      const before = start.length;
      noopMetrics.batchStart('hash', 1);
      expect(start.length).toBe(before);
    } finally {
      delete (batchStartChannel as { publish?: unknown }).publish;
    }
  });

  it('errorKind maps store errors to bounded labels', () => {
    expect(errorKind(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe('connection');
    expect(errorKind(new Error('Command timed out'))).toBe('timeout');
    expect(errorKind(new Error("OOM command not allowed when used memory > 'maxmemory'."))).toBe('oom');
    expect(errorKind(new Error("READONLY You can't write against a read only replica."))).toBe('failover');
    expect(errorKind(new Error('CLUSTERDOWN The cluster is down'))).toBe('cluster');
    expect(errorKind('weird')).toBe('other');
  });
});
