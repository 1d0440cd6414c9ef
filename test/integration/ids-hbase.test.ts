import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureHBase, hbaseConfigured, type HBaseHarness } from '../helpers/hbase.js';
import type { HBaseStore } from '../../src/stores/hbase.js';
import { HBaseIdStore, IdRegistry, logicalId, type CustomIdHash } from '../../src/ids/index.js';
import { checkRepair, checkWeakHashScenario, records, weak12 } from '../ids-scenarios.js';

const ok = hbaseConfigured('ids (hbase)');

describe.skipIf(!ok)('IdRegistry on a real HBase (checkAndPut)', () => {
  let h: HBaseHarness;
  let hb: HBaseStore;
  const fresh = (): Promise<string> => h.createTable('ids', ['raw', 'm']);
  beforeAll(async () => {
    h = await ensureHBase();
    hb = h.store();
  });
  afterAll(async () => {
    await h?.release();
  });

  it('row = logical hash, one raw column per physical id; statuses, collision records, repair', async () => {
    const t = await fresh();
    const reg = new IdRegistry({ hbase: hb, hbaseTable: t, algorithm: weak12 });
    expect(reg.store.kind).toBe('hbase');
    const { results } = await checkWeakHashScenario(reg, weak12, 400);
    const col = results.find((x) => x.status === 'collision')!;
    const row = await hb.get(t, `b:${col.id}`);
    const rawCols = Object.keys(row!.columns).filter((c) => c.startsWith('raw:'));
    expect(rawCols.length).toBeGreaterThan(1);
    expect(rawCols).toContain(`raw:${col.physicalId}`);
    await checkRepair(reg, results);
  }, 600_000);

  it('concurrent upserts from independent clients: exactly one new per record (checkAndPut)', async () => {
    const t = await fresh();
    const clients = [h.store(), h.store()];
    const regs = clients.map((c) => new IdRegistry({ store: new HBaseIdStore({ hbase: c, table: t }) }));
    const recs = records(40, 'hb-race');
    const out = await Promise.all(recs.flatMap((rec) => regs.map((g) => g.upsert(rec))));
    for (let i = 0; i < recs.length; i++) {
      const pair = [out[2 * i]!, out[2 * i + 1]!];
      expect(pair.map((p) => p.status).sort()).toEqual(['duplicate', 'new']);
      expect(pair[0]!.physicalId).toBe(pair[1]!.physicalId);
    }
    expect((await regs[0]!.stats()).docs).toBe(40);
  }, 300_000);

  it('colliding distinct records racing on one row: one new, the rest collisions', async () => {
    const t = await fresh();
    const constHash: CustomIdHash = { name: 'const', hash: () => 'same' };
    const regs = [0, 1, 2].map(() => new IdRegistry({ hbase: hb, hbaseTable: t, algorithm: constHash }));
    const recs = records(10, 'hb-col');
    const out = await Promise.all(recs.flatMap((rec) => regs.map((g) => g.upsert(rec))));
    expect(out.filter((o) => o.status === 'new').length).toBe(1);
    expect(out.filter((o) => o.status === 'collision').length).toBe(9);
    expect(out.filter((o) => o.status === 'duplicate').length).toBe(20);
    expect((await regs[0]!.collisions('pending')).length).toBe(9);
  }, 300_000);

  it('escalation to SHA-256 through the cfg row; old documents still found', async () => {
    const t = await fresh();
    const a = new IdRegistry({ hbase: hb, hbaseTable: t, algorithm: weak12, escalation: { threshold: 0.01, minDocuments: 100 } });
    const b = new IdRegistry({ hbase: hb, hbaseTable: t, algorithm: weak12 });
    const recs = records(1500, 'hb-esc'); // 12-bit ids pass 1% collisions after ~100-200 documents
    const done: Array<{ physicalId: string; id: string }> = [];
    let i = 0;
    for (; i < recs.length && a.activeAlgorithm !== 'sha256'; i++) done.push(await a.upsert(recs[i]));
    expect(a.activeAlgorithm).toBe('sha256');
    const o = await b.upsert(recs[i]);
    expect(o.id).toBe(logicalId(recs[i], 'sha256'));
    for (let j = 0; j < done.length; j += 25) {
      expect(await b.upsert(recs[j])).toMatchObject({ status: 'duplicate', physicalId: done[j]!.physicalId, id: done[j]!.id });
    }
  }, 600_000);
});
