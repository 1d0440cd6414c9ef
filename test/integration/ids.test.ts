import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { IdRegistry, RedisIdStore, logicalId, type CustomIdHash } from '../../src/ids/index.js';
import { checkGateRebuild, checkRepair, checkWeakHashScenario, privateGate, records, weak16 } from '../ids-scenarios.js';
import type { UpsertResult } from '../../src/ids/index.js';

const has = requireRedisOrSkip('ids (redis)');
const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const distIds = join(root, 'dist/src/ids/index.js');

/** Child processes run the built JS; rebuild when dist is missing or older than the sources. */
function ensureBuilt(): void {
  const newest = (dir: string): number =>
    Math.max(...readdirSync(dir).filter((f) => f.endsWith('.ts')).map((f) => statSync(join(dir, f)).mtimeMs));
  const srcTime = Math.max(newest(join(root, 'src/ids')), newest(join(root, 'src/hash')));
  if (existsSync(distIds) && statSync(distIds).mtimeMs >= srcTime && statSync(join(root, 'dist/src/ids/redis-store.js')).mtimeMs >= srcTime) return;
  // tsc emits even when an unrelated file has type errors; what matters is that our outputs are fresh
  spawnSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: root, stdio: 'ignore' });
  if (!existsSync(distIds) || statSync(distIds).mtimeMs < srcTime) throw new Error('tsc build for the multi-process test did not produce dist/src/ids');
}

const CHILD = `
import { Redis } from 'ioredis';
const { IdRegistry } = await import(process.env.HG_IDS);
const r = new Redis(process.env.HG_URL);
const reg = new IdRegistry({ redis: r, keyPrefix: 'mp' });
await r.incr('mp:ready');
while (!(await r.exists('mp:go'))) await new Promise((s) => setTimeout(s, 2));
const n = Number(process.env.HG_N);
const out = await Promise.all(Array.from({ length: n }, (_, i) => reg.upsert({ order: i, items: [i % 3, 'x'], who: 'same-record' })));
process.stdout.write(JSON.stringify(out.map((o) => [o.status, o.physicalId])));
r.disconnect();
`;

function runChild(url: string, n: number): Promise<Array<[string, string]>> {
  return new Promise((res, rej) => {
    const c = spawn(process.execPath, ['--input-type=module', '-e', CHILD], {
      cwd: root, env: { ...process.env, HG_URL: url, HG_N: String(n), HG_IDS: distIds }, stdio: ['ignore', 'pipe', 'inherit'],
    });
    let buf = '';
    c.stdout.on('data', (d) => (buf += d));
    c.on('exit', (code) => (code === 0 ? res(JSON.parse(buf)) : rej(new Error(`child exited ${code}`))));
  });
}

// A writer process that is gone before the reader starts: it stores records(n) under prefix HG_P.
const WRITER = `
import { Redis } from 'ioredis';
const { IdRegistry } = await import(process.env.HG_IDS);
const r = new Redis(process.env.HG_URL);
const reg = new IdRegistry({ redis: r, keyPrefix: process.env.HG_P });
const out = [];
for (let i = 0; i < Number(process.env.HG_N); i++) out.push(await reg.upsert({ user: i, tag: 'r', tags: ['t' + (i % 7)] }));
process.stdout.write(JSON.stringify(out));
r.disconnect();
`;

function runWriter(url: string, prefix: string, n: number): Promise<UpsertResult[]> {
  return new Promise((res, rej) => {
    const c = spawn(process.execPath, ['--input-type=module', '-e', WRITER], {
      cwd: root, env: { ...process.env, HG_URL: url, HG_N: String(n), HG_P: prefix, HG_IDS: distIds }, stdio: ['ignore', 'pipe', 'inherit'],
    });
    let buf = '';
    c.stdout.on('data', (d) => (buf += d));
    c.on('exit', (code) => (code === 0 ? res(JSON.parse(buf)) : rej(new Error(`writer exited ${code}`))));
  });
}

describe.skipIf(!has)('IdRegistry on a real redis-server', () => {
  let srv: RedisServer;
  let r: Redis;
  beforeAll(async () => {
    srv = await startRedis();
    r = new Redis(srv.url);
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
  });

  it('new / duplicate / collision with a weak 16-bit hash, collision records, events, repair', async () => {
    await r.flushdb();
    const reg = new IdRegistry({ redis: r, algorithm: weak16 });
    expect(reg.store.kind).toBe('redis');
    const { results } = await checkWeakHashScenario(reg);
    // physical identity is never the hash: documents sit in a hash per logical id, one field each
    const col = results.find((x) => x.status === 'collision')!;
    expect(await r.hlen(`ids:b:${col.id}`)).toBeGreaterThan(1);
    expect(await r.hget(`ids:d:${col.physicalId}`, 'x')).toBe('1');
    await checkRepair(reg, results);
    expect(await r.hget(`ids:b:${col.id}`, '!r')).toBe('1');
  });

  it('two processes upserting the same records at once: exactly one new per record', async () => {
    ensureBuilt();
    await r.flushdb();
    const n = 300;
    const pa = runChild(srv.url, n);
    const pb = runChild(srv.url, n);
    while (Number(await r.get('mp:ready')) < 2) await new Promise((s) => setTimeout(s, 5));
    await r.set('mp:go', '1');
    const [a, b] = await Promise.all([pa, pb]);
    for (let i = 0; i < n; i++) {
      const sa = a[i]!;
      const sb = b[i]!;
      expect([sa[0], sb[0]].sort()).toEqual(['duplicate', 'new']);
      expect(sa[1]).toBe(sb[1]);
    }
    expect(await r.hget('mp:stats', 'docs')).toBe(String(n));
  }, 180_000);

  it('many clients racing on colliding records: one new per bucket, every other distinct raw a collision', async () => {
    await r.flushdb();
    const constHash: CustomIdHash = { name: 'const', hash: () => 'same' };
    const clients = [new Redis(srv.url), new Redis(srv.url), new Redis(srv.url)];
    const regs = clients.map((c) => new IdRegistry({ redis: c, algorithm: constHash }));
    const recs = records(30, 'race');
    const out = await Promise.all(recs.flatMap((rec) => regs.map((g) => g.upsert(rec))));
    expect(out.filter((o) => o.status === 'new').length).toBe(1);
    expect(out.filter((o) => o.status === 'collision').length).toBe(29);
    expect(out.filter((o) => o.status === 'duplicate').length).toBe(60);
    expect((await regs[0]!.collisions('pending')).length).toBe(29);
    for (const c of clients) c.disconnect();
  });

  it('escalation: the epoch in redis moves every process to SHA-256; old documents stay findable', async () => {
    await r.flushdb();
    const r2 = new Redis(srv.url);
    const a = new IdRegistry({ redis: r, algorithm: weak16, escalation: { threshold: 0.002, minDocuments: 200 } });
    const b = new IdRegistry({ redis: r2, algorithm: weak16 });
    const recs = records(3000, 'esc');
    const done: Array<{ physicalId: string; id: string }> = [];
    let i = 0;
    for (; i < recs.length && a.activeAlgorithm !== 'sha256'; i++) done.push(await a.upsert(recs[i]));
    expect(a.activeAlgorithm).toBe('sha256');
    expect(await r.hget('ids:cfg', 'active')).toBe('sha256');
    const o = await b.upsert(recs[i]);
    expect(o.id).toBe(logicalId(recs[i], 'sha256'));
    expect(b.activeAlgorithm).toBe('sha256');
    for (let j = 0; j < done.length; j += 7) {
      const d = await b.upsert(recs[j]);
      expect(d).toMatchObject({ status: 'duplicate', physicalId: done[j]!.physicalId, id: done[j]!.id });
    }
    r2.disconnect();
  });

  it('repair merges pseudo-collisions (non-canonical writer) and re-ids true ones, stored in redis', async () => {
    await r.flushdb();
    const constHash: CustomIdHash = { name: 'const', hash: () => 'k' };
    let t = 1000;
    const sloppy = new IdRegistry({ redis: r, algorithm: constHash, canonicalize: (v) => JSON.stringify(v), now: () => t++ });
    const a = await sloppy.upsert({ a: 1, b: 2 });
    const b = await sloppy.upsert({ b: 2, a: 1 });
    const c = await sloppy.upsert({ z: 1 });
    expect([a.status, b.status, c.status]).toEqual(['new', 'collision', 'collision']);
    const good = new IdRegistry({ redis: r, algorithm: constHash, now: () => t++ });
    expect(await good.repairCollisions()).toEqual({ logicalIds: 1, merged: 1, rehashed: 2, resolvedRecords: 2 });
    expect((await good.collisions('resolved')).map((x) => x.resolution).sort()).toEqual(['merged', 'rehashed']);
    expect((await good.get(b.physicalId))?.physicalId).toBe(a.physicalId);
    expect(await r.get(`ids:a:${b.physicalId}`)).toBe(a.physicalId);
    expect((await good.find({ z: 1 }))?.logicalId).toBe(logicalId({ z: 1 }, 'sha256'));
    expect((await good.stats()).docs).toBe(2);
    expect((await good.repairCollisions()).logicalIds).toBe(0);
  });

  it('rebuildGate(): ids another process wrote before this one started are found after a SCAN-paged rebuild', async () => {
    ensureBuilt();
    await r.flushdb();
    // a store whose prefix has glob characters lists only its own ids, not those of 'rxg'
    const results = await runWriter(srv.url, 'r*g', 800);
    const other = new IdRegistry({ redis: r, keyPrefix: 'rxg' });
    for (const rec of records(50, 'other')) await other.upsert(rec);
    const writer = new IdRegistry({ redis: r, keyPrefix: 'r*g' });
    const reader = new IdRegistry({ redis: r, keyPrefix: 'r*g', gate: privateGate() });
    await checkGateRebuild(writer, reader, results, 97);
  }, 120_000);

  it('rebuildGate(): repaired (redirected and SHA-256) ids written by another registry are found after the rebuild', async () => {
    await r.flushdb();
    const writer = new IdRegistry({ redis: r, keyPrefix: 'rgw', algorithm: weak16 });
    const { results } = await checkWeakHashScenario(writer);
    await checkRepair(writer, results);
    const own = new Redis(srv.url);
    const reader = new IdRegistry({ redis: own, keyPrefix: 'rgw', algorithm: weak16, gate: privateGate() });
    await checkGateRebuild(writer, reader, results, 200);
    own.disconnect();
  }, 120_000);

  it('store errors surface as HashGateError HG_ERR_STORE', async () => {
    const dead = new Redis({ port: srv.port + 1, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    dead.on('error', () => undefined);
    const reg = new IdRegistry({ store: new RedisIdStore({ client: dead, keyPrefix: 'x' }) });
    await expect(reg.upsert({ a: 1 })).rejects.toMatchObject({ code: 'HG_ERR_STORE' });
    dead.disconnect();
  });
});
