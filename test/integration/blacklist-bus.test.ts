// Blacklist changes over the invalidation bus, on a real HBase and a real redis-server: an import
// on instance A reaches instance B's Bloom filter within the bus delay (B answers "blacklisted"
// without a rebuild), a cache in front of the blacklist table drops its entries on removal, and a
// bus outage makes B rebuild its filter from the table.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Blacklist, BLACKLIST_FAMILIES } from '../../src/entries/hbase.js';
import { InvalidationBus, TieredCache } from '../../src/entries/cache.js';
import { createMetrics } from '../../src/index.js';
import type { HBaseStore } from '../../src/hbase/client.js';
import { ensureHBase, hbaseConfigured, type HBaseHarness } from '../helpers/hbase.js';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { parseExposition, sampleValue } from '../helpers/exposition.js';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { startInstance, type Instance } from '../../bench/_fleet.js';

const CHILD = join(process.cwd(), 'dist/bench/_bus-child.js');

const hasRedis = requireRedisOrSkip('blacklist bus');
const until = async (cond: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe.skipIf(!hasRedis || !hbaseConfigured('blacklist bus'))('blacklist over the invalidation bus (real HBase + Redis)', () => {
  let hb: HBaseHarness;
  let store: HBaseStore;
  let table: string;
  let srv: RedisServer;
  beforeAll(async () => {
    srv = await startRedis();
    hb = await ensureHBase();
    store = hb.store();
    table = hb.uniqueName('blbus');
    await hb.ddl(`create ${table} ${BLACKLIST_FAMILIES.map((f) => `-f ${f}`).join(' ')} --replace`);
  });
  afterAll(async () => {
    if (hb) await hb.ddl(`drop ${table}`).catch(() => undefined);
    await hb?.release();
    await srv?.stop();
  });

  it('3 processes: a user blacklisted on A is blacklisted on B and C without a rebuild', async () => {
    if (!existsSync(CHILD)) throw new Error('run `npm run build` first: the instances run dist/bench/_bus-child.js');
    const t3 = hb.uniqueName('blbus3');
    await hb.ddl(`create ${t3} ${BLACKLIST_FAMILIES.map((f) => `-f ${f}`).join(' ')} --replace`);
    const fleet: Instance[] = [];
    try {
      // the quorum of the HBase this suite uses, which the helper may have started itself
      for (let i = 0; i < 3; i++) fleet.push(await startInstance(CHILD, srv.url, 'bl3', t3, false, hb.zookeeper));
      const [a, b, c] = fleet as [Instance, Instance, Instance];
      const who = { userType: 'PHONE', blacklistType: '2', userId: '13800000000' };
      type Check = { answers: boolean[]; stats: { rebuilds: number } };
      for (const x of [b, c]) expect((await x.call<Check>('blCheck', { blKeys: [who] })).answers).toEqual([false]);
      await a.call('blImport', { blEntries: [{ ...who, reason: 'chargeback' }] });
      for (const x of [b, c]) {
        await x.evictionOf(t3, 'PHONE_2_13800000000', 5_000);
        const r = await x.call<Check>('blCheck', { blKeys: [who] });
        expect(r.answers).toEqual([true]);
        expect(r.stats.rebuilds).toBe(0);
      }
    } finally {
      for (const x of fleet) x.kill();
      await hb.ddl(`drop ${t3}`).catch(() => undefined);
    }
  }, 120_000);

  it('an import on A is blacklisted on B before any rebuild; a bus outage makes B rebuild', async () => {
    const busA = new InvalidationBus({ url: srv.url, channel: 'bl' });
    const busB = new InvalidationBus({ url: srv.url, channel: 'bl', heartbeatMs: 200 });
    await Promise.all([busA.ready(), busB.ready()]);
    const a = new Blacklist({ store, table, rebuildIntervalMs: 0, expectedItems: 10_000, bus: busA });
    const b = new Blacklist({ store, table, rebuildIntervalMs: 0, expectedItems: 10_000, bus: busB });
    await Promise.all([a.start(), b.start()]);
    const who = { userType: 'CARD', blacklistType: '1', userId: '张三-6222' };
    expect(await b.isBlacklisted([who])).toEqual([false]); // B's filter: definitely absent
    await a.importBlacklist([{ ...who, reason: 'fraud' }]);
    await until(() => busB.stats().received >= 1);
    // without the bus B's filter would still say "absent" until its next rebuild
    expect(await b.isBlacklisted([who])).toEqual([true]);
    expect(b.stats().rebuilds).toBe(0);

    // a cache in front of the blacklist table on B drops its copy when A removes the entry
    const cache = new TieredCache({ bus: busB, negativeTtlMs: 60_000 });
    await cache.lookup(table, ['CARD_1_张三-6222']);
    expect(cache.stats().local.entries).toBe(1);
    await a.removeFromBlacklist([who]);
    await until(() => cache.stats().local.entries === 0);
    expect(await b.isBlacklisted([who])).toEqual([false]); // HBase says gone; the filter only keeps a false positive

    // bus outage: B re-subscribes and rebuilds its filter from the table (it may have missed adds)
    await srv.kill('SIGKILL');
    await srv.restart();
    // the publisher reconnects on its own schedule: wait for both connections, not only the resync
    await until(() => busB.stats().resyncs === 1 && b.stats().rebuilds === 1 && busB.stats().connected, 15_000);

    const m = createMetrics();
    const off = m.busSource('blacklist', () => busB.stats());
    const fam = parseExposition(await m.text());
    expect(sampleValue(fam, 'hashgate_bus_messages_received_total', { bus: 'blacklist' })).toBe(busB.stats().received);
    expect(sampleValue(fam, 'hashgate_bus_local_clears_total', { bus: 'blacklist' })).toBe(1);
    expect(sampleValue(fam, 'hashgate_bus_connected', { bus: 'blacklist' })).toBe(1);
    expect(sampleValue(fam, 'hashgate_bus_delivery_lag_seconds', { bus: 'blacklist', quantile: '0.99' })).toBeGreaterThan(0);
    off();
    // counters of a closed source are kept, never go backwards
    expect(sampleValue(parseExposition(await m.text()), 'hashgate_bus_local_clears_total', { bus: 'blacklist' })).toBe(1);
    a.stop();
    b.stop();
    await cache.close();
    await busA.close();
    await busB.close();
  }, 120_000);
});
