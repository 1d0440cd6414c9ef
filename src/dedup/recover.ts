// Replays the fail-open journal into Redis. Idempotent (SADD/PFADD/HSETNX), so a segment that was
// half replayed before a crash simply replays again. A segment is deleted only after Redis
// acknowledged every command built from it.
//
// Keys are placed against the bucket count the WINDOW has recorded in Redis (HSETNX of the
// writer's configured count, then HGET), never a count the writer guessed while Redis was away.
// Damage: the intact records of a damaged segment are replayed; a sealed segment (or a dead
// writer's segment damaged anywhere but at its very end) is then quarantined (renamed
// `.corrupt`, reported, `complete: false`). Only the torn end of a dead writer's `.open` segment,
// which is what a crash during a write leaves, is dropped: no caller was answered for it.
import { statSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { Journal, type JournalRecord, type JournalRecordV1, type JournalRecordV2 } from './journal.js';
import { isCluster, type RedisClient } from '../redis/client.js';
import { RedisLock } from '../redis/lock.js';
import { bucketKey, bucketsOfDigests, compactMember, hllKey, metaField, metaKey, type Member } from './layout.js';

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

const CHUNK = 10_000;

/** Members per bucket key (and per HyperLogLog key), sent in one pipeline per CHUNK members. */
class Batch {
  readonly sets = new Map<string, Member[]>();
  readonly hlls = new Map<string, Member[]>();
  size = 0;
  keys = 0;
  added = 0;

  constructor(private readonly redis: RedisClient) {}

  add(key: string, hk: string, m: Member): void {
    let a = this.sets.get(key);
    if (a === undefined) this.sets.set(key, (a = []));
    a.push(m);
    if (hk !== '') {
      let h = this.hlls.get(hk);
      if (h === undefined) this.hlls.set(hk, (h = []));
      h.push(m);
    }
    this.size++;
  }

  async flushIfFull(): Promise<void> {
    if (this.size >= CHUNK) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.size === 0) return;
    const sets = [...this.sets];
    const hlls = [...this.hlls];
    this.sets.clear();
    this.hlls.clear();
    this.keys += this.size;
    this.size = 0;
    if (!isCluster(this.redis)) {
      const pl = (this.redis as Redis).pipeline();
      for (const [k, ms] of sets) pl.sadd(k, ...(ms as string[]));
      for (const [k, ms] of hlls) pl.pfadd(k, ...(ms as string[]));
      const res = (await pl.exec()) ?? [];
      for (const [err] of res) if (err) throw err;
      for (let i = 0; i < sets.length; i++) this.added += res[i]![1] as number;
      return;
    }
    const adds = sets.map(([k, ms]) => this.redis.sadd(k, ...(ms as string[])));
    const ps = hlls.map(([k, ms]) => this.redis.pfadd(k, ...(ms as string[])));
    const [counts] = await Promise.all([Promise.all(adds), Promise.all(ps)]);
    for (const c of counts) this.added += c;
  }
}

/** Bucket count recorded for (prefix, window, layout), recording `configured` if none is yet. */
async function windowBuckets(redis: RedisClient, cache: Map<string, number>, prefix: string, window: string, layout: 'compact' | 'sets', configured: number): Promise<number> {
  const id = `${prefix}\u0000${window}\u0000${layout}`;
  const known = cache.get(id);
  if (known !== undefined) return known;
  const mk = metaKey(prefix, window);
  await redis.hsetnx(mk, metaField(layout), String(configured));
  const v = Number(await redis.hget(mk, metaField(layout)));
  const b = Number.isInteger(v) && v > 0 ? v : configured;
  cache.set(id, b);
  return b;
}

async function replayV2(redis: RedisClient, batch: Batch, metas: Map<string, number>, rec: JournalRecordV2): Promise<void> {
  const B = await windowBuckets(redis, metas, rec.p, rec.w, rec.l, rec.b);
  const d = rec.d;
  // bucketsOfDigests and compactMember read through a DataView: any alignment works.
  const buckets = bucketsOfDigests(d, rec.l, B);
  const spec = { layout: rec.l, prefix: rec.p };
  const hk = rec.h === 1 ? hllKey(rec.p, rec.w, rec.l) : '';
  const dv = new DataView(d.buffer, d.byteOffset, d.byteLength);
  for (let i = 0; i < buckets.length; i++) {
    const m = rec.l === 'compact' ? compactMember(d, i, dv) : rec.m![i]!;
    batch.add(bucketKey(spec, rec.w, buckets[i]!), hk, m);
    await batch.flushIfFull();
  }
}

/** Format 1 records carry bucket keys computed by the writer; they are replayed as written. */
async function replayV1(redis: RedisClient, batch: Batch, rec: JournalRecordV1): Promise<void> {
  await redis.hsetnx(rec.mk, rec.mf, String(rec.b));
  for (const [key, members] of rec.g) {
    for (const m of members) {
      batch.add(key, rec.hk, m);
      await batch.flushIfFull();
    }
  }
}

async function replayRecord(redis: RedisClient, batch: Batch, metas: Map<string, number>, rec: JournalRecord): Promise<void> {
  if (rec.v === 2) await replayV2(redis, batch, metas, rec);
  else await replayV1(redis, batch, rec);
}

export interface ReplayHooks {
  /** Called after each segment's records were acknowledged. */
  onReplayed?(records: number, bytes: number): void;
}

/** Replays every replayable segment of `journal` under the lock `lockKey`. */
export async function replayJournal(redis: RedisClient, journal: Journal, lockKey: string, lockTtlMs: number, hooks: ReplayHooks = {}): Promise<RecoverReport> {
  const report = emptyReport();
  const finish = (): RecoverReport => {
    report.quarantinedFiles = journal.quarantined();
    report.complete = !report.lockHeld && report.failed.length === 0 && report.remainingSegments === 0 && report.quarantinedFiles.length === 0;
    return report;
  };
  const lock = await RedisLock.acquire(redis, lockKey, lockTtlMs);
  if (lock === undefined) {
    report.lockHeld = true;
    report.remainingSegments = journal.replayable().length;
    return finish();
  }
  try {
    await journal.seal();
    const files = journal.replayable();
    const metas = new Map<string, number>();
    for (let f = 0; f < files.length; f++) {
      const file = files[f]!;
      const seg = Journal.read(file);
      const batch = new Batch(redis);
      try {
        for (const rec of seg.records) await replayRecord(redis, batch, metas, rec);
        await batch.flush();
        if (!(await lock.refresh())) throw new Error('recover lock expired and is held by another owner');
      } catch (err) {
        report.failed.push({ file, error: (err as Error).message });
        report.remainingSegments = files.length - f;
        return finish();
      }
      report.keys += batch.keys;
      report.added += batch.added;
      report.records += seg.records.length;
      let bytes = 0;
      for (const r of seg.damaged) bytes += r.bytes;
      report.corruptRecords += seg.damaged.length;
      const size = fileSize(file);
      report.bytes += size;
      hooks.onReplayed?.(seg.records.length, size);
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
