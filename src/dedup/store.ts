// The storage behind DedupService: one interface, an embedded in-memory implementation (default
// when no Redis is configured), a durable embedded one (lmdb-store.ts) and a Redis one (redis-store.ts).
import { ErrorCodes, HashGateError } from '../errors.js';
import type { Layout } from './options.js';
import type { Member } from './layout.js';
import { DigestTable } from './digest-table.js';

/**
 * Pending keys of one firstSeen call, grouped by bucket (group g = members[starts[g]..starts[g+1]))
 * or, for the Redis store without a request id, not grouped: then `bucket` gives each member's
 * bucket and the group arrays are empty.
 */
export interface StoreBatch {
  window: string;
  layout: Layout;
  buckets: number;
  /** Bucket of each group. */
  groupBuckets: Uint32Array;
  groupKeys: string[];
  starts: Uint32Array;
  /** Ungrouped batches: bucket of member j. */
  bucket?: Uint32Array;
  /** Members in group order. */
  count: number;
  member(j: number): Member;
  /** Compact layout: member j is the int64 of digest `idx[j]` (lets Redis encode it without a string). */
  compact?: { dv: DataView; idx: Uint32Array };
  /** The call's 16-byte digests and, per member j, the index of its digest (the journal keeps digests). */
  digests: Uint8Array;
  idx: Uint32Array;
  /**
   * Redis store: the call's request id. Its commands then keep a record of the keys they answered
   * 1, so a command resent after its reply was lost returns the original answers (see FIRST_SEEN_ONCE).
   */
  requestId?: string;
  /** Lifetime of that record; default dedup.requestTtlMs. */
  requestTtlMs?: number | undefined;
}

/**
 * A store error with what is known about the batch: `done[j]` = 1 when member j (in group order)
 * was acknowledged and `answers[j]` (1 = new) holds its answer; members with done 0 were not.
 * `unknown` false: none of those was applied (never sent, or refused before running); true: some
 * may have been (sent, and the reply never came).
 */
export class StoreBatchError extends HashGateError {
  constructor(
    message: string,
    readonly done: Uint8Array,
    readonly answers: Uint8Array,
    cause: unknown,
    readonly unknown = false,
  ) {
    super(ErrorCodes.STORE_UNAVAILABLE, message, { cause });
    this.name = 'StoreBatchError';
  }
}

export interface DedupStore {
  readonly kind: 'memory' | 'redis' | 'lmdb';
  /**
   * Bucket count recorded for the window (first writer wins), or `configured` if none yet. With
   * `record` false nothing is written: readers (stats) must never fix a window's bucketing.
   */
  resolveBuckets(window: string, layout: Layout, configured: number, record?: boolean): Promise<number>;
  /** Atomically add every member; answers[j] = 1 when member j was not in its bucket before. */
  addBatch(batch: StoreBatch, answers: Uint8Array): Promise<void>;
  /** Exact and approximate members of a window; `largestBucket` where the store keeps buckets as separate sets (Redis). */
  count(window: string, layout: Layout, buckets: number): Promise<{ exact: number; approximate: number; largestBucket?: number; subBuckets?: number }>;
  purge(window: string): Promise<number>;
  close(): Promise<void>;
}

const memberString = (m: Member): string => (typeof m === 'string' ? Buffer.from(m, 'utf8') : m).toString('latin1');


/**
 * Embedded store. 'sets': a Set of raw members per (window, bucket key); 'compact': one
 * DigestTable per window. Bounded by `maxKeys` over all windows.
 */
export class MemoryStore implements DedupStore {
  readonly kind = 'memory' as const;
  private readonly sets = new Map<string, Map<string, Set<string>>>();
  /** Compact layout: one digest table per window (the bucket is part of each entry). */
  private readonly tables = new Map<string, DigestTable>();
  private readonly meta = new Map<string, number>();
  private total = 0;

  constructor(private readonly maxKeys: number) {}

  async resolveBuckets(window: string, layout: Layout, configured: number, record = true): Promise<number> {
    const k = `${window}\u0000${layout}`;
    const b = this.meta.get(k);
    if (b !== undefined) return b;
    if (record) this.meta.set(k, configured);
    return configured;
  }

  async addBatch(batch: StoreBatch, answers: Uint8Array): Promise<void> {
    if (this.total + batch.count > this.maxKeys) {
      throw new HashGateError(ErrorCodes.CAPACITY, `embedded dedup store is full (dedup.memoryMaxKeys = ${this.maxKeys})`, {
        details: { maxKeys: this.maxKeys },
      });
    }
    const c = batch.compact;
    if (c !== undefined) {
      let t = this.tables.get(batch.window);
      if (t === undefined) this.tables.set(batch.window, (t = new DigestTable()));
      for (let g = 0; g < batch.groupKeys.length; g++) {
        const bucket = batch.groupBuckets[g]!;
        for (let j = batch.starts[g]!; j < batch.starts[g + 1]!; j++) {
          const o = c.idx[j]! << 4;
          const added = t.add(c.dv.getUint32(o, true), c.dv.getUint32(o + 4, true), bucket);
          answers[j] = added ? 1 : 0;
          if (added) this.total++;
        }
      }
      return;
    }
    let w = this.sets.get(batch.window);
    if (w === undefined) this.sets.set(batch.window, (w = new Map()));
    for (let g = 0; g < batch.groupKeys.length; g++) {
      const key = batch.groupKeys[g]!;
      let s = w.get(key);
      if (s === undefined) w.set(key, (s = new Set()));
      for (let j = batch.starts[g]!; j < batch.starts[g + 1]!; j++) {
        const m = memberString(batch.member(j));
        if (s.has(m)) answers[j] = 0;
        else {
          s.add(m);
          answers[j] = 1;
          this.total++;
        }
      }
    }
  }

  /**
   * The compact layout without the grouping by bucket a remote store needs: adds digest
   * `pend[j]` of `d32` (4 words per digest) with bucket `buckets[pend[j]]` for j < p, writing
   * 1 (was absent) or 0 to out[base + pend[j]]; returns how many were absent. Synchronous: the
   * embedded small-call path then needs no promise, sort or bucket-key string per batch. The
   * caller passes distinct digests, so the order they are added in cannot change an answer.
   */
  addCompactNow(window: string, d32: Uint32Array, pend: Uint32Array, p: number, buckets: Uint32Array, out: Uint8Array, base: number): number {
    if (this.total + p > this.maxKeys) {
      throw new HashGateError(ErrorCodes.CAPACITY, `embedded dedup store is full (dedup.memoryMaxKeys = ${this.maxKeys})`, {
        details: { maxKeys: this.maxKeys },
      });
    }
    let t = this.tables.get(window);
    if (t === undefined) this.tables.set(window, (t = new DigestTable()));
    let added = 0;
    for (let j = 0; j < p; j++) {
      const i = pend[j]!;
      const a = t.add(d32[i << 2]!, d32[(i << 2) + 1]!, buckets[i]!) ? 1 : 0;
      out[base + i] = a;
      added += a;
    }
    this.total += added;
    return added;
  }

  async count(window: string): Promise<{ exact: number; approximate: number }> {
    let n = this.tables.get(window)?.size ?? 0;
    for (const s of this.sets.get(window)?.values() ?? []) n += s.size;
    return { exact: n, approximate: n };
  }

  async purge(window: string): Promise<number> {
    const w = this.sets.get(window);
    const t = this.tables.get(window);
    if (w === undefined && t === undefined) return 0;
    let n = t?.size ?? 0;
    for (const s of w?.values() ?? []) n += s.size;
    this.total -= n;
    this.sets.delete(window);
    this.tables.delete(window);
    for (const k of [...this.meta.keys()]) if (k.startsWith(`${window}\u0000`)) this.meta.delete(k);
    // Redis would report the bucket keys it unlinked; the compact table stands for all of them.
    return (w?.size ?? 0) + (t === undefined ? 0 : 1);
  }

  async close(): Promise<void> {
    this.sets.clear();
    this.tables.clear();
  }
}
