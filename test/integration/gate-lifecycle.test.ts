// HashGate lifecycle against real redis-server processes: open() waits for the first connection
// (bounded), refuses non-Redis URLs, lazy start, a client still connecting is not a failed store,
// every fail-open answer is visible (channel + metrics), close() during start-up never answers
// wrong and leaves no journal segment open, timer or socket behind.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import diagnostics_channel from 'node:diagnostics_channel';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort, requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { parseExposition, sampleValue } from '../helpers/exposition.js';
import { HashGate } from '../../src/index.js';
import { PromMetrics } from '../../src/entries/metrics.js';

const has = requireRedisOrSkip('gate lifecycle');
const ROOT = resolve(import.meta.dirname, '../..');
const NOW = Date.parse('2026-06-01T00:00:00Z');

describe.skipIf(!has)('HashGate lifecycle', () => {
  let srv: RedisServer;
  let r: Redis;
  const dirs: string[] = [];
  const tmp = (): string => {
    const d = mkdtempSync(join(tmpdir(), 'hg-life-'));
    dirs.push(d);
    return d;
  };
  beforeAll(async () => {
    srv = await startRedis();
    r = new Redis(srv.url);
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('refuses a URL that is not redis:// or rediss:// with a coded error naming the option, never echoing it', async () => {
    for (const url of ['http://user:hunter2@127.0.0.1:6380', 'not a url', 'ftp://x']) {
      const err = await HashGate.open({ threads: 0, redis: url }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'HG_ERR_INVALID_OPTION', details: { name: 'options.redis' } });
      expect((err as Error).message).not.toContain('hunter2');
      expect((err as Error).message).toMatch(/redis:\/\//);
    }
  });

  it('open() rejects after dedup.connectTimeoutMs when Redis is unreachable; creates no journal directory', async () => {
    const jdir = join(tmp(), 'journal');
    const port = await freePort();
    const t0 = performance.now();
    const err = await HashGate.open({ threads: 0, redis: `redis://u:s3cret@127.0.0.1:${port}`, dedup: { journalDir: jdir, connectTimeoutMs: 400 } }).catch((e: unknown) => e);
    const ms = performance.now() - t0;
    expect(err).toMatchObject({ code: 'HG_ERR_STORE_UNAVAILABLE', details: { option: 'dedup.connectTimeoutMs' } });
    expect((err as Error).message).toMatch(/dedup\.connectTimeoutMs = 400 ms.*dedup\.lazyConnect/);
    expect((err as Error).message).not.toContain('s3cret');
    expect(ms).toBeGreaterThanOrEqual(350);
    expect(existsSync(jdir)).toBe(false);
  });

  it('open() waits for a Redis that comes up late, and answers exactly from the first call', async () => {
    const port = await freePort();
    const late = new Promise<RedisServer>((res) => setTimeout(() => res(startRedis({ port })), 400));
    const jdir = tmp();
    const gate = await HashGate.open({ threads: 0, redis: `redis://127.0.0.1:${port}`, dedup: { prefix: 'late', buckets: 8, journalDir: jdir, connectTimeoutMs: 15_000 }, now: () => NOW });
    const s2 = await late;
    try {
      expect([...(await gate.firstSeen(['a', 'b', 'a']))]).toEqual([1, 1, 0]);
      expect([...(await gate.firstSeen(['a']))]).toEqual([0]);
      expect(gate.dedup.counters.journaledKeys).toBe(0);
    } finally {
      await gate.close();
      await s2.stop();
    }
  });

  it('lazy start: 256 callers right away on an options client without offline queue wait for the connection; timers keep ticking', async () => {
    const port = await freePort();
    const jdir = tmp();
    const gate = await HashGate.open({
      threads: 0,
      redis: { host: '127.0.0.1', port, enableOfflineQueue: false },
      dedup: { prefix: 'lazy', buckets: 8, journalDir: jdir, lazyConnect: true, connectTimeoutMs: 15_000 },
      now: () => NOW,
    });
    let ticks = 0;
    const tick = setInterval(() => ticks++, 50);
    const t0 = performance.now();
    const late = new Promise<RedisServer>((res) => setTimeout(() => res(startRedis({ port })), 500));
    const answers = await Promise.all(Array.from({ length: 256 }, (_, i) => gate.firstSeen([`k${i % 128}`])));
    const elapsed = performance.now() - t0;
    clearInterval(tick);
    const s2 = await late;
    try {
      expect(gate.dedup.counters.journaledKeys).toBe(0); // nobody was answered from the journal
      expect(answers.reduce((x, a) => x + a[0]!, 0)).toBe(128); // each of the 128 keys first-seen once
      expect(ticks).toBeGreaterThanOrEqual(Math.floor((elapsed / 50) * 0.5));
      expect(existsSync(jdir) ? readdirSync(jdir) : []).toEqual([]);
    } finally {
      await gate.close();
      await s2.stop();
    }
  });

  it('lazy start with Redis down: every fail-open answer shows on hashgate:store:error, store_errors_total and the journal counters', async () => {
    const port = await freePort();
    const jdir = tmp();
    const seen: unknown[] = [];
    const listener = (m: unknown) => seen.push(m);
    diagnostics_channel.subscribe('hashgate:store:error', listener);
    const gate = await HashGate.open({
      threads: 0,
      redis: `redis://127.0.0.1:${port}`,
      metrics: true,
      dedup: { prefix: 'vis', buckets: 8, journalDir: jdir, lazyConnect: true, connectTimeoutMs: 200 },
      now: () => NOW,
    });
    try {
      expect([...(await gate.firstSeen(['x', 'y']))]).toEqual([1, 1]);
      expect([...(await gate.firstSeen(['z']))]).toEqual([1]);
      expect(seen.length).toBeGreaterThanOrEqual(2);
      expect(seen[0]).toMatchObject({ store: 'redis' });
      const f = parseExposition(await (gate.metrics as PromMetrics).registry.metrics());
      let errors = 0;
      for (const s of f.get('hashgate_store_errors_total')?.samples ?? []) if (s.labels.store === 'redis') errors += s.value;
      expect(errors).toBeGreaterThanOrEqual(2);
      expect(sampleValue(f, 'hashgate_journal_appended_records_total')).toBe(2);
      expect(sampleValue(f, 'hashgate_journal_appended_bytes_total')).toBeGreaterThan(32);
      expect(sampleValue(f, 'hashgate_dedup_fail_open_total')).toBe(3);
    } finally {
      diagnostics_channel.unsubscribe('hashgate:store:error', listener);
      await gate.close();
    }
    expect(readdirSync(jdir).filter((x) => x.endsWith('.open'))).toEqual([]);
    expect(readdirSync(jdir).filter((x) => x.endsWith('.hgj'))).toHaveLength(1);
  });

  it('close() during start-up: 1,000 calls in flight on already-seen keys complete with 0 or reject HG_ERR_CLOSED; no segment left open', async () => {
    const keys = Array.from({ length: 1000 }, (_, i) => `seen-${i}`);
    const seed = await HashGate.open({ threads: 0, redis: srv.url, dedup: { prefix: 'cl', buckets: 8, journalDir: tmp() }, now: () => NOW });
    await seed.firstSeen(keys);
    await seed.close();
    for (const when of ['connecting', 'not-yet-listening'] as const) {
      const jdir = tmp();
      const port = when === 'connecting' ? srv.port : await freePort();
      const gate = await HashGate.open({
        threads: 0,
        redis: `redis://127.0.0.1:${port}`,
        metrics: true,
        dedup: { prefix: 'cl', buckets: 8, journalDir: jdir, lazyConnect: true, connectTimeoutMs: 5000 },
        now: () => NOW,
      });
      const calls = keys.map((k) => gate.firstSeen([k]).then((a) => a[0]!, (e: { code?: string }) => e.code));
      await gate.close();
      const out = await Promise.all(calls);
      const wrong = out.filter((x) => x === 1).length;
      expect(wrong).toBe(0);
      expect(out.every((x) => x === 0 || x === 'HG_ERR_CLOSED')).toBe(true);
      if (when === 'not-yet-listening') expect(out.every((x) => x === 'HG_ERR_CLOSED')).toBe(true);
      expect(existsSync(jdir) ? readdirSync(jdir).filter((f) => f.endsWith('.open')) : []).toEqual([]);
      await expect(gate.firstSeen(['after'])).rejects.toMatchObject({ code: 'HG_ERR_CLOSED' });
    }
  });

  it('the process exits right after close() resolves (no timer or socket left behind)', async () => {
    const dist = join(ROOT, 'dist');
    const built = join(dist, 'src/dedup/service.js');
    if (!existsSync(built) || statSync(built).mtimeMs < statSync(join(ROOT, 'src/dedup/service.ts')).mtimeMs) {
      spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.json')], { stdio: 'inherit' });
    }
    const dead = `redis://127.0.0.1:${await freePort()}`;
    const runChild = (url: string, mode: string) =>
      new Promise<{ lingerMs: number; outcomes: unknown[] }>((res, rej) => {
        const c = spawn(process.execPath, [join(ROOT, 'test/integration/gate-lifecycle-child.mjs'), dist, url, mode, tmp()], { stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        c.stdout!.on('data', (d) => (out += d));
        c.once('exit', (code) => (code === 0 ? res(JSON.parse(out)) : rej(new Error(`child exited ${code}: ${out}`))));
      });
    for (const [url, mode] of [[srv.url, 'eager'], [srv.url, 'lazy'], [srv.url, 'close-early'], [dead, 'close-early']] as const) {
      const rep = await runChild(url, mode);
      expect(rep.lingerMs, `${mode} ${url === dead ? 'dead' : 'live'}`).toBeLessThan(500);
      if (mode !== 'close-early') expect(rep.outcomes).toEqual(['ok']);
    }
  });
});
