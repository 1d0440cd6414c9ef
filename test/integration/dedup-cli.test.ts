// `hashgate recover` and `hashgate stats` against a real private redis-server (run() called
// in-process; the lead wires them into src/cli/main.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { captureConsole } from '../helpers/console.js';
import { DedupService } from '../../src/dedup/index.js';
import { run as recover } from '../../src/cli/commands/recover.js';
import { run as stats } from '../../src/cli/commands/stats.js';

const has = requireRedisOrSkip('dedup CLI');

describe.skipIf(!has)('hashgate recover / stats', () => {
  let srv: RedisServer;
  let dir: string;
  beforeAll(async () => {
    srv = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'hg-dedup-cli-'));
  });
  afterAll(async () => {
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const capture = captureConsole;

  it('recover replays a journal written by a fail-open service; stats counts the window; --purge deletes it', async () => {
    const svc = new DedupService({ redis: srv.url, dedup: { layout: 'sets', prefix: 'cli', journalDir: dir, replayIntervalMs: 0 } });
    await svc.firstSeen(['k0']);
    await srv.kill('SIGKILL');
    expect([...(await svc.firstSeen(['k1', 'k2', 'k3']))]).toEqual([1, 1, 1]);
    await svc.close(); // seals the segment
    await srv.restart();
    const flags = ['--redis', srv.url, '--layout', 'sets', '--prefix', 'cli', '--journal-dir', dir];
    const r1 = await capture(() => recover([...flags, '--json']));
    expect(r1.code).toBe(0);
    expect(JSON.parse(r1.out)).toMatchObject({ segments: 1, keys: 3, added: 3 });
    expect(readdirSync(dir)).toEqual([]);
    const r2 = await capture(() => recover(flags));
    expect(r2.code).toBe(0);
    expect(r2.out).toMatch(/replayed 0 segment/);
    const window = svc.windowOf();
    const s = await capture(() => stats([...flags, '--window', window, '--json']));
    expect(s.code).toBe(0);
    expect(JSON.parse(s.out)).toMatchObject({ window, layout: 'sets', buckets: 1000, exact: 3, approximate: 3 });
    const p = await capture(() => stats([...flags, '--window', window, '--purge']));
    expect(p.code).toBe(0);
    expect(p.out).toMatch(/deleted \d+ key/);
    expect(JSON.parse((await capture(() => stats([...flags, '--window', window, '--json']))).out).exact).toBe(0);
  });

  it('usage errors exit 2 and name the flag', async () => {
    const a = await capture(() => stats(['--layout', 'hash']));
    expect(a.code).toBe(2);
    expect(a.out).toMatch(/--layout/);
    const b = await capture(() => recover(['--buckets', 'x']));
    expect(b.code).toBe(2);
    expect(b.out).toMatch(/--buckets/);
    const c = await capture(() => stats(['--purge']));
    expect(c.code).toBe(2);
  });
});
