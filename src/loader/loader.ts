// The bulk loader: files -> byte regions -> packed keys in kernel memory -> buckets -> per-bucket
// batches -> store, with bounded buffers and in-flight batches, retries, a failed file, a rejects
// file and a checkpoint that only ever covers rows the store acknowledged or that went to the
// failed file, and records where a file's failed rows start so --resume reads them again.
import { open, rm, type FileHandle } from 'node:fs/promises';
import { resolve } from 'node:path';
import { ErrorCodes, HashGateError } from '../errors.js';
import { bucketsOfDigests, digestKeys } from '../dedup/layout.js';
import { BatchBuffer, BufferPool, viewOf } from './buffers.js';
import { fingerprintDiff, readCheckpoint, writeCheckpoint, type CheckpointData, type FileProgress } from './checkpoint.js';
import { RegionHasher } from './hasher.js';
import { expandInputs } from './inputs.js';
import { inspectFile, sameIdentity, sampleFieldCount } from './inspect.js';
import { REGION_BYTES, runRegions } from './parallel.js';
import { ChunkParser, REJECT_NAMES, R_TOO_LONG, R_WINDOW, R_WINDOWS_CAP, type RejectName } from './parse.js';
import { MAX_KEY_BYTES } from '../util/limits.js';
import { redact } from '../util/redact.js';
import type { ProgressReporter, ProgressSnapshot } from './progress.js';
import { FileChunkReader, isOversize } from './reader.js';
import { isTransient, type LoadSink, type SinkBatch } from './sink.js';
import { makeWindowCoder, windowIdFromCode } from './window.js';
import { windowId, type WindowKind } from '../dedup/window.js';

export const DEFAULTS = {
  delimiter: '|',
  buckets: 1000,
  batch: 1000,
  concurrency: 16,
  layout: 'sets' as 'sets' | 'compact',
  prefix: 'hashgate',
  windowUnit: 'year' as WindowKind,
  timeZone: 'Asia/Shanghai',
  dateFormat: 'yyyyMMdd',
  maxLineBytes: 4096,
  readBufferBytes: 1 << 20,
  maxBufferedBytes: 128 << 20,
  retries: 5,
  retryDelayMs: 100,
  retryMaxDelayMs: 5000,
  checkpointFile: 'hashgate-load.checkpoint.json',
  checkpointIntervalMs: 1000,
  progressIntervalMs: 10_000,
  /** Distinct windows one load may write; rows past it are rejected as 'too-many-windows'. A
   *  leap year of day windows fits. Each window can hold one partly filled batch per bucket
   *  group, so this bounds the buffers as --max-buffer-mb bounds their bytes. */
  maxWindows: 400,
  /** Largest accepted key: the library's own limit, so every loaded key can be queried. */
  maxKeyBytes: MAX_KEY_BYTES,
  /** Rejected lines over all lines above which the load is reported as failed (exit 4). */
  maxRejectRatio: 0.01,
  /** Parsed-but-unacknowledged read regions before the oldest buckets are force-flushed. */
  maxLiveSegments: 256,
  /** Most batch buffers per window; more buckets than this share buffers (bucket % groups). */
  maxGroups: 2048,
} as const;

export interface LoadOptions {
  inputs: string[];
  delimiter?: number;
  fields?: number[] | null;
  /** Fields per line; default: the majority of a sample of lines across the inputs. */
  fieldCount?: number;
  /** Longest key in bytes (default MAX_KEY_BYTES); longer rows are rejected as 'key-too-long'. */
  maxKeyBytes?: number;
  /** Most distinct windows (default DEFAULTS.maxWindows). */
  maxWindows?: number;
  /** Share of rejected lines above which `ok` is false and `rejectRatioExceeded` set (default 0.01). */
  maxRejectRatio?: number;
  /** Fixed window id (e.g. '2026'); default: the current window of `now` in `timeZone`. */
  window?: string;
  windowField?: number;
  dateFormat?: string;
  windowUnit?: WindowKind;
  timeZone?: string;
  buckets?: number;
  batch?: number;
  concurrency?: number;
  maxLineBytes?: number;
  readBufferBytes?: number;
  maxBufferedBytes?: number;
  retries?: number;
  retryDelayMs?: number;
  retryMaxDelayMs?: number;
  failedFile?: string;
  rejectsFile?: string;
  checkpointFile?: string;
  checkpointIntervalMs?: number;
  resume?: boolean;
  dryRun?: boolean;
  /** Worker threads for a dry run (parse + hash + bucket per file region); 0 = main thread only.
   *  Used when rows need not reach the main thread: no sink, no onKeys, a fixed window. */
  threads?: number;
  /** Bytes per region handed to a worker (default 8 MiB). */
  regionBytes?: number;
  /** Compact layout: HMAC-SHA-256 key, as the store's `dedup.secret` (digests = HMAC(secret, key)). */
  secret?: Uint8Array;
  /** Recorded in the checkpoint fingerprint (layout, prefix, redis target). */
  extraFingerprint?: Record<string, unknown>;
}

export interface LoadDeps {
  sink?: LoadSink;
  now?: () => number;
  signal?: AbortSignal;
  progress?: ProgressReporter;
  /** Sees every accepted key (e.g. to build a Bloom filter): key i = bytes[offsets[i]..offsets[i+1]). */
  onKeys?: (bytes: Uint8Array, offsets: Uint32Array, count: number) => void;
}

export interface LoadSummary {
  ok: boolean;
  interrupted: boolean;
  dryRun: boolean;
  files: number;
  filesSkipped: number;
  /** Files --resume read again: changed since the checkpoint, or with rows in the failed file. */
  filesReloaded: number;
  /** Worker threads that parsed the input (0 = the main thread did). */
  threads: number;
  bytes: number;
  lines: number;
  rows: number;
  rejected: number;
  rejectedByReason: Partial<Record<RejectName, number>>;
  /** rejected / lines of this run, and whether it exceeded maxRejectRatio. */
  rejectRatio: number;
  maxRejectRatio: number;
  rejectRatioExceeded: boolean;
  loaded: number;
  failed: number;
  newMembers: number;
  batches: number;
  failedBatches: number;
  retries: number;
  windows: string[];
  buckets: number;
  bucketRows: { min: number; max: number; mean: number };
  fieldCount: number;
  elapsedMs: number;
  rowsPerSec: number;
  /** CPU time of this process (user + system) during the load: on a shared box, rows per CPU
   *  second says what the loader does with a core of its own. */
  cpuMs: number;
  rowsPerCpuSec: number;
  peakRssBytes: number;
  failedFile: string | undefined;
  rejectsFile: string | undefined;
  checkpointFile: string | undefined;
  lastError: string | undefined;
}

/** Serialised appends to one output file, opened on first use. */
class AppendFile {
  private fh: FileHandle | undefined;
  private chain: Promise<void> = Promise.resolve();
  constructor(readonly path: string, private readonly truncate: boolean) {}
  write(data: Buffer): Promise<void> {
    const p = this.chain.then(async () => {
      if (!this.fh) {
        // raw rows (names, ID numbers): owner-only, also when the file already existed
        this.fh = await open(this.path, this.truncate ? 'w' : 'a', 0o600);
        await this.fh.chmod(0o600);
      }
      await this.fh.write(data);
    });
    this.chain = p.catch(() => undefined);
    return p;
  }
  async flush(): Promise<void> {
    await this.chain;
    await this.fh?.sync();
  }
  async close(): Promise<void> {
    await this.chain;
    await this.fh?.close();
    this.fh = undefined;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function peakRss(): number {
  return Math.max(process.resourceUsage().maxRSS * 1024, process.memoryUsage.rss());
}

/**
 * The per-row hot loop, kept out of the async load() (whose locals live in a generator context
 * and behind closures): appends one region's rows to their (window, bucket) buffers and stops at
 * the first buffer that fills, so the caller can await its dispatch and resume.
 */
class Batcher {
  slots: (BatchBuffer | undefined)[];
  readonly active = new Set<BatchBuffer>();
  buffered = 0;
  /** The buffer that filled up in the last run(). */
  full: BatchBuffer | undefined;
  // the current region
  kb!: Uint8Array;
  kdv!: DataView;
  ldv!: DataView;
  ko!: Uint32Array;
  bk!: Uint32Array;
  lineBuf!: Uint8Array;
  rowStart!: Uint32Array;
  rowEnd!: Uint32Array;
  /** Window index per row, -1 = rejected; null = everything in window 0. */
  win: Int32Array | null = null;
  seg = 0;
  accepted = 0;

  constructor(
    private readonly pool: BufferPool,
    /** Buffers per window: one per bucket, or bucket % groups when there are many buckets. */
    readonly groups: number,
    private readonly compact: boolean,
    private readonly bucketRows: Float64Array,
    windows: number,
  ) {
    this.slots = new Array<BatchBuffer | undefined>(Math.max(1, windows) * groups);
  }

  ensureWindows(windows: number): void {
    if (this.slots.length < windows * this.groups) this.slots = this.slots.concat(new Array<BatchBuffer | undefined>(windows * this.groups - this.slots.length));
  }

  /** Appends rows [i, n); returns n, or the index after the row that filled `this.full`. */
  run(i: number, n: number): number {
    const { kb, kdv, ldv, ko, bk, lineBuf, rowStart, rowEnd, win, seg, compact, slots, bucketRows } = this;
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
      const slot = w * ng + (b0 % ng);
      let b = slots[slot];
      if (b === undefined) {
        b = this.pool.get();
        b.slot = slot;
        slots[slot] = b;
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
}

const EMPTY = Buffer.alloc(0);

/** Fixed cost of one live batch buffer (objects, row arrays, initial byte buffers), counted
 *  against maxBufferedBytes so many windows x buckets of near-empty buffers stay bounded too. */
const BUFFER_OVERHEAD = 1024;

export async function load(options: LoadOptions, deps: LoadDeps = {}): Promise<LoadSummary> {
  const now = deps.now ?? Date.now;
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const o = {
    delimiter: options.delimiter ?? DEFAULTS.delimiter.charCodeAt(0),
    fields: options.fields ?? null,
    fieldCount: options.fieldCount ?? 0,
    windowField: options.windowField ?? -1,
    dateFormat: options.dateFormat ?? DEFAULTS.dateFormat,
    windowUnit: options.windowUnit ?? DEFAULTS.windowUnit,
    timeZone: options.timeZone ?? DEFAULTS.timeZone,
    buckets: options.buckets ?? DEFAULTS.buckets,
    batch: options.batch ?? DEFAULTS.batch,
    concurrency: options.concurrency ?? DEFAULTS.concurrency,
    maxLineBytes: options.maxLineBytes ?? DEFAULTS.maxLineBytes,
    readBufferBytes: options.readBufferBytes ?? DEFAULTS.readBufferBytes,
    maxBufferedBytes: options.maxBufferedBytes ?? DEFAULTS.maxBufferedBytes,
    retries: options.retries ?? DEFAULTS.retries,
    retryDelayMs: options.retryDelayMs ?? DEFAULTS.retryDelayMs,
    retryMaxDelayMs: options.retryMaxDelayMs ?? DEFAULTS.retryMaxDelayMs,
    checkpointIntervalMs: options.checkpointIntervalMs ?? DEFAULTS.checkpointIntervalMs,
    maxKeyBytes: options.maxKeyBytes ?? DEFAULTS.maxKeyBytes,
    maxWindows: options.maxWindows ?? DEFAULTS.maxWindows,
    maxRejectRatio: options.maxRejectRatio ?? DEFAULTS.maxRejectRatio,
    dryRun: options.dryRun ?? false,
    resume: options.resume ?? false,
  };
  if (o.readBufferBytes < o.maxLineBytes * 2) o.readBufferBytes = o.maxLineBytes * 2;
  const sink = deps.sink;
  if (!o.dryRun && !sink) throw new HashGateError(ErrorCodes.INVALID_ARG, 'load needs a sink unless dryRun is set');
  const fixedWindow =
    options.window ?? (o.windowField < 0 ? windowId(now(), o.windowUnit, o.timeZone) : undefined);

  const failedPath = options.failedFile ? resolve(options.failedFile) : undefined;
  const rejectsPath = options.rejectsFile ? resolve(options.rejectsFile) : undefined;
  const cpPath = o.dryRun ? undefined : resolve(options.checkpointFile ?? DEFAULTS.checkpointFile);
  // the loader's own files are never inputs: a directory or glob skips them, naming one is an error
  const own = [failedPath, rejectsPath, resolve(options.checkpointFile ?? DEFAULTS.checkpointFile)].filter((p): p is string => p !== undefined);
  const files = await expandInputs(options.inputs, { own });
  // identity (for --resume) and a text check of every file before anything is loaded
  // (a few at a time: thousands of part files must not exhaust file descriptors)
  const inspected = new Array<Awaited<ReturnType<typeof inspectFile>>>(files.length);
  let nextFile = 0;
  await Promise.all(
    Array.from({ length: Math.min(16, files.length) }, async () => {
      while (nextFile < files.length) {
        const i = nextFile++;
        const f = await inspectFile(files[i]!, o.delimiter);
        // the field-count sample reads the heads of the first files only: memory stays ~1 MiB
        if (i >= 16) f.headBytes = EMPTY;
        inspected[i] = f;
      }
    }),
  );
  const sizes = inspected.map((f) => f.identity.size);
  const bytesTotal = sizes.reduce((a, b) => a + b, 0);
  if (o.fieldCount === 0) {
    const smp = sampleFieldCount(
      inspected.map((f) => f.headBytes),
      o.delimiter,
    );
    if (smp.sampled > 0 && smp.fieldCount === 0) {
      throw new HashGateError(
        ErrorCodes.PARSE,
        `no field count is shared by most sampled lines (${smp.sampled} lines, the commonest count on ${Math.round(smp.share * 100)}%); give --field-count`,
        { details: { reason: 'field-count', sampled: smp.sampled } },
      );
    }
    o.fieldCount = smp.fieldCount;
  }

  // ---- checkpoint ----
  const fingerprint: Record<string, unknown> = {
    delimiter: o.delimiter,
    fields: o.fields,
    window: fixedWindow ?? null,
    windowField: o.windowField,
    dateFormat: o.windowField >= 0 ? o.dateFormat : null,
    windowUnit: o.windowUnit,
    buckets: o.buckets,
    secret: options.secret !== undefined,
    ...options.extraFingerprint,
  };
  let cp: CheckpointData = { version: 1, fingerprint, files: {}, updatedAt: new Date(now()).toISOString() };
  if (cpPath && o.resume) {
    const prev = await readCheckpoint(cpPath);
    if (prev) {
      const diff = fingerprintDiff(prev.fingerprint, fingerprint);
      if (diff.length > 0) {
        throw new HashGateError(
          ErrorCodes.INVALID_OPTION,
          `--resume: checkpoint ${cpPath} was written with different options (${diff.join('; ')}); use the same options or drop --resume`,
          { details: { diff } },
        );
      }
      cp = { ...prev, fingerprint };
    }
  }
  let filesReloaded = 0;
  for (let i = 0; i < files.length; i++) {
    const f = files[i]!;
    const id = inspected[i]!.identity;
    const prev = cp.files[f];
    const fresh: FileProgress = { ...id, offset: 0, line: 0, done: false };
    if (prev === undefined) cp.files[f] = fresh;
    else if (!sameIdentity(prev, id)) {
      // replaced or rewritten since the checkpoint (or a checkpoint without identities): what
      // was acknowledged belongs to other bytes, so the whole file loads again
      cp.files[f] = fresh;
      filesReloaded++;
    } else if (prev.failedFrom !== undefined) {
      // rows of this file went to the failed file: read it again from the first of them, so a
      // resume does not report success for rows the store never acknowledged
      cp.files[f] = { ...id, offset: prev.failedFrom.offset, line: prev.failedFrom.line, done: false, ...(prev.rejectsLine ? { rejectsLine: prev.rejectsLine } : {}) };
      filesReloaded++;
    }
  }
  // Every row in an earlier failed file is re-read by this run (it lies past its file's
  // checkpoint offset, or behind a recorded failedFrom), so the file restarts empty: after a
  // clean resume it no longer lists rows that are now loaded.
  if (failedPath && !o.dryRun) await rm(failedPath, { force: true });
  // rejects an earlier run already listed, per file (rejects of one region are not written in
  // line order: parse rejects first, then window rejects)
  const listedBefore = new Map<string, number>();
  for (const f of files) {
    const n = (cp.files[f] as FileProgress).rejectsLine;
    if (n !== undefined) listedBefore.set(f, n);
  }

  const failedOut = failedPath ? new AppendFile(failedPath, true) : undefined;
  const rejectsOut = rejectsPath ? new AppendFile(rejectsPath, !o.resume) : undefined;

  // ---- state ----
  const maxRows = Math.ceil(o.readBufferBytes / 2) + 1;
  const hasher = new RegionHasher(o.readBufferBytes, maxRows);
  const parser = new ChunkParser(
    { delimiter: o.delimiter, fields: o.fields, fieldCount: o.fieldCount, maxLineBytes: o.maxLineBytes, maxKeyBytes: o.maxKeyBytes, windowField: o.windowField },
    hasher,
    maxRows,
  );
  const compact = sink?.layout === 'compact';
  const compactBucketOut = new Uint32Array(compact ? maxRows : 0);
  // row i's 8-byte member starts at i*16 in the digest output
  const digestOffsets = new Uint32Array(compact ? maxRows + 1 : 0);
  if (compact) for (let i = 0; i < maxRows; i++) digestOffsets[i] = i * 16;
  const coder = o.windowField >= 0 ? makeWindowCoder({ format: o.dateFormat, unit: o.windowUnit, timeZone: o.timeZone }) : undefined;
  const windows: string[] = fixedWindow !== undefined ? [fixedWindow] : [];
  const winByCode = new Map<number, number>();
  const bucketRows = new Float64Array(o.buckets);
  const pool = new BufferPool(o.batch, 128, o.concurrency + 64);
  // Many buckets (compact: 65_536) would mean tiny per-bucket batches: buffer per group of
  // buckets instead and let the sink write one SADD per bucket of the group in one go.
  const groups = Math.min(o.buckets, DEFAULTS.maxGroups);
  const batcher = new Batcher(pool, groups, compact, bucketRows, windows.length);
  const active = batcher.active;
  const winIdx = coder ? new Int32Array(maxRows) : null;

  // segments: one per parsed region (plus end-of-file markers), acknowledged in any order
  const segFile: number[] = [];
  const segStart: number[] = [];
  const segStartLine: number[] = [];
  const segEnd: number[] = [];
  const segLine: number[] = [];
  const segPending: number[] = [];
  const segDone: boolean[] = [];
  let segBase = 0; // id of segFile[0]
  let segHead = 0; // index of the oldest unacknowledged segment in the arrays

  const s = {
    bytes: 0,
    lines: 0,
    rows: 0,
    rejected: 0,
    loaded: 0,
    failed: 0,
    newMembers: 0,
    batches: 0,
    failedBatches: 0,
    retries: 0,
    filesDone: 0,
    filesSkipped: 0,
  };
  const byReason: Partial<Record<RejectName, number>> = {};
  let lastError: string | undefined;
  let fatal: unknown;
  let degraded = false;
  let inFlight = 0;
  let wake: (() => void) | undefined;
  let cpDirty = false;
  let cpSaving: Promise<void> | undefined;
  let cpLast = 0;
  const interrupted = (): boolean => deps.signal?.aborted === true;

  const snapshot = (): ProgressSnapshot => ({
    elapsedMs: performance.now() - t0,
    bytesDone: s.bytes,
    bytesTotal,
    filesDone: s.filesDone,
    filesTotal: files.length,
    rows: s.rows,
    loaded: s.loaded,
    failed: s.failed,
    rejected: s.rejected,
    inFlight,
  });

  const saveCheckpoint = async (force: boolean): Promise<void> => {
    if (!cpPath) return;
    if (!force && performance.now() - cpLast < o.checkpointIntervalMs) {
      cpDirty = true;
      return;
    }
    while (cpSaving) await cpSaving;
    cpLast = performance.now();
    cpDirty = false;
    cpSaving = (async () => {
      // snapshot first: every row it covers had its failed/rejects write completed before it was
      // counted, so flushing those files now makes everything behind the snapshot durable
      cp.updatedAt = new Date(now()).toISOString();
      const snap = JSON.stringify(cp, null, 1);
      await failedOut?.flush();
      await rejectsOut?.flush();
      await writeCheckpoint(cpPath, snap);
    })();
    try {
      await cpSaving;
    } finally {
      cpSaving = undefined;
    }
  };

  const advance = (): void => {
    let moved = false;
    while (segHead < segPending.length && segPending[segHead] === 0) {
      const f = files[segFile[segHead]!]!;
      const fp = cp.files[f] as FileProgress;
      fp.offset = segEnd[segHead]!;
      fp.line = segLine[segHead]!;
      if (segDone[segHead]) fp.done = true;
      segHead++;
      moved = true;
    }
    if (segHead > 4096 && segHead * 2 > segPending.length) {
      for (const a of [segFile, segStart, segStartLine, segEnd, segLine, segPending, segDone] as unknown[][]) a.splice(0, segHead);
      segBase += segHead;
      segHead = 0;
    }
    if (moved) void saveCheckpoint(false).catch((err) => (fatal ??= err));
  };

  const addSegment = (file: number, start: number, startLine: number, end: number, line: number, pending: number, done: boolean): number => {
    segFile.push(file);
    segStart.push(start);
    segStartLine.push(startLine);
    segEnd.push(end);
    segLine.push(line);
    segPending.push(pending);
    segDone.push(done);
    return segBase + segFile.length - 1;
  };

  const sendWithRetry = async (buf: BatchBuffer): Promise<void> => {
    const w = Math.floor(buf.slot / groups);
    const batch: SinkBatch = { window: windows[w]!, bucket: buf.bkts[0]!, count: buf.count, keys: buf.keys, keyOffsets: buf.keyOffs };
    if (groups < o.buckets) batch.rowBuckets = buf.bkts;
    let ok = false;
    for (let attempt = 0; ; attempt++) {
      try {
        await sink!.prepareWindow?.(batch.window);
        const added = await sink!.add(batch);
        s.newMembers += added;
        ok = true;
        break;
      } catch (err) {
        if ((err as HashGateError)?.code === ErrorCodes.INVALID_OPTION) throw err;
        lastError = redact((err as Error)?.message ?? String(err));
        // while the store keeps failing whole retry rounds, later batches try once and go
        // straight to the failed file instead of each waiting out its own backoff
        if (!isTransient(err) || attempt >= (degraded ? 0 : o.retries)) break;
        s.retries++;
        const d = Math.min(o.retryMaxDelayMs, o.retryDelayMs * 2 ** attempt);
        await sleep(d * (0.5 + Math.random() / 2));
      }
    }
    s.batches++;
    degraded = !ok;
    if (ok) s.loaded += buf.count;
    else {
      s.failedBatches++;
      if (!failedOut) throw new HashGateError(ErrorCodes.STORE, `a batch failed after ${o.retries} retries and no --failed-file is set: ${lastError}`);
      await failedOut.write(buf.linesAsText());
      s.failed += buf.count;
      // remember, per file, the earliest region with a failed row: --resume reloads from there
      const fsegs = buf.segs;
      for (let i = 0; i < buf.count; i++) {
        const k = fsegs[i]! - segBase;
        const fp = cp.files[files[segFile[k]!]!] as FileProgress;
        fp.failed = (fp.failed ?? 0) + 1;
        if (fp.failedFrom === undefined || segStart[k]! < fp.failedFrom.offset) fp.failedFrom = { offset: segStart[k]!, line: segStartLine[k]! };
      }
    }
    const segs = buf.segs;
    for (let i = 0; i < buf.count; i++) segPending[segs[i]! - segBase]!--;
    advance();
  };

  const dispatch = async (buf: BatchBuffer): Promise<void> => {
    batcher.slots[buf.slot] = undefined;
    active.delete(buf);
    batcher.buffered -= buf.usedBytes + BUFFER_OVERHEAD;
    while (inFlight >= o.concurrency) {
      await new Promise<void>((r) => (wake = r));
      if (fatal) throw fatal;
    }
    inFlight++;
    sendWithRetry(buf)
      .catch((err) => (fatal ??= err))
      .finally(() => {
        inFlight--;
        pool.put(buf);
        const w = wake;
        wake = undefined;
        w?.();
      });
  };

  const flushWhere = async (pred: (b: BatchBuffer) => boolean): Promise<void> => {
    for (const b of [...active]) if (b.count > 0 && pred(b)) await dispatch(b);
  };

  const writeReject = (file: string, line: number, reason: number, content: Uint8Array): void => {
    s.rejected++;
    const name = REJECT_NAMES[reason] as RejectName;
    byReason[name] = (byReason[name] ?? 0) + 1;
    const fp = cp.files[file];
    if (rejectsOut && fp !== undefined) {
      // a resumed region re-reads lines whose rejects an earlier run already wrote: count them
      // again (this run read them) but do not list them twice
      if (line <= (listedBefore.get(file) ?? 0)) return;
      if (line > (fp.rejectsLine ?? 0)) fp.rejectsLine = line;
      const head = content.length > 256 ? content.subarray(0, 256) : content;
      void rejectsOut
        .write(Buffer.concat([Buffer.from(`${file}\t${line}\t${name}\t`), head, Buffer.from('\n')]))
        .catch((err) => (fatal ??= err));
    }
  };

  const windowOfRow = (buf: Uint8Array, i: number): number => {
    if (!coder) return 0;
    const code = coder(buf, parser.rowWinStart[i]!, parser.rowWinEnd[i]!);
    if (code < 0) return -1;
    let w = winByCode.get(code);
    if (w === undefined) {
      if (windows.length >= o.maxWindows) return -2;
      w = windows.length;
      windows.push(windowIdFromCode(code, o.windowUnit));
      winByCode.set(code, w);
      batcher.ensureWindows(windows.length);
    }
    return w;
  };

  // below two regions a pool's start-up (workers, WASM compile) costs more than it saves
  const parallel =
    o.dryRun && (options.threads ?? 0) > 0 && !coder && deps.onKeys === undefined && o.fieldCount > 0 && bytesTotal >= 2 * (options.regionBytes ?? REGION_BYTES);

  // ---- main loop ----
  try {
    if (parallel) {
      const lineBase = new Float64Array(files.length);
      await runRegions(
        files,
        sizes,
        {
          threads: options.threads!,
          readBufferBytes: o.readBufferBytes,
          spec: { delimiter: o.delimiter, fields: o.fields, fieldCount: o.fieldCount, maxLineBytes: o.maxLineBytes, maxKeyBytes: o.maxKeyBytes, windowField: -1 },
          buckets: o.buckets,
          ...(options.regionBytes ? { regionBytes: options.regionBytes } : {}),
          ...(deps.signal ? { signal: deps.signal } : {}),
        },
        (fi, r, last) => {
          const file = files[fi]!;
          for (let j = 0; j < r.rejLine.length; j++) writeReject(file, lineBase[fi]! + r.rejLine[j]! + 1, r.rejReason[j]!, r.rejContent[j]!);
          lineBase[fi]! += r.lines;
          s.lines += r.lines;
          s.rows += r.rows;
          s.bytes += r.bytes;
          const br = r.bucketRows;
          for (let b = 0; b < br.length; b++) bucketRows[b]! += br[b]!;
          if (last) s.filesDone++;
          deps.progress?.update(snapshot());
        },
      );
    }
    for (let fi = 0; fi < files.length && !interrupted() && !fatal && !parallel; fi++) {
      const file = files[fi]!;
      const fp = cp.files[file] as FileProgress;
      if (fp.done) {
        s.filesSkipped++;
        s.filesDone++;
        s.bytes += sizes[fi]!;
        continue;
      }
      s.bytes += fp.offset;
      let lineNo = fp.line;
      const reader = new FileChunkReader(file, o.readBufferBytes, fp.offset);
      await reader.open();
      try {
        for (;;) {
          if (interrupted() || fatal) break;
          const r = await reader.next();
          if (r === null) break;
          if (isOversize(r)) {
            lineNo++;
            s.lines++;
            writeReject(file, lineNo, R_TOO_LONG, r.head);
            addSegment(fi, r.offset, lineNo - 1, r.next, lineNo, 0, false);
            s.bytes += r.next - r.offset;
            advance();
            continue;
          }
          parser.parse(r.buf, r.start, r.end, r.final);
          const n = parser.count;
          s.lines += parser.lines;
          for (let j = 0; j < parser.rejReason.length; j++) {
            writeReject(file, lineNo + parser.rejLine[j]! + 1, parser.rejReason[j]!, r.buf.subarray(parser.rejStart[j]!, parser.rejEnd[j]!));
          }
          deps.onKeys?.(hasher.keyBytes, hasher.keyOffsets, n);
          let buckets: Uint32Array;
          let ko = hasher.keyOffsets;
          let kb = hasher.keyBytes;
          if (compact) {
            // compact layout: members are digest bytes 0..7, buckets come from bytes 8..15
            kb = options.secret ? digestKeys({ bytes: hasher.keyBytes, offsets: hasher.keyOffsets, count: n }, options.secret) : hasher.digests(n);
            buckets = bucketsOfDigests(kb.subarray(0, n << 4), 'compact', o.buckets, compactBucketOut);
            ko = digestOffsets;
          } else buckets = hasher.buckets(n, o.buckets);
          const seg = addSegment(fi, r.offset + r.start, lineNo, r.offset + r.end, lineNo + parser.lines, o.dryRun ? 0 : n, false);
          let accepted = 0;
          if (o.dryRun) {
            for (let i = 0; i < n; i++) {
              if (coder) {
                const w = windowOfRow(r.buf, i);
                if (w < 0) {
                  writeReject(file, lineNo + parser.rowLine[i]! + 1, w === -2 ? R_WINDOWS_CAP : R_WINDOW, r.buf.subarray(parser.rowStart[i]!, parser.rowEnd[i]!));
                  continue;
                }
              }
              bucketRows[buckets[i]!]!++;
              accepted++;
            }
          } else {
            if (winIdx) {
              for (let i = 0; i < n; i++) {
                const w = windowOfRow(r.buf, i);
                winIdx[i] = w;
                if (w < 0) {
                  writeReject(file, lineNo + parser.rowLine[i]! + 1, w === -2 ? R_WINDOWS_CAP : R_WINDOW, r.buf.subarray(parser.rowStart[i]!, parser.rowEnd[i]!));
                  segPending[seg - segBase]!--;
                }
              }
            }
            if (batcher.kb !== kb) {
              batcher.kb = kb;
              batcher.kdv = viewOf(kb);
            }
            if (batcher.lineBuf !== r.buf) batcher.ldv = viewOf(r.buf);
            batcher.ko = ko;
            batcher.bk = buckets;
            batcher.lineBuf = r.buf;
            batcher.rowStart = parser.rowStart;
            batcher.rowEnd = parser.rowEnd;
            batcher.win = winIdx;
            batcher.seg = seg;
            batcher.accepted = 0;
            for (let i = 0; i < n; ) {
              i = batcher.run(i, n);
              if (batcher.full) await dispatch(batcher.full);
            }
            accepted = batcher.accepted;
          }
          s.rows += accepted;
          lineNo += parser.lines;
          s.bytes += r.end - r.start;
          if (!o.dryRun) {
            // global cap: flush every bucket, fullest first (big batches are the cheap ones)
            if (batcher.buffered > o.maxBufferedBytes) {
              const list = [...active].sort((a, b) => b.count - a.count);
              for (const b of list) {
                await dispatch(b);
                if (batcher.buffered <= o.maxBufferedBytes / 2) break;
              }
            }
            // a rarely-hit bucket must not pin the checkpoint forever
            const live = segPending.length - segHead;
            if (live > DEFAULTS.maxLiveSegments) {
              const cut = segBase + segHead + (live >> 1);
              await flushWhere((b) => b.segs[0]! < cut);
            }
          }
          advance();
          deps.progress?.update(snapshot());
        }
      } finally {
        await reader.close();
      }
      if (!interrupted() && !fatal) {
        addSegment(fi, sizes[fi]!, lineNo, sizes[fi]!, lineNo, 0, true);
        advance();
        s.filesDone++;
      }
    }
    if (!interrupted() && !fatal && !o.dryRun) await flushWhere(() => true);
    while (inFlight > 0) await new Promise<void>((r) => (wake = r));
    if (fatal) throw fatal;
  } finally {
    // on any exit: wait for acknowledgements in flight, then record what they covered
    while (inFlight > 0) await new Promise<void>((r) => (wake = r));
    advance();
    await saveCheckpoint(true).catch((err) => (fatal ??= err));
    await failedOut?.close();
    await rejectsOut?.close();
    deps.progress?.stop(snapshot());
  }
  void cpDirty;
  if (fatal) throw fatal;

  const elapsedMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  let min = Infinity;
  let max = 0;
  let sum = 0;
  for (let i = 0; i < o.buckets; i++) {
    const v = bucketRows[i]!;
    if (v < min) min = v;
    if (v > max) max = v;
    sum += v;
  }
  const rejectRatio = s.lines > 0 ? s.rejected / s.lines : 0;
  const rejectRatioExceeded = rejectRatio > o.maxRejectRatio;
  return {
    ok: s.failed === 0 && !interrupted() && !rejectRatioExceeded,
    interrupted: interrupted(),
    dryRun: o.dryRun,
    files: files.length,
    filesSkipped: s.filesSkipped,
    filesReloaded,
    threads: parallel ? options.threads! : 0,
    bytes: s.bytes,
    lines: s.lines,
    rows: s.rows,
    rejected: s.rejected,
    rejectedByReason: byReason,
    rejectRatio,
    maxRejectRatio: o.maxRejectRatio,
    rejectRatioExceeded,
    loaded: s.loaded,
    failed: s.failed,
    newMembers: s.newMembers,
    batches: s.batches,
    failedBatches: s.failedBatches,
    retries: s.retries,
    windows,
    buckets: o.buckets,
    bucketRows: { min: sum === 0 ? 0 : min, max, mean: sum / o.buckets },
    fieldCount: parser.fieldCount,
    elapsedMs,
    rowsPerSec: elapsedMs > 0 ? (s.rows * 1000) / elapsedMs : 0,
    cpuMs,
    rowsPerCpuSec: cpuMs > 0 ? (s.rows * 1000) / cpuMs : 0,
    peakRssBytes: peakRss(),
    failedFile: failedPath,
    rejectsFile: rejectsPath,
    checkpointFile: cpPath,
    lastError,
  };
}
