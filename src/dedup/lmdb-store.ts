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
// Check-and-add, per batch: first a pass over one read snapshot (a member found there was committed
// by someone, so its answer is 0), then one LMDB write transaction for the members not found:
// put(bucket, member, NODUPDATA), the put's success is the answer. The read pass exists because a
// NODUPDATA put of a member already present still copies its pages (LMDB touches the cursor's pages
// before it compares the value), so a batch of seen keys used to rewrite and fsync ~one page per
// bucket it touched; found members now cost one lookup and no page. The read pass stops after
// its first READ_PROBE members unless nearly all were found: in an inserting batch the puts copy
// those pages anyway, and the lookups would only add time. Measured on the bench host:
// checking 200k seen keys (batches of 10k) wrote 138 MB to data.mdb before, 0 bytes now. Per key
// the lookup costs about what the put did (~1.1 vs ~0.9 us CPU, lmdb-js builds a range iterator
// for a (key, value) lookup; getBinaryFast cannot, it reads a key's first value only), so the gain
// is the I/O. Not taken: flat 12-byte keys (getBinaryFast works, but ~31 B/key in use, over the
// 40 B/key on disk budget), and transactionSync (no event-loop hop, but its commit and fsync, or
// the wait for another process's writer lock, would block the event loop).
// Durability of a 0 from the read pass: another process's commit may be visible before its fsync
// ended. With `dedup.sync`, a batch that wrote nothing fsyncs the file before answering (cheap when
// nothing is dirty), and a batch that wrote awaits its own commit's fsync, which covers every
// earlier commit: a 0 is never answered for a key a power cut could take back.
// LMDB serialises write transactions across processes with a robust mutex in lock.mdb, and a
// member not found by the read pass is decided by its put inside that transaction, so concurrent
// processes get exact answers. An answer is returned only after the transaction committed (and,
// with `dedup.sync` (default), after it was flushed to disk): a kill -9 or power cut can lose only
// batches nobody was answered for. lmdb-js runs concurrent
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
/**
 * lmdb-js's doesExist(key, value) on a DUPSORT database reads `this.encoder`, which encoding
 * 'binary' leaves undefined (it throws). The read handle gets this pass-through encoder: values
 * are already the stored bytes. Reads only: writes go through the plain handle.
 */
const RAW_ENCODER = {
  encode: (v: Uint8Array): Uint8Array => v,
  writeKey: (key: Uint8Array, target: Uint8Array, start: number): number => {
    target.set(key, start);
    return start + key.length;
  },
};
/** Members the read pass looks up before it judges whether the batch is mostly seen. */
const READ_PROBE = 256;
/** The read pass goes on past READ_PROBE only while at least this share of members was found. */
const READ_MIN_FOUND = 0.95;
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
  /** A second handle per sub-database, for the read pass (see RAW_ENCODER). */
  private readonly readers = new Map<string, Database<Buffer, number>>();
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

  private reader(layout: Layout, window: string): Database<Buffer, number> {
    const name = dbName(layout, window);
    let r = this.readers.get(name);
    if (r === undefined) {
      r = this.env.openDB<Buffer, number>({
        name,
        keyEncoding: 'uint32',
        encoding: 'binary',
        dupSort: true,
        ...(layout === 'compact' ? { dupFixed: true } : {}),
      });
      (r as unknown as { encoder: typeof RAW_ENCODER }).encoder = RAW_ENCODER;
      this.readers.set(name, r);
    }
    return r;
  }

  /** Resolves once everything committed to the file so far (by any process) is on disk. */
  private syncFile(): Promise<void> {
    return new Promise((resolve, reject) => {
      (this.env as unknown as { sync(cb: (err?: Error) => void): void }).sync((err) => (err ? reject(err) : resolve()));
    });
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
    let rd: Database<Buffer, number>;
    try {
      db = this.db(b.layout, b.window);
      rd = this.reader(b.layout, b.window);
    } catch (cause) {
      throw storeFailure(`cannot open window ${b.window}`, cause);
    }
    const mk = metaKey(b.layout, b.window);
    const c = b.compact;
    const s = this.scratch;
    const sdv = this.scratchDv;
    const member = (j: number): Buffer => {
      if (c !== undefined) {
        const o = c.idx[j]! << 4;
        sdv.setUint32(0, c.dv.getUint32(o, true), true);
        sdv.setUint32(4, c.dv.getUint32(o + 4, true), true);
        return s;
      }
      const m = b.member(j);
      return typeof m === 'string' ? Buffer.from(m, 'utf8') : m;
    };
    // Read pass over one snapshot: answers[j] = 2 marks "found, answer 0"; the rest stays 0 = to put.
    answers.fill(0);
    let found = 0;
    let read = 0;
    try {
      this.env.resetReadTxn();
      read: for (let g = 0; g < G; g++) {
        const bucket = b.groupBuckets[g]!;
        const end = b.starts[g + 1]!;
        for (let j = b.starts[g]!; j < end; j++) {
          if (read === READ_PROBE && found < READ_MIN_FOUND * READ_PROBE) break read;
          read++;
          if (rd.doesExist(bucket, member(j))) {
            answers[j] = 2;
            found++;
          }
        }
      }
    } catch (cause) {
      answers.fill(0);
      throw storeFailure('read failed', cause);
    }
    try {
      if (found < b.count) {
        await db.transaction(() => {
          // Record the bucketing in the same transaction, so no window's keys exist without it.
          if (this.meta.get(mk) === undefined) this.meta.putSync(mk, b.buckets);
          for (let g = 0; g < G; g++) {
            const bucket = b.groupBuckets[g]!;
            const end = b.starts[g + 1]!;
            for (let j = b.starts[g]!; j < end; j++) {
              if (answers[j] === 0) answers[j] = putSync(db, bucket, member(j)) ? 1 : 0;
            }
          }
        });
        if (this.options.sync) await db.flushed;
      } else if (this.options.sync) {
        await this.syncFile();
      }
    } catch (cause) {
      answers.fill(0);
      throw storeFailure('write transaction failed, nothing of the batch was written', cause);
    }
    if (found > 0) for (let j = 0; j < b.count; j++) if (answers[j] === 2) answers[j] = 0;
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
      this.readers.delete(dbName(layout, window));
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
