// Replays the fail-open journal into Redis. Idempotent (SADD/PFADD/HSETNX), so a segment that was
// half replayed before a crash simply replays again. A segment is deleted only after Redis
// acknowledged every command built from it.
import { Cluster, type Redis } from 'ioredis';
import { Journal, type JournalRecord } from './journal.js';
import type { RedisClient } from './layout.js';
import { RedisLock } from './lock.js';

export interface RecoverReport {
  /** True when another instance held the recover lock; nothing was replayed. */
  lockHeld: boolean;
  /** Segments replayed and deleted. */
  segments: number;
  records: number;
  /** Members sent to Redis / members Redis did not have yet. */
  keys: number;
  added: number;
  tornTails: Array<{ file: string; offset: number }>;
  corruptRecords: number;
  /** Segments left for the next replay because Redis failed (or the lock was lost). */
  failed: Array<{ file: string; error: string }>;
  remainingSegments: number;
}

export const emptyReport = (): RecoverReport => ({
  lockHeld: false,
  segments: 0,
  records: 0,
  keys: 0,
  added: 0,
  tornTails: [],
  corruptRecords: 0,
  failed: [],
  remainingSegments: 0,
});

const CHUNK = 10_000;

async function replayRecord(redis: RedisClient, rec: JournalRecord): Promise<{ keys: number; added: number }> {
  let keys = 0;
  let added = 0;
  if (!(redis instanceof Cluster)) {
    const pl = (redis as Redis).pipeline();
    pl.hsetnx(rec.mk, rec.mf, String(rec.b));
    const saddAt: number[] = [];
    let i = 1;
    for (const [key, members] of rec.g) {
      for (let s = 0; s < members.length; s += CHUNK) {
        const chunk = members.slice(s, s + CHUNK) as string[];
        keys += chunk.length;
        pl.sadd(key, ...chunk);
        saddAt.push(i++);
        if (rec.hk !== '') {
          pl.pfadd(rec.hk, ...chunk);
          i++;
        }
      }
    }
    const res = (await pl.exec()) ?? [];
    for (const [err] of res) if (err) throw err;
    for (const k of saddAt) added += res[k]![1] as number;
    return { keys, added };
  }
  const ps: Promise<unknown>[] = [redis.hsetnx(rec.mk, rec.mf, String(rec.b))];
  const adds: Promise<number>[] = [];
  for (const [key, members] of rec.g) {
    for (let s = 0; s < members.length; s += CHUNK) {
      const chunk = members.slice(s, s + CHUNK) as string[];
      keys += chunk.length;
      adds.push(redis.sadd(key, ...chunk));
      if (rec.hk !== '') ps.push(redis.pfadd(rec.hk, ...chunk));
    }
  }
  const [counts] = await Promise.all([Promise.all(adds), Promise.all(ps)]);
  for (const c of counts) added += c;
  return { keys, added };
}

/** Replays every replayable segment of `journal` under the lock `lockKey`. */
export async function replayJournal(redis: RedisClient, journal: Journal, lockKey: string, lockTtlMs: number): Promise<RecoverReport> {
  const report = emptyReport();
  const lock = await RedisLock.acquire(redis, lockKey, lockTtlMs);
  if (lock === undefined) {
    report.lockHeld = true;
    report.remainingSegments = journal.replayable().length;
    return report;
  }
  try {
    journal.seal();
    const files = journal.replayable();
    for (let f = 0; f < files.length; f++) {
      const file = files[f]!;
      const seg = Journal.read(file);
      try {
        for (const rec of seg.records) {
          const r = await replayRecord(redis, rec);
          report.keys += r.keys;
          report.added += r.added;
          report.records++;
        }
        if (!(await lock.refresh())) throw new Error('recover lock expired and is held by another owner');
      } catch (err) {
        report.failed.push({ file, error: (err as Error).message });
        report.remainingSegments = files.length - f;
        return report;
      }
      if (seg.tornAt !== undefined) report.tornTails.push({ file, offset: seg.tornAt });
      report.corruptRecords += seg.corrupt;
      Journal.done(file);
      report.segments++;
    }
  } finally {
    await lock.release().catch(() => false);
  }
  return report;
}
