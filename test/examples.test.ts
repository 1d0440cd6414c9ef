// Runs every program in examples/ as a user would (node, the built package imported by name, a
// JVM with the real Guava jar) against a private redis-server: the bulk-load job, the Java reader
// of the compact layout it wrote, and the node:http service under concurrent requests + SIGTERM,
// and started while Redis is unreachable (through a TCP proxy that refuses, then stalls).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { once } from 'node:events';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';
import { guavaHarness } from './helpers/java.js';
import { startProxy } from './helpers/tcp-proxy.js';
import { HashGate } from 'hashgate';

const repo = resolve(import.meta.dirname, '..');
const has = requireRedisOrSkip('examples');

type Get = (path: string, init?: RequestInit) => Promise<{ status: number; body: Record<string, unknown> }>;

/** Starts examples/http-service.mjs; resolves once it listens (rejects if it exits or takes longer than startMs). */
async function startService(env: Record<string, string>, startMs: number) {
  const child = spawn(process.execPath, ['examples/http-service.mjs'], {
    cwd: repo,
    env: { ...process.env, PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d: Buffer) => (out.stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out.stderr += d.toString()));
  const deadline = Date.now() + startMs;
  while (!/listening on (\S+)/.test(out.stdout)) {
    if (Date.now() > deadline || child.exitCode !== null) {
      if (child.exitCode === null) child.kill('SIGKILL');
      throw new Error(`service did not start within ${startMs} ms: ${out.stdout} ${out.stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const base = /listening on (\S+)/.exec(out.stdout)![1]!;
  const get: Get = async (path, init) => {
    const res = await fetch(`${base}${path}`, init);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  return { child, out, get };
}

const key = (i: number): string => `用户${i % 1000}|${110101199001010000 + (i % 1000)}`;

describe.skipIf(!has)('examples/', () => {
  let srv: RedisServer;
  let dir: string;
  let window: string;
  beforeAll(async () => {
    srv = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'hg-examples-'));
  });
  afterAll(async () => {
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('bulk-load.mjs loads an export, counts duplicates exactly and reports rejected lines (exit 3)', () => {
    const file = join(dir, 'export.txt');
    const lines = Array.from({ length: 5000 }, (_, i) => key(i));
    lines.splice(2500, 0, 'not a valid row');
    writeFileSync(file, `${lines.join('\n')}\n`);
    const env = { ...process.env, HASHGATE_REDIS_URL: srv.url };
    const r = spawnSync(process.execPath, ['examples/bulk-load.mjs', file], { cwd: repo, env, encoding: 'utf8', timeout: 120_000 });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(3);
    const out = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(out).toMatchObject({ rows: 5000, firstSeen: 1000, duplicates: 4000, rejected: 1, windowKeys: 1000 });
    window = out.window as string;
    // a second run finds everything already seen
    const again = JSON.parse(spawnSync(process.execPath, ['examples/bulk-load.mjs', file], { cwd: repo, env, encoding: 'utf8' }).stdout) as Record<string, unknown>;
    expect(again).toMatchObject({ rows: 5000, firstSeen: 0, windowKeys: 1000 });
  });

  it('java/CompactReader.java reads the compact layout hashgate wrote (Guava digest, SISMEMBER)', async () => {
    const java = await guavaHarness();
    if (java === null) {
      if (process.env.CI === 'true') throw new Error('java/javac not found but CI=true');
      console.warn('\n!!! SKIPPING the Java example: java/javac are not installed !!!\n');
      return;
    }
    const classes = join(dir, 'java-classes');
    mkdirSync(classes, { recursive: true });
    const c = spawnSync('javac', ['-nowarn', '-cp', java.jar, '-d', classes, 'examples/java/CompactReader.java'], { cwd: repo, encoding: 'utf8' });
    expect(c.stderr).toBe('');
    expect(c.status).toBe(0);
    const seen = [0, 1, 999].map((i) => key(i).replace('|', ''));
    const unseen = ['用户1000110101199001011000', 'nobody'];
    const r = spawnSync('java', ['-cp', `${java.jar}:${classes}`, 'CompactReader', '127.0.0.1', String(srv.port), 'hg:dedup', window],
      { input: `${[...seen, ...unseen].join('\n')}\n`, encoding: 'utf8', timeout: 60_000 });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim().split('\n')).toEqual([...seen.map((k) => `${k}\t1`), ...unseen.map((k) => `${k}\t0`)]);
    // a window nobody wrote reads as "not seen", without writing anything
    const empty = spawnSync('java', ['-cp', `${java.jar}:${classes}`, 'CompactReader', '127.0.0.1', String(srv.port), 'hg:dedup', '1999'],
      { input: `${seen[0]}\n`, encoding: 'utf8' });
    expect(empty.stdout.trim()).toBe(`${seen[0]}\t0`);

    // a window whose buckets split into sub-buckets: 2 buckets, 40k keys (about 120 sub-buckets each)
    const gate = await HashGate.open({ threads: 0, redis: srv.url, dedup: { buckets: 2, window: () => '2041', journalDir: join(dir, 'grown-journal'), replayIntervalMs: 0 } });
    const grown = Array.from({ length: 40_000 }, (_, i) => `成长${i}|${310101199001010000 + i}`);
    try {
      for (let o = 0; o < grown.length; o += 5000) await gate.firstSeen(grown.slice(o, o + 5000));
      expect((await gate.dedupStats('2041')).subBuckets).toBeGreaterThan(100);
    } finally {
      await gate.close();
    }
    const sample = grown.filter((_, i) => i % 97 === 0);
    const absent = Array.from({ length: 200 }, (_, i) => `未见${i}|${410101199001010000 + i}`);
    const g = spawnSync('java', ['-cp', `${java.jar}:${classes}`, 'CompactReader', '127.0.0.1', String(srv.port), 'hg:dedup', '2041'],
      { input: `${[...sample, ...absent].join('\n')}\n`, encoding: 'utf8', timeout: 60_000 });
    expect(g.stderr).toBe('');
    expect(g.stdout.trim().split('\n')).toEqual([...sample.map((k) => `${k}\t1`), ...absent.map((k) => `${k}\t0`)]);
  }, 300_000);

  it('http-service.mjs answers concurrent first-seen and risk requests, reports ready, and stops on SIGTERM', async () => {
    const child = spawn(process.execPath, ['examples/http-service.mjs'], {
      cwd: repo,
      env: { ...process.env, HASHGATE_REDIS_URL: srv.url, PORT: '0', HASHGATE_JOURNAL_DIR: join(dir, 'journal') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    try {
      const deadline = Date.now() + 30_000;
      while (!/listening on (\S+)/.test(stdout)) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`service did not start: ${stdout} ${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const base = /listening on (\S+)/.exec(stdout)![1]!;
      const get = async (path: string): Promise<{ status: number; body: Record<string, unknown> }> => {
        const res = await fetch(`${base}${path}`);
        return { status: res.status, body: (await res.json()) as Record<string, unknown> };
      };
      // 300 concurrent requests over 100 keys: 50 were loaded by the bulk job, 50 are new; each new
      // key must be answered "first seen" exactly once however the requests interleave
      const keys = Array.from({ length: 100 }, (_, i) => (i < 50 ? key(i).replace('|', '') : `new-key-${i}`));
      const requests = Array.from({ length: 300 }, (_, i) => keys[i % 100]!);
      const answers = await Promise.all(requests.map((k) => get(`/first-seen?key=${encodeURIComponent(k)}`)));
      const firstByKey = new Map<string, number>();
      answers.forEach((a, i) => {
        expect(a.status).toBe(200);
        if (a.body.firstSeen === true) firstByKey.set(requests[i]!, (firstByKey.get(requests[i]!) ?? 0) + 1);
      });
      expect([...firstByKey.keys()].sort()).toEqual(keys.slice(50).sort());
      expect([...firstByKey.values()].every((n) => n === 1)).toBe(true);

      expect(await get(`/risk?key=${encodeURIComponent('王五110101198001011234')}`)).toEqual({
        status: 200, body: { blacklisted: true, record: { level: 'high', reason: 'chargeback' } },
      });
      // keys answered by firstSeen never leak into the blacklist filter
      const risk = await Promise.all(keys.map((k) => get(`/risk?key=${encodeURIComponent(k)}`)));
      expect(risk.every((r) => r.body.blacklisted === false)).toBe(true);
      const ready = await get('/readyz');
      expect(ready.status).toBe(200);
      expect(ready.body).toMatchObject({ ready: true, status: 'up' });
      expect((await get('/first-seen')).status).toBe(400);

      child.kill('SIGTERM');
      const [code] = (await once(child, 'exit')) as [number | null];
      expect(code).toBe(0);
      expect(stdout).toMatch(/stopped/);
      expect(stderr).toBe('');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 120_000);

  it('http-service.mjs starts while Redis is down, answers 503 "unknown" for risk checks it cannot decide, and correct answers once Redis is back', async () => {
    const proxy = await startProxy(srv.port);
    await proxy.refuse(); // Redis unreachable: every connection is reset
    const ghost = '赵六110101197001011234';
    const late = '钱七110101196001011234';
    const risk = (k: string): string => `/risk?key=${encodeURIComponent(k)}`;
    const post = (k: string, record: object): [string, RequestInit] => [`/blacklist?key=${encodeURIComponent(k)}`, { method: 'POST', body: JSON.stringify(record) }];
    let svc: Awaited<ReturnType<typeof startService>> | undefined;
    try {
      // it must listen well before a connect timeout would have failed open()
      svc = await startService({ HASHGATE_REDIS_URL: proxy.url, HASHGATE_JOURNAL_DIR: join(dir, 'journal-down') }, 8_000);
      const { get } = svc;
      // the seeded record is archived in the cold tier, which still answers
      expect(await get(risk('王五110101198001011234'))).toEqual({ status: 200, body: { blacklisted: true, record: { level: 'high', reason: 'chargeback' } } });
      // a write cannot reach Redis: 503; its key is in the filter now, and Redis could not be asked
      expect(await get(...post(ghost, { level: 'low' }))).toMatchObject({ status: 503 });
      expect(await get(risk(ghost))).toEqual({ status: 503, body: { blacklisted: 'unknown', error: 'HG_ERR_TIER_UNAVAILABLE' } });
      const readyDown = await get('/readyz');
      expect(readyDown.body.status).not.toBe('up');

      await proxy.restore();
      const deadline = Date.now() + 30_000;
      let back = await get(risk(ghost));
      while (back.status !== 200 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        back = await get(risk(ghost));
      }
      expect(back).toEqual({ status: 200, body: { blacklisted: false } }); // checked now: the write never landed
      expect(await get(...post(late, { level: 'mid' }))).toEqual({ status: 200, body: { blacklisted: true } });

      await proxy.stall(); // connections stay open, nothing moves: each Redis call times out
      expect(await get(risk(late))).toEqual({ status: 503, body: { blacklisted: 'unknown', error: 'HG_ERR_TIER_UNAVAILABLE' } });
      await proxy.resume();
      expect(await get(risk(late))).toEqual({ status: 200, body: { blacklisted: true, record: { level: 'mid' } } });

      svc.child.kill('SIGTERM');
      const [code] = (await once(svc.child, 'exit')) as [number | null];
      expect(code).toBe(0);
      expect(svc.out.stderr).toBe('');
    } finally {
      if (svc !== undefined && svc.child.exitCode === null) svc.child.kill('SIGKILL');
      await proxy.resume();
      await proxy.restore();
      await proxy.close();
    }
  }, 120_000);
});
