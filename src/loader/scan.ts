// Reads the inputs region by region and hands each row on (or, on a dry run, only counts it).
// Per region: parse lines, list rejects, hash and bucket the keys in kernel memory, find each
// row's window, record a checkpoint segment. A dry run may do this on worker threads.
import { availableParallelism } from 'node:os';
import { digestKeys } from '../dedup/layout.js';
import type { Batcher } from './batcher.js';
import type { BucketCounts } from './bucket-counts.js';
import type { Checkpointer } from './checkpointer.js';
import type { Dispatcher } from './dispatcher.js';
import type { LoadFailure } from './failure.js';
import { RegionHasher, compactBuckets } from './hasher.js';
import { dryRunThreads, type ResolvedOptions } from './options.js';
import { REGION_BYTES, runRegions } from './parallel.js';
import { ChunkParser, R_TOO_LONG, R_WINDOW, R_WINDOWS_CAP } from './parse.js';
import { FileChunkReader, isOversize, type Region } from './reader.js';
import type { RejectWriter } from './rejects.js';
import type { ReadCounts } from './summary.js';
import type { WindowTable } from './window.js';

export interface ScanInit {
  o: ResolvedOptions;
  files: readonly string[];
  sizes: readonly number[];
  bytesTotal: number;
  /** Compact layout: members are 8 digest bytes, bucketed by digest bytes 8..15. */
  compact: boolean;
  secret: Uint8Array | undefined;
  checkpointer: Checkpointer;
  rejects: RejectWriter;
  windows: WindowTable;
  /** Rows per bucket, for the summary. */
  bucketRows: BucketCounts;
  /** Where rows go; undefined on a dry run. */
  send: { batcher: Batcher; dispatcher: Dispatcher } | undefined;
  onKeys: ((bytes: Uint8Array, offsets: Uint32Array, count: number) => void) | undefined;
  signal: AbortSignal | undefined;
  onProgress: () => void;
  failure: LoadFailure;
}

export class InputScan implements ReadCounts {
  bytes = 0;
  lines = 0;
  rows = 0;
  filesDone = 0;
  filesSkipped = 0;
  readonly parser: ChunkParser;
  /** Worker threads that parse (0: this thread does). */
  readonly threads: number;
  private readonly hasher: RegionHasher;
  private readonly compactBucketOut: Uint32Array;
  /** Row i's 8-byte member starts at i*16 in the digest output. */
  private readonly digestOffsets: Uint32Array;
  /** Window index per row of the current region (null: every row in the fixed window). */
  private readonly winIdx: Int32Array | null;

  constructor(private readonly init: ScanInit) {
    const { o, compact } = init;
    const maxRows = Math.ceil(o.readBufferBytes / 2) + 1;
    this.hasher = new RegionHasher(o.readBufferBytes, maxRows);
    this.parser = new ChunkParser(
      { delimiter: o.delimiter, fields: o.fields, fieldCount: o.fieldCount, maxLineBytes: o.maxLineBytes, maxKeyBytes: o.maxKeyBytes, windowField: o.windowField },
      this.hasher,
      maxRows,
    );
    this.compactBucketOut = new Uint32Array(compact ? maxRows : 0);
    this.digestOffsets = new Uint32Array(compact ? maxRows + 1 : 0);
    if (compact) for (let i = 0; i < maxRows; i++) this.digestOffsets[i] = i * 16;
    this.winIdx = init.windows.coder ? new Int32Array(maxRows) : null;
    // workers only when rows need not reach this thread; below two regions their start-up costs
    // more than they save
    const want = o.threads ?? dryRunThreads(init.bytesTotal, availableParallelism());
    const parallel =
      o.dryRun && want > 0 && !init.windows.coder && init.onKeys === undefined && o.fieldCount > 0 && init.bytesTotal >= 2 * (o.regionBytes ?? REGION_BYTES);
    this.threads = parallel ? want : 0;
  }

  /** Interrupted, or a part of the load failed: stop reading. */
  get stopped(): boolean {
    return this.init.signal?.aborted === true || this.init.failure.failed;
  }

  async run(): Promise<void> {
    if (this.threads > 0) return this.runOnWorkers();
    for (let fi = 0; fi < this.init.files.length && !this.stopped; fi++) await this.readFile(fi);
  }

  private async readFile(fi: number): Promise<void> {
    const { o, files, sizes, checkpointer, rejects } = this.init;
    const file = files[fi]!;
    const fp = checkpointer.progress(file);
    if (fp.done) {
      this.filesSkipped++;
      this.filesDone++;
      this.bytes += sizes[fi]!;
      return;
    }
    this.bytes += fp.offset;
    let lineNo = fp.line;
    const reader = new FileChunkReader(file, o.readBufferBytes, fp.offset);
    await reader.open();
    try {
      for (;;) {
        if (this.stopped) break;
        const r = await reader.next();
        if (r === null) break;
        if (isOversize(r)) {
          lineNo++;
          this.lines++;
          rejects.reject(file, lineNo, R_TOO_LONG, r.head);
          checkpointer.addSegment(fi, r.offset, lineNo - 1, r.next, lineNo, 0, false);
          this.bytes += r.next - r.offset;
          checkpointer.advance();
          continue;
        }
        await this.region(fi, r, lineNo);
        lineNo += this.parser.lines;
        checkpointer.advance();
        this.init.onProgress();
      }
    } finally {
      await reader.close();
    }
    if (!this.stopped) {
      checkpointer.addSegment(fi, sizes[fi]!, lineNo, sizes[fi]!, lineNo, 0, true);
      checkpointer.advance();
      this.filesDone++;
    }
  }

  /** One region of file `fi` whose first line is line `lineNo` + 1. */
  private async region(fi: number, r: Region, lineNo: number): Promise<void> {
    const { o, files, checkpointer, rejects, bucketRows, send } = this.init;
    const { parser, hasher } = this;
    const file = files[fi]!;
    parser.parse(r.buf, r.start, r.end, r.final);
    const n = parser.count;
    this.lines += parser.lines;
    for (let j = 0; j < parser.rejReason.length; j++) {
      rejects.reject(file, lineNo + parser.rejLine[j]! + 1, parser.rejReason[j]!, r.buf.subarray(parser.rejStart[j]!, parser.rejEnd[j]!));
    }
    this.init.onKeys?.(hasher.keyBytes, hasher.keyOffsets, n);
    let buckets: Uint32Array;
    let ko = hasher.keyOffsets;
    let kb = hasher.keyBytes;
    if (this.init.compact) {
      // compact layout: members are digest bytes 0..7, buckets come from bytes 8..15
      kb = this.init.secret ? digestKeys({ bytes: hasher.keyBytes, offsets: hasher.keyOffsets, count: n }, this.init.secret) : hasher.digests(n);
      buckets = compactBuckets(kb, n, o.buckets, this.compactBucketOut);
      ko = this.digestOffsets;
    } else buckets = hasher.buckets(n, o.buckets);
    const outOfWindow = this.windowRows(file, r.buf, n, lineNo);
    const win = this.winIdx;
    // rows rejected for their window are settled already; the rest settle when acknowledged
    const seg = checkpointer.addSegment(fi, r.offset + r.start, lineNo, r.offset + r.end, lineNo + parser.lines, send ? n - outOfWindow : 0, false);
    let accepted = 0;
    if (send === undefined) accepted = bucketRows.addRows(buckets, n, win);
    else {
      const { batcher, dispatcher } = send;
      const rows = batcher.setRegion({ keys: kb, keyOffsets: ko, buckets, lines: r.buf, rowStart: parser.rowStart, rowEnd: parser.rowEnd, windows: win, segment: seg }, n);
      for (let i = 0; i < rows; ) {
        i = batcher.run(i);
        if (batcher.full) await dispatcher.dispatch(batcher.full);
      }
      accepted = batcher.accepted;
    }
    this.rows += accepted;
    this.bytes += r.end - r.start;
    if (send) await send.dispatcher.relieve();
  }

  /** Fills the window index of the region's rows and rejects rows without a usable window;
   *  returns how many it rejected. */
  private windowRows(file: string, buf: Uint8Array, n: number, lineNo: number): number {
    const win = this.winIdx;
    if (win === null) return 0;
    const { parser } = this;
    const { windows, rejects } = this.init;
    let rejected = 0;
    for (let i = 0; i < n; i++) {
      const w = windows.indexOf(buf, parser.rowWinStart[i]!, parser.rowWinEnd[i]!);
      win[i] = w;
      if (w < 0) {
        rejects.reject(file, lineNo + parser.rowLine[i]! + 1, w === -2 ? R_WINDOWS_CAP : R_WINDOW, buf.subarray(parser.rowStart[i]!, parser.rowEnd[i]!));
        rejected++;
      }
    }
    return rejected;
  }

  /** Dry run on worker threads: regions are parsed, hashed and bucketed there; this thread adds
   *  up the counts and lists rejects in file order. */
  private async runOnWorkers(): Promise<void> {
    const { o, files, sizes, rejects, bucketRows, signal } = this.init;
    const lineBase = new Float64Array(files.length);
    await runRegions(
      files,
      sizes,
      {
        threads: this.threads,
        readBufferBytes: o.readBufferBytes,
        spec: { delimiter: o.delimiter, fields: o.fields, fieldCount: o.fieldCount, maxLineBytes: o.maxLineBytes, maxKeyBytes: o.maxKeyBytes, windowField: -1 },
        buckets: o.buckets,
        compact: this.init.compact,
        ...(this.init.secret ? { secret: this.init.secret } : {}),
        ...(o.regionBytes ? { regionBytes: o.regionBytes } : {}),
        ...(signal ? { signal } : {}),
      },
      (fi, r, last) => {
        const file = files[fi]!;
        for (let j = 0; j < r.rejLine.length; j++) rejects.reject(file, lineBase[fi]! + r.rejLine[j]! + 1, r.rejReason[j]!, r.rejContent[j]!);
        lineBase[fi]! += r.lines;
        this.lines += r.lines;
        this.rows += r.rows;
        this.bytes += r.bytes;
        if (last) this.filesDone++;
        this.init.onProgress();
      },
      (rows) => bucketRows.addInBucketOrder(rows),
    );
  }
}
