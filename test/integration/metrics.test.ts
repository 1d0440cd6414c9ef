// Metrics through a real Redis outage: fail-open answers and journal backlog rise while
// redis-server is down, and the backlog returns to 0 after recover().
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { DedupService } from '../../src/dedup/index.js';
import { createMetrics, journalDirStats, serveMetrics } from '../../src/metrics/index.js';
import { parseExposition, sampleValue } from '../helpers/exposition.js';

const has = requireRedisOrSkip('metrics integration');
const NOW = Date.parse('2026-06-01T00:00:00Z');

describe.skipIf(!has)('metrics on a real Redis outage', () => {
  let srv: RedisServer;
  let dir: string;
  beforeAll(async () => {
    srv = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'hg-metrics-it-'));
  });
  afterAll(async () => {
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('journal backlog > 0 during the outage, back to 0 after recover; store errors counted', async () => {
    const m = createMetrics();
    const svc = new DedupService({
      redis: srv.url,
      // 'all': 'b', seen once before the outage, is answered by the seen-cache during it
      dedup: { journalDir: dir, prefix: 'mt', replayIntervalMs: 0, commandTimeoutMs: 500, onStoreError: 'fail-open', cacheAdmit: 'all' },
      now: () => NOW,
    });
    m.dedupSource('main', () => svc.counters);
    m.journalSource('main', () => journalDirStats(dir));
    const srvHttp = await serveMetrics(m, { port: 0 });
    const scrape = async () => parseExposition(await (await fetch(srvHttp.url)).text());
    try {
      expect([...(await svc.firstSeen(['a', 'b', 'a']))]).toEqual([1, 1, 0]);
      let f = await scrape();
      expect(sampleValue(f, 'hashgate_journal_backlog_bytes', { journal: 'main' })).toBe(0);
      expect(sampleValue(f, 'hashgate_dedup_fail_open_total')).toBe(0);
      expect(sampleValue(f, 'hashgate_dedup_store_errors_total')).toBe(0);

      await srv.kill('SIGKILL');
      const down = await svc.firstSeen(['c', 'd', 'b']);
      expect([...down]).toEqual([1, 1, 0]);
      const errorsBefore = svc.counters.storeErrors;
      expect(errorsBefore).toBeGreaterThan(0);
      f = await scrape();
      expect(sampleValue(f, 'hashgate_journal_backlog_bytes', { journal: 'main' })).toBeGreaterThan(0);
      expect(sampleValue(f, 'hashgate_dedup_fail_open_total')).toBe(2);
      expect(sampleValue(f, 'hashgate_dedup_keys_checked_total')).toBe(6);
      expect(sampleValue(f, 'hashgate_duplicates_skipped_total')).toBe(2);
      expect(sampleValue(f, 'hashgate_dedup_store_errors_total')).toBe(errorsBefore);

      await srv.restart();
      const rep = await svc.recover();
      expect(rep.keys).toBe(2);
      f = await scrape();
      expect(sampleValue(f, 'hashgate_journal_backlog_bytes', { journal: 'main' })).toBe(0);
    } finally {
      await srvHttp.close();
      await svc.close();
    }
  });
});
