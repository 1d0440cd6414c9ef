import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureHBase, hbaseConfigured, type HBaseHarness } from '../helpers/hbase.js';
import type { HBaseStore } from '../../src/hbase/client.js';
import { HBaseIdStore, IdRegistry, logicalId, type CustomIdHash } from '../../src/ids/index.js';
import { checkGateRebuild, checkRepair, checkWeakHashScenario, privateGate, records, weak12 } from '../ids-scenarios.js';

const ok = hbaseConfigured('ids (hbase)');
const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Child processes run the built JS; rebuild when dist is missing or older than the sources. */
function ensureBuilt(): void {
  const newest = (dir: string): number =>
    Math.max(...readdirSync(dir).filter((f) => f.endsWith('.ts')).map((f) => statSync(join(dir, f)).mtimeMs));
  const srcTime = Math.max(newest(join(root, 'src/ids')), newest(join(root, 'src/hbase')), newest(join(root, 'src/hash')));
  const outs = ['dist/src/ids/hbase-store.js', 'dist/src/ids/registry.js', 'dist/src/hbase/client.js'].map((f) => join(root, f));
  const fresh = (): boolean => outs.every((f) => existsSync(f) && statSync(f).mtimeMs >= srcTime);
  if (fresh()) return;
  // tsc emits even when an unrelated file has type errors; what matters is that our outputs are fresh
  spawnSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: root, stdio: 'ignore' });
  if (!fresh()) throw new Error('tsc build for the multi-process test did not produce dist/src/{ids,hbase}');
}

// Each child is its own process with its own HBase connection; a start file on disk lines them up.
const CHILD = `
import { existsSync } from 'node:fs';
const { HBaseStore } = await import(process.env.HG_HB);
const { IdRegistry } = await import(process.env.HG_IDS);
const hb = new HBaseStore({ zookeeper: process.env.HG_ZK });
const reg = new IdRegistry({ hbase: hb, hbaseTable: process.env.HG_TABLE });
await hb.ready(process.env.HG_TABLE);
process.stderr.write('ready\\n');
while (!existsSync(process.env.HG_GO)) await new Promise((s) => setTimeout(s, 5));
const n = Number(process.env.HG_N);
const out = await Promise.all(Array.from({ length: n }, (_, i) => reg.upsert({ order: i, who: 'same-record' })));
process.stdout.write(JSON.stringify(out.map((o) => [o.status, o.physicalId])));
await hb.close();
`;

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
  }, 300_000);

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

  it('two processes upserting the same records at once: exactly one new per record', async () => {
    ensureBuilt();
    const t = await fresh();
    const go = join(tmpdir(), `hashgate-ids-hbase-go-${process.pid}`);
    const n = 30;
    let ready = 0;
    const child = (): Promise<Array<[string, string]>> => new Promise((res, rej) => {
      const c = spawn(process.execPath, ['--input-type=module', '-e', CHILD], {
        cwd: root, stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, HG_HB: join(root, 'dist/src/hbase/client.js'), HG_IDS: join(root, 'dist/src/ids/index.js'), HG_ZK: h.zookeeper, HG_TABLE: t, HG_GO: go, HG_N: String(n) },
      });
      let out = '';
      let err = '';
      c.stdout.on('data', (d) => (out += d));
      c.stderr.on('data', (d) => {
        err += d;
        if (String(d).includes('ready')) ready++;
      });
      c.on('exit', (code) => (code === 0 ? res(JSON.parse(out)) : rej(new Error(`child exited ${code}: ${err}`))));
    });
    const pa = child();
    const pb = child();
    while (ready < 2) await new Promise((s) => setTimeout(s, 20));
    writeFileSync(go, '1');
    try {
      const [a, b] = await Promise.all([pa, pb]);
      for (let i = 0; i < n; i++) {
        expect([a[i]![0], b[i]![0]].sort()).toEqual(['duplicate', 'new']);
        expect(a[i]![1]).toBe(b[i]![1]);
      }
    } finally {
      rmSync(go, { force: true });
    }
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
  }, 300_000);

  it('rebuildGate(): a reader with its own connection and a private gate finds, after a paged scan, every id another client wrote and repaired', async () => {
    const t = await fresh();
    const writer = new IdRegistry({ hbase: hb, hbaseTable: t, algorithm: weak12 });
    const { results } = await checkWeakHashScenario(writer, weak12, 400);
    await checkRepair(writer, results);
    const own = h.store();
    const reader = new IdRegistry({ hbase: own, hbaseTable: t, algorithm: weak12, gate: privateGate() });
    await checkGateRebuild(writer, reader, results, 64);
    await own.close();
  }, 300_000);
});
