// Collision-safe logical ids: documents live under a unique physical id and are
// found through their logical hash; upsert tells new / duplicate / collision apart by comparing
// the canonical raw, never by trusting the hash.
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { canonicalJson } from '../hash/index.js';
import { checkInt, checkKnownKeys, checkNumber, invalidType, HashGateError, ErrorCodes } from '../errors.js';
import { algorithmName, checkAlgorithm, hashCanonical, type IdAlgorithm } from './logical-id.js';
import { MemoryIdStore } from './memory-store.js';
import { RedisIdStore } from './redis-store.js';
import { HBaseIdStore } from './hbase-store.js';
import type { HBaseStore } from '../hbase/client.js';
import type { CollisionRecord, IdStore, StoredDoc, UpsertStatus } from './types.js';
import { isSharedGate, type SharedGate } from '../bloom/shared-gate.js';
import { Coalescer, parseCoalesceOptions, type CoalesceOptions } from '../util/coalescer.js';
import type { UpsertOutcome, UpsertPlan } from './types.js';

export const DEFAULTS = {
  algorithm: 'murmur3_128' as IdAlgorithm,
  keyPrefix: 'ids',
  escalation: { threshold: 1e-6, minDocuments: 1000 },
  /** Bounded retries when another process escalated or repaired between our hash and our write. */
  maxRetries: 4,
  /** Logical ids per store listing call and per gate call in rebuildGate(). */
  rebuildPageSize: 1000,
} as const;

export interface IdRegistryOptions {
  /** Storage: an IdStore instance; omitted = `redis` if given, else embedded memory. */
  store?: IdStore;
  /** Standalone or Cluster (on a Cluster one registry's keys share the slot of `{keyPrefix}`). */
  redis?: Redis | Cluster;
  /** Redis key prefix (default 'ids'). */
  keyPrefix?: string;
  /** HBase adapter; documents go to table `hbaseTable` (families raw, m). Used when no store/redis. */
  hbase?: HBaseStore;
  /** default 'hashgate_ids' */
  hbaseTable?: string;
  /** Logical-id hash: 'murmur3_128' (default), 'murmur3_128+len', 'sha256' or { name, hash }. */
  algorithm?: IdAlgorithm;
  /**
   * Move new writes to SHA-256 once collisions/documents exceeds `threshold`, with
   * at least `minDocuments` stored. Old documents stay findable: lookups also probe the old id.
   * false (default) = never escalate.
   */
  escalation?: false | { threshold?: number; minDocuments?: number };
  /** Canonical serializer; default src/hash canonicalJson. */
  canonicalize?: (value: unknown) => string;
  now?: () => number;
  /** Physical id generator; must be unique across processes (default randomUUID). */
  newId?: () => string;
  /**
   * A Bloom gate of logical ids shared by every instance (src/bloom/shared-gate.ts): upsert adds
   * the ids before writing, find() answers "not stored" without a store call when the gate has
   * never seen them. The gate must cover every stored id: a gate that is not shared by every
   * writer since the store was empty (a process-local filter, a replica that missed messages)
   * must be filled with `rebuildGate()` before find() relies on it.
   */
  gate?: SharedGate;
  /**
   * Merge concurrent upserts into one store batch (src/util/coalescer.ts; stores with
   * `upsertMany`: all built-in ones). Merged calls answer as if run one after another in call
   * order. Default on ({ maxKeys: 128, maxDelayMs: 0 }); inside a HashGate the gate's `coalesce`
   * applies unless this one is set. false = one store call per upsert.
   */
  coalesce?: CoalesceOptions | false;
}

/** One upsert waiting in the coalescer for its batch. */
interface PendingUpsert {
  plan: UpsertPlan;
  resolve: (o: UpsertOutcome) => void;
  reject: (e: unknown) => void;
}

export interface UpsertResult {
  /** Logical id the document is stored under. */
  id: string;
  physicalId: string;
  status: UpsertStatus;
  algorithm: string;
  /** Present when status is 'collision'. */
  collision?: CollisionRecord;
}

export interface RepairReport {
  logicalIds: number;
  merged: number;
  rehashed: number;
  resolvedRecords: number;
}

export interface IdRegistryStats {
  docs: number;
  collisions: number;
  collisionRate: number;
  activeAlgorithm: string;
}

export interface IdRegistryEvents {
  collision: [CollisionRecord];
  escalated: [{ from: string; to: string; collisionRate: number }];
}

export class IdRegistry extends EventEmitter<IdRegistryEvents> {
  readonly store: IdStore;
  private readonly algorithm: IdAlgorithm;
  private readonly canonicalize: (v: unknown) => string;
  private readonly now: () => number;
  private readonly newId: () => string;
  private readonly escalation: { threshold: number; minDocuments: number } | undefined;
  private epoch = 0;
  private escalated = false;
  private loaded: Promise<void> | undefined;
  private readonly gate: SharedGate | undefined;
  /** find() calls answered by the gate alone. */
  gateShortCircuits = 0;
  private readonly co: Coalescer<PendingUpsert> | undefined;
  // With a gate: resolves once the last flushed batch has been handed to the store (keeps batches in flush order).
  private storeTail: Promise<void> = Promise.resolve();

  constructor(options: IdRegistryOptions = {}) {
    super();
    if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options);
    checkKnownKeys('ids', options, ['store', 'redis', 'keyPrefix', 'hbase', 'hbaseTable', 'algorithm', 'escalation', 'canonicalize', 'now', 'newId', 'gate', 'coalesce']);
    if (options.escalation) checkKnownKeys('ids.escalation', options.escalation, ['threshold', 'minDocuments']);
    this.algorithm = checkAlgorithm('ids.algorithm', options.algorithm ?? DEFAULTS.algorithm);
    if (options.store) this.store = options.store;
    else if (options.redis) this.store = new RedisIdStore({ client: options.redis, keyPrefix: options.keyPrefix ?? DEFAULTS.keyPrefix });
    else if (options.hbase) this.store = new HBaseIdStore(options.hbaseTable === undefined ? { hbase: options.hbase } : { hbase: options.hbase, table: options.hbaseTable });
    else this.store = new MemoryIdStore();
    if (options.canonicalize !== undefined && typeof options.canonicalize !== 'function') throw invalidType('ids.canonicalize', 'a function', options.canonicalize);
    this.canonicalize = options.canonicalize ?? canonicalJson;
    if (options.now !== undefined && typeof options.now !== 'function') throw invalidType('ids.now', 'a function', options.now);
    this.now = options.now ?? Date.now;
    if (options.newId !== undefined && typeof options.newId !== 'function') throw invalidType('ids.newId', 'a function', options.newId);
    this.newId = options.newId ?? randomUUID;
    if (options.gate !== undefined && !isSharedGate(options.gate)) throw invalidType('ids.gate', 'an object with addAll() and containsAll()', options.gate);
    this.gate = options.gate;
    const co = parseCoalesceOptions(options.coalesce, 'ids.coalesce');
    this.co = co === false || this.store.upsertMany === undefined ? undefined : new Coalescer<PendingUpsert>(co, (items) => this.flushUpserts(items));
    const e = options.escalation;
    if (e !== undefined && e !== false) {
      if (e === null || typeof e !== 'object') throw invalidType('ids.escalation', 'false or { threshold, minDocuments }', e);
      this.escalation = {
        threshold: checkNumber('ids.escalation.threshold', e.threshold ?? DEFAULTS.escalation.threshold, 0, 1),
        minDocuments: checkInt('ids.escalation.minDocuments', e.minDocuments ?? DEFAULTS.escalation.minDocuments, 0),
      };
    }
  }

  get activeAlgorithm(): string {
    return this.escalated ? 'sha256' : algorithmName(this.algorithm);
  }

  /** Logical id under the configured (pre-escalation) algorithm. */
  logicalId(record: unknown): string {
    return hashCanonical(this.canonicalize(record), this.algorithm);
  }

  private async ensureConfig(): Promise<void> {
    this.loaded ??= this.store.config().then((c) => this.applyConfig(c.epoch, c.active));
    await this.loaded;
  }

  private applyConfig(epoch: number, active: string): void {
    this.epoch = epoch;
    this.escalated = active === 'sha256' && algorithmName(this.algorithm) !== 'sha256';
  }

  private lidsFor(canonical: string): string[] {
    const base = hashCanonical(canonical, this.algorithm);
    return this.escalated ? [hashCanonical(canonical, 'sha256'), base] : [base];
  }

  async upsert(record: unknown): Promise<UpsertResult> {
    const raw = this.canonicalize(record);
    // checked before the call can join a batch: a bad record must reject its own call only
    if (typeof raw !== 'string') throw invalidType('ids.canonicalize() result', 'a string', raw);
    await this.ensureConfig();
    let lids = this.lidsFor(raw);
    let algorithm = this.activeAlgorithm;
    for (let attempt = 0; attempt <= DEFAULTS.maxRetries; attempt++) {
      const out = await this.send({
        lids, raw, physicalId: this.newId(), collisionId: this.newId(), algorithm, now: this.now(), epoch: this.epoch,
      });
      if (out.status === 'stale') {
        this.applyConfig(out.epoch, out.active);
        lids = this.lidsFor(raw);
        algorithm = this.activeAlgorithm;
        continue;
      }
      if (out.status === 'redirect') {
        // repairCollisions re-id'd this logical id: its documents now live under SHA-256
        const strong = hashCanonical(raw, 'sha256');
        lids = [strong, ...lids.filter((l) => l !== strong)];
        algorithm = 'sha256';
        continue;
      }
      const res: UpsertResult = { id: out.logicalId, physicalId: out.physicalId, status: out.status, algorithm };
      if (out.status === 'collision' && out.record) {
        res.collision = out.record;
        this.emit('collision', out.record);
        await this.maybeEscalate();
      }
      return res;
    }
    throw new HashGateError(ErrorCodes.STORE, `ids.upsert: gave up after ${DEFAULTS.maxRetries} config/redirect retries`);
  }

  // One plan to the store: queued for the next merged batch, or sent alone when coalescing is
  // off. Either way the gate learns the ids before the store writes them: a crash between the two
  // costs a false positive, never a false negative.
  private async send(plan: UpsertPlan): Promise<UpsertOutcome> {
    const co = this.co;
    if (co === undefined) {
      if (this.gate) await this.gate.addAll(plan.lids);
      return this.store.upsert(plan);
    }
    return new Promise<UpsertOutcome>((resolve, reject) => co.add({ plan, resolve, reject }, 1));
  }

  // Sends one batch: the store applies the plans in order, each caller gets its own outcome, and a
  // store failure rejects every caller of the batch with that error. Without a gate the store
  // call starts here, synchronously, so batches reach the store in flush order; with one, each
  // batch waits for its gate write and for the previous batch to have been sent.
  private flushUpserts(items: PendingUpsert[]): void {
    const co = this.co as Coalescer<PendingUpsert>;
    const store = this.store as Required<Pick<IdStore, 'upsertMany'>> & IdStore;
    const plans = items.map((it) => it.plan);
    const start = (): Promise<UpsertOutcome[]> => {
      try {
        return store.upsertMany(plans);
      } catch (e) {
        return Promise.reject(e);
      }
    };
    let run: Promise<UpsertOutcome[]>;
    if (this.gate) {
      let sent: Promise<UpsertOutcome[]> | undefined;
      const gated = Promise.all([this.gate.addAll(plans.flatMap((p) => p.lids)), this.storeTail]).then(() => {
        sent = start();
      });
      this.storeTail = gated.catch(() => undefined);
      run = gated.then(() => sent as Promise<UpsertOutcome[]>);
    } else run = start();
    run.then(
      (outs) => {
        co.done();
        if (outs.length !== items.length) {
          const e = new HashGateError(ErrorCodes.STORE, `ids.upsert: store answered ${outs.length} outcomes for ${items.length} upserts`);
          for (const it of items) it.reject(e);
          return;
        }
        for (let i = 0; i < items.length; i++) (items[i] as PendingUpsert).resolve(outs[i] as UpsertOutcome);
      },
      (e: unknown) => {
        co.done();
        for (const it of items) it.reject(e);
      },
    );
  }

  private async maybeEscalate(): Promise<void> {
    if (!this.escalation || this.escalated) return;
    const s = await this.store.stats();
    const rate = s.docs === 0 ? 0 : s.collisions / s.docs;
    if (s.docs >= this.escalation.minDocuments && rate > this.escalation.threshold) {
      const from = this.activeAlgorithm;
      const c = await this.store.escalate('sha256');
      this.applyConfig(c.epoch, c.active);
      this.emit('escalated', { from, to: 'sha256', collisionRate: rate });
    }
  }

  /** The stored document whose canonical raw equals `record`'s, wherever its id lives. */
  async find(record: unknown): Promise<StoredDoc | undefined> {
    const raw = this.canonicalize(record);
    await this.ensureConfig();
    const lids = this.lidsFor(raw);
    if (this.gate && !(await this.gate.containsAll(lids)).includes(1)) {
      this.gateShortCircuits++;
      return undefined;
    }
    for (let i = 0; i < lids.length; i++) {
      const b = await this.store.bucket(lids[i] as string);
      const d = b.docs.find((x) => x.raw === raw);
      if (d) return d;
      if (b.redirect && i === lids.length - 1) lids.push(hashCanonical(raw, 'sha256'));
    }
    return undefined;
  }

  /** All documents sharing a logical id (more than one = collision). */
  async byLogicalId(id: string): Promise<StoredDoc[]> {
    return (await this.store.bucket(id)).docs;
  }

  /** Document by physical id; ids merged away by repair resolve to the kept document. */
  async get(physicalId: string): Promise<StoredDoc | undefined> {
    return this.store.getDoc(physicalId);
  }

  async collisions(status?: 'pending' | 'resolved'): Promise<CollisionRecord[]> {
    const all = await this.store.collisions();
    return (status ? all.filter((r) => r.status === status) : all).sort((a, b) => a.detectedAt - b.detectedAt || (a.id < b.id ? -1 : 1));
  }

  async stats(): Promise<IdRegistryStats> {
    await this.ensureConfig();
    const s = await this.store.stats();
    return { ...s, collisionRate: s.docs === 0 ? 0 : s.collisions / s.docs, activeAlgorithm: this.activeAlgorithm };
  }

  /**
   * The repair job: for every logical id holding more than one document, merge
   * documents with the same canonical raw (pseudo-collisions) and move true collisions to
   * SHA-256 ids. Idempotent: a second run finds nothing to do. Run it from one process at a time.
   */
  async repairCollisions(): Promise<RepairReport> {
    const report: RepairReport = { logicalIds: 0, merged: 0, rehashed: 0, resolvedRecords: 0 };
    for (const lid of await this.store.collidedLogicalIds()) {
      report.logicalIds++;
      const { docs } = await this.store.bucket(lid);
      // re-canonicalize: documents written with an older/other serializer compare equal here
      const groups = new Map<string, StoredDoc[]>();
      for (const d of docs.sort((a, b) => a.createdAt - b.createdAt || (a.physicalId < b.physicalId ? -1 : 1))) {
        const c = this.canonicalize(JSON.parse(d.raw));
        const g = groups.get(c);
        if (g) g.push(d);
        else groups.set(c, [d]);
      }
      const newIds: Record<string, string> = {};
      const mergedInto: Record<string, string> = {};
      for (const [, g] of groups) {
        const keep = g[0] as StoredDoc;
        if (g.length > 1) {
          const drop = g.slice(1).map((d) => d.physicalId);
          await this.store.merge(lid, keep.physicalId, drop);
          for (const p of drop) mergedInto[p] = keep.physicalId;
          report.merged += drop.length;
        }
      }
      if (groups.size > 1) {
        for (const [c, g] of groups) {
          const keep = g[0] as StoredDoc;
          const strong = hashCanonical(c, 'sha256');
          const there = (await this.store.bucket(strong)).docs.find((d) => d.raw === c && d.physicalId !== keep.physicalId);
          if (there) {
            await this.store.merge(lid, there.physicalId, [keep.physicalId]);
            mergedInto[keep.physicalId] = there.physicalId;
            report.merged++;
          } else {
            await this.store.move(lid, keep.physicalId, strong, c, 'sha256');
            newIds[keep.physicalId] = strong;
            report.rehashed++;
          }
        }
      }
      const now = this.now();
      report.resolvedRecords += await this.store.resolveCollisions(lid, (r) => {
        const same = this.canonicalize(JSON.parse(r.doc1Snapshot)) === this.canonicalize(JSON.parse(r.doc2Snapshot));
        const ids: Record<string, string> = {};
        for (const p of [r.doc1Id, r.doc2Id]) {
          const target = mergedInto[p] ?? p;
          const l = newIds[target];
          if (l) ids[p] = l;
        }
        return { ...r, status: 'resolved', resolvedAt: now, resolution: same ? 'merged' : 'rehashed', newIds: ids };
      });
      await this.store.clearCollided(lid);
    }
    return report;
  }

  /**
   * Loads every logical id the store holds into the gate, page by page (`pageSize` ids per store
   * call and per gate call, so memory stays bounded whatever the store's size), through the gate's
   * loadAll() when it has one (a rebuild re-publishes nothing) else addAll(). Returns how many ids
   * were loaded. Ids upserted during the rebuild reach the gate through upsert() itself.
   */
  async rebuildGate(options: { pageSize?: number } = {}): Promise<number> {
    if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options);
    checkKnownKeys('options', options, ['pageSize']);
    const pageSize = checkInt('options.pageSize', options.pageSize ?? DEFAULTS.rebuildPageSize, 1, 1_000_000);
    const gate = this.gate;
    if (!gate) return 0;
    const store = this.store;
    if (typeof store.listLogicalIds !== 'function') {
      throw new HashGateError(ErrorCodes.INVALID_ARG, `ids.rebuildGate: the ${store.kind} store cannot list its logical ids (IdStore.listLogicalIds)`);
    }
    let n = 0;
    let cursor: string | undefined;
    do {
      const page = await store.listLogicalIds(cursor, pageSize);
      if (page.ids.length) await (gate.loadAll ? gate.loadAll(page.ids) : gate.addAll(page.ids));
      n += page.ids.length;
      cursor = page.cursor;
    } while (cursor !== undefined);
    return n;
  }

  async close(): Promise<void> {
    await this.co?.drain();
    await this.store.close();
  }
}
