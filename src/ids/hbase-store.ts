// HBase IdStore: row `b:<logical id>`, one column per physical id in family
// `raw` (the canonical raw), per-document metadata in family `m`. HBase has no scripts, so every
// insert is an optimistic compare-and-set on the bucket's version cell `m:v`: two processes that
// read the same bucket race on one checkAndPut, the loser re-reads and sees the winner's document
// (duplicate) or its different raw (collision). Exactly one 'new' per record, whatever the writers.
//
// Other rows: `p:<pid>` (m:lid, or m:alias after a merge), `c:<collision id>` (m:j JSON record),
// `x:<lid>` (logical ids with unrepaired collisions), `s:<0..15>` (sharded doc/collision counters,
// CAS-incremented so one hot counter row does not serialize all writers), `cfg` (m:epoch, m:active).
// DDL: create <table> -f raw -f m   (services/hbase/ddl.sh create hashgate_ids -f raw -f m)
import { randomInt } from 'node:crypto';
import type { HBaseRow, HBaseStore } from '../hbase/client.js';
import { HashGateError, ErrorCodes } from '../errors.js';
import type { CollisionRecord, IdPage, IdStore, IdStoreConfig, IdStoreStats, StoredDoc, UpsertOutcome, UpsertPlan } from './types.js';

export const HBASE_IDS_DEFAULTS = {
  table: 'hashgate_ids',
  counterShards: 16,
  /** CAS attempts before giving up on a bucket that keeps changing under us. */
  maxCasAttempts: 32,
} as const;

export interface HBaseIdStoreOptions {
  hbase: HBaseStore;
  table?: string;
}

const s = (b: Buffer | undefined): string | undefined => (b === undefined ? undefined : b.toString('utf8'));

interface Bucket {
  version: string | null;
  redirect: boolean;
  docs: StoredDoc[];
}

function parseBucket(lid: string, row: HBaseRow | null): Bucket {
  if (!row) return { version: null, redirect: false, docs: [] };
  const c = row.columns;
  const docs: StoredDoc[] = [];
  for (const [col, val] of Object.entries(c)) {
    if (!col.startsWith('raw:')) continue;
    const pid = col.slice(4);
    const d: StoredDoc = {
      physicalId: pid, logicalId: lid, raw: val.toString('utf8'), algorithm: s(c[`m:a:${pid}`]) ?? '',
      createdAt: Number(s(c[`m:c:${pid}`]) ?? 0), updatedAt: Number(s(c[`m:u:${pid}`]) ?? 0),
      collision: s(c[`m:x:${pid}`]) === '1',
    };
    const w = s(c[`m:w:${pid}`]);
    if (w) d.collisionWith = w;
    docs.push(d);
  }
  docs.sort((a, b) => a.createdAt - b.createdAt || (a.physicalId < b.physicalId ? -1 : 1));
  return { version: s(c['m:v']) ?? null, redirect: s(c['m:r']) === '1', docs };
}

export class HBaseIdStore implements IdStore {
  readonly kind = 'hbase';
  private readonly hb: HBaseStore;
  private readonly t: string;
  // Per logical id, the last upsertMany plan still in flight: later plans on that id start after it.
  private readonly tails = new Map<string, Promise<unknown>>();

  constructor(opts: HBaseIdStoreOptions) {
    this.hb = opts.hbase;
    this.t = opts.table ?? HBASE_IDS_DEFAULTS.table;
  }

  private async bump(field: 'docs' | 'collisions', by: number): Promise<void> {
    const row = `s:${randomInt(HBASE_IDS_DEFAULTS.counterShards)}`;
    for (let i = 0; i < HBASE_IDS_DEFAULTS.maxCasAttempts; i++) {
      const r = await this.hb.get(this.t, row, { columns: [`m:${field}`] });
      const cur = s(r?.columns[`m:${field}`]);
      if (await this.hb.checkAndPut(this.t, row, { column: `m:${field}`, value: cur ?? null }, { [`m:${field}`]: String(Number(cur ?? 0) + by) })) return;
    }
    throw new HashGateError(ErrorCodes.STORE, `ids: counter ${row} kept changing`);
  }

  async upsert(p: UpsertPlan): Promise<UpsertOutcome> {
    const primary = p.lids[0] as string;
    for (let attempt = 0; attempt < HBASE_IDS_DEFAULTS.maxCasAttempts; attempt++) {
      const rows = await this.hb.mget(this.t, ['cfg', ...p.lids.map((l) => `b:${l}`)]);
      const cfg = rows[0];
      const epoch = Number(s(cfg?.columns['m:epoch']) ?? 0);
      if (epoch !== p.epoch) return { status: 'stale', epoch, active: s(cfg?.columns['m:active']) ?? '' };
      const buckets = p.lids.map((l, i) => parseBucket(l, rows[i + 1] ?? null));
      for (let i = 0; i < buckets.length; i++) {
        const d = (buckets[i] as Bucket).docs.find((x) => x.raw === p.raw);
        if (d) {
          await this.hb.put(this.t, `b:${p.lids[i]}`, { [`m:u:${d.physicalId}`]: String(p.now) });
          return { status: 'duplicate', physicalId: d.physicalId, logicalId: p.lids[i] as string };
        }
      }
      const b = buckets[0] as Bucket;
      if (b.redirect) return { status: 'redirect' };
      const first = b.docs[0];
      const pid = p.physicalId;
      const values: Record<string, string> = {
        [`raw:${pid}`]: p.raw, 'm:v': String(Number(b.version ?? 0) + 1),
        [`m:c:${pid}`]: String(p.now), [`m:u:${pid}`]: String(p.now), [`m:a:${pid}`]: p.algorithm, [`m:x:${pid}`]: first ? '1' : '0',
      };
      if (first) values[`m:w:${pid}`] = first.physicalId;
      if (!(await this.hb.checkAndPut(this.t, `b:${primary}`, { column: 'm:v', value: b.version }, values))) continue;
      await this.hb.put(this.t, `p:${pid}`, { 'm:lid': primary });
      await this.bump('docs', 1);
      if (!first) return { status: 'new', physicalId: pid, logicalId: primary };
      const record: CollisionRecord = {
        id: p.collisionId, hashId: primary, algorithm: p.algorithm, doc1Id: first.physicalId, doc2Id: pid,
        doc1Snapshot: first.raw, doc2Snapshot: p.raw, detectedAt: p.now, status: 'pending', resolvedAt: null,
      };
      await this.hb.mput(this.t, [
        { row: `c:${record.id}`, values: { 'm:j': JSON.stringify(record) } },
        { row: `x:${primary}`, values: { 'm:x': '1' } },
      ]);
      await this.bump('collisions', 1);
      return { status: 'collision', physicalId: pid, logicalId: primary, record };
    }
    throw new HashGateError(ErrorCodes.STORE, `ids: bucket ${primary} kept changing during upsert`);
  }

  /**
   * The client has no batched conditional mutation, so this is not one round trip: every plan is
   * its own read and compare-and-set, as in upsert(). Plans on different logical ids run
   * concurrently; a plan waits for the earlier plans (of this batch or one still in flight) that
   * share a logical id with it, so the answers are those of running the plans in order.
   */
  upsertMany(plans: readonly UpsertPlan[]): Promise<UpsertOutcome[]> {
    return Promise.all(plans.map((p) => {
      const before: Promise<unknown>[] = [];
      for (const l of p.lids) {
        const t = this.tails.get(l);
        if (t !== undefined) before.push(t);
      }
      const run = before.length === 0 ? this.upsert(p) : Promise.all(before).then(() => this.upsert(p));
      const settled: Promise<unknown> = run.then(
        () => this.untail(p.lids, settled),
        () => this.untail(p.lids, settled),
      );
      for (const l of p.lids) this.tails.set(l, settled);
      return run;
    }));
  }

  // Forgets a finished plan unless a later one already waits behind it (holds in-flight plans only).
  private untail(lids: readonly string[], settled: Promise<unknown>): void {
    for (const l of lids) if (this.tails.get(l) === settled) this.tails.delete(l);
  }

  async getDoc(physicalId: string): Promise<StoredDoc | undefined> {
    let pid = physicalId;
    let idx = await this.hb.get(this.t, `p:${pid}`);
    const alias = s(idx?.columns['m:alias']);
    if (alias) {
      pid = alias;
      idx = await this.hb.get(this.t, `p:${pid}`);
    }
    const lid = s(idx?.columns['m:lid']);
    if (!lid) return undefined;
    return (await this.bucket(lid)).docs.find((d) => d.physicalId === pid);
  }

  async bucket(lid: string): Promise<{ docs: StoredDoc[]; redirect: boolean }> {
    const b = parseBucket(lid, await this.hb.get(this.t, `b:${lid}`));
    return { docs: b.docs, redirect: b.redirect };
  }

  async collisions(): Promise<CollisionRecord[]> {
    const out: CollisionRecord[] = [];
    for await (const r of this.hb.scanIterator(this.t, { prefix: 'c:' })) {
      const j = s(r.columns['m:j']);
      if (j) out.push(JSON.parse(j) as CollisionRecord);
    }
    return out;
  }

  async collidedLogicalIds(): Promise<string[]> {
    const out: string[] = [];
    for await (const r of this.hb.scanIterator(this.t, { prefix: 'x:' })) out.push(r.key.toString('utf8').slice(2));
    return out;
  }

  private docColumns(pid: string): string[] {
    return [`raw:${pid}`, `m:c:${pid}`, `m:u:${pid}`, `m:a:${pid}`, `m:x:${pid}`, `m:w:${pid}`];
  }

  async merge(lid: string, keep: string, drop: string[]): Promise<void> {
    const b = parseBucket(lid, await this.hb.get(this.t, `b:${lid}`));
    for (const pid of drop) {
      if (pid === keep) continue;
      await this.hb.put(this.t, `p:${pid}`, { 'm:alias': keep });
      if (b.docs.some((d) => d.physicalId === pid)) {
        await this.hb.delete(this.t, `b:${lid}`, { columns: this.docColumns(pid) });
        await this.bump('docs', -1);
      }
    }
  }

  async move(lid: string, physicalId: string, newLid: string, raw: string, algorithm: string): Promise<void> {
    await this.hb.put(this.t, `b:${lid}`, { 'm:r': '1' });
    const old = parseBucket(lid, await this.hb.get(this.t, `b:${lid}`)).docs.find((d) => d.physicalId === physicalId);
    if (!old) return;
    for (let i = 0; i < HBASE_IDS_DEFAULTS.maxCasAttempts; i++) {
      const nb = parseBucket(newLid, await this.hb.get(this.t, `b:${newLid}`));
      const values: Record<string, string> = {
        [`raw:${physicalId}`]: raw, 'm:v': String(Number(nb.version ?? 0) + 1), [`m:c:${physicalId}`]: String(old.createdAt),
        [`m:u:${physicalId}`]: String(old.updatedAt), [`m:a:${physicalId}`]: algorithm, [`m:x:${physicalId}`]: '0',
      };
      if (await this.hb.checkAndPut(this.t, `b:${newLid}`, { column: 'm:v', value: nb.version }, values)) {
        await this.hb.put(this.t, `p:${physicalId}`, { 'm:lid': newLid });
        await this.hb.delete(this.t, `b:${lid}`, { columns: this.docColumns(physicalId) });
        return;
      }
    }
    throw new HashGateError(ErrorCodes.STORE, `ids: bucket ${newLid} kept changing during repair`);
  }

  async resolveCollisions(lid: string, update: (r: CollisionRecord) => CollisionRecord | undefined): Promise<number> {
    let n = 0;
    for (const r of await this.collisions()) {
      if (r.hashId !== lid || r.status !== 'pending') continue;
      const u = update(r);
      if (u) {
        await this.hb.put(this.t, `c:${r.id}`, { 'm:j': JSON.stringify(u) });
        n++;
      }
    }
    return n;
  }

  async clearCollided(lid: string): Promise<void> {
    await this.hb.delete(this.t, `x:${lid}`);
  }

  async stats(): Promise<IdStoreStats> {
    const rows = await this.hb.mget(this.t, Array.from({ length: HBASE_IDS_DEFAULTS.counterShards }, (_, i) => `s:${i}`));
    const st: IdStoreStats = { docs: 0, collisions: 0 };
    for (const r of rows) {
      st.docs += Number(s(r?.columns['m:docs']) ?? 0);
      st.collisions += Number(s(r?.columns['m:collisions']) ?? 0);
    }
    return st;
  }

  async config(): Promise<IdStoreConfig> {
    const r = await this.hb.get(this.t, 'cfg');
    return { epoch: Number(s(r?.columns['m:epoch']) ?? 0), active: s(r?.columns['m:active']) ?? '' };
  }

  async escalate(active: string): Promise<IdStoreConfig> {
    for (let i = 0; i < HBASE_IDS_DEFAULTS.maxCasAttempts; i++) {
      const cur = await this.hb.get(this.t, 'cfg');
      const epoch = s(cur?.columns['m:epoch']) ?? null;
      if ((s(cur?.columns['m:active']) ?? '') === active) return { epoch: Number(epoch ?? 0), active };
      const next = String(Number(epoch ?? 0) + 1);
      if (await this.hb.checkAndPut(this.t, 'cfg', { column: 'm:epoch', value: epoch }, { 'm:epoch': next, 'm:active': active })) {
        return { epoch: Number(next), active };
      }
    }
    throw new HashGateError(ErrorCodes.STORE, 'ids: config row kept changing during escalation');
  }

  /**
   * Logical ids by a range scan over the `b:` rows ('b;' is the first key past them), at most
   * `limit` rows per page, reading only the version and redirect cells; the cursor is the last id.
   */
  async listLogicalIds(cursor: string | undefined, limit: number): Promise<IdPage> {
    const rows = await this.hb.scan(this.t, {
      startRow: cursor === undefined ? 'b:' : `b:${cursor}\0`, stopRow: 'b;', limit, columns: ['m:v', 'm:r'],
    });
    const ids = rows.map((r) => r.key.toString('utf8').slice(2));
    return { ids, cursor: rows.length === limit ? ids[ids.length - 1] : undefined };
  }

  async close(): Promise<void> {
    // the HBaseStore belongs to the caller
  }
}
