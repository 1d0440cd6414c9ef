// Fail-open journal: what Redis did not acknowledge, kept on local disk until recover() has put
// it into Redis.
//
// Files: `<dir>/seg-<pid>-<15-digit ms>-<6-digit seq>.open` while a process appends to it, renamed
// to `.hgj` (sealed) on rotation, replay or close. Only names of exactly that shape are ever read,
// renamed or deleted: anything else in the directory belongs to someone else. Replay reads sealed
// segments and the `.open` segments of dead processes (crashed writers), never another live
// process's active segment. A sealed segment found damaged is renamed `<name>.corrupt`
// (quarantined) after its intact records were replayed, so nothing is deleted that may hold keys.
//
// Record (format 2): u32 LE magic 'HGJ2' | u32 LE payload length | u32 LE crc32(magic, length,
// payload) | payload (msgpackr). The checksum covers the header, so a damaged length is detected
// instead of swallowing the rest of the file, and the magic lets the reader resynchronise on the
// next intact record after a damaged region. The payload holds what replay needs to place keys
// itself (window, prefix, layout, the 16-byte digests, raw members for the 'sets' layout, the
// bucket count the writer was configured with); replay computes buckets from the window's
// recorded bucket count, so a writer that never learnt that count cannot misplace keys.
//
// Format 1 (u32 length | u32 crc32(payload) | payload, records holding already-computed bucket
// keys) is still read: a segment whose first bytes are not the magic is parsed as format 1.
//
// Appends are group-committed: records appended during one turn of the event loop are written
// with one write and one fsync on the libuv thread pool, and every append resolves only after
// its record is on disk. Callers therefore always wait on I/O (the event loop keeps turning while
// Redis is down) and a burst of 256 single-key failures costs one fsync, not 256.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync } from 'node:fs';
import { open, readFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { Packr } from 'msgpackr';
import { ErrorCodes, HashGateError } from '../errors.js';
import type { Member } from './layout.js';
import type { Layout } from './options.js';

/** Format 1 record (read only): groups of already-bucketed members. */
export interface JournalRecordV1 {
  v: 1;
  t: number;
  w: string;
  mk: string;
  mf: string;
  b: number;
  hk: string;
  g: Array<[string, Member[]]>;
}

/** Format 2 record: keys as digests; replay places them against the window's recorded bucket count. */
export interface JournalRecordV2 {
  v: 2;
  /** ms since epoch when journaled. */
  t: number;
  /** Window id. */
  w: string;
  /** Redis key prefix and layout of the writer. */
  p: string;
  l: Layout;
  /** Bucket count the writer was configured with: used only when the window has none recorded yet. */
  b: number;
  /** Written as 0 (once: 1 when the writer kept a HyperLogLog, which replay no longer feeds). */
  h: 0 | 1;
  /** 16-byte digests, back to back (compact: member = bytes 0..7, bucket from bytes 8..15). */
  d: Uint8Array;
  /** 'sets' layout: the raw members (the bucket comes from the digest bytes 0..7). */
  m?: Member[];
}

export type JournalRecord = JournalRecordV1 | JournalRecordV2;

export interface DamagedRange {
  offset: number;
  bytes: number;
  /** The damage hit only a length field and the record was recovered whole. */
  repaired?: boolean;
}

export interface SegmentRead {
  file: string;
  records: JournalRecord[];
  /** Record format of the segment (1 or 2). */
  format: 1 | 2;
  /** Damaged byte ranges, in file order. */
  damaged: DamagedRange[];
  /** Set when the last damaged range runs to the end of the file (no intact record after it). */
  tailAt?: number;
}

const packr = new Packr({ useRecords: false, moreTypes: false });
const MAGIC = 0x32_4a_47_48; // bytes 'H' 'G' 'J' '2' in little endian
const HEADER = 12;
const V1_HEADER = 8;
/** Per process, not per Journal: two journals of one process on one directory never share a file name. */
let segmentSeq = 0;
/** Segment names this journal owns; nothing else in the directory is ever touched. */
export const SEGMENT_RE = /^seg-(\d+)-(\d{15})-(\d{6})\.(open|hgj)$/;

const alive = (pid: number): boolean => {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

export function encodeRecord(rec: JournalRecord): Buffer {
  const payload = packr.pack(rec);
  const buf = Buffer.allocUnsafe(HEADER + payload.length);
  buf.writeUInt32LE(MAGIC, 0);
  buf.writeUInt32LE(payload.length, 4);
  buf.writeUInt32LE(crc32(payload, crc32(buf.subarray(0, 8))), 8);
  payload.copy(buf, HEADER);
  return buf;
}

const validRecord = (r: unknown): r is JournalRecord => {
  if (r === null || typeof r !== 'object') return false;
  const x = r as Record<string, unknown>;
  if (x.v === 1) return Array.isArray(x.g) && typeof x.mk === 'string';
  return (
    x.v === 2 && typeof x.w === 'string' && typeof x.p === 'string' && (x.l === 'compact' || x.l === 'sets') &&
    Number.isInteger(x.b) && (x.b as number) > 0 && x.d instanceof Uint8Array && (x.d as Uint8Array).length % 16 === 0 &&
    (x.l === 'compact' || (Array.isArray(x.m) && (x.m as unknown[]).length === (x.d as Uint8Array).length / 16))
  );
};

type Waiter = [resolve: (bytes: number) => void, reject: (err: unknown) => void, bytes: number];

export class Journal {
  private handle: FileHandle | undefined;
  private file = '';
  private size = 0;
  private total = -1;
  private queue: Buffer[] = [];
  private queueBytes = 0;
  private waiters: Waiter[] = [];
  private flushing: Promise<void> | undefined;
  /** Serialises flushes and seals (rename must not race a write to the same file). */
  private chain: Promise<void> = Promise.resolve();

  constructor(
    readonly dir: string,
    private readonly segmentBytes: number,
    private readonly maxBytes: number,
  ) {}

  /** Bytes held by all segments (sealed and open). */
  pendingBytes(): number {
    if (!existsSync(this.dir)) return 0;
    let n = 0;
    for (const f of readdirSync(this.dir)) {
      if (!SEGMENT_RE.test(f)) continue;
      try {
        n += statSync(join(this.dir, f)).size;
      } catch {
        // replayed and deleted between readdir and stat
      }
    }
    return n;
  }

  /** True while appends wait to be written. */
  get busy(): boolean {
    return this.flushing !== undefined;
  }

  /**
   * Appends one record; resolves (with the bytes written) once it is fsync'd. Rejects with
   * HG_ERR_JOURNAL when it cannot be made durable or the journal is full.
   */
  append(rec: JournalRecord): Promise<number> {
    let buf: Buffer;
    try {
      buf = encodeRecord(rec);
    } catch (cause) {
      return Promise.reject(new HashGateError(ErrorCodes.JOURNAL, 'cannot encode journal record', { cause }));
    }
    if (this.total < 0) this.total = this.pendingBytes();
    if (this.total + this.queueBytes + buf.length > this.maxBytes) {
      return Promise.reject(
        new HashGateError(ErrorCodes.JOURNAL, `journal is full (dedup.journalMaxBytes = ${this.maxBytes}); run recover()`, {
          details: { dir: this.dir, bytes: this.total + this.queueBytes },
        }),
      );
    }
    return new Promise<number>((resolve, reject) => {
      this.queue.push(buf);
      this.queueBytes += buf.length;
      this.waiters.push([resolve, reject, buf.length]);
      this.kick();
    });
  }

  private kick(): void {
    if (this.flushing !== undefined) return;
    const run = (async () => {
      // Let every caller of this turn of the event loop join the same write + fsync.
      await new Promise<void>((r) => setImmediate(r));
      while (this.queue.length > 0) await this.serial(() => this.flushOnce());
    })();
    this.flushing = run.finally(() => {
      this.flushing = undefined;
      if (this.queue.length > 0) this.kick();
    });
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.chain.then(fn);
    this.chain = p.then(
      () => undefined,
      () => undefined,
    );
    return p;
  }

  private async flushOnce(): Promise<void> {
    const bufs = this.queue;
    const waiters = this.waiters;
    const bytes = this.queueBytes;
    this.queue = [];
    this.waiters = [];
    this.queueBytes = 0;
    if (bufs.length === 0) return;
    const data = bufs.length === 1 ? bufs[0]! : Buffer.concat(bufs, bytes);
    let good = -1;
    try {
      if (this.handle !== undefined && this.size > 0 && this.size + bytes > this.segmentBytes) await this.sealNow();
      if (this.handle === undefined) {
        mkdirSync(this.dir, { recursive: true, mode: 0o700 });
        if (this.total < 0) this.total = this.pendingBytes();
        this.file = join(this.dir, `seg-${process.pid}-${String(Date.now()).padStart(15, '0')}-${String(segmentSeq++ % 1_000_000).padStart(6, '0')}.open`);
        // The journal holds raw keys in the 'sets' layout: owner-only.
        this.handle = await open(this.file, 'a', 0o600);
        this.size = (await this.handle.stat()).size;
      }
      good = this.size;
      let off = 0;
      while (off < data.length) off += (await this.handle.write(data, off, data.length - off)).bytesWritten;
      await this.handle.sync();
      this.size += data.length;
      this.total += data.length;
    } catch (cause) {
      // Cut a partial write back so the segment stays a clean sequence of records.
      if (this.handle !== undefined && good >= 0) await this.handle.truncate(good).catch(() => undefined);
      const err =
        cause instanceof HashGateError ? cause : new HashGateError(ErrorCodes.JOURNAL, `cannot write journal in ${this.dir}: ${(cause as Error).message}`, { cause });
      for (const w of waiters) w[1](err);
      return;
    }
    for (const w of waiters) w[0](w[2]);
  }

  private async sealNow(): Promise<void> {
    const h = this.handle;
    if (h === undefined) return;
    this.handle = undefined;
    try {
      await h.sync();
    } finally {
      await h.close();
      renameSync(this.file, this.file.replace(/\.open$/, '.hgj'));
      this.file = '';
      this.size = 0;
      // Replay may delete segments from now on: recount before the next segment opens.
      this.total = -1;
    }
  }

  /**
   * Closes the active segment (after the write in progress) and renames it sealed, so replay may
   * consume it. Appends still queued go to the next segment.
   */
  async seal(): Promise<void> {
    await this.serial(() => this.sealNow());
  }

  /** Sealed segments plus open segments of dead processes, oldest first. */
  replayable(): string[] {
    if (!existsSync(this.dir)) return [];
    const out: Array<[string, string]> = [];
    for (const f of readdirSync(this.dir)) {
      const m = SEGMENT_RE.exec(f);
      if (m === null) continue;
      if (m[4] === 'open' && (alive(Number(m[1])) || join(this.dir, f) === this.file)) continue;
      out.push([`${m[2]}-${m[3]}-${m[1]}`, f]);
    }
    // Sort by time then seq, not by pid.
    return out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([, f]) => join(this.dir, f));
  }

  /** Quarantined segments (`*.corrupt`) waiting for an operator. */
  quarantined(): string[] {
    if (!existsSync(this.dir)) return [];
    return readdirSync(this.dir)
      .filter((f) => f.endsWith('.corrupt') && SEGMENT_RE.test(f.slice(0, -'.corrupt'.length)))
      .map((f) => join(this.dir, f));
  }

  /** Parses a segment; never throws on damaged content. */
  static read(file: string): SegmentRead {
    const scan = new SegmentScan(file, readFileSync(file));
    const records = [...scan];
    const out: SegmentRead = { file, records, format: scan.format, damaged: scan.damaged };
    if (scan.tailAt !== undefined) out.tailAt = scan.tailAt;
    return out;
  }

  /**
   * Reads a segment on the thread pool (a 64 MiB segment read synchronously would stall the
   * event loop) and returns it for parsing record by record. Never rejects on damaged content.
   */
  static async scan(file: string): Promise<SegmentScan> {
    return new SegmentScan(file, await readFile(file));
  }

  /** Marks a segment done (after Redis acknowledged every key in it). */
  static done(file: string): void {
    unlinkSync(file);
  }

  /** Keeps a damaged segment for an operator: renamed `<name>.corrupt`, never read again. */
  static quarantine(file: string): string {
    const to = `${file}.corrupt`;
    renameSync(file, to);
    return to;
  }

  /** Writes every queued append, then seals. */
  async close(): Promise<void> {
    while (this.flushing !== undefined) await this.flushing;
    await this.seal();
  }
}

const MAGIC_BYTES = Buffer.from([0x48, 0x47, 0x4a, 0x32]);

/**
 * Format-2 records of `buf` in file order, one at a time. Damaged ranges go to `out.damaged` as
 * they are found (and `out.tailAt` when the damage runs to the end), so they are complete once
 * the generator is exhausted.
 */
function* scanV2(buf: Buffer, out: { damaged: DamagedRange[]; tailAt?: number }): Generator<JournalRecord, void, undefined> {
  let off = 0;
  let badFrom = -1;
  while (off < buf.length) {
    const rec = recordAt(buf, off);
    if (rec !== undefined) {
      if (badFrom >= 0) {
        out.damaged.push({ offset: badFrom, bytes: off - badFrom });
        badFrom = -1;
      }
      off = rec.end;
      yield rec.record;
      continue;
    }
    // Resynchronise: the next magic after this byte that starts an intact record.
    let next = buf.indexOf(MAGIC_BYTES, off + 1);
    if (next < 0) next = buf.length;
    // A damaged length field alone: the checksum, taken with the length implied by where the
    // next record starts, proves the payload intact, and the record is kept.
    const fixed = recordWithLength(buf, off, next - off - HEADER);
    if (fixed !== undefined) {
      out.damaged.push({ offset: off + 4, bytes: 4, repaired: true });
      off = next;
      yield fixed;
      continue;
    }
    if (badFrom < 0) badFrom = off;
    off = next;
  }
  if (badFrom >= 0) {
    out.damaged.push({ offset: badFrom, bytes: buf.length - badFrom });
    out.tailAt = badFrom;
  }
}

/**
 * One segment, parsed lazily: iterating yields its records one by one (format 2, or format 1 when
 * the segment holds no intact format-2 record), so replay can work through a large segment in
 * slices. `format`, `damaged`, `tailAt` and `records` are final once the iteration is done.
 */
export class SegmentScan implements Iterable<JournalRecord> {
  format: 1 | 2 = 2;
  damaged: DamagedRange[] = [];
  tailAt: number | undefined;
  /** Records yielded so far. */
  records = 0;

  constructor(
    readonly file: string,
    private readonly buf: Buffer,
  ) {}

  *[Symbol.iterator](): Iterator<JournalRecord> {
    for (const r of scanV2(this.buf, this)) {
      this.records++;
      yield r;
    }
    if (this.records > 0 || this.buf.length === 0) return;
    // No intact format-2 record anywhere: an old segment, or one damaged beyond recognition.
    const v1 = readV1(this.file, this.buf);
    if (v1.records.length === 0) return;
    this.format = 1;
    this.damaged = v1.damaged;
    this.tailAt = v1.tailAt;
    for (const r of v1.records) {
      this.records++;
      yield r;
    }
  }
}

function recordWithLength(buf: Buffer, off: number, len: number): JournalRecord | undefined {
  if (len < 0 || buf.length - off < HEADER || buf.readUInt32LE(off) !== MAGIC) return undefined;
  const head = Buffer.allocUnsafe(8);
  head.writeUInt32LE(MAGIC, 0);
  head.writeUInt32LE(len, 4);
  const payload = buf.subarray(off + HEADER, off + HEADER + len);
  if (crc32(payload, crc32(head)) !== buf.readUInt32LE(off + 8)) return undefined;
  try {
    const r: unknown = packr.unpack(payload);
    return validRecord(r) ? r : undefined;
  } catch {
    return undefined;
  }
}

function recordAt(buf: Buffer, off: number): { record: JournalRecord; end: number } | undefined {
  if (buf.length - off < HEADER || buf.readUInt32LE(off) !== MAGIC) return undefined;
  const len = buf.readUInt32LE(off + 4);
  if (len > buf.length - off - HEADER) return undefined;
  const payload = buf.subarray(off + HEADER, off + HEADER + len);
  if (crc32(payload, crc32(buf.subarray(off, off + 8))) !== buf.readUInt32LE(off + 8)) return undefined;
  try {
    const r: unknown = packr.unpack(payload);
    return validRecord(r) ? { record: r, end: off + HEADER + len } : undefined;
  } catch {
    return undefined;
  }
}

/** Format 1: no magic, so no resynchronisation; everything from the first damage on is one damaged range. */
function readV1(file: string, buf: Buffer): SegmentRead {
  const records: JournalRecord[] = [];
  const damaged: DamagedRange[] = [];
  let off = 0;
  while (off < buf.length) {
    const len = buf.length - off >= V1_HEADER ? buf.readUInt32LE(off) : -1;
    if (len < 0 || off + V1_HEADER + len > buf.length) break;
    const payload = buf.subarray(off + V1_HEADER, off + V1_HEADER + len);
    let r: unknown;
    if (crc32(payload) === buf.readUInt32LE(off + 4)) {
      try {
        r = packr.unpack(payload);
      } catch {
        r = undefined;
      }
    }
    if (r === undefined || !validRecord(r) || r.v !== 1) break;
    records.push(r);
    off += V1_HEADER + len;
  }
  const out: SegmentRead = { file, records, format: 1, damaged };
  if (off < buf.length) {
    damaged.push({ offset: off, bytes: buf.length - off });
    out.tailAt = off;
  }
  return out;
}
