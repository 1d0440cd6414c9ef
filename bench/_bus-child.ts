// One "service instance" for the multi-process invalidation-bus test and bench: a TieredCache with
// a bus plus a HotColdStore writing through it, driven over IPC by the parent (fork()).
// argv: redisUrl channel [blacklistTable]; HG_BUS_REPLAY=1 turns the replay log on. With a table (and HBASE_ZK) the instance also runs a
// Blacklist on that HBase table sharing the cache's bus. Every bus delivery is reported as {type:'evicted', table, keys, at}
// where `at` (epoch ms, sub-ms precision) is taken after the cache dropped the keys.
import { performance } from 'node:perf_hooks';
import { TieredCache } from '../src/cache/index.js';
import { HotColdStore } from '../src/tiering/index.js';
import type { CacheValue } from '../src/cache/types.js';
import { Blacklist, type BlacklistEntry, type BlacklistKey } from '../src/risk/blacklist.js';
import { HBaseStore } from '../src/hbase/client.js';

const [url, channel, blTable] = process.argv.slice(2);
const send = (m: unknown): void => {
  process.send?.(m);
};
const now = (): number => performance.timeOrigin + performance.now();

const cache = new TieredCache({
  redis: { url: url!, timeoutMs: 2_000 },
  bus: { channel: channel!, heartbeatMs: 500, ...(process.env['HG_BUS_REPLAY'] === '1' ? { replay: { maxEntries: 10_000 } } : {}) },
  local: { ttlMs: 600_000 },
  negativeTtlMs: 600_000,
});
const store = new HotColdStore({ redis: cache.redis as never, cache });
// registered after the cache's own listener, so the keys are already gone when this runs
cache.bus!.subscribe({
  keys: (table, keys) => send({ type: 'evicted', table, keys: [...keys], at: now() }),
  resync: () => send({ type: 'resync', at: now() }),
});

const hbase = blTable ? new HBaseStore({ zookeeper: process.env['HBASE_ZK']! }) : undefined;
const blacklist = hbase ? new Blacklist({ store: hbase, table: blTable!, rebuildIntervalMs: 0, expectedItems: 10_000, bus: cache.bus! }) : undefined;

interface Cmd {
  id: number;
  cmd: 'lookup' | 'write' | 'invalidate' | 'stats' | 'close' | 'blImport' | 'blCheck';
  blEntries?: BlacklistEntry[];
  blKeys?: BlacklistKey[];
  table: string;
  keys?: string[];
  entries?: Array<{ key: string; value: CacheValue }>;
}

process.on('message', (m: Cmd) => {
  void (async () => {
    try {
      switch (m.cmd) {
        case 'lookup':
          send({ id: m.id, values: await cache.lookup(m.table, m.keys!) });
          break;
        case 'write': {
          const t0 = now();
          await store.write(m.table, m.entries!);
          send({ id: m.id, t0, t1: now() });
          break;
        }
        case 'invalidate': {
          const t0 = now();
          cache.invalidate(m.table, m.keys!);
          send({ id: m.id, t0 });
          break;
        }
        case 'blImport': {
          const t0 = now();
          await blacklist!.importBlacklist(m.blEntries!);
          send({ id: m.id, t0 });
          break;
        }
        case 'blCheck':
          send({ id: m.id, answers: await blacklist!.isBlacklisted(m.blKeys!), stats: blacklist!.stats() });
          break;
        case 'stats':
          send({ id: m.id, cache: cache.stats(), bus: cache.bus!.stats() });
          break;
        case 'close':
          blacklist?.stop();
          await hbase?.close();
          await cache.close();
          send({ id: m.id });
          process.disconnect?.();
          break;
      }
    } catch (e) {
      send({ id: m.id, error: e instanceof Error ? e.message : String(e) });
    }
  })();
});

await cache.ready(10_000);
await blacklist?.start();
send({ type: 'ready', pid: process.pid });
