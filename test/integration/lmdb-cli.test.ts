// `hashgate load|stats|export --store PATH` (the durable embedded store) and the move from the
// embedded store to a real private redis-server without losing a key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { captureConsole } from '../helpers/console.js';
import { DedupService } from '../../src/dedup/index.js';
import { run as load } from '../../src/cli/commands/load.js';
import { run as stats } from '../../src/cli/commands/stats.js';
import { run as exportCmd } from '../../src/cli/commands/export.js';
import { writeFirstFormatStore } from '../helpers/lmdb-first-format.js';

const has = requireRedisOrSkip('LMDB store CLI');
const at = new Date('2026-06-01T00:00:00Z');

const capture = captureConsole;

describe.skipIf(!has)('hashgate load / stats / export --store', () => {
  let srv: RedisServer;
  let dir: string;
  const N = 3000;
  // the loader's key is the line without its delimiters (name + ID), as DedupService is called with
  const rows = Array.from({ length: N }, (_, i) => [`赵${i % 977}`, `3301${String(i).padStart(14, '0')}`]);
  const keys = rows.map(([a, b]) => `${a}${b}`);
  beforeAll(async () => {
    srv = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'hg-lmdb-cli-'));
    // every row twice, so the loader sees duplicates
    writeFileSync(join(dir, '000000_0'), [...rows, ...rows.slice(0, 500)].map((r) => r.join('|')).join('\n') + '\n');
  });
  afterAll(async () => {
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const layout of ['compact', 'sets'] as const) {
    it(`${layout}: load --store, stats --store, then export --redis; the Redis store answers every key 0`, async () => {
      const path = join(dir, `store-${layout}`);
      const common = ['--layout', layout, '--window', '2026', '--quiet', '--checkpoint', join(dir, `ck-${layout}`), '--failed-file', join(dir, 'f'), '--rejects-file', join(dir, 'r')];
      const l = await capture(() => load(['--store', path, ...common, '--json', join(dir, '000000_0')]));
      expect(l.code).toBe(0);
      expect(JSON.parse(l.out)).toMatchObject({ rows: N + 500, loaded: N + 500, newMembers: N, failed: 0 });
      const s = await capture(() => stats(['--store', path, '--layout', layout, '--window', '2026', '--json']));
      expect(s.code).toBe(0);
      expect(JSON.parse(s.out)).toMatchObject({ store: 'lmdb', layout, exact: N, approximate: N });
      // the service on the same path sees what the loader wrote
      const emb = new DedupService({ dedup: { path, layout } });
      expect((await emb.firstSeen(keys, { at })).every((v) => v === 0)).toBe(true);
      await emb.close();

      const prefix = `mv-${layout}`;
      const e = await capture(() => exportCmd(['--store', path, '--redis', srv.url, '--prefix', prefix, '--json']));
      expect(e.code).toBe(0);
      expect(JSON.parse(e.out)).toMatchObject({ exported: N, skipped: 0, windows: [{ window: '2026', layout, members: N, added: N }] });
      const red = new DedupService({ redis: srv.url, dedup: { layout, prefix, replayIntervalMs: 0, buckets: 7 } });
      try {
        const st = await red.stats('2026');
        // the store's bucketing came along, not the 7 configured here
        expect(st).toMatchObject({ exact: N, buckets: layout === 'compact' ? 65_536 : 1000 });
        expect(st.approximate).toBeGreaterThan(N * 0.95);
        expect((await red.firstSeen(keys, { at })).every((v) => v === 0)).toBe(true);
        expect([...(await red.firstSeen(['brand-new'], { at }))]).toEqual([1]);
      } finally {
        await red.close();
      }
      // exporting again adds nothing
      const again = await capture(() => exportCmd(['--store', path, '--redis', srv.url, '--prefix', prefix, '--json']));
      expect(JSON.parse(again.out).windows[0].added).toBe(0);
    }, 120_000);
  }

  it("export --out writes a 'sets' window's keys 0600 for load; unexportable keys are counted, never printed", async () => {
    const path = join(dir, 'store-out');
    const svc = new DedupService({ dedup: { path, layout: 'sets' } });
    await svc.firstSeen([...keys.slice(0, 100), 'has|pipe', 'has\nnewline'], { at });
    await svc.close();
    const file = join(dir, 'keys.txt');
    writeFileSync(file, 'old content\n', { mode: 0o644 }); // an existing, world-readable file
    const e = await capture(() => exportCmd(['--store', path, '--out', file, '--json']));
    expect(e.code).toBe(3);
    expect(JSON.parse(e.out)).toMatchObject({ exported: 100, skipped: 2 });
    expect(e.out).not.toMatch(/has\|pipe/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8').split('\n').filter(Boolean).sort()).toEqual(keys.slice(0, 100).sort());
    const back = join(dir, 'store-back');
    const l = await capture(() => load(['--store', back, '--layout', 'sets', '--window', '2026', '--quiet', '--json', '--checkpoint', join(dir, 'ck-back'), file]));
    expect(l.code).toBe(0);
    const b = new DedupService({ dedup: { path: back, layout: 'sets' } });
    expect((await b.firstSeen(keys.slice(0, 100), { at })).every((v) => v === 0)).toBe(true);
    await b.close();
    // a compact window cannot go to a file: usage error, exit 2
    expect((await capture(() => exportCmd(['--store', join(dir, 'store-compact'), '--out', join(dir, 'x')]))).code).toBe(2);
  }, 60_000);

  it('export --redis of a store written in the first format (one duplicate per member) converts it first', async () => {
    const path = join(dir, 'store-first-format');
    const buckets = 64;
    const old = keys.slice(0, 500);
    await writeFirstFormatStore(path, old, buckets);
    const prefix = 'mv-first';
    const e = await capture(() => exportCmd(['--store', path, '--redis', srv.url, '--prefix', prefix, '--json']));
    expect(e.code).toBe(0);
    expect(JSON.parse(e.out)).toMatchObject({ exported: 500, windows: [{ window: '2026', layout: 'compact', buckets, members: 500, added: 500 }] });
    const red = new DedupService({ redis: srv.url, dedup: { prefix, replayIntervalMs: 0 } });
    try {
      expect((await red.firstSeen(old, { at })).every((v) => v === 0)).toBe(true);
    } finally {
      await red.close();
    }
  }, 60_000);

  it('usage errors exit 2', async () => {
    expect((await capture(() => exportCmd(['--redis', srv.url]))).code).toBe(2);
    // a path without a store is an error, and export does not create one there
    expect((await capture(() => exportCmd(['--store', join(dir, 'nothing'), '--redis', srv.url]))).code).toBe(1);
    expect((await capture(() => stats(['--store', join(dir, 'nothing')]))).code).toBe(1);
    expect(() => statSync(join(dir, 'nothing'))).toThrow();
    expect((await capture(() => exportCmd(['--store', dir, '--redis', srv.url, '--out', 'x']))).code).toBe(2);
    expect((await capture(() => exportCmd(['--store', dir, '--layout', 'hash', '--redis', srv.url]))).code).toBe(2);
    expect((await capture(() => load(['--store', join(dir, 's'), '--redis', srv.url, join(dir, '000000_0')]))).code).toBe(2);
    expect((await capture(() => stats(['--store', join(dir, 's'), '--redis', srv.url]))).code).toBe(2);
  });
});
