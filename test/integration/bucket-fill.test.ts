// Bucket fill of a compact dedup window on a real redis-server whose set-max-intset-entries is
// small: stats() reports the exact largest bucket and the limit, health() turns degraded before
// buckets turn into hashtables, the metric carries the ratio, a process sized larger than the
// window was recorded warns, and `hashgate stats --purge` reports the memory it freed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { HashGate } from 'hashgate';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';

const has = requireRedisOrSkip('bucket fill');
const CLI = resolve(import.meta.dirname, '../../dist/src/cli/main.js');
const LIMIT = 64;
const BUCKETS = 16;

describe.skipIf(!has)('compact bucket fill against the intset limit', () => {
  let srv: RedisServer;
  let dir: string;
  beforeAll(async () => {
    srv = await startRedis({ args: ['--set-max-intset-entries', String(LIMIT)] });
    dir = mkdtempSync(join(tmpdir(), 'hg-fill-'));
  });
  afterAll(async () => {
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const open = (buckets: number, journal: string, registry = new Registry()) =>
    HashGate.open({ threads: 0, redis: srv.url, metrics: { registry }, dedup: { buckets, journalDir: join(dir, journal), window: () => '2031', replayIntervalMs: 0 } });

  it('stats() gives the exact largest bucket and the limit; health() degrades near the limit; the metric follows', async () => {
    const registry = new Registry();
    const gate = await open(BUCKETS, 'a', registry);
    try {
      const few = Array.from({ length: BUCKETS * 8 }, (_, i) => `few-${i}`);
      await gate.firstSeen(few);
      const h1 = await gate.health();
      expect(h1.tiers.dedup.status).toBe('up');
      expect(h1.tiers.dedup.bucketFill).toMatchObject({ window: '2031', buckets: BUCKETS, limit: LIMIT });
      expect(h1.tiers.dedup.bucketFill!.ratio).toBeLessThan(0.9);

      const many = Array.from({ length: BUCKETS * 52 }, (_, i) => `many-${i}`);
      await gate.firstSeen(many);
      const st = await gate.dedupStats('2031');
      const r = new Redis(srv.url);
      const sizes = await Promise.all(Array.from({ length: BUCKETS }, (_, b) => r.scard(`hg:dedup:2031:c:${b}`)));
      r.disconnect();
      expect(st.largestBucket).toBe(Math.max(...sizes));
      expect(st.bucketLimit).toBe(LIMIT);
      expect(st.exact).toBe(few.length + many.length);

      const h2 = await gate.health();
      expect(h2.tiers.dedup.status).toBe('degraded');
      expect(h2.tiers.dedup.reason).toMatch(/largest bucket expected at \d+ of 64/);
      expect(h2.ready).toBe(true);
      const fill = h2.tiers.dedup.bucketFill!;
      // the prediction is the expected maximum of BUCKETS Poisson counts: near the real one
      expect(Math.abs(fill.predictedLargest - Math.max(...sizes))).toBeLessThan(20);

      const text1 = await registry.metrics();
      await new Promise((r) => setTimeout(r, 100)); // the first scrape starts the background reading
      const text2 = await registry.metrics();
      const line = `${text1}\n${text2}`.split('\n').find((l) => l.startsWith('hashgate_dedup_bucket_fill_ratio{'));
      expect(line).toBeDefined();
      expect(Number(line!.split(' ').pop())).toBeGreaterThan(0.9);
    } finally {
      await gate.close();
    }
  });

  it('a process sized for more buckets than the window recorded warns, once, and uses the recorded count', async () => {
    const first = await open(BUCKETS, 'b');
    await first.firstSeen(['w-1']);
    await first.close();
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    const second = await open(BUCKETS * 64, 'c');
    try {
      await second.firstSeen(['w-1', 'w-2']);
      await second.firstSeen(['w-3']);
      await new Promise((r) => setImmediate(r));
      const ours = warnings.filter((w) => (w as Error & { code?: string }).code === 'HG_WARN_UNDERSIZED_WINDOW');
      expect(ours).toHaveLength(1);
      expect(ours[0]!.message).toMatch(/recorded with 16 buckets, fewer than the 1024/);
      expect((await second.dedupStats('2031')).buckets).toBe(BUCKETS);
    } finally {
      process.off('warning', onWarning);
      await second.close();
    }
  });

  it('`hashgate stats --purge --json` reports the memory the purge freed', async () => {
    const gate = await HashGate.open({ threads: 0, redis: srv.url, dedup: { buckets: 4096, journalDir: join(dir, 'd'), window: () => '2032', replayIntervalMs: 0 } });
    for (let o = 0; o < 100_000; o += 10_000) await gate.firstSeen(Array.from({ length: 10_000 }, (_, i) => `purge-${o + i}`));
    await gate.close();
    const r = spawnSync(process.execPath, [CLI, 'stats', '--redis', srv.url, '--window', '2032', '--purge', '--json'], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim()) as Record<string, number>;
    expect(out.deletedKeys).toBeGreaterThan(4096);
    // 100k members at 8 B each in intsets: the purge frees far more than a connection costs
    expect(out.usedMemoryBefore! - out.usedMemoryAfter!).toBeGreaterThan(500_000);
    expect(typeof out.rssAfter).toBe('number');
  });
});
