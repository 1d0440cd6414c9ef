// Blacklist on a shared Redis-held filter across three OS processes (three service instances):
// an import on A is visible on B and C at once, where per-process filters would answer "not
// blacklisted" until their next rebuild; a dead filter sends checks to HBase instead of "absent".
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { Blacklist, BLACKLIST_FAMILIES, blacklistRowKey, type BlacklistEntry } from 'hashgate/hbase';
import { RedisBloom } from 'hashgate/bloom';
import { ensureHBase, hbaseConfigured, type HBaseHarness } from './helpers/hbase.js';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';

const ok = hbaseConfigured('Blacklist shared filter') && requireRedisOrSkip('Blacklist shared filter');
const WORKER = fileURLToPath(new URL('./blacklist-shared-worker.mjs', import.meta.url));

interface Instance {
  child: ChildProcess;
  call(msg: Record<string, unknown>): Promise<{ result: unknown; stats?: Record<string, number> }>;
}

function startInstance(args: string[]): Promise<Instance> {
  const child = fork(WORKER, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let next = 0;
  const waiting = new Map<number, (m: { ok: boolean; result: unknown; error?: string; stats?: Record<string, number> }) => void>();
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`instance exited ${code} before ready`)));
    child.on('message', (m: { ready?: boolean; id?: number; ok: boolean; result: unknown; error?: string }) => {
      if (m.ready) {
        resolve({
          child,
          call: (msg) =>
            new Promise((res, rej) => {
              const id = next++;
              waiting.set(id, (r) => (r.ok ? res(r) : rej(new Error(r.error))));
              child.send({ ...msg, id });
            }),
        });
      } else if (m.id !== undefined) {
        waiting.get(m.id)?.(m);
        waiting.delete(m.id);
      }
    });
  });
}

describe.skipIf(!ok)('Blacklist with a shared filter, three processes', () => {
  let hb: HBaseHarness;
  let server: RedisServer;
  let table = '';
  const instances: Instance[] = [];

  beforeAll(async () => {
    hb = await ensureHBase();
    table = await hb.createTable('blshared', [...BLACKLIST_FAMILIES]);
    server = await startRedis();
  }, 300_000);

  afterAll(async () => {
    for (const i of instances) i.child.kill('SIGKILL');
    await server?.stop();
    await hb?.release();
  });

  it('a user blacklisted through A is blacklisted on B and C immediately', async () => {
    // a row written before any instance started: the first start() fills the new filter from a scan
    const seed = hb.store();
    await seed.mput(table, [{ row: blacklistRowKey({ userType: 'CARD', blacklistType: '0', userId: 'old-1' }), values: { 'base:status': '1' } }]);
    const args = [server.url, hb.zookeeper, table, 'risk:blacklist'];
    instances.push(await startInstance(args));
    instances.push(...(await Promise.all([startInstance(args), startInstance(args)])));
    const [a, b, c] = instances as [Instance, Instance, Instance];
    expect(new Set(instances.map((i) => i.child.pid)).size).toBe(3);

    const entries: BlacklistEntry[] = Array.from({ length: 50 }, (_, i) => ({ userType: 'CARD', blacklistType: '0', userId: `用户${i}`, reason: 'fraud' }));
    const keys = [...entries, { userType: 'CARD', blacklistType: '0', userId: 'old-1' }, { userType: 'CARD', blacklistType: '0', userId: 'never' }];
    // before the import, B says no
    const before = (await b.call({ op: 'check', keys })).result as boolean[];
    expect(before.slice(0, 50).every((x) => !x)).toBe(true);
    expect(before[50]).toBe(true);

    await a.call({ op: 'import', entries });
    for (const inst of [b, c]) {
      const r = await inst.call({ op: 'check', keys });
      expect(r.result).toEqual([...entries.map(() => true), true, false]);
      expect(r.stats!.filterErrors).toBe(0);
    }
    // the filter Redisson would read holds the row keys; the completed scan is recorded
    const redis = new Redis(server.url);
    const f = await RedisBloom.open({ redis, name: 'risk:blacklist' });
    expect(Array.from(await f.containsAll(entries.map((e) => blacklistRowKey(e))))).toEqual(entries.map(() => 1));
    expect(await f.getFlag('filledFrom')).toBe(table);

    // a filter created elsewhere (e.g. by Redisson) without a recorded scan is filled at start
    const foreign = await RedisBloom.open({ redis, name: 'risk:foreign', expectedItems: 1000, fpp: 0.01 });
    expect(await foreign.tryInit()).toBe(true);
    const bl = new Blacklist({ store: hb.store(), table, filter: foreign });
    await bl.start();
    expect(await bl.isBlacklisted([{ userType: 'CARD', blacklistType: '0', userId: 'old-1' }, { userType: 'CARD', blacklistType: '0', userId: '用户7' }])).toEqual([true, true]);
    expect(bl.stats().bloomNegatives).toBe(0);
    redis.disconnect();
  }, 120_000);

  it('with Redis down the shared filter cannot answer, so HBase decides (never a silent "absent")', async () => {
    const redis = new Redis(server.url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
    redis.on('error', () => undefined);
    const filter = await RedisBloom.open({ redis, name: 'risk:blacklist' });
    const bl = new Blacklist({ store: hb.store(), table, filter });
    await bl.start();
    await server.kill();
    const r = await bl.isBlacklisted([{ userType: 'CARD', blacklistType: '0', userId: '用户3' }, { userType: 'CARD', blacklistType: '0', userId: 'never' }]);
    expect(r).toEqual([true, false]);
    expect(bl.stats().filterErrors).toBe(1);
    expect(bl.stats().hbaseLookups).toBe(2);
    redis.disconnect();
    await server.restart();
  }, 60_000);
});
