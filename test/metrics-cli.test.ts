// `hashgate metrics`: serves parseable exposition text with the journal and Redis probes.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { run, start } from '../src/cli/commands/metrics.js';
import { freePort, requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';
import { parseExposition, sampleValue } from './helpers/exposition.js';

const has = requireRedisOrSkip('hashgate metrics CLI');

describe('hashgate metrics', () => {
  let dir: string;
  let srv: RedisServer | undefined;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'hg-metrics-cli-'));
    if (has) srv = await startRedis();
  });
  afterAll(async () => {
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('--once prints valid exposition text with the journal backlog of --journal-dir', async () => {
    writeFileSync(join(dir, 'seg-000001.hgj'), Buffer.alloc(321));
    const out: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      out.push(String(chunk));
      return true;
    });
    let code: number;
    try {
      code = await run(['--once', '--journal-dir', dir, '--no-process']);
    } finally {
      spy.mockRestore();
    }
    expect(code).toBe(0);
    const f = parseExposition(out.join(''));
    expect(sampleValue(f, 'hashgate_journal_backlog_bytes', { journal: dir })).toBe(321);
    expect(sampleValue(f, 'hashgate_journal_backlog_segments', { journal: dir })).toBe(1);
    expect(f.has('hashgate_process_cpu_user_seconds_total')).toBe(false);
    // only what the sidecar observes: no empty in-process families that would add to a service's
    expect(f.has('hashgate_dedup_keys_checked_total')).toBe(false);
    expect([...f.keys()].every((k) => k.startsWith('hashgate_journal_'))).toBe(true);
    rmSync(join(dir, 'seg-000001.hgj'));
  });

  it('bad flags exit 2 with usage', async () => {
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await run(['--port', 'abc'])).toBe(2);
      expect(await run(['--bogus'])).toBe(2);
      expect(await run(['--path', 'metrics'])).toBe(2);
      expect(await run(['--prefix', 'bad-prefix', '--once'])).toBe(2);
      expect(String(err.mock.calls[0]?.[0])).toMatch(/--port/);
    } finally {
      err.mockRestore();
    }
  });

  it('serves over HTTP; redis_up follows a real redis-server, 0 when nothing listens', async () => {
    const deadPort = await freePort();
    const cmd = await start(['--port', '0', '--redis', `redis://127.0.0.1:${deadPort}`, '--journal-dir', dir]);
    try {
      const f = parseExposition(await (await fetch(cmd.server!.url)).text());
      expect(sampleValue(f, 'hashgate_redis_up')).toBe(0);
      // unknown while Redis is down: no sample at all, never NaN
      expect(f.get('hashgate_redis_used_memory_bytes')?.samples ?? []).toEqual([]);
      const ready = await fetch(cmd.server!.url.replace('/metrics', '/readyz'));
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ ready: false, redis: 'down', journalDirs: 'up' });
      const live = await fetch(cmd.server!.url.replace('/metrics', '/healthz'));
      expect(live.status).toBe(200);
      expect(sampleValue(f, 'hashgate_journal_backlog_bytes', { journal: dir })).toBe(0);
      expect(f.has('hashgate_process_cpu_user_seconds_total')).toBe(true);
    } finally {
      await cmd.close();
    }
    if (!srv) return;
    const live = await start(['--port', '0', '--redis', srv.url, '--prefix', 'hg_']);
    try {
      const f = parseExposition(await (await fetch(live.server!.url)).text());
      expect(sampleValue(f, 'hg_redis_up')).toBe(1);
      expect(sampleValue(f, 'hg_redis_used_memory_bytes')).toBeGreaterThan(0);
      expect(sampleValue(f, 'hg_redis_keys')).toBe(0);
      const ready = await fetch(live.server!.url.replace('/metrics', '/readyz'));
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ ready: true, redis: 'up' });
    } finally {
      await live.close();
    }
  });

  it('--once prints no NaN and no empty-histogram sentinel, with a dead Redis and process metrics on', () => {
    const r = spawnSync(process.execPath, ['dist/src/cli/main.js', 'metrics', '--once', '--redis', 'redis://127.0.0.1:1', '--journal-dir', dir], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const samples = r.stdout.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
    expect(samples.length).toBeGreaterThan(20);
    expect(samples.filter((l) => /nan|9223372036|inf$/i.test(l.split(' ').pop() ?? ''))).toEqual([]);
    expect(samples).toContain('hashgate_redis_up 0');
    expect(samples.some((l) => l.startsWith('hashgate_nodejs_eventloop_lag_min_seconds '))).toBe(true);
  });
});
