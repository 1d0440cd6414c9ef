// Dedup on a real 3-master Redis Cluster started by the harness: bucket keys spread over every
// master, exact answers in both layouts, stats/purge across nodes, and a node killed mid-run
// (only that node's buckets fail: they are journaled and replayed).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireClusterOrSkip, startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { DedupService } from '../../src/dedup/index.js';
import { load } from '../../src/loader/loader.js';
import { RedisLayoutSink } from '../../src/loader/sink.js';

const has = requireClusterOrSkip('dedup cluster');
const NOW = Date.parse('2026-06-01T00:00:00Z');

describe.skipIf(!has)('dedup on Redis Cluster', () => {
  let cl: RedisClusterHandle;
  let dir: string;
  beforeAll(async () => {
    // AOF so the node killed in the last test keeps what it acknowledged
    cl = await startRedisCluster({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    dir = mkdtempSync(join(tmpdir(), 'hg-dedup-cluster-'));
  });
  afterAll(async () => {
    await cl?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const dbsizes = async (): Promise<number[]> =>
    Promise.all(
      cl.nodes.map(async ({ port }) => {
        const r = new Redis({ port, host: '127.0.0.1' });
        try {
          return await r.dbsize();
        } finally {
          r.disconnect();
        }
      }),
    );

  it('requestId: records live in their bucket\'s slot; a retry with the same id answers the original 1s, a retry without it 0', async () => {
    const svc = new DedupService({ redis: { cluster: cl.nodes }, dedup: { prefix: 'cl-req', buckets: 64, maxKeysPerCommand: 7, onStoreError: 'fail-closed', journalDir: dir, replayIntervalMs: 0 }, now: () => NOW });
    const keys = Array.from({ length: 500 }, (_, i) => `req${i}`);
    const first = await svc.firstSeen(keys, { requestId: 'batch-1' });
    expect(first.reduce((x, y) => x + y, 0)).toBe(500);
    expect((await svc.firstSeen(keys, { requestId: 'batch-1' })).reduce((x, y) => x + y, 0)).toBe(500);
    // another split of the same request (a subset, another order) still gets its original answers
    expect([...(await svc.firstSeen(keys.slice(100, 140).reverse(), { requestId: 'batch-1' }))]).toEqual(new Array(40).fill(1));
    expect((await svc.firstSeen(keys)).reduce((x, y) => x + y, 0)).toBe(0);
    expect((await svc.firstSeen(keys, { requestId: 'batch-2' })).reduce((x, y) => x + y, 0)).toBe(0);
    await svc.close();
  });

  for (const layout of ['compact', 'sets'] as const) {
    it(`${layout}: exact answers, keys on every master, stats and purge across nodes`, async () => {
      const svc = new DedupService({ redis: { cluster: cl.nodes }, dedup: { layout, prefix: `cl-${layout}`, buckets: 64, journalDir: dir, replayIntervalMs: 0 }, now: () => NOW });
      const keys = Array.from({ length: 6000 }, (_, i) => `王${i % 4000}|4401${i % 4000}`);
      const a = await svc.firstSeen(keys);
      expect(a.reduce((x, y) => x + y, 0)).toBe(4000);
      expect(a[4000]).toBe(0);
      const other = new DedupService({ redis: { cluster: cl.nodes }, dedup: { layout, prefix: `cl-${layout}`, buckets: 64, journalDir: dir, replayIntervalMs: 0, cacheMaxEntries: 0 }, now: () => NOW });
      expect([...(await other.firstSeen(['王1|44011', 'fresh']))]).toEqual([0, 1]);
      for (const n of await dbsizes()) expect(n).toBeGreaterThan(0);
      const st = await svc.stats('2026');
      expect(st.exact).toBe(4001);
      expect(Math.abs(st.approximate - 4001)).toBeLessThan(200);
      expect(await svc.purgeWindow('2026')).toBeGreaterThanOrEqual(64);
      expect((await other.stats('2026')).exact).toBe(0);
      await svc.close();
      await other.close();
    });
  }

  it('the bulk loader writes bucket sets on every node and firstSeen reads what it wrote', async () => {
    const file = join(dir, 'bulk.txt');
    writeFileSync(file, Array.from({ length: 3000 }, (_, i) => `bulk${i}\n`).join(''));
    const c = new Cluster(cl.nodes);
    const sink = new RedisLayoutSink(c, { layout: 'compact', prefix: 'cl-bulk', buckets: 32 });
    try {
      const sum = await load({ inputs: [file], window: '2026', buckets: 32, checkpointFile: join(dir, 'bulk.cp') }, { sink });
      expect(sum).toMatchObject({ ok: true, loaded: 3000, failed: 0, newMembers: 3000 });
      const perNode = await Promise.all(c.nodes('master').map((node) => node.keys('cl-bulk:2026:c{*')));
      expect(perNode.every((keys) => keys.length > 0)).toBe(true);
    } finally {
      await sink.close();
    }
    const svc = new DedupService({ redis: { cluster: cl.nodes }, dedup: { prefix: 'cl-bulk', buckets: 32, journalDir: dir, replayIntervalMs: 0 }, now: () => NOW });
    expect([...(await svc.firstSeen(['bulk0', 'bulk2999', 'nope']))]).toEqual([0, 0, 1]);
    await svc.close();
  });

  it('a master killed mid-run: only its buckets are journaled (fail-open); recover() completes the window', async () => {
    const jdir = mkdtempSync(join(tmpdir(), 'hg-dedup-cl-fo-'));
    const svc = new DedupService({
      redis: { cluster: cl.nodes, options: { redisOptions: { commandTimeout: 500 } } },
      dedup: { prefix: 'cl-kill', buckets: 64, journalDir: jdir, replayIntervalMs: 0, commandTimeoutMs: 500 },
      now: () => NOW,
    });
    const batch1 = Array.from({ length: 2000 }, (_, i) => `a${i}`);
    expect((await svc.firstSeen(batch1)).reduce((x, y) => x + y, 0)).toBe(2000);
    await cl.kill(2);
    const batch2 = Array.from({ length: 2000 }, (_, i) => `b${i}`);
    const a2 = await svc.firstSeen(batch2);
    expect(a2.reduce((x, y) => x + y, 0)).toBe(2000); // fail-open: all new
    const journaled = svc.counters.journaledKeys;
    expect(journaled).toBeGreaterThan(0);
    expect(journaled).toBeLessThan(2000); // the two live masters answered their buckets
    await cl.restart(2);
    let rep = await svc.recover().catch(() => undefined);
    for (let i = 0; i < 50 && (rep === undefined || rep.failed.length > 0 || rep.segments === 0); i++) {
      await new Promise((r) => setTimeout(r, 200));
      rep = await svc.recover().catch(() => undefined);
    }
    expect(rep?.keys).toBe(journaled);
    expect(readdirSync(jdir)).toEqual([]);
    expect((await svc.stats('2026')).exact).toBe(4000);
    await svc.close();
    rmSync(jdir, { recursive: true, force: true });
  }, 120_000);
});
