// Embedded IdStore for the no-Redis default. Single-threaded JS makes each method atomic.
import type { CollisionRecord, IdPage, IdStore, IdStoreConfig, IdStoreStats, StoredDoc, UpsertOutcome, UpsertPlan } from './types.js';

interface Bucket {
  docs: Map<string, StoredDoc>;
  redirect: boolean;
}

export class MemoryIdStore implements IdStore {
  readonly kind = 'memory';
  private readonly buckets = new Map<string, Bucket>();
  /** Bucket ids in creation order, so a listing cursor is a plain index (buckets are never dropped). */
  private readonly order: string[] = [];
  private readonly docs = new Map<string, StoredDoc>();
  private readonly aliases = new Map<string, string>();
  private readonly records = new Map<string, CollisionRecord>();
  private readonly collided = new Set<string>();
  private readonly st: IdStoreStats = { docs: 0, collisions: 0 };
  private cfg: IdStoreConfig = { epoch: 0, active: '' };

  private bucketOf(lid: string, create: boolean): Bucket | undefined {
    let b = this.buckets.get(lid);
    if (!b && create) {
      b = { docs: new Map(), redirect: false };
      this.buckets.set(lid, b);
      this.order.push(lid);
    }
    return b;
  }

  async upsert(p: UpsertPlan): Promise<UpsertOutcome> {
    if (p.epoch !== this.cfg.epoch) return { status: 'stale', epoch: this.cfg.epoch, active: this.cfg.active };
    for (const lid of p.lids) {
      const b = this.buckets.get(lid);
      if (!b) continue;
      for (const d of b.docs.values()) {
        if (d.raw === p.raw) {
          d.updatedAt = p.now;
          return { status: 'duplicate', physicalId: d.physicalId, logicalId: lid };
        }
      }
    }
    const lid = p.lids[0] as string;
    const b = this.bucketOf(lid, true) as Bucket;
    if (b.redirect) return { status: 'redirect' };
    const first = b.docs.values().next();
    const doc: StoredDoc = {
      physicalId: p.physicalId, logicalId: lid, raw: p.raw, algorithm: p.algorithm,
      createdAt: p.now, updatedAt: p.now, collision: !first.done,
    };
    if (!first.done) doc.collisionWith = first.value.physicalId;
    b.docs.set(p.physicalId, doc);
    this.docs.set(p.physicalId, doc);
    this.st.docs++;
    if (first.done) return { status: 'new', physicalId: p.physicalId, logicalId: lid };
    const record: CollisionRecord = {
      id: p.collisionId, hashId: lid, algorithm: p.algorithm,
      doc1Id: first.value.physicalId, doc2Id: p.physicalId,
      doc1Snapshot: first.value.raw, doc2Snapshot: p.raw,
      detectedAt: p.now, status: 'pending', resolvedAt: null,
    };
    this.records.set(record.id, record);
    this.collided.add(lid);
    this.st.collisions++;
    return { status: 'collision', physicalId: p.physicalId, logicalId: lid, record: { ...record } };
  }

  /** upsert() never awaits, so each call below runs to completion before the next one starts. */
  upsertMany(plans: readonly UpsertPlan[]): Promise<UpsertOutcome[]> {
    return Promise.all(plans.map((p) => this.upsert(p)));
  }

  async getDoc(physicalId: string): Promise<StoredDoc | undefined> {
    const d = this.docs.get(this.aliases.get(physicalId) ?? physicalId);
    return d ? { ...d } : undefined;
  }

  async bucket(lid: string): Promise<{ docs: StoredDoc[]; redirect: boolean }> {
    const b = this.buckets.get(lid);
    return { docs: b ? [...b.docs.values()].map((d) => ({ ...d })) : [], redirect: b?.redirect ?? false };
  }

  async collisions(): Promise<CollisionRecord[]> {
    return [...this.records.values()].map((r) => ({ ...r }));
  }

  async collidedLogicalIds(): Promise<string[]> {
    return [...this.collided];
  }

  async merge(lid: string, keep: string, drop: string[]): Promise<void> {
    const b = this.buckets.get(lid);
    for (const pid of drop) {
      if (pid === keep) continue;
      b?.docs.delete(pid);
      if (this.docs.delete(pid)) this.st.docs--;
      this.aliases.set(pid, keep);
    }
  }

  async move(lid: string, physicalId: string, newLid: string, raw: string, algorithm: string): Promise<void> {
    const from = this.bucketOf(lid, true) as Bucket;
    from.redirect = true;
    const d = this.docs.get(physicalId);
    if (!d || d.logicalId === newLid) return;
    from.docs.delete(physicalId);
    if (from.docs.size === 0 && !from.redirect) this.buckets.delete(lid);
    Object.assign(d, { logicalId: newLid, raw, algorithm, collision: false });
    delete d.collisionWith;
    (this.bucketOf(newLid, true) as Bucket).docs.set(physicalId, d);
  }

  async resolveCollisions(lid: string, update: (r: CollisionRecord) => CollisionRecord | undefined): Promise<number> {
    let n = 0;
    for (const r of this.records.values()) {
      if (r.hashId !== lid || r.status !== 'pending') continue;
      const u = update({ ...r });
      if (u) {
        this.records.set(r.id, u);
        n++;
      }
    }
    return n;
  }

  async clearCollided(lid: string): Promise<void> {
    this.collided.delete(lid);
  }

  async stats(): Promise<IdStoreStats> {
    return { ...this.st };
  }

  async config(): Promise<IdStoreConfig> {
    return { ...this.cfg };
  }

  async escalate(active: string): Promise<IdStoreConfig> {
    if (this.cfg.active !== active) this.cfg = { epoch: this.cfg.epoch + 1, active };
    return { ...this.cfg };
  }

  async listLogicalIds(cursor: string | undefined, limit: number): Promise<IdPage> {
    const from = cursor === undefined ? 0 : Number(cursor);
    const ids = this.order.slice(from, from + limit).filter((l) => this.buckets.has(l));
    const next = from + limit;
    return { ids, cursor: next < this.order.length ? String(next) : undefined };
  }

  async close(): Promise<void> {}
}
