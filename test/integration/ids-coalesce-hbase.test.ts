// Merged ids.upsert calls on a real HBase: upsertMany runs each plan as its own compare-and-set,
// ordered per logical id, so random interleavings must still answer like the sequential model.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HBaseIdStore, IdRegistry } from 'hashgate/ids';
import { ensureHBase, hbaseConfigured, type HBaseHarness } from '../helpers/hbase.js';
import { checkInterleavings, countBatches, deterministic } from '../ids-coalesce-scenarios.js';

const ok = hbaseConfigured('ids coalescing (hbase)');

describe.skipIf(!ok)('ids.upsert coalescing on a real HBase', () => {
  let h: HBaseHarness;
  beforeAll(async () => {
    h = await ensureHBase();
  });
  afterAll(async () => {
    await h?.release();
  });

  it('random interleavings of concurrent upserts answer like the same upserts run one after another', async () => {
    const hb = h.store();
    // a JVM per created table is slow: the fresh tables (one per registry) come from one DDL batch
    const tables = Array.from({ length: 10 }, () => h.uniqueName('idsco'));
    await h.ddl(...tables.map((t) => `create ${t} -f raw -f m --replace`));
    const drop = [...tables];
    const open = (coalesce: { maxKeys: number; maxDelayMs: number } | false) =>
      new IdRegistry({ store: countBatches(new HBaseIdStore({ hbase: hb, table: tables.pop()! })), coalesce, ...deterministic() }) as IdRegistry & { store: { batches: number[] } };
    try {
      const sizes = await checkInterleavings(open, 5, 10);
      expect(Math.max(...sizes)).toBeGreaterThan(1);
    } finally {
      await h.ddl(...drop.map((t) => `drop ${t}`));
    }
  }, 600_000);
});
