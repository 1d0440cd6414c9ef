// rebuildRedisBloom and `hashgate bloom rebuild|status` safety on a private redis-server: readers
// never miss a key of both generations during the swap and old-only keys go, the shape is kept
// unless reshaping is asked for, an empty source never wipes the live filter, one of two concurrent
// rebuilds runs, a run that lost its lock cannot write or swap, rejected export lines exit 4 with
// file:line only, kill -9 mid-build leaves the live filter intact and the next run cleans up, and
// SIGINT exits 130 with nothing swapped.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { Redis } from 'ioredis';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { RedisBloom, rebuildRedisBloom, readRebuildStatus, rebuildKeys, redisBloomMetrics, ExportFileKeys } from 'hashgate/bloom';
import { ErrorCodes } from 'hashgate';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';

const HAVE = requireRedisOrSkip('bloom rebuild safety');
let server: RedisServer;
let redis: Redis;
let dir = '';

beforeAll(async () => {
  if (!HAVE) return;
  server = await startRedis();
  redis = new Redis(server.port, '127.0.0.1');
  dir = mkdtempSync(join(tmpdir(), 'hg-rebuild-safety-'));
}, 60_000);
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// key = the line's fields concatenated, as `hashgate load` builds it
const rows = (p: string, from: number, n: number): Array<[string, string]> =>
  Array.from({ length: n }, (_, i) => [i % 5 === 0 ? `${p}用户${from + i}` : `${p}name${from + i}`, `ID${(from + i) * 7}`]);
const keysOf = (r: Array<[string, string]>): string[] => r.map(([a, b]) => a + b);
const fileOf = (name: string, r: Array<[string, string]>, extra = ''): string => {
  const f = join(dir, name);
  writeFileSync(f, r.map(([a, b]) => `${a}|${b}\n`).join('') + extra);
  return f;
};
const allOnes = (u: Uint8Array): boolean => u.every((b) => b === 1);
const ones = (u: Uint8Array): number => u.reduce((a, b) => a + b, 0);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function liveFilter(name: string, keys: string[], expectedItems = 50_000, fpp = 0.01): Promise<RedisBloom> {
  const f = await RedisBloom.open({ redis, name, expectedItems, fpp });
  await f.tryInit();
  await f.addAll(keys);
  return f;
}

const CLI = join(process.cwd(), 'dist/src/cli/main.js');
const cli = (args: string[]) => spawnSync(process.execPath, [CLI, 'bloom', ...args], { encoding: 'utf8', timeout: 120_000 });

describe.skipIf(!HAVE)('rebuildRedisBloom safety', () => {
  for (const local of [true, false]) {
    it(`readers see no false negative for keys of both generations; old-only keys are gone after (${local ? 'built locally, uploaded' : 'built in Redis'})`, async () => {
      const A = keysOf(rows('old', 0, 8000)); // only in the old generation
      const B = keysOf(rows('both', 0, 20_000)); // in both
      const Cr = rows('new', 0, 20_000); // only in the new one
      const name = local ? 'guard' : 'guard-r';
      await liveFilter(name, [...A, ...B]);
      const configBefore = await redis.hgetall(`{${name}}:config`);
      const file = fileOf(`gen2-${name}.txt`, [...rows('both', 0, 20_000), ...Cr]);
      // a reader on its own connection checks B in a loop while the rebuild runs
      const readerConn = new Redis(server.port, '127.0.0.1');
      const reader = await RedisBloom.open({ redis: readerConn, name });
      let done = false;
      let duringBuild = 0;
      let misses = 0;
      const loop = (async () => {
        while (!done) {
          const building = (await readerConn.exists(rebuildKeys(name).next)) === 1;
          misses += B.length - ones(await reader.containsAll(B));
          if (building) duringBuild++;
        }
      })();
      const registry = new Registry();
      const metrics = redisBloomMetrics(registry);
      const res = await rebuildRedisBloom({ redis, name, local, keys: new ExportFileKeys({ inputs: [file] }), sourceDescription: 'files:1', metrics, now: () => 1_700_000_000_000 });
      done = true;
      await loop;
      readerConn.disconnect();
      expect(res).toMatchObject({ keys: 40_000, generation: 1, cleanedStale: false });
      expect(duringBuild).toBeGreaterThan(0); // the reader really overlapped the build
      expect(misses).toBe(0);
      const f = await RedisBloom.open({ redis, name });
      expect(allOnes(await f.containsAll(B))).toBe(true);
      expect(allOnes(await f.containsAll(keysOf(Cr)))).toBe(true);
      expect(ones(await f.containsAll(A)) / A.length).toBeLessThan(0.05); // like never-added keys
      expect(await redis.hgetall(`{${name}}:config`)).toEqual(configBefore);
      expect(await redis.pttl(name)).toBe(-1); // RENAME carried the temporary TTL; the swap dropped it
      expect(await redis.pttl(`{${name}}:config`)).toBe(-1);
      expect(await redis.exists(rebuildKeys(name).next, rebuildKeys(name).nextConfig, rebuildKeys(name).lock)).toBe(0);
      expect(await readRebuildStatus(redis, name)).toMatchObject({ generation: 1, keys: 40_000, source: 'files:1', at: 1_700_000_000_000 });
      const text = await registry.metrics();
      expect(text).toContain(`hashgate_bloom_last_rebuild_keys{filter="${name}"} 40000`);
      expect(text).toContain(`hashgate_bloom_last_rebuild_timestamp_seconds{filter="${name}"} 1700000000`);
    }, 120_000);
  }

  it('keeps the live shape unless reshape is given; a first generation needs a size', async () => {
    const name = 'fresh{t1}';
    await expect(rebuildRedisBloom({ redis, name, keys: [['a', 'b', 'c']] })).rejects.toBeInstanceOf(TypeError);
    const r = await rebuildRedisBloom({ redis, name, keys: [['a', 'b', 'c']], expectedItems: 1000, fpp: 0.01 });
    expect(r).toMatchObject({ keys: 3, generation: 1 });
    expect(await redis.hget('fresh{t1}:config', 'falseProbability')).toBe('0.01');
    const before = await redis.getBuffer(name);
    await expect(rebuildRedisBloom({ redis, name, keys: [['x']], expectedItems: 5000, fpp: 0.01 })).rejects.toMatchObject({ code: ErrorCodes.BLOOM_SHAPE_MISMATCH });
    expect((await redis.getBuffer(name))!.equals(before!)).toBe(true);
    expect(await redis.exists('fresh{t1}:hg:next', 'fresh{t1}:hg:rebuild-lock')).toBe(0);
    const re = await rebuildRedisBloom({ redis, name, keys: [['x']], expectedItems: 5000, fpp: 0.01, reshape: true });
    expect(re.size).toBeGreaterThan(r.size);
    const f = await RedisBloom.open({ redis, name });
    expect(f.size).toBe(re.size);
    expect(await f.contains('x')).toBe(true);
  }, 30_000);

  it('an empty source never replaces the live filter (minKeys) and leaves no temporary keys', async () => {
    const name = 'blk-empty';
    const live = await liveFilter(name, ['u1', 'u2']);
    await expect(rebuildRedisBloom({ redis, name, keys: [] })).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG });
    expect(allOnes(await live.containsAll(['u1', 'u2']))).toBe(true);
    expect(await redis.exists(rebuildKeys(name).next, rebuildKeys(name).nextConfig, rebuildKeys(name).lock)).toBe(0);
    await rebuildRedisBloom({ redis, name, keys: [], minKeys: 0 });
    expect(await live.contains('u1')).toBe(false);
  }, 30_000);

  it('one of two concurrent rebuilds runs; the other is refused with LOCK_HELD and changes nothing', async () => {
    const name = 'blk-lock';
    await liveFilter(name, ['x']);
    const c2 = new Redis(server.port, '127.0.0.1');
    try {
      const keys = keysOf(rows('k', 0, 30_000));
      const r = await Promise.allSettled([rebuildRedisBloom({ redis, name, keys: [keys] }), rebuildRedisBloom({ redis: c2, name, keys: [keys] })]);
      expect(r.map((x) => x.status).sort()).toEqual(['fulfilled', 'rejected']);
      expect((r.find((x) => x.status === 'rejected') as PromiseRejectedResult).reason).toMatchObject({ code: ErrorCodes.LOCK_HELD });
      expect((await readRebuildStatus(redis, name))!.generation).toBe(1);
    } finally {
      c2.disconnect();
    }
  }, 30_000);

  it('a run whose lock was taken over cannot write into the new holder\'s generation nor swap', async () => {
    const name = 'blk-fence';
    const live = await liveFilter(name, ['keep-me']);
    const { lock, next } = rebuildKeys(name);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const isStarted = new Promise<void>((r) => (started = r));
    async function* slow() {
      yield ['n1', 'n2'];
      started();
      await gate;
      yield ['n3'];
    }
    const p = rebuildRedisBloom({ redis, name, keys: slow(), local: true });
    await isStarted;
    // the lease "expired" and another run took the lock and started its own generation
    await redis.set(lock, 'someone-else', 'PX', 60_000);
    await redis.set(next, 'theirs');
    release();
    await expect(p).rejects.toMatchObject({ code: ErrorCodes.LOCK_HELD });
    expect(await live.contains('keep-me')).toBe(true);
    expect(await live.contains('n1')).toBe(false);
    expect(await redis.get(lock)).toBe('someone-else'); // not released by the loser
    expect(await redis.get(next)).toBe('theirs'); // neither overwritten nor deleted by the loser
    await redis.del(lock, next);
  }, 30_000);

  it('an add published right before the swap is in the new generation', async () => {
    const name = 'pub-race';
    const writer = await RedisBloom.open({ redis, name, expectedItems: 10_000, fpp: 0.01, publish: true });
    await writer.tryInit();
    await writer.addAll(['first-key']);
    let raced = false;
    const now = (): number => {
      if (!raced) {
        raced = true;
        void writer.addAll(['slipped-in']);
      }
      return Date.now();
    };
    await rebuildRedisBloom({ redis, name, keys: [['a', 'b']], now });
    expect(await writer.contains('slipped-in')).toBe(true);
    expect(await writer.contains('first-key')).toBe(false);
  }, 30_000);
});

describe.skipIf(!HAVE)('hashgate bloom (CLI) safety', () => {
  it('rejected lines: swaps, exits 4 and names file:line, never the content; status and metrics --bloom report the swap', async () => {
    const name = 'cli-rej';
    await liveFilter(name, ['gone']);
    const r = rows('c', 0, 500);
    const file = fileOf('rej.txt', r, 'secret-person|ID1|extra\n\nsecond-secret|ID2\n');
    const out = cli(['rebuild', '--name', name, '--redis', server.url, '--file', file]);
    expect(out.stderr).toContain(`${file}:501 field-count`);
    expect(out.stderr).toContain(`${file}:502 empty`);
    expect(out.stderr + out.stdout).not.toContain('secret-person');
    expect(out.status).toBe(4);
    const f = await RedisBloom.open({ redis, name });
    expect(allOnes(await f.containsAll([...keysOf(r), 'second-secretID2']))).toBe(true);
    expect(await f.contains('gone')).toBe(false);
    const m = spawnSync(process.execPath, [CLI, 'metrics', '--once', '--no-process', '--redis', server.url, '--bloom', name, '--bloom', 'never-built'], { encoding: 'utf8' });
    expect(m.status).toBe(0);
    expect(m.stdout).toContain(`hashgate_bloom_last_rebuild_keys{filter="${name}"} 501`);
    expect(m.stdout).toMatch(new RegExp(`hashgate_bloom_last_rebuild_timestamp_seconds\\{filter="${name}"\\} \\d{10}`));
    expect(m.stdout).not.toContain('never-built');
    const st = cli(['status', '--name', name, '--redis', server.url, '--json']);
    expect(st.status).toBe(0);
    expect(JSON.parse(st.stdout)).toMatchObject({ exists: true, last: { generation: 1, keys: 501 } });
    expect(cli(['status', '--name', 'absent', '--redis', server.url]).status).toBe(1);
    expect(cli(['rebuild', '--name', name, '--redis', server.url, '--file', file, '--min-keys', 'x']).status).toBe(2);
  }, 60_000);

  it('kill -9 mid-build: live filter intact, a run during the stale lock exits 3, the next run cleans up', async () => {
    const name = 'cli-crash';
    const old = keysOf(rows('o', 0, 2000));
    await liveFilter(name, old, 3_000_000, 0.01);
    const big = fileOf('big.txt', rows('big', 0, 1_500_000));
    const { next, nextConfig, lock } = rebuildKeys(name);
    const child = spawn(process.execPath, [CLI, 'bloom', 'rebuild', '--name', name, '--redis', server.url, '--lock-ttl', '5s', '--quiet', '--file', big], { stdio: 'ignore' });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    // wait until its generation exists (allocated first, filled in memory, then uploaded), then kill it
    const deadline = Date.now() + 60_000;
    while ((await redis.exists(next)) === 0 && Date.now() < deadline && child.exitCode === null) await sleep(10);
    expect(await redis.exists(next)).toBe(1);
    child.kill('SIGKILL');
    await exited;
    expect(await redis.exists(next, nextConfig)).toBe(2); // half-built generation left behind...
    expect(await redis.pttl(next)).toBeGreaterThan(0); // ...with a TTL, so it goes even if no run follows
    const live = await RedisBloom.open({ redis, name });
    expect(allOnes(await live.containsAll(old))).toBe(true);
    expect(await live.contains('big用户0ID0')).toBe(false);
    const small = fileOf('small.txt', rows('s', 0, 100));
    const locked = cli(['rebuild', '--name', name, '--redis', server.url, '--quiet', '--file', small]);
    expect(locked.status).toBe(3); // the dead run's lease has not expired yet
    expect(locked.stderr).toContain('holds');
    while ((await redis.exists(lock)) === 1) await sleep(100);
    const again = cli(['rebuild', '--name', name, '--redis', server.url, '--json', '--file', small]);
    expect(again.status, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ cleanedStale: true, keys: 100, generation: 1 });
    expect(await redis.exists(next, nextConfig, lock)).toBe(0);
    expect(allOnes(await live.containsAll(keysOf(rows('s', 0, 100))))).toBe(true);
    expect(ones(await live.containsAll(old))).toBeLessThan(100);
  }, 180_000);

  it('SIGINT mid-build: exits 130, live filter intact, temporary keys and lock gone', async () => {
    const name = 'cli-int';
    const old = keysOf(rows('i', 0, 500));
    await liveFilter(name, old, 3_000_000, 0.01);
    const big = fileOf('big-int.txt', rows('bi', 0, 1_500_000));
    const { next, nextConfig, lock } = rebuildKeys(name);
    const child = spawn(process.execPath, [CLI, 'bloom', 'rebuild', '--name', name, '--redis', server.url, '--quiet', '--file', big], { stdio: 'ignore' });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const deadline = Date.now() + 60_000;
    while ((await redis.exists(next)) === 0 && Date.now() < deadline && child.exitCode === null) await sleep(10);
    expect(await redis.exists(next)).toBe(1);
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(await redis.exists(next, nextConfig, lock)).toBe(0); // the next run need not wait
    const live = await RedisBloom.open({ redis, name });
    expect(allOnes(await live.containsAll(old))).toBe(true);
    expect(await live.contains('bi用户0ID0')).toBe(false);
  }, 120_000);
});
