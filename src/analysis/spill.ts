// The bucket analysis's spill files: when its set of distinct digests would outgrow its memory
// bound, rows go to hash-partitioned files that are de-duplicated one at a time, so an export of
// any size is counted exactly with bounded memory.
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const PARTITIONS = 256;
const PART_BUFFER = 64 * 1024;

/**
 * Fixed-size records (a 16-byte digest first) written to PARTITIONS temporary files by one digest
 * byte, so every copy of a key lands in the same file and each file can be de-duplicated alone.
 */
export class DigestSpill {
  readonly dir: string;
  private readonly fds: number[] = [];
  private readonly bufs: Buffer[] = [];
  private readonly used = new Uint32Array(PARTITIONS);
  private readonly rows = new Float64Array(PARTITIONS);

  constructor(readonly recordBytes: number) {
    this.dir = mkdtempSync(join(tmpdir(), 'hashgate-buckets-'));
    try {
      for (let p = 0; p < PARTITIONS; p++) {
        this.fds.push(openSync(join(this.dir, String(p)), 'w+'));
        this.bufs.push(Buffer.allocUnsafe(PART_BUFFER - (PART_BUFFER % recordBytes)));
      }
    } catch (err) {
      this.dispose();
      throw err;
    }
  }

  /** Record space in partition `p` (chosen by the caller from a digest byte): fill [offset, offset + recordBytes). */
  slot(p: number): { buf: Buffer; offset: number } {
    let u = this.used[p]!;
    const b = this.bufs[p]!;
    if (u + this.recordBytes > b.length) {
      this.flush(p);
      u = 0;
    }
    this.used[p] = u + this.recordBytes;
    this.rows[p]!++;
    return { buf: b, offset: u };
  }

  private flush(p: number): void {
    const u = this.used[p]!;
    let off = 0;
    while (off < u) off += writeSync(this.fds[p]!, this.bufs[p]!, off, u - off);
    this.used[p] = 0;
  }

  /** Calls `each(buf, count)` with the records of partition p, in chunks; a fresh pass per partition. */
  read(p: number, each: (buf: Buffer, count: number) => void): void {
    this.flush(p);
    const buf = this.bufs[p]!;
    let pos = 0;
    for (;;) {
      let got = 0;
      while (got < buf.length) {
        const r = readSync(this.fds[p]!, buf, got, buf.length - got, pos + got);
        if (r === 0) break;
        got += r;
      }
      if (got === 0) break;
      each(buf, Math.floor(got / this.recordBytes));
      pos += got;
      if (got < buf.length) break;
    }
  }

  rowsIn(p: number): number {
    return this.rows[p]!;
  }

  get partitions(): number {
    return PARTITIONS;
  }

  dispose(): void {
    for (const fd of this.fds) {
      try {
        closeSync(fd);
      } catch {
        /* already closed */
      }
    }
    this.fds.length = 0;
    rmSync(this.dir, { recursive: true, force: true });
  }
}
