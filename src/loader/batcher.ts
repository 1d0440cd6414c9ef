// Appends a parsed region's rows to their (window, bucket group) batch buffers.
// This is the loader's per-row hot loop, kept in a class of its own so its state lives in fields
// rather than in the async load's generator context and closures.
import { BatchBuffer, BufferPool, viewOf } from './buffers.js';

/** Fixed cost of one live batch buffer (objects, row arrays, initial byte buffers), counted
 *  against maxBufferedBytes so many windows x buckets of near-empty buffers stay bounded too. */
export const BUFFER_OVERHEAD = 1024;

/** One parsed region as the batcher reads it. */
export interface ParsedRegion {
  /** Packed keys (or 16-byte digests in the compact layout) and their offsets. */
  keys: Uint8Array;
  keyOffsets: Uint32Array;
  buckets: Uint32Array;
  /** The input bytes holding the rows' lines, and each row's line span in it. */
  lines: Uint8Array;
  rowStart: Uint32Array;
  rowEnd: Uint32Array;
  /** Window index per row, -1 = rejected; null = every row in window 0. */
  windows: Int32Array | null;
  /** Checkpoint segment id of the region. */
  segment: number;
}

export class Batcher {
  /** The buffer filling for each window and bucket group, at cell window * groups + group. */
  held: (BatchBuffer | undefined)[];
  readonly active = new Set<BatchBuffer>();
  /** Bytes held by live buffers plus their fixed overhead (what --max-buffer-mb bounds). */
  buffered = 0;
  /** The buffer that filled up in the last run(). */
  full: BatchBuffer | undefined;
  // the current region
  private kb: Uint8Array = new Uint8Array(0);
  private kdv: DataView = viewOf(this.kb);
  private ldv: DataView = viewOf(this.kb);
  private ko: Uint32Array = new Uint32Array(1);
  private bk: Uint32Array = new Uint32Array(0);
  private lineBuf: Uint8Array = this.kb;
  private rowStart: Uint32Array = this.bk;
  private rowEnd: Uint32Array = this.bk;
  /** Window index per row, -1 = rejected; null = everything in window 0. */
  private win: Int32Array | null = null;
  private seg = 0;
  /** Rows of the current region appended so far. */
  accepted = 0;

  constructor(
    private readonly pool: BufferPool,
    /** Buffers per window: one per bucket, or bucket % groups when there are many buckets. */
    readonly groups: number,
    private readonly compact: boolean,
    private readonly bucketRows: Float64Array,
    windows: number,
  ) {
    this.held = new Array<BatchBuffer | undefined>(Math.max(1, windows) * groups);
  }

  ensureWindows(windows: number): void {
    if (this.held.length < windows * this.groups) this.held = this.held.concat(new Array<BatchBuffer | undefined>(windows * this.groups - this.held.length));
  }

  /** Starts a region; run() then appends its rows. */
  setRegion(r: ParsedRegion): void {
    if (this.kb !== r.keys) {
      this.kb = r.keys;
      this.kdv = viewOf(r.keys);
    }
    if (this.lineBuf !== r.lines) this.ldv = viewOf(r.lines);
    this.ko = r.keyOffsets;
    this.bk = r.buckets;
    this.lineBuf = r.lines;
    this.rowStart = r.rowStart;
    this.rowEnd = r.rowEnd;
    this.win = r.windows;
    this.seg = r.segment;
    this.accepted = 0;
  }

  /** Appends rows [i, n); returns n, or the index after the row that filled `this.full`. */
  run(i: number, n: number): number {
    const { kb, kdv, ldv, ko, bk, lineBuf, rowStart, rowEnd, win, seg, compact, held, bucketRows } = this;
    const ng = this.groups;
    let buffered = this.buffered;
    let accepted = this.accepted;
    for (; i < n; i++) {
      let w = 0;
      if (win !== null) {
        w = win[i]!;
        if (w < 0) continue;
      }
      const b0 = bk[i]!;
      bucketRows[b0]!++;
      accepted++;
      const cell = w * ng + (b0 % ng);
      let b = held[cell];
      if (b === undefined) {
        b = this.pool.get();
        b.cell = cell;
        held[cell] = b;
        this.active.add(b);
        buffered += BUFFER_OVERHEAD;
      }
      const ks = ko[i]!;
      const ke = compact ? ks + 8 : ko[i + 1]!;
      const ls = rowStart[i]!;
      const le = rowEnd[i]!;
      buffered += ke - ks + (le - ls) + 16;
      if (b.append(kb, kdv, ks, ke, lineBuf, ldv, ls, le, seg, b0)) {
        this.full = b;
        this.buffered = buffered;
        this.accepted = accepted;
        return i + 1;
      }
    }
    this.full = undefined;
    this.buffered = buffered;
    this.accepted = accepted;
    return n;
  }

  /** Takes a buffer out of the batcher for sending: its rows no longer count as buffered. */
  detach(buf: BatchBuffer): void {
    this.held[buf.cell] = undefined;
    this.active.delete(buf);
    this.buffered -= buf.usedBytes + BUFFER_OVERHEAD;
  }

  /** Returns a sent buffer for reuse. */
  recycle(buf: BatchBuffer): void {
    this.pool.put(buf);
  }

  /** Window index of a buffer's rows. */
  windowOf(buf: BatchBuffer): number {
    return Math.floor(buf.cell / this.groups);
  }
}
