// Fail-open journal: what Redis did not acknowledge, kept on local disk until recover() has put
// it into Redis.
//
// Files: `<dir>/seg-<pid>-<time>-<seq>.open` while a process appends to it, renamed to `.hgj`
// (sealed) on rotation or close. Replay reads sealed segments and the `.open` segments of dead
// processes (crashed writers), never another live process's active segment.
// Record: u32 LE payload length | u32 LE crc32(payload) | payload (msgpackr). One record per
// failed batch, written with a single write and fsync'd before firstSeen answers, so an answered
// key is on disk. A record cut short by a crash (torn tail) or with a bad checksum is reported
// and skipped; the records before and after it still replay.
import { closeSync, existsSync, fstatSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { Packr } from 'msgpackr';
import { ErrorCodes, HashGateError } from '../errors.js';
import type { Member } from './layout.js';

export interface JournalRecord {
  v: 1;
  /** ms since epoch when journaled. */
  t: number;
  w: string;
  /** Meta hash key / field / bucket count, so replay records the bucketing like a live write. */
  mk: string;
  mf: string;
  b: number;
  /** HyperLogLog key or '' when disabled. */
  hk: string;
  /** Groups: resolved Redis key and its members. */
  g: Array<[string, Member[]]>;
}

export interface SegmentRead {
  file: string;
  records: JournalRecord[];
  /** Byte offset of a torn tail (incomplete last record), if any. */
  tornAt?: number;
  corrupt: number;
}

const packr = new Packr({ useRecords: false, moreTypes: false });
const HEADER = 8;

const alive = (pid: number): boolean => {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

export class Journal {
  private fd: number | undefined;
  private file = '';
  private size = 0;
  private seq = 0;
  private total = 0;

  constructor(
    readonly dir: string,
    private readonly segmentBytes: number,
    private readonly maxBytes: number,
  ) {}

  private ensureDir(): void {
    mkdirSync(this.dir, { recursive: true });
  }

  /** Bytes held by all segments (sealed and open). */
  pendingBytes(): number {
    if (!existsSync(this.dir)) return 0;
    let n = 0;
    for (const f of readdirSync(this.dir)) if (/^seg-.*\.(open|hgj)$/.test(f)) n += statSync(join(this.dir, f)).size;
    return n;
  }

  /** Appends one record and fsyncs it. Throws HG_ERR_JOURNAL when it cannot be made durable. */
  append(rec: JournalRecord): void {
    let buf: Buffer;
    try {
      const payload = packr.pack(rec);
      buf = Buffer.allocUnsafe(HEADER + payload.length);
      buf.writeUInt32LE(payload.length, 0);
      buf.writeUInt32LE(crc32(payload), 4);
      payload.copy(buf, HEADER);
    } catch (cause) {
      throw new HashGateError(ErrorCodes.JOURNAL, 'cannot encode journal record', { cause });
    }
    try {
      if (this.fd === undefined) {
        this.ensureDir();
        this.total = this.pendingBytes();
      }
      if (this.total + buf.length > this.maxBytes) {
        throw new HashGateError(ErrorCodes.JOURNAL, `journal is full (dedup.journalMaxBytes = ${this.maxBytes}); run recover()`, {
          details: { dir: this.dir, bytes: this.total },
        });
      }
      if (this.fd !== undefined && this.size + buf.length > this.segmentBytes && this.size > 0) this.seal();
      if (this.fd === undefined) {
        this.file = join(this.dir, `seg-${process.pid}-${String(Date.now()).padStart(15, '0')}-${String(this.seq++).padStart(6, '0')}.open`);
        this.fd = openSync(this.file, 'a', 0o600); // journal records hold raw keys: owner-only
        this.size = fstatSync(this.fd).size;
      }
      let off = 0;
      while (off < buf.length) off += writeSync(this.fd, buf, off, buf.length - off);
      fsyncSync(this.fd);
      this.size += buf.length;
      this.total += buf.length;
    } catch (cause) {
      if (cause instanceof HashGateError) throw cause;
      throw new HashGateError(ErrorCodes.JOURNAL, `cannot write journal in ${this.dir}: ${(cause as Error).message}`, { cause });
    }
  }

  /** Closes the active segment and renames it to sealed, so replay may consume it. */
  seal(): void {
    if (this.fd === undefined) return;
    fsyncSync(this.fd);
    closeSync(this.fd);
    this.fd = undefined;
    renameSync(this.file, this.file.replace(/\.open$/, '.hgj'));
    this.size = 0;
  }

  /** Sealed segments plus open segments of dead processes, oldest first. */
  replayable(): string[] {
    if (!existsSync(this.dir)) return [];
    const out: string[] = [];
    for (const f of readdirSync(this.dir)) {
      if (f.endsWith('.hgj')) out.push(f);
      else if (f.endsWith('.open')) {
        const pid = Number(f.split('-')[1]);
        if (!alive(pid) && join(this.dir, f) !== this.file) out.push(f);
      }
    }
    // Sort by time then seq, not by pid.
    const k = (f: string): string => f.split('-').slice(2).join('-');
    return out.sort((a, b) => (k(a) < k(b) ? -1 : k(a) > k(b) ? 1 : 0)).map((f) => join(this.dir, f));
  }

  static read(file: string): SegmentRead {
    const buf = readFileSync(file);
    const records: JournalRecord[] = [];
    let off = 0;
    let corrupt = 0;
    let tornAt: number | undefined;
    while (off < buf.length) {
      if (buf.length - off < HEADER) {
        tornAt = off;
        break;
      }
      const len = buf.readUInt32LE(off);
      const sum = buf.readUInt32LE(off + 4);
      if (off + HEADER + len > buf.length) {
        tornAt = off;
        break;
      }
      const payload = buf.subarray(off + HEADER, off + HEADER + len);
      if (crc32(payload) !== sum) {
        if (off + HEADER + len === buf.length) tornAt = off;
        else corrupt++;
      } else {
        try {
          const r = packr.unpack(payload) as JournalRecord;
          if (r && r.v === 1 && Array.isArray(r.g)) records.push(r);
          else corrupt++;
        } catch {
          corrupt++;
        }
      }
      off += HEADER + len;
    }
    return tornAt === undefined ? { file, records, corrupt } : { file, records, corrupt, tornAt };
  }

  /** Marks a segment done (after Redis acknowledged every key in it). */
  static done(file: string): void {
    unlinkSync(file);
  }

  close(): void {
    this.seal();
  }
}
