// The bulk loader against real redis-server processes: a load whose Redis was killed (kill -9)
// mid-run and restarted is finished by --resume with the exact count (never "done" with rows
// missing); keys the loader stores can all be queried by the library; credentials in --redis
// never reach any command's output.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { startRedis, requireRedisOrSkip, scardSum, freePort } from '../helpers/redis-server.js';
import { generateExport } from '../../src/loader/generate.js';
import { DedupService } from '../../src/dedup/index.js';
import { MAX_KEY_BYTES } from '../../src/util/limits.js';

const HAVE = requireRedisOrSkip('loader reliability tests');
const CLI = resolve('dist/src/cli/main.js');

function cli(args: string[], env: NodeJS.ProcessEnv = {}): { done: Promise<{ code: number | null; out: string; err: string }>; pid: number | undefined } {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const done = new Promise<{ code: number | null; out: string; err: string }>((r) => child.once('exit', (code) => r({ code, out, err })));
  return { done, pid: child.pid };
}

describe.skipIf(!HAVE)('loader reliability (real redis-server)', () => {
  let dir: string;
  beforeAll(() => {
    if (!existsSync(CLI)) throw new Error(`${CLI} missing: run \`npm run build\` first (npm test does)`);
    dir = mkdtempSync(join(tmpdir(), 'hg-loader-rel-int-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('redis-server kill -9 mid-load: exit 3; while it is down --resume fails (exit 1, never 0); after restart --resume exits 0 with the exact count', async () => {
    const srv = await startRedis({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    const check = new Redis(srv.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    check.on('error', () => undefined);
    try {
      const gen = generateExport({ dir: join(dir, 'kill'), files: 8, rowsPerFile: 20_000, dupRatio: 0.25, seed: 21 });
      const cp = join(dir, 'kill.cp');
      const failed = join(dir, 'kill.failed');
      const args = [
        'load', join(dir, 'kill'), '--redis', srv.url, '--layout', 'sets', '--prefix', 'rk', '--window', '2026', '--buckets', '1000',
        '--batch', '50', '--concurrency', '2', '--retries', '1', '--retry-delay', '5', '--checkpoint', cp, '--failed-file', failed,
        '--rejects-file', join(dir, 'kill.rej'), '--no-progress', '--json',
      ];
      const first = cli(args);
      await check.connect();
      // kill -9 once some rows are in Redis, well before the load ends
      const deadline = Date.now() + 60_000;
      let seen = 0;
      while (Date.now() < deadline) {
        seen = await check.dbsize();
        if (seen > 50) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(seen).toBeGreaterThan(50);
      check.disconnect();
      await srv.kill('SIGKILL');
      const r1 = await first.done;
      expect(r1.code, r1.err).toBe(3);
      const s1 = JSON.parse(r1.out) as { failed: number; loaded: number; rows: number };
      expect(s1.failed).toBeGreaterThan(0);
      expect(statSync(failed).mode & 0o777).toBe(0o600);

      // the checkpoint marks files whose rows failed as "reload from the first failed row"
      const cpData = JSON.parse(readFileSync(cp, 'utf8')) as { files: Record<string, { failedFrom?: unknown }> };
      expect(Object.values(cpData.files).some((f) => f.failedFrom !== undefined)).toBe(true);

      const down = await cli([...args, '--resume']).done;
      expect(down.code, down.err).toBe(1);
      expect(down.err).toContain('HG_ERR_STORE_UNAVAILABLE');

      await srv.restart();
      const check2 = new Redis(srv.url);
      try {
        const before = await scardSum(check2, 'rk:2026:[0-9]*');
        expect(before).toBeLessThan(gen.distinct);
        const r2 = await cli([...args, '--resume']).done;
        expect(r2.code, r2.err).toBe(0);
        const s2 = JSON.parse(r2.out) as { failed: number; filesReloaded: number; ok: boolean };
        expect(s2.failed).toBe(0);
        expect(s2.ok).toBe(true);
        expect(s2.filesReloaded).toBeGreaterThan(0);
        expect(await scardSum(check2, 'rk:2026:[0-9]*')).toBe(gen.distinct);
        // the failed file no longer lists rows: they are loaded now
        expect(existsSync(failed) ? readFileSync(failed, 'utf8') : '').toBe('');
        // and one more --resume is a no-op that still exits 0 with the same count
        const r3 = await cli([...args, '--resume']).done;
        expect(r3.code, r3.err).toBe(0);
        expect(JSON.parse(r3.out)).toMatchObject({ rows: 0, filesSkipped: gen.files.length });
        expect(await scardSum(check2, 'rk:2026:[0-9]*')).toBe(gen.distinct);
      } finally {
        check2.disconnect();
      }
    } finally {
      check.disconnect();
      await srv.stop();
    }
  });

  it('every key the loader stores can be queried: a MAX_KEY_BYTES key answers 0 (seen), a longer one is a reject', async () => {
    const srv = await startRedis();
    const svc = new DedupService({ redis: srv.url, dedup: { layout: 'sets', prefix: 'lk', journalDir: join(dir, 'lk-journal'), replayIntervalMs: 0 } });
    try {
      const f = join(dir, 'longkeys.txt');
      const name = 'n'.repeat(MAX_KEY_BYTES - 18);
      const id = '11010519491231002X';
      const over = 'm'.repeat(MAX_KEY_BYTES - 17);
      writeFileSync(f, `${name}|${id}\n${over}|${id}\nshort|${id}\n`);
      const rej = join(dir, 'longkeys.rej');
      const window = svc.windowOf();
      const r = await cli(['load', f, '--redis', srv.url, '--layout', 'sets', '--prefix', 'lk', '--window', window, '--checkpoint', join(dir, 'lk.cp'),
        '--rejects-file', rej, '--failed-file', join(dir, 'lk.failed'), '--no-progress', '--json', '--max-reject-ratio', '0.5']).done;
      expect(r.code, r.err).toBe(0);
      expect(JSON.parse(r.out)).toMatchObject({ rows: 2, rejectedByReason: { 'key-too-long': 1 } });
      expect(readFileSync(rej, 'utf8')).toContain('\t2\tkey-too-long\t');
      expect(statSync(rej).mode & 0o777).toBe(0o600);
      // what was loaded is seen; the over-long key the library would refuse anyway
      expect([...(await svc.firstSeen([name + id, `short${id}`]))]).toEqual([0, 0]);
      await expect(svc.firstSeen([over + id])).rejects.toMatchObject({ code: 'HG_ERR_KEY_TOO_LONG' });
    } finally {
      await svc.close();
      await srv.stop();
    }
  });

  it('--redis with a password: no command prints it (wrong password, unreachable port)', async () => {
    const srv = await startRedis();
    const dead = await freePort();
    const admin = new Redis(srv.url);
    // set after start: the helper's readiness probe is an unauthenticated PING
    await admin.config('SET', 'requirepass', 'the-real-one');
    admin.disconnect();
    try {
      const f = join(dir, 'pw.txt');
      writeFileSync(f, 'a|1\nb|2\n');
      const secret = 'Pa55w0rdNeverPrinted';
      for (const url of [`redis://admin:${secret}@127.0.0.1:${srv.port}`, `redis://:${secret}@127.0.0.1:${dead}`, `redis://127.0.0.1:${srv.port}/0?password=${secret}`]) {
        const runs = [
          ['load', f, '--redis', url, '--checkpoint', join(dir, 'pw.cp'), '--failed-file', join(dir, 'pw.failed'), '--rejects-file', join(dir, 'pw.rej'), '--no-progress'],
          ['stats', '--redis', url, '--window', '2026'],
          ['recover', '--redis', url, '--journal-dir', join(dir, 'pw-journal')],
          ['migrate', '--redis', url, '--dry-run'],
        ];
        for (const args of runs) {
          const r = await cli(args).done;
          expect(r.code, `${args[0]} ${url}`).not.toBe(0);
          expect(r.out + r.err, `${args[0]} ${url}`).not.toContain(secret);
        }
        // the load names its target, with the password masked
        const l = await cli(runs[0]!).done;
        expect(l.err).toMatch(/cannot connect to redis:\/\/(admin)?:\*\*\*@|cannot connect to redis:\/\/\S+password=\*\*\*/);
      }
    } finally {
      await srv.stop();
    }
  }, 240_000); // 15 CLI processes, some waiting out a connection timeout
});
