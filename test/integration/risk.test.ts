// Risk tables on a real HBase: blacklist (batch import, Bloom-gated batch checks, rebuild),
// behaviour history (salted, reversed-timestamp keys; newest first across salts), point checks.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { Blacklist, BLACKLIST_FAMILIES, type BlacklistKey } from '../../src/risk/blacklist.js';
import { BehaviorHistory, historySplitKeys } from '../../src/risk/history.js';
import { RiskCheck } from '../../src/risk/risk-check.js';
import type { HBaseStore } from '../../src/hbase/client.js';
import { hbaseConfigured, ensureHBase, type HBaseHarness } from '../helpers/hbase.js';

describe.skipIf(!hbaseConfigured('risk tables integration'))('risk tables (real HBase)', () => {
  let hb: HBaseHarness;
  let store: HBaseStore;
  let blTable: string;
  let histTable: string;
  let riskTable: string;

  beforeAll(async () => {
    hb = await ensureHBase();
    store = hb.store();
    blTable = hb.uniqueName('blacklist');
    histTable = hb.uniqueName('history');
    riskTable = hb.uniqueName('risk');
    // one JVM for the three tables; history pre-split on its 8 salts
    await hb.ddl(
      `create ${blTable} ${BLACKLIST_FAMILIES.map((f) => `-f ${f}`).join(' ')} -s CARD_1,CARD_5 --replace`,
      `create ${histTable} -f e:bloom=ROW -s ${historySplitKeys(8).join(',')} --replace`,
      `create ${riskTable} -f base -f risk --replace`,
    );
  });
  afterAll(async () => {
    if (hb) await hb.ddl(`drop ${blTable}`, `drop ${histTable}`, `drop ${riskTable}`).catch(() => undefined);
    await hb?.release();
  });

  describe('blacklist', () => {
    const entry = (i: number): BlacklistKey => ({ userType: 'CARD', blacklistType: String(i % 10), userId: `u${i}` });
    let bl: Blacklist;

    it('start() builds the filter from the rows already in the table', async () => {
      await store.mput(blTable, [{ row: 'CARD_0_pre1', values: { 'base:status': '1' } }]);
      bl = new Blacklist({ store, table: blTable, expectedItems: 10_000, fpp: 0.001, rebuildIntervalMs: 0 });
      await bl.start();
      expect(bl.stats().lastRebuildKeys).toBe(1);
      expect(await bl.isBlacklisted([{ userType: 'CARD', blacklistType: '0', userId: 'pre1' }])).toEqual([true]);
    });

    it('importBlacklist writes in batches; batch checks find exactly the imported keys', async () => {
      const entries = Array.from({ length: 1200 }, (_, i) => ({ ...entry(i), reason: `r${i}`, updateTime: 1_700_000_000_000 + i }));
      const res = await bl.importBlacklist(entries, { batch: 500 });
      expect(res).toEqual({ imported: 1200, batches: 3 });
      const probe = [entry(0), entry(1199), { userType: 'CARD', blacklistType: '3', userId: 'never' }, entry(7)];
      expect(await bl.isBlacklisted(probe)).toEqual([true, true, false, true]);
      const [rec] = await bl.lookup([entry(42)]);
      expect(rec).toEqual({ userType: 'CARD', blacklistType: '2', userId: 'u42', status: '1', reason: 'r42', updateTime: 1_700_000_000_042 });
    });

    it('absent keys are answered by the Bloom filter with zero HBase calls', async () => {
      const absent = Array.from({ length: 200 }, (_, i) => ({ userType: 'VIP', blacklistType: '9', userId: `nobody${i}` }));
      const before = bl.stats();
      store.resetCallCounts();
      const res = await bl.isBlacklisted(absent);
      expect(res.every((b) => b === false)).toBe(true);
      // 1.2 k keys in a filter sized for 10 k at 0.1 %: these fixed keys all miss it (deterministic)
      expect(bl.stats().bloomNegatives - before.bloomNegatives).toBe(200);
      const counts = store.callCounts();
      expect(Object.values(counts.rpcs).reduce((a, b) => a + b, 0)).toBe(0);
      expect(counts.ops.mget).toBe(0);
    });

    it('status 0 is not blacklisted; removal is immediate, the filter forgets it on rebuild', async () => {
      await bl.importBlacklist([{ userType: 'CARD', blacklistType: '1', userId: 'cleared', status: '0' }]);
      expect(await bl.isBlacklisted([{ userType: 'CARD', blacklistType: '1', userId: 'cleared' }])).toEqual([false]);
      await bl.removeFromBlacklist([entry(5)]);
      expect(await bl.isBlacklisted([entry(5)])).toEqual([false]);
      const fp = bl.stats().falsePositives;
      expect(fp).toBeGreaterThanOrEqual(1); // entry(5) passed the stale filter and missed in HBase
      await bl.rebuild();
      expect(bl.stats().lastRebuildKeys).toBe(1 + 1200 + 1 - 1);
      store.resetCallCounts();
      expect(await bl.isBlacklisted([entry(5)])).toEqual([false]);
      expect(store.callCounts().ops.mget).toBe(0);
      bl.stop();
    });
  });

  describe('behaviour history', () => {
    const T0 = 1_750_000_000_000;
    let h: BehaviorHistory;

    beforeAll(async () => {
      h = new BehaviorHistory({ store, table: histTable, salts: 8, spread: 4 });
      const events = [];
      for (let i = 0; i < 60; i++) events.push({ userId: 'alice', type: i % 3 === 0 ? 'TRANS' : 'LOGIN', ts: T0 + i * 1000, data: `a${i}` });
      for (let i = 0; i < 20; i++) events.push({ userId: 'bob', type: 'TRANS', ts: T0 + i * 500 });
      // same user, same ms, same type: eventIds keep both
      events.push({ userId: 'carol', type: 'LOGIN', ts: T0, eventId: 'e1' }, { userId: 'carol', type: 'LOGIN', ts: T0, eventId: 'e2' });
      await h.appendEvents(events);
    });

    it('one user\'s row keys spread over `spread` salts starting at the hash of the user', async () => {
      const salts = new Set((await store.scan(histTable)).filter((r) => r.key.toString().includes('|alice|'))
        .map((r) => r.key.toString().slice(0, 2)));
      expect(salts.size).toBeGreaterThan(1);
      expect([...salts].every((s) => h.saltsOf('alice').includes(parseInt(s, 16)))).toBe(true);
    });

    it('queries merge the salts newest first: by user, user+type, user+time range, limit', async () => {
      const all = await h.query({ userId: 'alice', limit: 1000 });
      expect(all.map((e) => e.ts)).toEqual(Array.from({ length: 60 }, (_, i) => T0 + (59 - i) * 1000));
      expect(all[0]!.data!.toString()).toBe('a59');

      const trans = await h.query({ userId: 'alice', type: 'TRANS', limit: 1000 });
      expect(trans.map((e) => e.ts)).toEqual(Array.from({ length: 20 }, (_, i) => T0 + (57 - i * 3) * 1000));

      const range = await h.query({ userId: 'alice', from: T0 + 10_000, to: T0 + 20_000 });
      expect(range.map((e) => e.ts)).toEqual(Array.from({ length: 10 }, (_, i) => T0 + (19 - i) * 1000));

      const top3 = await h.query({ userId: 'alice', limit: 3 });
      expect(top3.map((e) => e.ts)).toEqual([T0 + 59_000, T0 + 58_000, T0 + 57_000]);

      expect((await h.query({ userId: 'bob', limit: 1000 })).length).toBe(20);
      expect((await h.query({ userId: 'carol' })).map((e) => e.eventId).sort()).toEqual(['e1', 'e2']);
      expect(await h.query({ userId: 'nobody' })).toEqual([]);
      // 'ali' is a prefix of 'alice' but a different user
      expect(await h.query({ userId: 'ali' })).toEqual([]);
    });
  });

  describe('risk_check point checks', () => {
    it('latest record per (scene, user) with one reversed scan', async () => {
      const rc = new RiskCheck({ store, table: riskTable });
      await rc.recordRisks([
        { scene: 'LOAN', userId: '10086', ts: 1_633_027_200_000, level: 'LOW' },
        { scene: 'LOAN', userId: '10086', ts: 1_633_027_300_000, level: 'HIGH', reason: 'velocity' },
        { scene: 'LOAN', userId: '100861', ts: 1_733_027_300_000, level: 'MID' },
        { scene: 'PAY', userId: '10086', ts: 1_833_027_300_000, level: 'LOW' },
      ]);
      store.resetCallCounts();
      expect(await rc.latestRisk('LOAN', '10086')).toEqual({ scene: 'LOAN', userId: '10086', ts: 1_633_027_300_000, level: 'HIGH', reason: 'velocity' });
      expect(store.callCounts().ops.scan).toBe(1);
      expect(await rc.latestRisk('LOAN', 'nobody')).toBeNull();
      const batch = await rc.latestRiskBatch([
        { scene: 'PAY', userId: '10086' }, { scene: 'LOAN', userId: '100861' }, { scene: 'PAY', userId: 'x' },
      ]);
      expect(batch.map((r) => r?.level ?? null)).toEqual(['LOW', 'MID', null]);
    });
  });
});
