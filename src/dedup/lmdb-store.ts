// Durable embedded dedup store on LMDB (`dedup.path`): survives restarts and is shared by every
// process of one host that opens the same directory.
//
// Layout on disk (one LMDB environment, i.e. data.mdb + lock.mdb in `path`):
//   sub-database `b:${window}`  compact layout, in member blocks. Key: block id (uint32) =
//                               bucket * 2^bits + the top `bits` bits of the member; value: the
//                               block's members (digest bytes 0..7 of each key, never a raw key),
//                               8 bytes each, sorted as unsigned big-endian byte strings. Bucket +
//                               member = the same 64 + log2(buckets) bits that identify a key in the
//                               Redis compact layout, so `hashgate export` writes the exact Redis
//                               members and bucket keys. `bits` is fixed per window when the window
//                               is first written (meta `bits:${window}`, see blockBitsFor): a block
//                               is half a bucket, ~128 members or ~1 KiB at 256 keys per bucket.
//   sub-database `s:${window}`  'sets' layout. Key: bucket (bucketOf = Guava asLong mod buckets),
//                               values: the raw key bytes (DUPSORT), as in the Redis 'sets' layout.
//   sub-database `hg:meta`      `w:${layout}:${window}` -> bucket count recorded for the window
//                               (first writer wins, like HSETNX on the Redis meta hash);
//                               `bits:${window}` -> block bits; `n:compact:${window}` -> exact
//                               member count, updated in the transaction that adds the members.
//
// Why blocks and not one LMDB duplicate per member (a DUPSORT|DUPFIXED set per bucket, which is
// what this store used first, in sub-databases `c:${window}`): a lookup of a (bucket, member) pair
// through lmdb-js builds a range iterator per call (~1.1 us and garbage), and a put per member
// costs ~0.9 us of lmdb-js overhead. A block is one getBinaryFast (a copy of ~1 KiB into a reused
// buffer) shared by the batch's members in that block, plus a binary search in JS; adding is one
// merge and one put per touched block. Measured on the bench host (`node dist/bench/run.js --only
// store`, 500k keys): checks of seen keys went from 0.65-0.83M/s to 1.7M/s and batch firstSeen
// with fsync from 0.32-0.44M/s to 0.46M/s, at ~32 B/key on disk either way. Blocks are
// hand-written for that measured reason. A block leaves LMDB's leaf pages (~2 KiB inline limit)
// only when a window holds ~2x the keys its bucket count was sized for; it then lives in overflow
// pages and still answers exactly, only slower to rewrite, as a Redis intset past its sizing
// would. Stores written in the older `c:` format are converted, one window per write
// transaction, the first time a process opens them (`ready()`); every process that opens the
// store must run a version that knows blocks.
//
// Check-and-add, per batch: first a pass over one read snapshot (a member found there was committed
// by someone, so its answer is 0), then one LMDB write transaction for the members not found: each
// touched block is read inside the transaction, merged with its new members and written back; a
// member is new when it is neither in the block nor earlier in the batch. The read pass keeps a
// batch of seen keys from copying pages and fsyncing: checking 200k seen keys (batches of 10k)
// wrote 138 MB to data.mdb when every batch went through the write transaction, 0 bytes with the
// read pass. The read pass stops after its first READ_PROBE members unless nearly all were found:
// in an inserting batch the write pass reads those blocks anyway. Not taken: transactionSync (no
// event-loop hop, but its commit and fsync, or the wait for another process's writer lock, would
// block the event loop).
// Durability of a 0 from the read pass: another process's commit may be visible before its fsync
// ended. With `dedup.sync`, a batch that wrote nothing fsyncs the file before answering (cheap when
// nothing is dirty), and a batch that wrote awaits its own commit's fsync, which covers every
// earlier commit: a 0 is never answered for a key a power cut could take back.
// LMDB serialises write transactions across processes with a robust mutex in lock.mdb, and a
// member not found by the read pass is decided inside that transaction, so concurrent processes
// get exact answers. An answer is returned only after the transaction committed and was flushed
// to disk: a kill -9 or power cut can lose only batches nobody was answered for. The flush is not
// optional here: with overlappingSync (lmdb-js's default off Windows) a write transaction's
// promise resolves after the commit's fsync and the synced meta page, done after the writer lock
// is released so the next transaction commits meanwhile; without it the commit syncs inside the
// lock. `dedup.sync` false therefore only skips the sync of a batch that wrote nothing.
// Not taken: answering at commit and syncing later. A power cut would then take back keys already
// answered 1, and the same keys would be answered 1 again after the restart (duplicates let
// through): a wrong answer for latency. The env is never opened with noSync for the same reason,
// and because processes sharing a path must agree on overlappingSync.
// Group commit: lmdb-js puts the async transactions queued while one commits into one next LMDB
// transaction, one commit and one fsync for all of them; with the service merging the calls of
// an event-loop turn into one batch, N concurrent one-key callers cost about one transaction per
// round. Not taken: holding batches here until the transaction in flight has ended. The first
// call of a burst then commits alone and the rest follow in a second transaction, which doubled
// the transactions of 16 independent callers when measured.
//
// A failed transaction (disk full, I/O error) is aborted by LMDB entirely: the call rejects with
// HG_ERR_STORE and nothing of the batch was written. There is no fail-open journal here: the
// journal would live on the same failed disk.
import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Database, RootDatabase } from 'lmdb';
import { ErrorCodes, HashGateError } from '../errors.js';
import { BlockMerger, ValueView, blockBitsFor, blockHas, blockOf, sortMembers } from './lmdb-blocks.js';
import { orderByBucket } from './layout.js';
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
  /**
   * Sync the file before answering a batch that wrote nothing (default true): its 0s may come
   * from another process's commit whose fsync has not ended. Batches that write always wait for
   * their own commit's fsync (see the file header).
   */
  sync: boolean;
  /** Windows the environment can hold sub-databases for (see the constructor). */
  maxWindows: number;
  /**
   * Block bits for compact windows this handle is the first to write (default blockBitsFor of
   * the bucket count). Recorded per window, so every later writer follows the first. Tests use
   * 0 with one bucket to put many members in one block.
   */
  blockBits?: number;
}

const NODUP = { noDupData: true } as const;
/** lmdb-js's putSync returns whether the write happened (false: NODUPDATA found the pair); its typings say void. */
const putSync = (db: Database<Buffer, number>, key: number, value: Buffer): boolean =>
  (db.putSync as unknown as (k: number, v: Buffer, o: typeof NODUP) => boolean).call(db, key, value, NODUP);
/**
 * lmdb-js's doesExist(key, value) on a DUPSORT database reads `this.encoder`, which encoding
 * 'binary' leaves undefined (it throws). The 'sets' read handle gets this pass-through encoder:
 * values are already the stored bytes. Reads only: writes go through the plain handle.
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
const dbName = (layout: Layout, window: string): string => (layout === 'compact' ? `b:${window}` : `s:${window}`);
/** The compact sub-database of the first format (one DUPSORT duplicate per member), converted by ready(). */
const legacyName = (window: string): string => `c:${window}`;
const metaKey = (layout: Layout, window: string): string => `w:${layout}:${window}`;
const bitsKey = (window: string): string => `bits:${window}`;
const countKey = (window: string): string => `n:compact:${window}`;
/**
 * Whether the read pass stops before looking up member number `read` (0-based): after READ_PROBE
 * members unless nearly all were found (in an inserting batch the write pass reads those blocks
 * or pages anyway).
 */
const stopReading = (read: number, found: number): boolean => read === READ_PROBE && found < READ_MIN_FOUND * READ_PROBE;

/** One batch's layout-specific halves: the read pass over a snapshot and the write transaction's body. */
interface BatchPlan {
  db: Database<Buffer, number>;
  /** Marks members found in the current read snapshot with answers[j] = 2; returns how many. */
  read(answers: Uint8Array): number;
  /** Inside the write transaction: decides every member whose answer is still 0 (1 = new). */
  write(answers: Uint8Array): void;
}
/** Keys removed per write transaction when a window is purged (bounds writer lock hold time). */
const PURGE_BATCH_KEYS = 512;

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
  /** A second handle per 'sets' sub-database, for the read pass (see RAW_ENCODER). */
  private readonly readers = new Map<string, Database<Buffer, number>>();
  private readonly merger = new BlockMerger();
  private readonly view = new ValueView();
  private readied: Promise<void> | undefined;
  private closed = false;

  constructor(readonly options: LmdbStoreOptions) {
    try {
      // maxDbs: per window the compact, legacy compact and 'sets' sub-databases, plus meta
      this.env = openPrivateEnv(options.path, { maxDbs: 3 * options.maxWindows + 2 });
      this.meta = this.env.openDB<number, string>({ name: META, encoding: 'json' });
    } catch (cause) {
      throw storeFailure(`cannot open ${options.path}`, cause);
    }
  }

  private db(layout: Layout, window: string): Database<Buffer, number> {
    const name = dbName(layout, window);
    let d = this.dbs.get(name);
    if (d === undefined) {
      d = this.env.openDB<Buffer, number>(
        layout === 'compact' ? { name, keyEncoding: 'uint32', encoding: 'binary' } : { name, keyEncoding: 'uint32', encoding: 'binary', dupSort: true },
      );
      this.dbs.set(name, d);
    }
    return d;
  }

  private reader(window: string): Database<Buffer, number> {
    const name = dbName('sets', window);
    let r = this.readers.get(name);
    if (r === undefined) {
      r = this.env.openDB<Buffer, number>({ name, keyEncoding: 'uint32', encoding: 'binary', dupSort: true });
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

  /**
   * Recorded block bits of a compact window, read in the current snapshot or write transaction
   * (once per batch, never cached: another process may purge the window and record it anew).
   */
  private recordedBits(window: string): number | undefined {
    const v = this.meta.get(bitsKey(window));
    return typeof v === 'number' ? v : undefined;
  }

  /**
   * Inside a write transaction: records the window's bucket count and, for compact, its block
   * bits, unless another writer did; returns the block bits in force.
   */
  private recordWindow(layout: Layout, window: string, buckets: number): number {
    const mk = metaKey(layout, window);
    const b = this.meta.get(mk);
    if (b === undefined) this.meta.putSync(mk, buckets);
    if (layout !== 'compact') return 0;
    let bits = this.recordedBits(window);
    if (bits === undefined) {
      bits = this.options.blockBits ?? blockBitsFor(typeof b === 'number' ? b : buckets);
      this.meta.putSync(bitsKey(window), bits);
    }
    return bits;
  }

  /**
   * Converts compact windows of the first on-disk format (`c:` sub-databases, one duplicate per
   * member) into blocks, one write transaction per window, then drops the old sub-database. Every
   * method awaits it; call it before members() on a store an older version may have written.
   */
  ready(): Promise<void> {
    return (this.readied ??= (async () => {
      this.env.resetReadTxn();
      const legacy = this.windows().filter((w) => w.layout === 'compact' && this.meta.get(bitsKey(w.window)) === undefined);
      for (const w of legacy) {
        const old = this.env.openDB<Buffer, number>({ name: legacyName(w.window), keyEncoding: 'uint32', encoding: 'binary', dupSort: true, ...{ dupFixed: true } });
        const db = this.db('compact', w.window);
        try {
          const converted = await db.transaction(() => {
            if (this.meta.get(bitsKey(w.window)) !== undefined) return false; // another process converted it
            const bits = this.recordWindow('compact', w.window, w.buckets);
            let block = -1;
            let parts: Buffer[] = [];
            let n = 0;
            const flush = (): void => {
              if (parts.length > 0) db.putSync(block, Buffer.concat(parts));
              parts = [];
            };
            // buckets ascending, members ascending inside a bucket: block ids arrive in order
            for (const { key, value } of old.getRange({})) {
              const id = blockOf(key, value.readUInt32BE(0), bits);
              if (id !== block) {
                flush();
                block = id;
              }
              parts.push(Buffer.from(value));
              n++;
            }
            flush();
            this.meta.putSync(countKey(w.window), n);
            return true;
          });
          // Only the converter drops the old sub-database: another process's handle to it may
          // be stale by now. A crash right here leaves it behind, unread (the window has bits).
          if (converted) await old.drop();
        } catch (cause) {
          this.readied = undefined;
          throw storeFailure(`cannot convert window ${w.window} to member blocks`, cause);
        }
      }
    })());
  }

  async resolveBuckets(window: string, layout: Layout, configured: number, record = true): Promise<number> {
    this.check();
    await this.ready();
    // the common case (window already recorded) is a read: no write transaction, no fsync
    const known = this.recordedBuckets(window, layout);
    if (known !== undefined) return known;
    // readers (stats) never fix a window's bucketing
    if (!record) return configured;
    try {
      const b = await this.meta.transaction(() => {
        this.recordWindow(layout, window, configured);
        return this.meta.get(metaKey(layout, window)) as number;
      });
      if (this.options.sync) await this.env.flushed;
      return b;
    } catch (cause) {
      throw storeFailure('cannot record the bucket count', cause);
    }
  }

  /** Inside a write transaction: adds `n` to the window's exact member count. */
  private addCount(window: string, n: number): void {
    if (n === 0) return;
    const k = countKey(window);
    const v = this.meta.get(k);
    this.meta.putSync(k, (typeof v === 'number' ? v : 0) + n);
  }

  async addBatch(b: StoreBatch, answers: Uint8Array): Promise<void> {
    this.check();
    if (b.groupKeys.length === 0) return;
    await this.ready();
    let plan: BatchPlan;
    try {
      plan = b.compact !== undefined ? this.compactPlan(b, b.compact) : this.setsPlan(b);
    } catch (cause) {
      throw storeFailure(`cannot open window ${b.window}`, cause);
    }
    // Read pass over one snapshot: answers[j] = 2 marks "found, answer 0"; the rest stays 0 = to add.
    answers.fill(0);
    let found: number;
    try {
      this.env.resetReadTxn();
      found = plan.read(answers);
    } catch (cause) {
      answers.fill(0);
      throw storeFailure('read failed', cause);
    }
    try {
      if (found < b.count) {
        await plan.db.transaction(() => plan.write(answers));
        // already flushed when lmdb-js resolves the commit (see the file header); awaited
        // regardless, so answers never depend on that lmdb-js detail
        await plan.db.flushed;
      } else if (this.options.sync) {
        await this.syncFile();
      }
    } catch (cause) {
      answers.fill(0);
      throw storeFailure('write transaction failed, nothing of the batch was written', cause);
    }
    if (found > 0) for (let j = 0; j < b.count; j++) if (answers[j] === 2) answers[j] = 0;
  }

  /** 'sets': raw-key duplicates per bucket; a lookup per member, a NODUPDATA put per member not found. */
  private setsPlan(b: StoreBatch): BatchPlan {
    const db = this.db(b.layout, b.window);
    const rd = this.reader(b.window);
    const G = b.groupKeys.length;
    const member = (j: number): Buffer => {
      const m = b.member(j);
      return typeof m === 'string' ? Buffer.from(m, 'utf8') : m;
    };
    return {
      db,
      read: (answers) => {
        let found = 0;
        let read = 0;
        for (let g = 0; g < G; g++) {
          const bucket = b.groupBuckets[g]!;
          const end = b.starts[g + 1]!;
          for (let j = b.starts[g]!; j < end; j++) {
            if (stopReading(read++, found)) return found;
            if (rd.doesExist(bucket, member(j))) {
              answers[j] = 2;
              found++;
            }
          }
        }
        return found;
      },
      write: (answers) => {
        // Record the bucketing in the same transaction, so no window's keys exist without it.
        this.recordWindow(b.layout, b.window, b.buckets);
        for (let g = 0; g < G; g++) {
          const bucket = b.groupBuckets[g]!;
          const end = b.starts[g + 1]!;
          for (let j = b.starts[g]!; j < end; j++) if (answers[j] === 0) answers[j] = putSync(db, bucket, member(j)) ? 1 : 0;
        }
      },
    };
  }

  /** Compact: members sorted per bucket group, one block read per run, one merge and put per touched block. */
  private compactPlan(b: StoreBatch, c: NonNullable<StoreBatch['compact']>): BatchPlan {
    const db = this.db('compact', b.window);
    const G = b.groupKeys.length;
    const n = b.count;
    const hi = new Uint32Array(n);
    const lo = new Uint32Array(n);
    const ord = new Uint32Array(n);
    for (let j = 0; j < n; j++) {
      const o = c.idx[j]! << 4;
      hi[j] = c.dv.getUint32(o);
      lo[j] = c.dv.getUint32(o + 4);
    }
    // Each group's members in (member, batch order) order: blocks are read once per group run,
    // and equal members are adjacent with the earliest first.
    for (let g = 0; g < G; g++) {
      const from = b.starts[g]!;
      const end = b.starts[g + 1]!;
      for (let j = from; j < end; j++) ord[j] = j;
      sortMembers(ord, from, end, hi, lo);
    }
    return {
      db,
      read: (answers) => {
        const bits = this.recordedBits(b.window);
        if (bits === undefined) return 0; // nothing written to the window yet
        let found = 0;
        let read = 0;
        let block = -1;
        let cur: Buffer | undefined;
        let dv: DataView | undefined;
        for (let g = 0; g < G; g++) {
          const bucket = b.groupBuckets[g]!;
          const end = b.starts[g + 1]!;
          for (let k = b.starts[g]!; k < end; k++) {
            if (stopReading(read++, found)) return found;
            const j = ord[k]!;
            const id = blockOf(bucket, hi[j]!, bits);
            if (id !== block) {
              block = id;
              cur = db.getBinaryFast(id);
              dv = cur === undefined ? undefined : this.view.of(cur);
            }
            if (cur !== undefined && blockHas(dv!, cur.byteOffset, cur.length, hi[j]!, lo[j]!)) {
              answers[j] = 2;
              found++;
            }
          }
        }
        return found;
      },
      write: (answers) => {
        // Record the bucketing in the same transaction, so no window's keys exist without it.
        const bits = this.recordWindow('compact', b.window, b.buckets);
        let added = 0;
        for (let g = 0; g < G; g++) {
          // members of the group not found by the read pass, still in sorted order
          let m = 0;
          const from = b.starts[g]!;
          const end = b.starts[g + 1]!;
          for (let k = from; k < end; k++) if (answers[ord[k]!] === 0) ord[from + m++] = ord[k]!;
          if (m === 0) continue;
          added += this.merger.add(db, b.groupBuckets[g]!, bits, hi, lo, ord, from, from + m, answers);
        }
        this.addCount(b.window, added);
      },
    };
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
    await this.ready();
    const db = this.db(layout, window);
    const buf = Buffer.from(keys.buffer, keys.byteOffset, keys.byteLength);
    try {
      let added: number;
      if (layout === 'compact') {
        const hi = new Uint32Array(count);
        const lo = new Uint32Array(count);
        const bk = new Uint32Array(count);
        for (let i = 0; i < count; i++) {
          const s = offsets[i]!;
          hi[i] = buf.readUInt32BE(s);
          lo[i] = buf.readUInt32BE(s + 4);
          bk[i] = bucketAt(i);
        }
        const ord = orderByBucket(bk, count);
        const answers = new Uint8Array(count);
        added = await db.transaction(() => {
          const bits = this.recordWindow('compact', window, buckets);
          let n = 0;
          for (let s = 0; s < count; ) {
            const bucket = bk[ord[s]!]!;
            let e = s + 1;
            while (e < count && bk[ord[e]!] === bucket) e++;
            sortMembers(ord, s, e, hi, lo);
            n += this.merger.add(db, bucket, bits, hi, lo, ord, s, e, answers);
            s = e;
          }
          this.addCount(window, n);
          return n;
        });
      } else {
        added = await db.transaction(() => {
          this.recordWindow(layout, window, buckets);
          let n = 0;
          for (let i = 0; i < count; i++) {
            if (putSync(db, bucketAt(i), buf.subarray(offsets[i]!, offsets[i + 1]!))) n++;
          }
          return n;
        });
      }
      await db.flushed;
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
    await this.ready();
    if (!this.has(layout, window)) return { exact: 0, approximate: 0 };
    this.env.resetReadTxn();
    let n: number;
    if (layout === 'compact') {
      const v = this.meta.get(countKey(window));
      n = typeof v === 'number' ? v : 0;
    } else {
      n = (this.db(layout, window).getStats() as { entryCount: number }).entryCount;
    }
    return { exact: n, approximate: n };
  }

  /**
   * Drops the window in both layouts: keys are removed PURGE_BATCH_KEYS per write transaction (so
   * other processes' batches interleave), then the empty sub-database is dropped. Returns the
   * number of buckets (and meta records) removed, as Redis counts unlinked keys.
   */
  async purge(window: string): Promise<number> {
    this.check();
    await this.ready();
    let removed = 0;
    for (const layout of ['compact', 'sets'] as const) {
      if (!this.has(layout, window)) continue;
      const db = this.db(layout, window);
      this.env.resetReadTxn();
      const bits = layout === 'compact' ? (this.recordedBits(window) ?? 0) : 0;
      let lastBucket = -1;
      for (;;) {
        this.env.resetReadTxn();
        const keys = [...db.getKeys({ limit: PURGE_BATCH_KEYS })];
        if (keys.length === 0) break;
        await db.transaction(() => {
          for (const k of keys) {
            if (!db.removeSync(k)) continue;
            // compact keys are blocks, several per bucket, in bucket order
            const bucket = Math.floor(k / 2 ** bits);
            if (bucket !== lastBucket) removed++;
            lastBucket = bucket;
          }
        });
      }
      await db.drop();
      this.dbs.delete(dbName(layout, window));
      this.readers.delete(dbName(layout, window));
      if (layout === 'compact') {
        await this.meta.transaction(() => {
          this.meta.removeSync(bitsKey(window));
          this.meta.removeSync(countKey(window));
        });
      }
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
   * Every member of a window in bucket order, about `batch` at a time (compact: whole blocks):
   * compact members as their 8 digest bytes, 'sets' members as the raw key bytes. A read snapshot
   * per batch, so a long export never pins old pages (which would grow the file) while writers
   * go on. Await ready() first on a store an older version may have written.
   */
  *members(window: string, layout: Layout, batch = 65_536): Generator<{ bucket: number; member: Buffer }[]> {
    if (!this.has(layout, window)) return;
    const db = this.db(layout, window);
    if (layout === 'compact') {
      const bits = this.recordedBits(window);
      if (bits === undefined) throw storeFailure(`window ${window}`, new Error('written in the first store format: await ready() before reading it'));
      let start = 0;
      for (;;) {
        this.env.resetReadTxn();
        const out: { bucket: number; member: Buffer }[] = [];
        let last = -1;
        for (const { key, value } of db.getRange({ start })) {
          const bucket = Math.floor(key / 2 ** bits);
          for (let o = 0; o + 8 <= value.length; o += 8) out.push({ bucket, member: Buffer.from(value.subarray(o, o + 8)) });
          last = key;
          if (out.length >= batch) break;
        }
        if (out.length === 0) return;
        yield out;
        if (out.length < batch || last === 0xffffffff) return;
        start = last + 1;
      }
    }
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
    await this.readied?.catch(() => undefined);
    await this.env.close();
  }
}
