// Hot/cold tiering against a real redis-server and a real HBase: migrateCold() moves exactly the
// near-expiry keys (with their original timestamps as HBase cell timestamps), is harmless when run
// twice or concurrently, resumes from its checkpoint, and the cold family's TTL hides old cells.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { ensureHBase, hbaseConfigured, type HBaseHarness } from '../helpers/hbase.js';
import type { HBaseStore } from '../../src/hbase/client.js';
import { FLAG_ARCHIVED, HBaseColdStore, TieredCache, coldTableDdl, decodeValue, readEnvelope } from '../../src/cache/index.js';
import { HotColdStore } from '../../src/tiering/index.js';

/** Generous tier timeouts: a loaded CI box must not turn a slow answer into a degraded one. */
const SLOW = 20_000;

const hasRedis = requireRedisOrSkip('tiering (integration)');
const hasHBase = hbaseConfigured('tiering (integration)');

describe.skipIf(!hasRedis || !hasHBase)('migrateCold: Redis -> real HBase', () => {
  let srv: RedisServer;
  let redis: Redis;
  let hb: HBaseHarness;
  let store: HBaseStore;
  let cold: HBaseColdStore;
  const tables: string[] = [];
  let n = 0;
  const T0 = Date.now() - 3_600_000;

  // one JVM creates every table the suite needs
  beforeAll(async () => {
    srv = await startRedis();
    redis = new Redis(srv.url, { maxRetriesPerRequest: 1 });
    hb = await ensureHBase();
    for (let i = 0; i < 4; i++) tables.push(hb.uniqueName('tier'));
    const short = hb.uniqueName('tierttl');
    tables.push(short);
    await hb.ddl(...tables.slice(0, 4).map((t) => coldTableDdl(t)), coldTableDdl(short, { ttlSeconds: 3_600 }));
    store = hb.store();
    cold = new HBaseColdStore({ store });
    await store.ready(tables[0]);
  });
  afterAll(async () => {
    redis?.disconnect();
    await srv?.stop();
    if (tables.length) await hb?.ddl(...tables.map((t) => `drop ${t}`)).catch(() => undefined);
    await hb?.release();
  });
  beforeEach(async () => {
    await redis.flushall();
    store.resetCallCounts();
  });

  const seed = async (table: string) => {
    const hot = new HotColdStore({ redis, cold });
    const near = Array.from({ length: 30 }, (_, i) => ({ key: `near${i}`, value: { i, kind: 'near' }, ts: T0 + i }));
    const far = Array.from({ length: 50 }, (_, i) => ({ key: `far${i}`, value: { i, kind: 'far' }, ts: T0 + 100 + i }));
    await hot.write(table, near, { ttlSeconds: 1_200 }); // 20 min left: under the 1 h threshold
    await hot.write(table, far); // 7 days
    return { hot, near, far };
  };

  it('moves exactly the near-expiry keys, with their timestamps; a second run writes nothing', async () => {
    const table = tables[n++]!;
    const { hot, near, far } = await seed(table);
    const r = await hot.migrateCold({ batchSize: 16 });
    expect(r).toMatchObject({ acquired: true, complete: true, scanned: 80, candidates: 30, migrated: 30, raced: 0 });
    const rows = await store.mget(table, [...near, ...far].map((e) => e.key));
    expect(rows.slice(0, 30).every((row) => row !== null)).toBe(true);
    expect(rows.slice(30).every((row) => row === null)).toBe(true);
    expect(rows.map((row) => row?.cells[0]?.timestamp).slice(0, 30)).toEqual(near.map((e) => e.ts));
    expect(decodeValue(rows[7]!.columns['c:v']!)).toEqual({ i: 7, kind: 'near' });
    const env = readEnvelope((await redis.getBuffer(`hg:v:${table}:near3`))!);
    expect(env!.flags & FLAG_ARCHIVED).toBe(FLAG_ARCHIVED);
    expect(await redis.pttl(`hg:v:${table}:near3`)).toBeLessThanOrEqual(1_200_000);
    const puts = store.callCounts().ops.mput;
    const again = await hot.migrateCold({ batchSize: 16 });
    expect(again).toMatchObject({ complete: true, migrated: 0, alreadyArchived: 30 });
    expect(store.callCounts().ops.mput).toBe(puts);
  });

  it('concurrent runs: one migrates, the other backs off; HBase holds each key once', async () => {
    const table = tables[n++]!;
    const { hot } = await seed(table);
    const other = new HotColdStore({ redis, cold });
    const [a, b] = await Promise.all([hot.migrateCold({ batchSize: 8 }), other.migrateCold({ batchSize: 8 })]);
    expect([a.acquired, b.acquired].sort()).toEqual([false, true]);
    expect(a.migrated + b.migrated).toBe(30);
    const rows = await store.scan(table, { limit: 1_000 });
    expect(rows.length).toBe(30);
    expect(rows.every((row) => row.key.toString().startsWith('near'))).toBe(true);
  });

  it('resumes from the SCAN cursor checkpoint; after expiry the cache serves migrated keys from HBase', async () => {
    const table = tables[n++]!;
    const { hot, near } = await seed(table);
    const first = await hot.migrateCold({ batchSize: 10, maxBatches: 2 });
    expect(first.complete).toBe(false);
    const rest = await hot.migrateCold({ batchSize: 10 });
    expect(rest.resumedFrom).toBe(first.cursor);
    expect(rest.complete).toBe(true);
    expect(first.migrated + rest.migrated).toBe(30);
    expect((await store.scan(table, { limit: 1_000 })).length).toBe(30);
    // the hot copies expire (simulated by deleting them): lookups fall through to the cold tier
    await redis.del(...near.map((e) => `hg:v:${table}:${e.key}`));
    const cache = new TieredCache({ redis: { client: redis, timeoutMs: SLOW }, cold, coldOptions: { timeoutMs: SLOW } });
    const vals = await cache.lookup(table, ['near0', 'near29', 'far0']);
    expect(vals).toEqual([{ i: 0, kind: 'near' }, { i: 29, kind: 'near' }, { i: 0, kind: 'far' }]);
    expect(cache.stats().cold!.hits).toBe(2);
  });

  it('dual-write puts values into HBase on write and archives them, so migration skips them', async () => {
    const table = tables[n++]!;
    const hot = new HotColdStore({ redis, cold, mode: 'dual-write' });
    const w = await hot.write(table, [{ key: 'd1', value: { d: 1 } }], { ttlSeconds: 60 });
    expect(w).toEqual({ written: 1, coldWritten: 1 });
    expect((await store.get(table, 'd1')) !== null).toBe(true);
    const r = await hot.migrateCold();
    expect(r).toMatchObject({ migrated: 0, alreadyArchived: 1 });
  });

  it("the cold family's TTL (HBase's own expiry) hides cells older than the TTL; fresh ones stay", async () => {
    const table = tables[4]!; // family TTL 3600 s
    const hot = new HotColdStore({ redis, cold });
    const now = Date.now();
    await hot.write(table, [
      { key: 'old', value: { age: 'two hours' }, ts: now - 2 * 3_600_000 },
      { key: 'new', value: { age: 'a minute' }, ts: now - 60_000 },
    ], { ttlSeconds: 600 });
    const r = await hot.migrateCold({ tables: [table] });
    expect(r.migrated).toBe(2);
    const cells = await cold.mget(table, ['old', 'new']);
    expect(cells[0]).toBeUndefined();
    expect(cells[1]?.ts).toBe(now - 60_000);
  });
});
