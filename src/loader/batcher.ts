// Appends a parsed region's rows to their (window, bucket group) batch buffers.
// This is the loader's per-row hot loop, kept in a class of its own so its state lives in fields
// rather than in the async load's generator context and closures.
//
// With many bucket groups a region's rows are appended group by group, not in input order: a
// counting sort by bucket group comes first. In input order each row went to one of up to 2,048
// buffers at random, six arrays each, some hundred MiB in all, so nearly every row missed the TLB
// and the caches six times over; group by group, a buffer's arrays are written in runs. The rows
// of a region share one checkpoint segment, so their order inside it changes nothing a reader sees.
import type { BucketCounts } from './bucket-counts.js';
import { BatchBuffer, BufferPool, viewOf } from './buffers.js';

/** Fixed cost of one live batch buffer (objects, row arrays, initial byte buffers), counted
 *  against maxBufferedBytes so many windows x buckets of near-empty buffers stay bounded too. */
export const BUFFER_OVERHEAD = 1024;

/** Fewer groups than this are appended in input order: their buffers stay in the caches, and
 *  sorting only added work (measured: 16 groups slower sorted, 1,000 even, 2,048 faster). */
const SORT_MIN_GROUPS = 512;

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
  /** The region's accepted rows by bucket group (what run() walks), and each row's group. */
  private order = new Uint32Array(0);
  private group = new Uint32Array(0);
  /** Per group, where its rows start in `order` (groups + 1 entries while sorting). */
  private readonly groupStart: Uint32Array;
  /** Positions of `order` in use: the region's rows less those rejected for their window. */
  private positions = 0;
  /** Rows of the current region appended so far. */
  accepted = 0;

  constructor(
    private readonly pool: BufferPool,
    /** Buffers per window: one per bucket, or bucket % groups when there are many buckets. */
    readonly groups: number,
    private readonly compact: boolean,
    private readonly bucketRows: BucketCounts,
    windows: number,
  ) {
    this.held = new Array<BatchBuffer | undefined>(Math.max(1, windows) * groups);
    this.groupStart = new Uint32Array(groups + 1);
  }

  ensureWindows(windows: number): void {
    if (this.held.length < windows * this.groups) this.held = this.held.concat(new Array<BatchBuffer | undefined>(windows * this.groups - this.held.length));
  }

  /** Starts a region of `n` rows; returns how many positions run() then walks (the rows not
   *  rejected for their window). */
  setRegion(r: ParsedRegion, n: number): number {
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
    return (this.positions = this.sortByGroup(r.buckets, r.windows, n));
  }

  /** The region's accepted rows into `order`, sorted by bucket group when there are many groups
   *  (a counting sort); returns their count. */
  private sortByGroup(bk: Uint32Array, win: Int32Array | null, n: number): number {
    if (this.order.length < n) {
      this.order = new Uint32Array(n + (n >> 2));
      this.group = new Uint32Array(this.order.length);
    }
    const { order, group, groupStart: start } = this;
    const ng = this.groups;
    if (ng < SORT_MIN_GROUPS) {
      let rows = 0;
      for (let i = 0; i < n; i++) {
        if (win !== null && win[i]! < 0) continue;
        group[i] = bk[i]! % ng;
        order[rows++] = i;
      }
      return rows;
    }
    start.fill(0);
    let rows = 0;
    for (let i = 0; i < n; i++) {
      if (win !== null && win[i]! < 0) continue;
      const g = bk[i]! % ng;
      group[i] = g;
      start[g + 1]!++;
      rows++;
    }
    for (let g = 1; g <= ng; g++) start[g]! += start[g - 1]!;
    for (let i = 0; i < n; i++) {
      if (win !== null && win[i]! < 0) continue;
      order[start[group[i]!]!++] = i;
    }
    return rows;
  }

  /** Appends the rows at positions [i, setRegion's count) of the group order; returns that count,
   *  or the position after the row that filled `this.full`. */
  run(i: number): number {
    const { kb, kdv, ldv, ko, bk, lineBuf, rowStart, rowEnd, win, seg, compact, held, order, group } = this;
    const ng = this.groups;
    const n = this.positions;
    let buffered = this.buffered;
    let accepted = this.accepted;
    for (; i < n; i++) {
      const row = order[i]!;
      const w = win === null ? 0 : win[row]!;
      const b0 = bk[row]!;
      accepted++;
      const cell = w * ng + group[row]!;
      let b = held[cell];
      if (b === undefined) {
        b = this.pool.get();
        b.cell = cell;
        held[cell] = b;
        this.active.add(b);
        buffered += BUFFER_OVERHEAD;
      }
      const ks = ko[row]!;
      const ke = compact ? ks + 8 : ko[row + 1]!;
      const ls = rowStart[row]!;
      const le = rowEnd[row]!;
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
    this.countRows(buf);
    this.held[buf.cell] = undefined;
    this.active.delete(buf);
    this.buffered -= buf.usedBytes + BUFFER_OVERHEAD;
  }

  /** Adds the rows of the buffers still held to the bucket counts (a load that stopped early). */
  countHeld(): void {
    for (const buf of this.active) this.countRows(buf);
  }

  /** Adds a buffer's rows not counted yet to the bucket counts. A full buffer's rows share one
   *  group, so they count into that group's few KiB of counters, not at random over all of them. */
  private countRows(buf: BatchBuffer): void {
    const { counts, perGroup } = this.bucketRows;
    const ng = this.groups;
    const base = (buf.cell % ng) * perGroup;
    const bk = buf.bkts;
    for (let k = buf.counted; k < buf.count; k++) counts[base + Math.floor(bk[k]! / ng)]!++;
    buf.counted = buf.count;
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
