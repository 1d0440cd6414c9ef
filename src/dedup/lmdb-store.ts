// Durable embedded dedup store on LMDB (`dedup.path`): survives restarts and is shared by every
// process of one host that opens the same directory.
//
// Layout on disk (one LMDB environment, i.e. data.mdb + lock.mdb in `path`):
//   sub-database `c:${window}`  compact layout. Key: the bucket (uint32, integer key), values:
//                               the 8 digest bytes 0..7 of each member, as a sorted DUPSORT|DUPFIXED
//                               set, so a member costs ~8 bytes in packed leaf pages and never a raw
//                               key. Bucket + member = the same 64 + log2(buckets) bits that
//                               identify a key in the Redis compact layout, so `hashgate export`
//                               can write the exact Redis members and bucket keys.
//   sub-database `s:${window}`  'sets' layout. Key: bucket (bucketOf = Guava asLong mod buckets),
//                               values: the raw key bytes (DUPSORT), as in the Redis 'sets' layout.
//   sub-database `hg:meta`      `w:${layout}:${window}` -> bucket count recorded for the window
//                               (first writer wins, like HSETNX on the Redis meta hash).
//
// Check-and-add: one LMDB write transaction per batch: put(bucket, member, NODUPDATA) per member;
// the put's success is the answer. LMDB serialises write transactions across processes with a
// robust mutex in lock.mdb, so concurrent processes get exact answers. An answer is returned only
// after the transaction committed (and, with `dedup.sync` (default), after it was flushed to disk):
// a kill -9 or power cut can lose only batches nobody was answered for. lmdb-js runs concurrent
// async transactions of one process in a single LMDB transaction (group commit), which is what
// keeps many small calls cheap.
//
// A failed transaction (disk full, I/O error) is aborted by LMDB entirely: the call rejects with
// HG_ERR_STORE and nothing of the batch was written. There is no fail-open journal here: the
// journal would live on the same failed disk.
import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Database, RootDatabase } from 'lmdb';
import { ErrorCodes, HashGateError } from '../errors.js';
import type { Layout } from './options.js';
import type { DedupStore, StoreBatch } from './store.js';

type Lmdb = typeof import('lmdb');
let lmdbModule: Lmdb | undefined;
/** Loaded on first use, so users without `dedup.path` never load the native addon. */
function lmdb(): Lmdb {
  if (lmdbModule === undefined) lmdbModule = createRequire(import.meta.url)('lmdb') as Lmdb;
  return lmdbModule;
}

/** Longest value LMDB accepts in a DUPSORT database with the default 4 KiB pages (lmdb-js limit). */
export const LMDB_MAX_MEMBER_BYTES = 1978;

export interface LmdbStoreOptions {
  path: string;
  /** Await the fsync of each commit before answering (default true). */
  sync: boolean;
  /** Sub-databases the environment can hold: two per window and layout, plus meta. */
  maxWindows: number;
}

const NODUP = { noDupData: true } as const;
/** lmdb-js's putSync returns whether the write happened (false: NODUPDATA found the pair); its typings say void. */
const putSync = (db: Database<Buffer, number>, key: number, value: Buffer): boolean =>
  (db.putSync as unknown as (k: number, v: Buffer, o: typeof NODUP) => boolean).call(db, key, value, NODUP);
const META = 'hg:meta';
const dbName = (layout: Layout, window: string): string => (layout === 'compact' ? `c:${window}` : `s:${window}`);
const metaKey = (layout: Layout, window: string): string => `w:${layout}:${window}`;
/** Bucket keys removed per write transaction when a window is purged (bounds writer lock hold time). */
const PURGE_BATCH_BUCKETS = 512;

/**
 * Opens (creating) an LMDB environment whose files only the owner can read: the directory is
 * created 0700 and data.mdb/lock.mdb are set to 0600, since a 'sets' store (or a cache tier)
 * holds raw keys.
 */
export function openPrivateEnv(path: string, options: Record<string, unknown>): RootDatabase {
  if (!existsSync(path)) mkdirSync(path, { recursive: true, mode: 0o700 });
  const env = lmdb().open({ path, ...options });
  for (const f of ['data.mdb', 'lock.mdb']) {
    try {
      chmodSync(join(path, f), 0o600);
    } catch {
      // a store another user owns stays as it is; opening it already worked
    }
  }
  return env;
}

export const storeFailure = (what: string, cause: unknown): HashGateError =>
  new HashGateError(ErrorCodes.STORE, `embedded LMDB dedup store: ${what}: ${(cause as Error)?.message ?? String(cause)}`, { cause });

export class LmdbStore implements DedupStore {
  readonly kind = 'lmdb' as const;
  readonly env: RootDatabase;
  private readonly meta: Database<number, string>;
  private readonly dbs = new Map<string, Database<Buffer, number>>();
  /** Reused member buffer: lmdb-js copies a value during a put inside a write transaction. */
  private readonly scratch = Buffer.alloc(8);
  private readonly scratchDv = new DataView(this.scratch.buffer, this.scratch.byteOffset, 8);
  private closed = false;

  constructor(readonly options: LmdbStoreOptions) {
    try {
      this.env = openPrivateEnv(options.path, { maxDbs: 2 * options.maxWindows + 2 });
      this.meta = this.env.openDB<number, string>({ name: META, encoding: 'json' });
    } catch (cause) {
      throw storeFailure(`cannot open ${options.path}`, cause);
    }
  }

  private db(layout: Layout, window: string): Database<Buffer, number> {
    const name = dbName(layout, window);
    let d = this.dbs.get(name);
    if (d === undefined) {
      d = this.env.openDB<Buffer, number>({
        name,
        keyEncoding: 'uint32',
        encoding: 'binary',
        dupSort: true,
        ...(layout === 'compact' ? { dupFixed: true } : {}),
      });
      this.dbs.set(name, d);
    }
    return d;
  }

  /** Whether the window has a sub-database, without creating one. */
  private has(layout: Layout, window: string): boolean {
    if (this.dbs.has(dbName(layout, window))) return true;
    this.env.resetReadTxn();
    return this.meta.get(metaKey(layout, window)) !== undefined;
  }

  async resolveBuckets(window: string, layout: Layout, configured: number, record = true): Promise<number> {
    this.check();
    const k = metaKey(layout, window);
    // the common case (window already recorded) is a read: no write transaction, no fsync
    const known = this.recordedBuckets(window, layout);
    if (known !== undefined) return known;
    // readers (stats) never fix a window's bucketing
    if (!record) return configured;
    try {
      const b = await this.meta.transaction(() => {
        const v = this.meta.get(k);
        if (typeof v === 'number') return v;
        this.meta.putSync(k, configured);
        return configured;
      });
      if (this.options.sync) await this.env.flushed;
      return b;
    } catch (cause) {
      throw storeFailure('cannot record the bucket count', cause);
    }
  }

  async addBatch(b: StoreBatch, answers: Uint8Array): Promise<void> {
    this.check();
    const G = b.groupKeys.length;
    if (G === 0) return;
    let db: Database<Buffer, number>;
    try {
      db = this.db(b.layout, b.window);
    } catch (cause) {
      throw storeFailure(`cannot open window ${b.window}`, cause);
    }
    const mk = metaKey(b.layout, b.window);
    const c = b.compact;
    const s = this.scratch;
    const sdv = this.scratchDv;
    try {
      await db.transaction(() => {
        // Record the bucketing in the same transaction, so no window's keys exist without it.
        if (this.meta.get(mk) === undefined) this.meta.putSync(mk, b.buckets);
        for (let g = 0; g < G; g++) {
          const bucket = b.groupBuckets[g]!;
          const end = b.starts[g + 1]!;
          if (c !== undefined) {
            for (let j = b.starts[g]!; j < end; j++) {
              const o = c.idx[j]! << 4;
              sdv.setUint32(0, c.dv.getUint32(o, true), true);
              sdv.setUint32(4, c.dv.getUint32(o + 4, true), true);
              answers[j] = putSync(db, bucket, s) ? 1 : 0;
            }
          } else {
            for (let j = b.starts[g]!; j < end; j++) {
              const m = b.member(j);
              answers[j] = putSync(db, bucket, typeof m === 'string' ? Buffer.from(m, 'utf8') : m) ? 1 : 0;
            }
          }
        }
      });
      if (this.options.sync) await db.flushed;
    } catch (cause) {
      answers.fill(0);
      throw storeFailure('write transaction failed, nothing of the batch was written', cause);
    }
  }

  /**
   * Bulk add for the loader: row i's member is keys[offsets[i] .. offsets[i] + width) with width 8
   * for 'compact' (digest bytes 0..7), the whole range for 'sets'; its bucket is bucketAt(i). One
   * write transaction; resolves with the number of members that were new.
   */
  async addRows(
    window: string, layout: Layout, buckets: number, count: number, bucketAt: (i: number) => number, keys: Uint8Array, offsets: Uint32Array,
  ): Promise<number> {
    this.check();
    const db = this.db(layout, window);
    const mk = metaKey(layout, window);
    const buf = Buffer.from(keys.buffer, keys.byteOffset, keys.byteLength);
    try {
      const added = await db.transaction(() => {
        if (this.meta.get(mk) === undefined) this.meta.putSync(mk, buckets);
        let n = 0;
        for (let i = 0; i < count; i++) {
          const s = offsets[i]!;
          const e = layout === 'compact' ? s + 8 : offsets[i + 1]!;
          if (putSync(db, bucketAt(i), buf.subarray(s, e))) n++;
        }
        return n;
      });
      if (this.options.sync) await db.flushed;
      return added;
    } catch (cause) {
      throw storeFailure('write transaction failed, nothing of the batch was written', cause);
    }
  }

  /** Bucket count recorded for the window, if any. */
  recordedBuckets(window: string, layout: Layout): number | undefined {
    this.env.resetReadTxn();
    const v = this.meta.get(metaKey(layout, window));
    return typeof v === 'number' ? v : undefined;
  }

  async count(window: string, layout: Layout): Promise<{ exact: number; approximate: number }> {
    this.check();
    if (!this.has(layout, window)) return { exact: 0, approximate: 0 };
    const db = this.db(layout, window);
    this.env.resetReadTxn();
    const n = (db.getStats() as { entryCount: number }).entryCount;
    return { exact: n, approximate: n };
  }

  /**
   * Drops the window in both layouts: bucket keys are removed PURGE_BATCH_BUCKETS per write
   * transaction (so other processes' batches interleave), then the empty sub-database is dropped.
   * Returns the number of bucket keys (and meta records) removed, as Redis counts unlinked keys.
   */
  async purge(window: string): Promise<number> {
    this.check();
    let removed = 0;
    for (const layout of ['compact', 'sets'] as const) {
      if (!this.has(layout, window)) continue;
      const db = this.db(layout, window);
      for (;;) {
        this.env.resetReadTxn();
        const keys = [...db.getKeys({ limit: PURGE_BATCH_BUCKETS })];
        if (keys.length === 0) break;
        await db.transaction(() => {
          for (const k of keys) if (db.removeSync(k)) removed++;
        });
      }
      await db.drop();
      this.dbs.delete(dbName(layout, window));
      if (await this.meta.remove(metaKey(layout, window))) removed++;
    }
    if (this.options.sync) await this.env.flushed;
    return removed;
  }

  /** Windows with data (or a recorded bucketing), per layout, with their bucket counts. */
  windows(): Array<{ window: string; layout: Layout; buckets: number }> {
    this.env.resetReadTxn();
    const out: Array<{ window: string; layout: Layout; buckets: number }> = [];
    for (const { key, value } of this.meta.getRange({ start: 'w:', end: 'w;' })) {
      const m = /^w:(compact|sets):(.+)$/.exec(key);
      if (m !== null) out.push({ layout: m[1] as Layout, window: m[2]!, buckets: value });
    }
    return out;
  }

  /**
   * Every member of a window in bucket order, `batch` at a time: compact members as their
   * 8 digest bytes, 'sets' members as the raw key bytes. A read snapshot per batch, so a long
   * export never pins old pages (which would grow the file) while writers go on.
   */
  *members(window: string, layout: Layout, batch = 65_536): Generator<{ bucket: number; member: Buffer }[]> {
    if (!this.has(layout, window)) return;
    const db = this.db(layout, window);
    let start: number | undefined;
    let startValue: Buffer | undefined;
    for (;;) {
      this.env.resetReadTxn();
      const out: { bucket: number; member: Buffer }[] = [];
      const range = db.getRange(start === undefined ? {} : { start });
      let skipping = startValue !== undefined;
      for (const { key, value } of range) {
        if (skipping) {
          // resume strictly after the last (bucket, member) of the previous batch
          if (key === start && Buffer.compare(value, startValue!) <= 0) continue;
          skipping = false;
        }
        out.push({ bucket: key, member: Buffer.from(value) });
        if (out.length === batch) break;
      }
      if (out.length === 0) return;
      yield out;
      const last = out[out.length - 1]!;
      start = last.bucket;
      startValue = last.member;
      if (out.length < batch) return;
    }
  }

  private check(): void {
    if (this.closed) throw new HashGateError(ErrorCodes.CLOSED, 'embedded LMDB dedup store is closed');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.env.close();
  }
}
