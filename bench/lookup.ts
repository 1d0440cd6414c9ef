// Lookups/s through the tiered cache, tier by tier, against the same tier used directly:
// Bloom-gated absent keys, local LRU hits, batched Redis hits, batched HBase hits (when HBase is
// reachable), vs lru-cache alone, raw MGET, and one awaited GET per key.
import { LRUCache } from 'lru-cache';
import { Redis } from 'ioredis';
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Suite, makeKeys, repoRoot, size, type SuiteOptions, type SuiteResult } from './common.js';
import { startBenchRedis } from './redis-server.js';
import { TieredCache, MemoryColdStore, HBaseColdStore, coldTableDdl, encodeValue, type ColdStore } from '../src/cache/index.js';
import { HBaseStore } from '../src/hbase/client.js';
import { HotColdStore } from '../src/tiering/index.js';
import { BloomFilter } from '../src/bloom/index.js';

const TABLE = 'bench';



/**
 * Optional HBase cold tier: measured only when HBASE_ZK says where the HBase of services/hbase
 * runs (.ci/run exports it). The bench table is created through services/hbase/ddl.sh.
 */
async function openHBaseCold(): Promise<{ cold: ColdStore; table: string; getPerKey: (keys: string[]) => Promise<number>; close(): Promise<void> } | undefined> {
  const zk = process.env.HBASE_ZK;
  if (!zk) return undefined;
  try {
    const table = 'hg_bench_lookup';
    const port = zk.split(',')[0]!.split(':')[1] ?? '21810';
    const ddl = spawnSync(join(repoRoot(), 'services', 'hbase', 'ddl.sh'), [...coldTableDdl(table).split(' ')], {
      env: { ...process.env, HBASE_ZK_PORT: port },
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (ddl.status !== 0) throw new Error(`ddl.sh failed: ${(ddl.stderr || ddl.stdout || '').slice(-500)}`);
    const store = new HBaseStore({ zookeeper: zk });
    await store.ready(table);
    const cold = new HBaseColdStore({ store });
    return {
      cold,
      table,
      getPerKey: async (keys) => {
        for (const k of keys) await store.get(table, k, { columns: ['c:v'] });
        return keys.length;
      },
      close: () => store.close(),
    };
  } catch (e) {
    console.warn(`[lookup] HBase rows skipped: ${e instanceof Error ? e.message : String(e)}`);
    return undefined;
  }
}

function batches(keys: string[], b: number): string[][] {
  const out: string[][] = [];
  for (let i = 0; i + b <= keys.length; i += b) out.push(keys.slice(i, i + b));
  return out;
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('lookup', opts);
  // the box is shared: record how busy it was, absolute rates move with it (ratios much less)
  const load0 = loadavg()[0]!;
  const N = size(opts, 100_000, 4_000);
  const B = size(opts, 1_000, 200);
  // makeKeys builds each key by appending characters, leaving V8 ropes; keys read from a socket or
  // file are flat strings, so flatten them once (otherwise every concat re-walks the rope)
  const flat = (ks: string[]): string[] => ks.map((k) => Buffer.from(k, 'utf8').toString('utf8'));
  const present = flat(makeKeys(N, 'B', 11));
  const absent = flat(makeKeys(N, 'B', 12));
  const presentBatches = batches(present, B);
  const absentBatches = batches(absent, B);
  const value = { level: 3, reason: 'bench', updateTime: 1_700_000_000_000 };
  const runs = opts.quick ? 2 : 5;

  const expectAll = (vals: unknown[], want: 'present' | 'absent'): boolean | string =>
    vals.every((v) => (want === 'absent' ? v === undefined : (v as { level?: number })?.level === 3)) || `wrong ${want} answers`;

  // --- Bloom-gated absent keys (no I/O) vs lru-cache alone missing the same keys
  const bloom = BloomFilter.create({ expectedItems: N, fpp: 0.001 });
  for (const k of present) bloom.add(k);
  const gated = new TieredCache({ bloom, local: { maxEntries: N * 2 }, negativeTtlMs: 0 });
  await s.sample({
    name: 'absent keys (Bloom gate)', impl: 'hashgate TieredCache', runs, extra: { batch: B },
    check: async () => {
      const r = await gated.lookup(TABLE, absentBatches[0]!);
      return expectAll(r, 'absent') === true && gated.stats().local.misses < B / 10 ? true : 'gate let keys through';
    },
    fn: async () => {
      for (const b of absentBatches) await gated.lookup(TABLE, b);
      return absentBatches.length * B;
    },
  });
  // the peer: the same question asked of an lru-cache holding the present keys (no gate)
  const lruAbsent = new LRUCache<string, object>({ max: N * 2, ttl: 3_600_000 });
  for (const k of present) lruAbsent.set(k, value);
  await s.sample({
    name: 'absent keys (Bloom gate)', impl: 'lru-cache get (miss, populated)', role: 'peer', runs,
    fn: () => {
      let miss = 0;
      for (const k of absent) if (lruAbsent.get(k) === undefined) miss++;
      return miss;
    },
  });

  // --- local LRU hits vs lru-cache alone
  const cold = new MemoryColdStore();
  await cold.mput(TABLE, present.map((key) => ({ key, value: encodeValue(value), ts: 1 })));
  const local = new TieredCache({ cold, local: { maxEntries: N * 2, maxBytes: 512 * 1024 * 1024, ttlMs: 3_600_000 } });
  for (const b of presentBatches) await local.lookup(TABLE, b);
  await s.sample({
    name: 'LRU hits', impl: 'hashgate TieredCache', runs, extra: { batch: B },
    check: async () => {
      const before = cold.counters.mgetCalls;
      const r = await local.lookup(TABLE, presentBatches[0]!);
      return cold.counters.mgetCalls === before ? expectAll(r, 'present') : 'reached the cold tier';
    },
    fn: async () => {
      for (const b of presentBatches) await local.lookup(TABLE, b);
      return presentBatches.length * B;
    },
  });
  const lru = new LRUCache<string, object>({ max: N * 2, ttl: 3_600_000 });
  for (const k of present) lru.set(k, value);
  await s.sample({
    name: 'LRU hits', impl: 'lru-cache get', role: 'peer', runs,
    fn: () => {
      let hit = 0;
      for (const k of present) if (lru.get(k) !== undefined) hit++;
      return hit;
    },
  });
  const lruHits = s.find('LRU hits', 'hashgate TieredCache')?.opsPerSec;
  s.target('LRU hits', '>=', 3_000_000, lruHits, ' lookups/s');

  // --- Redis hits (batched)
  const srv = await startBenchRedis('lookup');
  if (!srv) {
    s.note('redis-server not available: Redis rows not measured');
    s.target('batched Redis hits', '>=', 100_000, null, ' lookups/s', 'redis-server not installed');
  } else {
    const admin = new Redis(srv.url);
    try {
      const hot = new HotColdStore({ redis: admin });
      for (let i = 0; i < present.length; i += 5_000) {
        await hot.write(TABLE, present.slice(i, i + 5_000).map((key) => ({ key, value })));
      }
      // local tier of one entry: every key below it is a Redis hit (and pays its backfill)
      const viaRedis = new TieredCache({ redis: { url: srv.url, batchSize: B }, local: { maxEntries: 1 } });
      await viaRedis.ready();
      await s.sample({
        name: `Redis hits (batch ${B})`, impl: 'hashgate TieredCache', runs, extra: { batch: B },
        check: async () => {
          const r = await viaRedis.lookup(TABLE, presentBatches[1]!);
          return viaRedis.stats().redis!.hits >= B ? expectAll(r, 'present') : 'not served by Redis';
        },
        fn: async () => {
          for (const b of presentBatches) await viaRedis.lookup(TABLE, b);
          return presentBatches.length * B;
        },
      });
      const rkeys = presentBatches.map((b) => b.map((k) => `hg:v:${TABLE}:${k}`));
      await s.sample({
        name: `Redis hits (batch ${B})`, impl: 'ioredis MGET (raw bytes, no decode)', role: 'peer', runs,
        fn: async () => {
          let n = 0;
          for (const b of rkeys) n += (await admin.mgetBuffer(...b)).length;
          return n;
        },
      });
      const few = rkeys.slice(0, opts.quick ? 1 : 5).flat();
      await s.sample({
        name: `Redis hits (batch ${B})`, impl: 'ioredis GET per key (awaited)', role: 'baseline', runs,
        fn: async () => {
          for (const k of few) await admin.getBuffer(k);
          return few.length;
        },
      });
      s.target('batched Redis hits', '>=', 100_000, s.find(`Redis hits (batch ${B})`, 'hashgate TieredCache')?.opsPerSec, ' lookups/s');
      await viaRedis.close();
    } finally {
      admin.disconnect();
      await srv.stop();
    }
  }

  // --- HBase hits (batched mget), only when the HBase service is reachable
  const hb = await openHBaseCold();
  if (!hb) {
    s.note('HBase not reachable (HBASE_ZK unset or ddl failed): HBase rows not measured');
  } else {
    try {
      const nH = opts.quick ? 500 : 5_000;
      const keysH = present.slice(0, nH);
      const now = Date.now();
      for (let i = 0; i < nH; i += 500) {
        await hb.cold.mput(hb.table, keysH.slice(i, i + 500).map((key) => ({ key, value: encodeValue(value), ts: now })));
      }
      const sizes = opts.quick ? [100] : [10, 100, 500];
      for (const bs of sizes) {
        const viaHBase = new TieredCache({ cold: hb.cold, coldOptions: { batchSize: bs, timeoutMs: 30_000 }, local: { maxEntries: 1 } });
        const bb = batches(keysH, bs);
        await s.sample({
          name: `HBase hits (batch ${bs})`, impl: 'hashgate TieredCache', runs: opts.quick ? 1 : 3, extra: { batch: bs },
          check: async () => expectAll(await viaHBase.lookup(hb.table, bb[0]!), 'present'),
          fn: async () => {
            for (const b of bb) await viaHBase.lookup(hb.table, b);
            return bb.length * bs;
          },
        });
        const rawStore = (hb.cold as HBaseColdStore).store;
        await s.sample({
          name: `HBase hits (batch ${bs})`, impl: 'HBaseStore.mget (raw rows, no decode)', role: 'peer', runs: opts.quick ? 1 : 3, extra: { batch: bs },
          fn: async () => {
            for (const b of bb) await rawStore.mget(hb.table, b, { columns: ['c:v'] });
            return bb.length * bs;
          },
        });
        await s.sample({
          name: `HBase hits (batch ${bs})`, impl: 'HBase get per key (awaited)', role: 'baseline', runs: opts.quick ? 1 : 2,
          fn: () => hb.getPerKey(keysH.slice(0, opts.quick ? 50 : 300)),
        });
        await viaHBase.close();
      }
    } finally {
      await hb.close();
    }
  }
  await gated.close();
  await local.close();
  s.note(`1-min load average ${load0.toFixed(1)} at start, ${loadavg()[0]!.toFixed(1)} at end, on ${s.quick ? 'a quick run' : 'a full run'}`);
  const lruRatio = s.ratio('LRU hits', 'hashgate TieredCache', 'lru-cache get');
  const redisRatio = s.ratio(`Redis hits (batch ${B})`, 'hashgate TieredCache', 'ioredis MGET (raw bytes, no decode)');
  if (lruRatio !== undefined) s.note(`LRU hits through the full lookup path = ${lruRatio.toFixed(2)}x lru-cache.get alone`);
  if (redisRatio !== undefined) s.note(`Redis hits (decode + local backfill included) = ${redisRatio.toFixed(2)}x a raw MGET of the same keys`);
  return s.finish();
}

const isMain = process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isMain) {
  run({ quick: process.argv.includes('--quick') }).catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
