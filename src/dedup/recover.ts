// Replays the fail-open journal into Redis. Idempotent (SADD/HSETNX), so a segment that was
// half replayed before a crash simply replays again. A segment is deleted only after Redis
// acknowledged every command built from it.
//
// Keys are placed against the bucket count the WINDOW has recorded in Redis (HSETNX of the
// writer's configured count, then HGET), never a count the writer guessed while Redis was away.
// Damage: the intact records of a damaged segment are replayed; a sealed segment (or a dead
// writer's segment damaged anywhere but at its very end) is then quarantined (renamed
// `.corrupt`, reported, `complete: false`). Only the torn end of a dead writer's `.open` segment,
// which is what a crash during a write leaves, is dropped: no caller was answered for it.
//
// Pacing: replay runs beside live calls on the same connections and event loop. A segment is read
// on the thread pool and parsed one record at a time; keys go out in slices (one SADD per
// sub-bucket through the dedup store's writer, never two slices in flight), with an event-loop
// turn after every slice and, while live calls are in flight, a pause as long as the slice took
// (see `pace`).
import { statSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Journal, type JournalRecordV1, type JournalRecordV2, type SegmentScan } from './journal.js';
import type { RedisClient } from '../redis/client.js';
import { RedisLock } from '../redis/lock.js';
import { PipeRouter } from '../redis/pipes.js';
import { bucketsOfDigests, type Member } from './layout.js';
import { RedisWriter, type MemberSource } from './redis-writer.js';
import { resolveWindowBuckets } from './redis-store.js';
import { TableGrowth, intsetLimitOf } from './tables.js';

export interface RecoverReport {
  /** True when another instance held the recover lock; nothing was replayed. */
  lockHeld: boolean;
  /** Segments replayed and deleted (or quarantined after their intact records were replayed). */
  segments: number;
  records: number;
  /** Members sent to Redis / members Redis did not have yet. */
  keys: number;
  added: number;
  /** Journal bytes of the replayed segments. */
  bytes: number;
  /** Crash-torn ends of dead writers' `.open` segments, dropped (no caller was answered for them). */
  tornTails: Array<{ file: string; offset: number }>;
  /** Damaged segments renamed `<name>.corrupt` this run: their intact records were replayed. */
  quarantined: Array<{ file: string; movedTo: string; damagedBytes: number; ranges: Array<{ offset: number; bytes: number; repaired?: boolean }> }>;
  /** Every `*.corrupt` segment in the journal directory (this run's and earlier ones). */
  quarantinedFiles: string[];
  /** Damaged byte ranges over all segments (repaired ones included). */
  corruptRecords: number;
  /** Segments left for the next replay because Redis failed (or the lock was lost). */
  failed: Array<{ file: string; error: string }>;
  remainingSegments: number;
  /** True only when the journal is empty and nothing is quarantined: every journaled key is in Redis. */
  complete: boolean;
}

export const emptyReport = (): RecoverReport => ({
  lockHeld: false,
  segments: 0,
  records: 0,
  keys: 0,
  added: 0,
  bytes: 0,
  tornTails: [],
  quarantined: [],
  quarantinedFiles: [],
  corruptRecords: 0,
  failed: [],
  remainingSegments: 0,
  complete: true,
});

/** Default of dedup.replaySliceKeys. */
export const REPLAY_SLICE_KEYS = 1000;

export interface ReplayPacing {
  /**
   * Keys per slice (default REPLAY_SLICE_KEYS). A slice is the unit of synchronous work (parse,
   * bucket, build commands) and of Redis traffic: one pipeline, and replay never has more than
   * that one in flight, so live calls' commands on the same connection wait behind at most one
   * slice.
   */
  sliceKeys?: number;
  /**
   * True while live calls are in flight. Replay then pauses after each slice for as long as the
   * slice's round trip took (see `pace` in replayJournal).
   */
  liveBusy?(): boolean;
}

export interface ReplayHooks extends ReplayPacing {
  /** Called after each segment's records were acknowledged. */
  onReplayed?(records: number, bytes: number): void;
  /** The dedup store's writer (its connections and table counts); replay makes its own without one. */
  writer?: RedisWriter;
  /** Stall timeout of the writer replay makes itself. */
  commandTimeoutMs?: number;
}

/** Longest pause between two slices, however slow the last one was. */
const MAX_PAUSE_MS = 100;

const turn = (): Promise<void> => new Promise<void>((r) => setImmediate(r));

/**
 * One slice of journal keys of one window (base, layout, bucket count), sent through the dedup
 * store's writer as one SADD per sub-bucket (idempotent, so a slice replayed twice is harmless);
 * the replies count what Redis did not have yet. A key of another window sends the slice first.
 */
class Batch {
  /** Compact: the members' 8 bytes back to back; sets: the raw members. */
  private mem: Uint8Array;
  private raws: Member[] = [];
  private buckets: Uint32Array;
  private base = '';
  private layout: 'compact' | 'sets' = 'compact';
  private T = 0;
  size = 0;
  keys = 0;
  added = 0;

  constructor(
    private readonly writer: RedisWriter,
    private readonly slice: number,
    /** Runs after every sent slice with its round-trip time: yields, paces, refreshes the lock. */
    private readonly pace: (ms: number) => Promise<void>,
  ) {
    this.mem = new Uint8Array(8 * slice);
    this.buckets = new Uint32Array(slice);
  }

  /** Sends what the slice holds when it belongs to another window, layout or bucket count. */
  async use(base: string, layout: 'compact' | 'sets', T: number): Promise<void> {
    if (base === this.base && layout === this.layout && T === this.T) return;
    await this.flush();
    this.base = base;
    this.layout = layout;
    this.T = T;
  }

  /** Adds one member (compact: its 8 bytes at src[off..off+8); sets: `raw`); sends the slice once full. */
  add(bucket: number, src: Uint8Array | undefined, off: number, raw: Member | undefined): Promise<void> | undefined {
    const i = this.size;
    this.buckets[i] = bucket;
    if (src !== undefined) this.mem.set(src.subarray(off, off + 8), i * 8);
    else this.raws[i] = raw!;
    if (++this.size < this.slice) return undefined;
    const t = performance.now();
    return this.flush().then(() => this.pace(performance.now() - t));
  }

  async flush(): Promise<void> {
    const n = this.size;
    if (n === 0) return;
    const offs = new Uint32Array(n);
    for (let j = 0; j < n; j++) offs[j] = j * 8;
    const raws = this.raws;
    const src: MemberSource = {
      base: this.base, layout: this.layout, buckets: this.T, count: n, bucket: this.buckets.subarray(0, n),
      ...(this.layout === 'compact' ? { dv: new DataView(this.mem.buffer, 0, n * 8), offs } : { member: (j: number) => raws[j]! }),
    };
    const added = await this.writer.addGrouped(src);
    this.size = 0;
    this.raws = [];
    // counted only once Redis acknowledged the slice
    this.keys += n;
    this.added += added;
  }
}

/** Bucket count recorded for (prefix, window, layout), recording `configured` if none is yet. */
async function windowBuckets(redis: RedisClient, cache: Map<string, number>, prefix: string, window: string, layout: 'compact' | 'sets', configured: number): Promise<number> {
  const id = `${prefix}\u0000${window}\u0000${layout}`;
  const known = cache.get(id);
  if (known !== undefined) return known;
  const b = await resolveWindowBuckets(redis, prefix, window, layout, configured, true);
  cache.set(id, b);
  return b;
}

async function replayV2(redis: RedisClient, batch: Batch, metas: Map<string, number>, rec: JournalRecordV2, slice: number): Promise<void> {
  const B = await windowBuckets(redis, metas, rec.p, rec.w, rec.l, rec.b);
  await batch.use(`${rec.p}:${rec.w}`, rec.l, B);
  const d = rec.d;
  const n = d.length >>> 4;
  const compact = rec.l === 'compact';
  // Buckets a slice at a time: a record can hold a whole large batch.
  for (let s = 0; s < n; s += slice) {
    const e = Math.min(n, s + slice);
    // bucketsOfDigests reads through a DataView: any alignment works.
    const buckets = bucketsOfDigests(d.subarray(s << 4, e << 4), rec.l, B);
    for (let i = s; i < e; i++) {
      const sent = compact ? batch.add(buckets[i - s]!, d, i << 4, undefined) : batch.add(buckets[i - s]!, undefined, 0, rec.m![i]!);
      if (sent !== undefined) await sent;
    }
  }
}

/**
 * Format 1 records carry the bucket keys the writer computed (`{base}:{bucket}`, compact
 * `{base}:c:{bucket}`) and the members; the bucket is the key's last field.
 */
async function replayV1(redis: RedisClient, batch: Batch, rec: JournalRecordV1): Promise<void> {
  await redis.hsetnx(rec.mk, rec.mf, String(rec.b));
  const compact = rec.mf.startsWith('compact');
  const base = rec.mk.slice(0, -':meta'.length);
  await batch.use(base, compact ? 'compact' : 'sets', rec.b);
  const eight = new Uint8Array(8);
  const dv = new DataView(eight.buffer);
  for (const [key, members] of rec.g) {
    const bucket = Number(key.slice(key.lastIndexOf(':') + 1));
    for (const m of members) {
      if (compact) dv.setBigInt64(0, BigInt(typeof m === 'string' ? m : m.toString('latin1')), true);
      const sent = compact ? batch.add(bucket, eight, 0, undefined) : batch.add(bucket, undefined, 0, m);
      if (sent !== undefined) await sent;
    }
  }
}

/** Replays every replayable segment of `journal` under the lock `lockKey`. */
export async function replayJournal(redis: RedisClient, journal: Journal, lockKey: string, lockTtlMs: number, hooks: ReplayHooks = {}): Promise<RecoverReport> {
  if (hooks.writer !== undefined) return replayWith(redis, hooks.writer, journal, lockKey, lockTtlMs, hooks);
  // a writer of our own (the CLI): its connections live as long as the replay
  const router = new PipeRouter(redis, { connectTimeoutMs: 5000, maxInFlight: 2, commandTimeoutMs: hooks.commandTimeoutMs ?? 10_000 });
  const growth = new TableGrowth(router);
  try {
    return await replayWith(redis, new RedisWriter(router, growth, 2000, () => intsetLimitOf(redis)), journal, lockKey, lockTtlMs, hooks);
  } finally {
    await growth.close().catch(() => undefined);
    router.close();
  }
}

async function replayWith(redis: RedisClient, writer: RedisWriter, journal: Journal, lockKey: string, lockTtlMs: number, hooks: ReplayHooks): Promise<RecoverReport> {
  const report = emptyReport();
  const finish = (): RecoverReport => {
    report.quarantinedFiles = journal.quarantined();
    report.complete = !report.lockHeld && report.failed.length === 0 && report.remainingSegments === 0 && report.quarantinedFiles.length === 0;
    return report;
  };
  const slice = hooks.sliceKeys ?? REPLAY_SLICE_KEYS;
  const lock = await RedisLock.acquire(redis, lockKey, lockTtlMs);
  if (lock === undefined) {
    report.lockHeld = true;
    report.remainingSegments = journal.replayable().length;
    return finish();
  }
  // A paced replay of a large segment can outlast the lock TTL: refresh it as time passes, not
  // only per segment.
  let refreshedAt = Date.now();
  const refresh = async (): Promise<void> => {
    if (!(await lock.refresh())) throw new Error('recover lock expired and is held by another owner');
    refreshedAt = Date.now();
  };
  // Live calls on the same connection queue behind a slice in Redis; sending the next slice at
  // once would make every live round trip wait for one. While live calls are in flight, replay
  // therefore stays off Redis for as long as its last slice took, leaving live traffic at least
  // half of Redis and of the connection; with no live calls it runs at full speed.
  const pace = async (sliceMs: number): Promise<void> => {
    await turn();
    if (hooks.liveBusy?.() === true) await new Promise<void>((r) => setTimeout(r, Math.min(Math.ceil(sliceMs), MAX_PAUSE_MS)));
    if (Date.now() - refreshedAt > lockTtlMs / 3) await refresh();
  };
  try {
    await journal.seal();
    const files = journal.replayable();
    const metas = new Map<string, number>();
    for (let f = 0; f < files.length; f++) {
      const file = files[f]!;
      const batch = new Batch(writer, slice, pace);
      let seg: SegmentScan;
      try {
        seg = await Journal.scan(file);
        // Records are parsed one at a time between slices; a run of small records counts
        // toward the slice through their keys, so no synchronous step parses more than a slice.
        for (const rec of seg) {
          if (rec.v === 2) await replayV2(redis, batch, metas, rec, slice);
          else await replayV1(redis, batch, rec);
        }
        await batch.flush();
        await refresh();
      } catch (err) {
        report.failed.push({ file, error: (err as Error).message });
        report.remainingSegments = files.length - f;
        return finish();
      }
      report.keys += batch.keys;
      report.added += batch.added;
      report.records += seg.records;
      let bytes = 0;
      for (const r of seg.damaged) bytes += r.bytes;
      report.corruptRecords += seg.damaged.length;
      const size = fileSize(file);
      report.bytes += size;
      hooks.onReplayed?.(seg.records, size);
      // A crash can only tear the end of the segment a dead writer was appending to.
      const crashTorn = file.endsWith('.open') && seg.damaged.length === 1 && seg.tailAt !== undefined && !seg.damaged[0]!.repaired;
      if (seg.damaged.length === 0) Journal.done(file);
      else if (crashTorn) {
        report.tornTails.push({ file, offset: seg.tailAt! });
        Journal.done(file);
      } else {
        const movedTo = Journal.quarantine(file);
        report.quarantined.push({ file, movedTo, damagedBytes: bytes, ranges: seg.damaged });
      }
      report.segments++;
    }
  } finally {
    await lock.release().catch(() => false);
  }
  return finish();
}

function fileSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}
