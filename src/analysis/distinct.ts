// Exact distinct-key detection for the bucket analysis: a set of 128-bit digests in one typed array
// (16 B per slot, no object per key), and hash-partitioned spill files for when the set would
// outgrow its memory bound, so an export of any size is counted with bounded memory.
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const MIN_SLOTS = 1024;

/**
 * Open-addressing set of 128-bit digests, four Uint32 words per slot. Digests are murmur3_128
 * output, so word 0 is already uniform and serves as the hash. An all-zero slot is empty; the
 * all-zero digest itself is tracked by a flag so it still counts exactly.
 */
export class Digest128Set {
  private cells: Uint32Array;
  private mask: number;
  private zero = false;
  size = 0;

  constructor(capacity = MIN_SLOTS) {
    let cap = MIN_SLOTS;
    while (cap * 0.75 < capacity) cap *= 2;
    this.cells = new Uint32Array(cap * 4);
    this.mask = cap - 1;
  }

  get byteLength(): number {
    return this.cells.byteLength;
  }

  /** Whether one more key fits without growing (load factor kept <= 3/4). */
  get full(): boolean {
    return (this.size + 1) * 4 > (this.mask + 1) * 3;
  }

  /** Bytes the set takes after its next growth. */
  get grownBytes(): number {
    return this.cells.byteLength * 2;
  }

  /** Adds the digest at words d[o .. o+4); true when it was not there. */
  add(d: Uint32Array, o: number): boolean {
    if (this.full) this.grow();
    return this.insert(d[o]!, d[o + 1]!, d[o + 2]!, d[o + 3]!);
  }

  has(d: Uint32Array, o: number): boolean {
    const a = d[o]!;
    const b = d[o + 1]!;
    const c = d[o + 2]!;
    const e = d[o + 3]!;
    if ((a | b | c | e) === 0) return this.zero;
    const s = this.cells;
    for (let i = a & this.mask; ; i = (i + 1) & this.mask) {
      const p = i << 2;
      if ((s[p]! | s[p + 1]! | s[p + 2]! | s[p + 3]!) === 0) return false;
      if (s[p] === a && s[p + 1] === b && s[p + 2] === c && s[p + 3] === e) return true;
    }
  }

  private insert(a: number, b: number, c: number, e: number): boolean {
    if ((a | b | c | e) === 0) {
      if (this.zero) return false;
      this.zero = true;
      this.size++;
      return true;
    }
    const s = this.cells;
    for (let i = a & this.mask; ; i = (i + 1) & this.mask) {
      const p = i << 2;
      if ((s[p]! | s[p + 1]! | s[p + 2]! | s[p + 3]!) === 0) {
        s[p] = a;
        s[p + 1] = b;
        s[p + 2] = c;
        s[p + 3] = e;
        this.size++;
        return true;
      }
      if (s[p] === a && s[p + 1] === b && s[p + 2] === c && s[p + 3] === e) return false;
    }
  }

  private grow(): void {
    const old = this.cells;
    const cap = (this.mask + 1) * 2;
    this.cells = new Uint32Array(cap * 4);
    this.mask = cap - 1;
    const zero = this.zero;
    this.size = zero ? 1 : 0;
    for (let p = 0; p < old.length; p += 4) {
      if ((old[p]! | old[p + 1]! | old[p + 2]! | old[p + 3]!) !== 0) this.insert(old[p]!, old[p + 1]!, old[p + 2]!, old[p + 3]!);
    }
  }
}

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
