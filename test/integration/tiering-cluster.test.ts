// migrateCold() on a real 3-master Redis Cluster with a real HBase cold tier: the pass walks every
// master, archives exactly the near-expiry keys (each once, with its original timestamp), resumes
// from a checkpoint that names a master and its cursor, and a second pass writes nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import { requireClusterOrSkip, startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { ensureHBase, hbaseConfigured, type HBaseHarness } from '../helpers/hbase.js';
import type { HBaseStore } from '../../src/hbase/client.js';
import { FLAG_ARCHIVED, HBaseColdStore, coldTableDdl, decodeValue, readEnvelope } from '../../src/cache/index.js';
import { HotColdStore } from '../../src/tiering/index.js';

const hasCluster = requireClusterOrSkip('tiering cluster');
const hasHBase = hbaseConfigured('tiering cluster (hbase)');

describe.skipIf(!hasCluster || !hasHBase)('migrateCold: Redis Cluster -> real HBase', () => {
  let cl: RedisClusterHandle;
  let c: Cluster;
  let hb: HBaseHarness;
  let store: HBaseStore;
  let table: string;
  const T0 = Date.now() - 3_600_000;

  beforeAll(async () => {
    cl = await startRedisCluster();
    c = new Cluster(cl.nodes, { redisOptions: { commandTimeout: 5_000 } });
    hb = await ensureHBase();
    table = hb.uniqueName('tiercl');
    await hb.ddl(coldTableDdl(table));
    store = hb.store();
    await store.ready(table);
  });
  afterAll(async () => {
    c?.disconnect();
    await cl?.stop();
    if (table) await hb?.ddl(`drop ${table}`).catch(() => undefined);
    await hb?.release();
  });

  /** Keys under `pattern` on each node, asked of the node itself. */
  const perNode = async (pattern: string): Promise<number[]> =>
    Promise.all(
      cl.nodes.map(async ({ host, port }) => {
        const r = new Redis({ host, port });
        try {
          let n = 0;
          let cursor = '0';
          do {
            const [next, keys] = await r.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
            n += keys.length;
            cursor = next;
          } while (cursor !== '0');
          return n;
        } finally {
          r.disconnect();
        }
      }),
    );

  it('archives exactly the near-expiry keys of every master, resumably, once each', async () => {
    const cold = new HBaseColdStore({ store });
    const hot = new HotColdStore({ redis: c, cold });
    const near = Array.from({ length: 120 }, (_, i) => ({ key: `near${i}`, value: { i, kind: 'near' }, ts: T0 + i }));
    const far = Array.from({ length: 60 }, (_, i) => ({ key: `far${i}`, value: { i }, ts: T0 + 500 + i }));
    await hot.write(table, near, { ttlSeconds: 1_200 }); // 20 min left: under the 1 h threshold
    await hot.write(table, far); // 7 days
    const spread = await perNode(`hg:v:${table}:near*`);
    expect(spread.every((n) => n > 0)).toBe(true);

    const first = await hot.migrateCold({ batchSize: 10, maxBatches: 3 });
    expect(first).toMatchObject({ acquired: true, complete: false });
    expect(first.cursor).toMatch(/^[^/]+:\d+\/\d+$/);
    const rest = await hot.migrateCold({ batchSize: 10 });
    expect(rest.resumedFrom).toBe(first.cursor);
    expect(rest.complete).toBe(true);
    expect(first.migrated + rest.migrated).toBe(near.length);
    expect(first.scanned + rest.scanned).toBeGreaterThanOrEqual(near.length + far.length);

    const rows = await store.mget(table, [...near, ...far].map((e) => e.key));
    expect(rows.slice(0, near.length).every((row) => row !== null)).toBe(true);
    expect(rows.slice(near.length).every((row) => row === null)).toBe(true);
    expect(rows.slice(0, near.length).map((row) => row?.cells[0]?.timestamp)).toEqual(near.map((e) => e.ts));
    expect(decodeValue(rows[77]!.columns['c:v']!)).toEqual({ i: 77, kind: 'near' });
    for (const k of ['near0', 'near50', 'near119']) {
      expect(readEnvelope((await c.getBuffer(`hg:v:${table}:${k}`))!)!.flags & FLAG_ARCHIVED).toBe(FLAG_ARCHIVED);
    }
    expect(readEnvelope((await c.getBuffer(`hg:v:${table}:far3`))!)!.flags & FLAG_ARCHIVED).toBe(0);

    const again = await hot.migrateCold({ batchSize: 50 });
    expect(again).toMatchObject({ complete: true, migrated: 0, alreadyArchived: near.length });
    // a fresh pass once the checkpoint is gone; concurrent runs: one migrates, the other backs off
    const [a, b] = await Promise.all([hot.migrateCold({ batchSize: 50 }), new HotColdStore({ redis: c, cold }).migrateCold({ batchSize: 50 })]);
    expect([a.acquired, b.acquired].sort()).toEqual([false, true]);
    expect(a.migrated + b.migrated).toBe(0);
  }, 180_000);
});
