// `hashgate bloom rebuild` and rebuildRedisBloom: a new generation built from files or Redis sets
// replaces the live filter atomically under the same name (Redisson reads it), drops removed keys,
// keeps adds published during the build, and only one rebuild runs at a time.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { RedisBloom, RedisBloomReplica, rebuildRedisBloom, rebuildKeys } from 'hashgate/bloom';
import { ErrorCodes } from 'hashgate';
import { redissonHarness, type RedissonHarness } from './helpers/redisson.js';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';
import { ensureHBase, hbaseConfigured } from './helpers/hbase.js';

const HBASE = hbaseConfigured('bloom rebuild from HBase');

const HAVE = requireRedisOrSkip('bloom rebuild');
const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
let server: RedisServer;
let redis: Redis;
let java: RedissonHarness | null = null;
let dir = '';

beforeAll(async () => {
  if (!HAVE) return;
  server = await startRedis();
  redis = new Redis(server.port, '127.0.0.1');
  java = await redissonHarness();
  dir = mkdtempSync(join(tmpdir(), 'hg-rebuild-'));
}, 600_000);
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const cli = (args: string[]) =>
  new Promise<{ code: number; out: string; err: string }>((resolve) => {
    execFile(process.execPath, [CLI, ...args], (e, out, err) => resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out, err }));
  });

describe.skipIf(!HAVE)('bloom rebuild', () => {
  it('CLI: swaps in a generation built from a file and a Redis set; removed keys go, Redisson reads the new one', async () => {
    const live = await RedisBloom.open({ redis, name: 'guard', expectedItems: 5000, fpp: 0.001 });
    await live.tryInit();
    const keep = Array.from({ length: 2000 }, (_, i) => `keep-${i}-中文`);
    const removed = Array.from({ length: 200 }, (_, i) => `removed-${i}`);
    await live.addAll([...keep, ...removed]);
    const file = join(dir, 'keys.txt');
    writeFileSync(file, keep.slice(0, 1500).join('\n') + '\n');
    await redis.sadd('window:day1', ...keep.slice(1500));
    const r = await cli(['bloom', 'rebuild', '--redis', server.url, '--name', 'guard', '--file', file, '--set', 'window:day1', '--json']);
    expect(r.code, r.err).toBe(0);
    const res = JSON.parse(r.out);
    expect(res.keys).toBe(2000);
    expect(Array.from(await live.containsAll(keep)).every((b) => b === 1)).toBe(true); // same shape: no reload needed
    const stillThere = Array.from(await live.containsAll(removed)).filter((b) => b === 1).length;
    expect(stillThere).toBeLessThan(10); // only false positives remain (fpp 0.001)
    expect(await redis.exists('{guard}:hg:next', '{guard}:hg:next:config', '{guard}:hg:rebuild-lock')).toBe(0);
    expect(await redis.exists('{guard}:hg:spare')).toBe(1); // the replaced bitmap, for the next run
    const spareBytes = async (): Promise<number> => JSON.parse((await cli(['bloom', 'status', '--redis', server.url, '--name', 'guard', '--json'])).out).spareBytes;
    expect(await spareBytes()).toBe(await redis.strlen('{guard}:hg:spare'));
    expect(await spareBytes()).toBeGreaterThan(0);
    const dropped = await cli(['bloom', 'rebuild', '--redis', server.url, '--name', 'guard', '--file', file, '--set', 'window:day1', '--drop-spare', '--json']);
    expect(dropped.code, dropped.err).toBe(0);
    expect(JSON.parse(dropped.out)).toMatchObject({ keys: 2000, reusedBitmap: false });
    expect(await redis.exists('{guard}:hg:spare')).toBe(0);
    expect(await spareBytes()).toBe(0);
    if (java) {
      const addr = `127.0.0.1:${server.port}`;
      expect(await java.keys(['contains', addr, 'guard'], keep.slice(0, 300))).toBe('1'.repeat(300));
      expect((await java.run(['config', addr, 'guard'])).out.trim()).toBe(`${live.size} ${live.hashIterations} 5000 0.001`);
    }
  }, 120_000);

  it('only one rebuild runs: a held lock exits 3 and changes nothing', async () => {
    await redis.set('{guard}:hg:rebuild-lock', 'someone-else', 'PX', 60_000);
    const before = await redis.getBuffer('guard');
    const file = join(dir, 'other.txt');
    writeFileSync(file, 'x\n');
    const r = await cli(['bloom', 'rebuild', '--redis', server.url, '--name', 'guard', '--file', file]);
    expect(r.code).toBe(3);
    expect(r.err).toContain('holds');
    expect(await redis.getBuffer('guard')).toEqual(before);
    await redis.del('{guard}:hg:rebuild-lock');
    expect((await cli(['bloom', 'rebuild', '--redis', server.url])).code).toBe(2);
    expect((await cli(['bloom', 'rebuild', '--redis', server.url, '--name', 'guard', '--file', file, '--fpp', '2'])).code).toBe(2);
  }, 60_000);

  it('adds published during the build are replayed into the new generation; replicas reload', async () => {
    const writer = await RedisBloom.open({ redis, name: 'live2', expectedItems: 10_000, fpp: 0.01, publish: true });
    await writer.tryInit();
    await writer.addAll(['old-1', 'old-2']);
    const replica = await RedisBloomReplica.open({ redis, name: 'live2', resyncIntervalMs: 0, blockMs: 50 });
    async function* source() {
      yield 'src-1';
      // a live add lands while the new generation is being built
      await writer.addAll(['during-build']);
      yield 'src-2';
    }
    const r = await rebuildRedisBloom({ redis, name: 'live2', keys: source() });
    expect(r.replayed).toBe(1);
    expect(Array.from(await writer.containsAll(['src-1', 'src-2', 'during-build']))).toEqual([1, 1, 1]);
    const end = Date.now() + 5_000;
    while (!replica.contains('src-1') && Date.now() < end) await new Promise((res) => setTimeout(res, 20));
    // the replica replaced its bits: the new generation's keys are in, the dropped ones are out
    expect(Array.from(replica.containsAll(['src-1', 'src-2', 'during-build', 'old-1', 'old-2']))).toEqual([1, 1, 1, 0, 0]);
    expect(replica.stats().resyncs).toBeGreaterThanOrEqual(1);
    await replica.close();
    await expect(rebuildRedisBloom({ redis, name: 'no-config', keys: ['a'] })).rejects.toBeInstanceOf(TypeError);
    expect(await redis.exists('{no-config}:hg:rebuild-lock')).toBe(0);
  }, 60_000);

  it('a lost lock aborts the swap', async () => {
    const f = await RedisBloom.open({ redis, name: 'lost', expectedItems: 100, fpp: 0.01 });
    await f.tryInit();
    await f.addAll(['keep-me']);
    async function* source() {
      yield 'a';
      await redis.set('{lost}:hg:rebuild-lock', 'thief');
      yield 'b';
    }
    await expect(rebuildRedisBloom({ redis, name: 'lost', keys: source() })).rejects.toMatchObject({ code: ErrorCodes.LOCK_HELD });
    expect(await f.contains('keep-me')).toBe(true);
    expect(await redis.get('{lost}:hg:rebuild-lock')).toBe('thief');
  }, 30_000);

  it('a bitmap of many MiB is allocated by one command, then uploaded in place', async () => {
    // 6M keys at 1%: a 7.2 MB bitmap. Grown in steps, the allocator would move (copy) it at its
    // size classes, costing Redis more than allocating it once.
    const f = await RedisBloom.open({ redis, name: 'big', expectedItems: 6_000_000, fpp: 0.01 });
    await f.tryInit();
    const keys = Array.from({ length: 20_000 }, (_, i) => `big-${i}-用户`);
    await redis.config('RESETSTAT');
    const res = await rebuildRedisBloom({ redis, name: 'big', keys });
    const stats = await redis.info('commandstats');
    const calls = (cmd: string): number => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
    const bytes = Math.ceil(res.size / 8);
    expect(await redis.strlen('big')).toBe(bytes);
    const bitmap = await redis.getBuffer('big');
    const MiB = 1024 * 1024;
    let uploaded = 0;
    for (let off = 0; off < bytes; off += MiB) if (bitmap.subarray(off, off + MiB).some((b) => b !== 0)) uploaded++;
    // one SETRANGE allocates the string, then one per non-zero MiB of bits
    expect(calls('setrange')).toBe(1 + uploaded);
    expect(calls('setbit')).toBe(0);
    expect(Array.from(await f.containsAll(keys)).every((b) => b === 1)).toBe(true);
  }, 60_000);

  it('a later rebuild writes into the bitmap the last swap replaced, and its bits equal a build into a new string', async () => {
    const name = 'spare';
    const shape = { expectedItems: 20_000_000, fpp: 0.01 }; // a 24 MB bitmap: 23 chunks of 1 MiB
    const f = await RedisBloom.open({ redis, name, ...shape });
    await f.tryInit();
    const gen = (g: number, n: number): string[] => Array.from({ length: n }, (_, i) => `g${g}-${i}-用户`);
    await f.addAll(gen(0, 5000));
    const { spare, next } = rebuildKeys(name);
    const first = await rebuildRedisBloom({ redis, name, keys: gen(1, 5000) });
    expect(first.reusedBitmap).toBe(false);
    const bytes = Math.ceil(first.size / 8);
    const chunks = Math.ceil(bytes / (1024 * 1024));
    // the generation the swap replaced (filled by SETBITs: it ends at its highest set bit) is kept,
    // without a TTL, for the next rebuild
    expect(await redis.strlen(spare)).toBeGreaterThan(bytes - 65536);
    expect(await redis.pttl(spare)).toBe(-1);
    /** The bitmap the same keys give in a filter that never had a spare (a string grown from nothing). */
    const freshBits = async (keys: string[], local: boolean, tag: string): Promise<Buffer> => {
      const other = await RedisBloom.open({ redis, name: `fresh-${tag}`, ...shape });
      await other.tryInit();
      const r = await rebuildRedisBloom({ redis, name: `fresh-${tag}`, keys, local });
      expect(r.reusedBitmap).toBe(false);
      return redis.getBuffer(`fresh-${tag}`);
    };
    let round = 0;
    for (const local of [true, false, true]) {
      // the last round sets one key's bits: most of its chunks are zeros written over old bits
      const keys = round === 2 ? gen(7, 1) : gen(local ? 2 : 3, 3000);
      await redis.config('RESETSTAT');
      const r = await rebuildRedisBloom({ redis, name, keys, local, sourceDescription: `round ${round}` });
      const stats = await redis.info('commandstats');
      expect(r.reusedBitmap).toBe(true);
      // one in-place write per 1 MiB chunk, zero chunks included; only the first reuse grows the
      // SETBIT-filled spare by its few missing bytes
      expect(Number(/cmdstat_setrange:calls=(\d+)/.exec(stats)?.[1])).toBe(chunks + (round++ === 0 ? 1 : 0));
      expect((await redis.getBuffer(name)).equals(await freshBits(keys, local, String(round)))).toBe(true);
      expect(Array.from(await f.containsAll([...gen(0, 3000), ...gen(1, 3000)])).filter((b) => b === 1).length).toBeLessThan(200); // no old bits
      expect(await redis.strlen(spare)).toBe(bytes);
    }
    // keepSpare false: the swap drops the replaced bitmap, and a spare left before goes too
    expect((await rebuildRedisBloom({ redis, name, keys: gen(4, 100), keepSpare: false })).reusedBitmap).toBe(false);
    expect(await redis.exists(spare)).toBe(0);
    // a generation a killed run left at the final length is written over, never trusted
    await redis.set(next, Buffer.alloc(bytes, 0xff), 'PX', 60_000);
    const keys = gen(5, 3000);
    const again = await rebuildRedisBloom({ redis, name, keys });
    expect([again.cleanedStale, again.reusedBitmap]).toEqual([true, true]);
    expect((await redis.getBuffer(name)).equals(await freshBits(keys, true, 'stale'))).toBe(true);
    // a refused run keeps its bitmap as the spare and leaves the live filter as it was
    const live = await redis.getBuffer(name);
    await expect(rebuildRedisBloom({ redis, name, keys: gen(6, 10), minKeys: 100 })).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG });
    expect((await redis.getBuffer(name)).equals(live)).toBe(true);
    expect(await redis.exists(next)).toBe(0);
    expect(await redis.strlen(spare)).toBe(bytes);
    expect(await redis.pttl(spare)).toBe(-1);
    await expect(rebuildRedisBloom({ redis, name, keys: ['x'], keepSpare: 'yes' as unknown as boolean })).rejects.toBeInstanceOf(TypeError);
    // delete() takes the spare with the filter
    expect(await f.delete()).toBe(true);
    expect(await redis.exists(name, spare)).toBe(0);
  }, 120_000);

  it.skipIf(!HBASE)('CLI: rebuilds from an HBase table scan (the blacklist table)', async () => {
    const hb = await ensureHBase();
    try {
      const table = await hb.createTable('blrebuild', ['base:bloom=ROW', 'detail'], ['CARD_0_用户2', 'CARD_0_用户5']); // three regions
      const store = hb.store();
      const rows = Array.from({ length: 300 }, (_, i) => `CARD_0_用户${i}`);
      await store.mput(table, rows.map((row) => ({ row, values: { 'base:status': '1' } })));
      await store.mput(table, [{ row: 'CARD_0_detail-only', values: { 'detail:reason': 'x' } }]);
      const f = await RedisBloom.open({ redis, name: 'risk:blacklist', expectedItems: 1000, fpp: 0.001 });
      await f.tryInit();
      await f.addAll(['CARD_0_removed']);
      const r = await cli(['bloom', 'rebuild', '--redis', server.url, '--name', 'risk:blacklist', '--hbase-table', table, '--hbase', hb.zookeeper, '--hbase-column', 'base:status', '--json']);
      expect(r.code, r.err).toBe(0);
      expect(JSON.parse(r.out).keys).toBe(300);
      expect(Array.from(await f.containsAll(rows)).every((b) => b === 1)).toBe(true);
      expect(Array.from(await f.containsAll(['CARD_0_removed', 'CARD_0_detail-only']))).toEqual([0, 0]);
      // a filter that does not exist yet, without --expected-items and --fpp: a usage error, whether
      // or not $HBASE_ZK would have given the scan its quorum
      expect((await cli(['bloom', 'rebuild', '--redis', server.url, '--name', 'x', '--hbase-table', table])).code).toBe(2);
    } finally {
      await hb.release();
    }
  }, 300_000);
});
