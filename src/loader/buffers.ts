// Per-(window, bucket) batch buffers. Each holds up to `batch` rows as packed key bytes (what goes
// to the store) and packed original lines (what goes to the failed file, so the same command can
// re-feed it), plus the segment id of every row for checkpoint accounting.

/**
 * Copies src[s, e) to dst[p..] four bytes per step (DataView words beat a byte loop 3-5x for the
 * 20-40 byte rows loaded here); returns the new write position.
 */
export function copyWords(src: Uint8Array, sdv: DataView, s: number, e: number, dst: Uint8Array, ddv: DataView, p: number): number {
  for (; s + 4 <= e; s += 4, p += 4) ddv.setUint32(p, sdv.getUint32(s, true), true);
  for (; s < e; s++) dst[p++] = src[s]!;
  return p;
}

export const viewOf = (a: Uint8Array): DataView => new DataView(a.buffer, a.byteOffset, a.byteLength);

export class BatchBuffer {
  /** Where the Batcher holds it: window * groups + group; -1 when not held. */
  cell = -1;
  count = 0;
  /** Rows already added to the load's bucket counts. */
  counted = 0;
  keys: Buffer;
  private kdv: DataView;
  private ldv: DataView;
  keyOffs: Uint32Array;
  lines: Buffer;
  lineOffs: Uint32Array;
  segs: Uint32Array;
  /** Bucket of each row (a buffer may hold a group of buckets, see Batcher). */
  bkts: Uint32Array;

  constructor(readonly capacity: number, initialBytes: number) {
    this.keys = Buffer.allocUnsafe(initialBytes);
    this.lines = Buffer.allocUnsafe(initialBytes);
    this.kdv = viewOf(this.keys);
    this.ldv = viewOf(this.lines);
    // row arrays grow too: 65_536 compact buckets must not each pre-allocate `batch` rows
    const rows = Math.min(capacity, 16);
    this.keyOffs = new Uint32Array(rows + 1);
    this.lineOffs = new Uint32Array(rows + 1);
    this.segs = new Uint32Array(rows);
    this.bkts = new Uint32Array(rows);
  }

  /** Bytes this buffer holds now (what the global cap counts). */
  get usedBytes(): number {
    return this.keyOffs[this.count]! + this.lineOffs[this.count]! + this.count * 16;
  }

  /** Bytes allocated (for the RSS bound). */
  get allocatedBytes(): number {
    return this.keys.length + this.lines.length + this.segs.length * 16;
  }

  reset(): void {
    this.count = 0;
    this.counted = 0;
    this.cell = -1;
  }

  // Buffers and row arrays grow four-fold: with thousands of bucket groups most buffers fill
  // from empty about once, and each step is a fresh allocation and a copy of what is there.
  private static grow(b: Buffer, need: number): Buffer {
    let n = b.length * 4;
    while (n < need) n *= 4;
    const nb = Buffer.allocUnsafe(n);
    b.copy(nb, 0, 0, b.length);
    return nb;
  }

  private growRows(): void {
    const n = Math.min(this.capacity, this.segs.length * 4);
    const ko = new Uint32Array(n + 1);
    ko.set(this.keyOffs);
    this.keyOffs = ko;
    const lo = new Uint32Array(n + 1);
    lo.set(this.lineOffs);
    this.lineOffs = lo;
    const sg = new Uint32Array(n);
    sg.set(this.segs);
    this.segs = sg;
    const bk = new Uint32Array(n);
    bk.set(this.bkts);
    this.bkts = bk;
  }

  /** Appends one row; returns true when the buffer is full. */
  append(
    kSrc: Uint8Array, kSrcView: DataView, ks: number, ke: number,
    lSrc: Uint8Array, lSrcView: DataView, ls: number, le: number,
    seg: number, bucket: number,
  ): boolean {
    const c = this.count;
    if (c >= this.segs.length) this.growRows();
    let kp = this.keyOffs[c]!;
    let lp = this.lineOffs[c]!;
    if (kp + (ke - ks) > this.keys.length) {
      this.keys = BatchBuffer.grow(this.keys, kp + (ke - ks));
      this.kdv = viewOf(this.keys);
    }
    if (lp + (le - ls) > this.lines.length) {
      this.lines = BatchBuffer.grow(this.lines, lp + (le - ls));
      this.ldv = viewOf(this.lines);
    }
    kp = copyWords(kSrc, kSrcView, ks, ke, this.keys, this.kdv, kp);
    lp = copyWords(lSrc, lSrcView, ls, le, this.lines, this.ldv, lp);
    this.segs[c] = seg;
    this.bkts[c] = bucket;
    this.count = c + 1;
    this.keyOffs[c + 1] = kp;
    this.lineOffs[c + 1] = lp;
    return c + 1 >= this.capacity;
  }

  /** The rows as input lines, LF-terminated, for the failed file. */
  linesAsText(): Buffer {
    const n = this.count;
    const out = Buffer.allocUnsafe(this.lineOffs[n]! + n);
    let p = 0;
    for (let i = 0; i < n; i++) {
      p += this.lines.copy(out, p, this.lineOffs[i]!, this.lineOffs[i + 1]!);
      out[p++] = 10;
    }
    return out;
  }
}

/** Recycles buffers so steady-state loading allocates nothing per batch. */
export class BufferPool {
  private readonly free: BatchBuffer[] = [];
  constructor(private readonly capacity: number, private readonly initialBytes: number, private readonly maxFree: number) {}

  get(): BatchBuffer {
    return this.free.pop() ?? new BatchBuffer(this.capacity, this.initialBytes);
  }

  put(b: BatchBuffer): void {
    b.reset();
    if (this.free.length < this.maxFree) this.free.push(b);
  }
}
