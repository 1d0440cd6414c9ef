// Fault tests of the bulk loader against real redis-server processes: the server killed
// mid-load (failed file, restart, re-feed) and the loader itself killed mid-run (--resume).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { startRedis, requireRedisOrSkip, type RedisServer, scardSum } from '../helpers/redis-server.js';
import { generateExport } from '../../src/loader/generate.js';
import { load } from '../../src/loader/loader.js';
import { RedisLayoutSink } from '../../src/loader/sink.js';

const HAVE = requireRedisOrSkip('loader fault tests');
const CLI = resolve('dist/src/cli/main.js');


describe.skipIf(!HAVE)('loader faults (real redis-server)', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'hg-loader-faults-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('redis-server killed mid-load: failed rows land in the failed file; after restart re-feeding it gives the exact count', async () => {
    // AOF with fsync always: what Redis acknowledged before the kill survives the restart
    const srv: RedisServer = await startRedis({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    const check = new Redis(srv.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    check.on('error', () => undefined);
    try {
      const gen = generateExport({ dir: join(dir, 'kill-redis'), files: 3, rowsPerFile: 40_000, dupRatio: 0.25, seed: 11 });
      const client = new Redis(srv.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
      client.on('error', () => undefined);
      const sink = new RedisLayoutSink(client, { layout: 'sets', prefix: 'kr', buckets: 1000 });
      const failedFile = join(dir, 'kill-redis.failed');
      let killed: Promise<void> | undefined;
      const sum1 = await load(
        {
          inputs: [join(dir, 'kill-redis')],
          window: '2026',
          buckets: 1000,
          batch: 50,
          concurrency: 4,
          retries: 1,
          retryDelayMs: 5,
          failedFile,
          checkpointFile: join(dir, 'kill-redis.cp'),
          readBufferBytes: 32 * 1024,
        },
        {
          sink,
          progress: {
            update(s) {
              if (!killed && s.loaded > 20_000) killed = srv.kill('SIGKILL');
            },
            stop() {},
          },
        },
      );
      await killed;
      await sink.close();
      expect(killed).toBeDefined();
      expect(sum1.failed).toBeGreaterThan(0);
      expect(sum1.loaded + sum1.failed).toBe(gen.rows);
      const failedLines = readFileSync(failedFile, 'utf8').split('\n').filter((l) => l !== '');
      expect(failedLines.length).toBe(sum1.failed);
      // every failed line is an input line, in the input format
      expect(failedLines.every((l) => /^[^|]+\|\d{17}X$/.test(l))).toBe(true);

      await srv.restart();
      await check.connect();
      const before = await scardSum(check, 'kr:2026:[0-9]*');
      expect(before).toBeLessThan(gen.distinct);
      const client2 = new Redis(srv.url);
      const sink2 = new RedisLayoutSink(client2, { layout: 'sets', prefix: 'kr', buckets: 1000 });
      const sum2 = await load(
        { inputs: [failedFile], window: '2026', buckets: 1000, failedFile: join(dir, 'kill-redis.failed2'), checkpointFile: join(dir, 'kill-redis.cp2') },
        { sink: sink2 },
      );
      await sink2.close();
      expect(sum2.failed).toBe(0);
      expect(sum2.rows).toBe(sum1.failed);
      expect(await scardSum(check, 'kr:2026:[0-9]*')).toBe(gen.distinct);
    } finally {
      check.disconnect();
      await srv.stop();
    }
  });

  it('loader process killed mid-run: --resume finishes with the exact count', async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} missing: run \`npx tsc -p .\` first (npm test does)`);
    const srv = await startRedis();
    const check = new Redis(srv.url);
    try {
      const gen = generateExport({ dir: join(dir, 'kill-loader'), files: 6, rowsPerFile: 50_000, dupRatio: 0.2, crlfRatio: 0.1, seed: 5 });
      const cp = join(dir, 'kill-loader.cp');
      const args = [
        CLI, 'load', join(dir, 'kill-loader'), '--redis', srv.url, '--layout', 'sets', '--prefix', 'kl', '--window', '2026',
        '--batch', '20', '--concurrency', '1', '--checkpoint', cp, '--failed-file', join(dir, 'kl.failed'),
        '--rejects-file', join(dir, 'kl.rejects'), '--no-progress', '--json',
      ];
      const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let exited = false;
      child.once('exit', () => (exited = true));
      // wait until the checkpoint records acknowledged progress, then SIGKILL (no clean shutdown)
      const deadline = Date.now() + 120_000;
      let progressed = false;
      while (!exited && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
        try {
          const data = JSON.parse(readFileSync(cp, 'utf8')) as { files: Record<string, { offset: number }> };
          if (Object.values(data.files).some((f) => f.offset > 0)) {
            progressed = true;
            break;
          }
        } catch {
          /* not written yet, or mid-rename */
        }
      }
      child.kill('SIGKILL');
      await new Promise((r) => (exited ? r(undefined) : child.once('exit', r)));
      expect(progressed).toBe(true);
      expect(await scardSum(check, 'kl:2026:[0-9]*')).toBeLessThan(gen.distinct);

      const resumed = spawn(process.execPath, [...args, '--resume'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      resumed.stdout.on('data', (d) => (out += d));
      resumed.stderr.on('data', (d) => (err += d));
      const code = await new Promise<number | null>((r) => resumed.once('exit', r));
      expect(code, err).toBe(0);
      const summary = JSON.parse(out) as { rows: number; failed: number; loaded: number };
      expect(summary.failed).toBe(0);
      expect(summary.rows).toBeLessThan(gen.rows); // it really resumed instead of starting over
      expect(await scardSum(check, 'kl:2026:[0-9]*')).toBe(gen.distinct);
    } finally {
      check.disconnect();
      await srv.stop();
    }
  });
});
