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
//
// Pacing: replay runs beside live calls on the same connection and event loop. A segment is read
// on the thread pool and parsed one record at a time; keys go out in slices (one script call each
// on standalone Redis, never two slices in flight), with an event-loop turn after every slice and, while live calls are in
// flight, a pause as long as the slice took (see `pace`).
import { statSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { Journal, type JournalRecordV1, type JournalRecordV2, type SegmentScan } from './journal.js';
import { isCluster, type RedisClient } from '../redis/client.js';
import { RedisLock } from '../redis/lock.js';
import { bucketKey, bucketsOfDigests, hllKey, metaField, metaKey, type Member } from './layout.js';
import { FIRST_SEEN } from './scripts.js';
import { int64Decimal } from '../redis/int64.js';
import { RespWriter } from '../redis/resp.js';
import { runScript, runScriptWire } from '../redis/scripts.js';
import { decimalLow20, intsetLimitOf, memberLow20, putLow20, splitLoad } from './growth.js';

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
}

/** Longest pause between two slices, however slow the last one was. */
const MAX_PAUSE_MS = 100;

const memberBytes = (m: Member): Buffer => (typeof m === 'string' ? Buffer.from(m) : m);

const turn = (): Promise<void> => new Promise<void>((r) => setImmediate(r));

/**
 * One slice of journal keys, sent as one command: on standalone Redis the dedup store's own
 * FIRST_SEEN script (one EVALSHA built with RespWriter, compact members written straight from
 * the digests), whose per-member answers count what Redis did not have yet; on a Cluster one SADD
 * per bucket key plus the PFADD, the slice's commands all in flight together. A slice holds
 * members of one HyperLogLog key only (a window or prefix change sends the slice first).
 */
class Batch {
  private readonly groups = new Map<string, number[]>();
  /** Per member: its digest (view and offset; none in format-1 records), and the raw member unless compact. */
  private readonly dvs: Array<DataView | undefined> = [];
  private readonly offs: number[] = [];
  private readonly raws: Array<Member | undefined> = [];
  /** Group key per member, and the members by their first digest word: repeats are dropped. */
  private readonly keyOf: string[] = [];
  private readonly byDigest = new Map<number, number[]>();
  private readonly rawSeen = new Set<string>();
  private hk = '';
  private repeats = 0;
  size = 0;
  keys = 0;
  added = 0;

  constructor(
    private readonly redis: RedisClient,
    private readonly slice: number,
    /** Runs after every sent slice with its round-trip time: yields, paces, refreshes the lock. */
    private readonly pace: (ms: number) => Promise<void>,
  ) {}

  /** Sends what the slice holds when its members belong to another HyperLogLog key than `hk`, or to the other layout. */
  async use(hk: string, compact: boolean): Promise<void> {
    if (hk === this.hk && compact === this.compact) return;
    await this.flush();
    this.hk = hk;
    this.compact = compact;
  }
  /** Whether the slice's buckets are compact ones, which split as they fill (growth.ts). */
  private compact = false;

  /**
   * Adds one member (`dv`/`off`: its 16-byte digest when the record has one; `raw`: the member
   * itself unless it is the compact digest's first 8 bytes); sends the slice (and paces) once it
   * holds `slice` members.
   */
  add(key: string, dv: DataView | undefined, off: number, raw: Member | undefined): Promise<void> | undefined {
    // The script answers from SMISMEMBER before its SADD: a member twice in one slice (a key
    // journaled twice) would count as added twice.
    if (this.repeated(key, dv, off, raw)) {
      this.repeats++;
      return undefined;
    }
    const i = this.size;
    this.keyOf[i] = key;
    this.dvs[i] = dv;
    this.offs[i] = off;
    this.raws[i] = raw;
    const g = this.groups.get(key);
    if (g === undefined) this.groups.set(key, [i]);
    else g.push(i);
    if (++this.size < this.slice) return undefined;
    const t = performance.now();
    return this.flush().then(() => this.pace(performance.now() - t));
  }

  private repeated(key: string, dv: DataView | undefined, off: number, raw: Member | undefined): boolean {
    if (dv === undefined) {
      const id = `${key}\u0000${memberBytes(raw!).toString('latin1')}`;
      if (this.rawSeen.has(id)) return true;
      this.rawSeen.add(id);
      return false;
    }
    const h = dv.getUint32(off, true);
    const c = this.byDigest.get(h);
    if (c === undefined) {
      this.byDigest.set(h, [this.size]);
      return false;
    }
    for (const j of c) {
      const dj = this.dvs[j]!;
      const oj = this.offs[j]!;
      if (this.keyOf[j] !== key || dj.getUint32(oj + 4, true) !== dv.getUint32(off + 4, true) || dj.getUint32(oj, true) !== h) continue;
      // compact: the member is these 8 bytes; sets: the raw members decide (a digest match is not proof)
      if (raw === undefined || memberBytes(raw).equals(memberBytes(this.raws[j]!))) return true;
    }
    c.push(this.size);
    return false;
  }

  /** Low 20 bits of compact member i (from its digest; from its decimal in records without one). */
  private low20(i: number): number {
    const dv = this.dvs[i];
    return dv !== undefined ? memberLow20(dv, this.offs[i]!) : decimalLow20(String(this.raws[i]));
  }

  private memberString(i: number): string {
    const raw = this.raws[i];
    return raw !== undefined ? (raw as string) : int64Decimal(this.dvs[i]!, this.offs[i]!);
  }

  async flush(): Promise<void> {
    const n = this.size;
    const repeats = this.repeats;
    if (n === 0) return;
    const groups = [...this.groups];
    this.groups.clear();
    this.byDigest.clear();
    this.rawSeen.clear();
    this.size = 0;
    this.repeats = 0;
    const hll = this.hk !== '';
    const alpha = this.compact ? String(splitLoad(await intsetLimitOf(this.redis))) : '0';
    let added = 0;
    if (!isCluster(this.redis)) {
      const G = groups.length;
      const numKeys = G + (hll ? 1 : 0);
      const w = new RespWriter(64 + G * 56 + n * 35);
      w.array(3 + numKeys + 4 + G + n);
      w.str('EVALSHA');
      w.str(FIRST_SEEN.sha);
      w.uintStr(numKeys);
      for (const [k] of groups) w.str(k);
      if (hll) w.str(this.hk);
      w.uintStr(G);
      w.str(hll ? '1' : '0');
      w.str(alpha);
      if (this.compact) {
        let at = w.bulkSpace(3 * n);
        for (const [, ix] of groups) {
          for (const i of ix) {
            putLow20(w.buf, at, this.low20(i));
            at += 3;
          }
        }
      } else w.str('');
      for (const [, ix] of groups) w.uintStr(ix.length);
      for (const [, ix] of groups) {
        for (const i of ix) {
          const raw = this.raws[i];
          if (raw !== undefined) w.member(raw);
          else w.int64(this.dvs[i]!, this.offs[i]!);
        }
      }
      const r = await runScriptWire(this.redis as Redis, FIRST_SEEN, w.bytes());
      if (r.length !== n) throw new Error(`Redis answered ${r.length} of ${n} replayed members`);
      for (let j = 0; j < n; j++) added += r[j]! - 48;
    } else {
      const all: string[] = [];
      const adds = groups.map(([k, ix]) => {
        const ms = ix.map((i) => this.memberString(i));
        if (hll) for (const m of ms) all.push(m);
        if (!this.compact) return this.redis.sadd(k, ...ms);
        const lows = Buffer.allocUnsafe(3 * ix.length);
        for (let j = 0; j < ix.length; j++) putLow20(lows, 3 * j, this.low20(ix[j]!));
        return (runScript(this.redis, FIRST_SEEN, 1, [k, '1', '0', alpha, lows, String(ms.length), ...ms]) as Promise<string>).then((r) => {
          let a = 0;
          for (let j = 0; j < r.length; j++) a += r.charCodeAt(j) - 48;
          return a;
        });
      });
      const ps = hll ? this.redis.pfadd(this.hk, ...all) : undefined;
      const [counts] = await Promise.all([Promise.all(adds), ps]);
      for (const c of counts) added += c;
    }
    this.keyOf.length = 0;
    this.dvs.length = 0;
    this.offs.length = 0;
    this.raws.length = 0;
    // counted only once Redis acknowledged the slice
    this.keys += n + repeats;
    this.added += added;
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

/** Bucket counts up to this keep their key strings (one per bucket, not one per replayed key). */
const BUCKET_KEY_CACHE_MAX = 65_536;

/** Bucket key strings of the (prefix, window, layout) replayed last. */
class BucketKeys {
  private id = '';
  private keys: Array<string | undefined> = [];

  of(rec: JournalRecordV2, buckets: number): (b: number) => string {
    const spec = { layout: rec.l, prefix: rec.p };
    if (buckets > BUCKET_KEY_CACHE_MAX) return (b) => bucketKey(spec, rec.w, b);
    const id = `${rec.p}\u0000${rec.w}\u0000${rec.l}\u0000${buckets}`;
    if (id !== this.id) {
      this.id = id;
      this.keys = new Array<string | undefined>(buckets);
    }
    const keys = this.keys;
    return (b) => (keys[b] ??= bucketKey(spec, rec.w, b));
  }
}

async function replayV2(redis: RedisClient, batch: Batch, metas: Map<string, number>, names: BucketKeys, rec: JournalRecordV2, slice: number): Promise<void> {
  const B = await windowBuckets(redis, metas, rec.p, rec.w, rec.l, rec.b);
  await batch.use(rec.h === 1 ? hllKey(rec.p, rec.w, rec.l) : '', rec.l === 'compact');
  const d = rec.d;
  const n = d.length >>> 4;
  const keyOf = names.of(rec, B);
  const dv = new DataView(d.buffer, d.byteOffset, d.byteLength);
  const compact = rec.l === 'compact';
  // Buckets a slice at a time: a record can hold a whole large batch.
  for (let s = 0; s < n; s += slice) {
    const e = Math.min(n, s + slice);
    // bucketsOfDigests reads through a DataView: any alignment works.
    const buckets = bucketsOfDigests(d.subarray(s << 4, e << 4), rec.l, B);
    for (let i = s; i < e; i++) {
      const key = keyOf(buckets[i - s]!);
      const sent = batch.add(key, dv, i << 4, compact ? undefined : rec.m![i]!);
      if (sent !== undefined) await sent;
    }
  }
}

/** Format 1 records carry bucket keys computed by the writer; they are replayed as written. */
async function replayV1(redis: RedisClient, batch: Batch, rec: JournalRecordV1): Promise<void> {
  await redis.hsetnx(rec.mk, rec.mf, String(rec.b));
  await batch.use(rec.hk, rec.mf.startsWith('compact'));
  for (const [key, members] of rec.g) {
    for (const m of members) {
      const sent = batch.add(key, undefined, 0, m);
      if (sent !== undefined) await sent;
    }
  }
}

/** Replays every replayable segment of `journal` under the lock `lockKey`. */
export async function replayJournal(redis: RedisClient, journal: Journal, lockKey: string, lockTtlMs: number, hooks: ReplayHooks = {}): Promise<RecoverReport> {
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
    const names = new BucketKeys();
    for (let f = 0; f < files.length; f++) {
      const file = files[f]!;
      const batch = new Batch(redis, slice, pace);
      let seg: SegmentScan;
      try {
        seg = await Journal.scan(file);
        // Records are parsed one at a time between slices; a run of small records counts
        // toward the slice through their keys, so no synchronous step parses more than a slice.
        for (const rec of seg) {
          if (rec.v === 2) await replayV2(redis, batch, metas, names, rec, slice);
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
