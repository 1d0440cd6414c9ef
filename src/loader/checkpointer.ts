// The load's checkpoint: what it may cover, resuming from it, and saving it.
// Per file it records the offset up to which every row was acknowledged by the store or written to
// the failed file. Each parsed region is a segment with a count of rows still in flight; segments
// settle in any order, and a file's offset only moves over a run of settled segments from its
// start, so a crash never skips an unacknowledged row.
import { ErrorCodes, HashGateError } from '../errors.js';
import type { AppendFile } from './append-file.js';
import { fingerprintDiff, readCheckpoint, writeCheckpoint, type CheckpointData, type FileProgress } from './checkpoint.js';
import type { LoadFailure } from './failure.js';
import { sameIdentity, type FileIdentity } from './inspect.js';

export interface CheckpointerInit {
  /** undefined: nothing is saved (a dry run). */
  path: string | undefined;
  resume: boolean;
  /** Options that change what is written where; a resume with different ones is refused. */
  fingerprint: Record<string, unknown>;
  files: readonly string[];
  identities: readonly FileIdentity[];
  intervalMs: number;
  now: () => number;
  /** Files holding rows the checkpoint counts as done: made durable before each save. */
  outputs: readonly (AppendFile | undefined)[];
  failure: LoadFailure;
}

/** Segment compaction threshold: settled segments are dropped in bulk, not one by one. */
const COMPACT_AFTER = 4096;

export class Checkpointer {
  /** Files --resume reads again: changed since the checkpoint, or with rows in the failed file. */
  readonly filesReloaded: number;
  private readonly data: CheckpointData;
  private readonly init: CheckpointerInit;
  private saving: Promise<void> | undefined;
  private lastSave = 0;

  // segments, one per parsed region plus an end-of-file marker per file, as parallel arrays
  private readonly segFile: number[] = [];
  private readonly segStart: number[] = [];
  private readonly segStartLine: number[] = [];
  private readonly segEnd: number[] = [];
  private readonly segLine: number[] = [];
  private readonly segPending: number[] = [];
  private readonly segDone: boolean[] = [];
  /** Id of the segment at index 0 of the arrays. */
  private segBase = 0;
  /** Index of the oldest unsettled segment. */
  private segHead = 0;

  private constructor(data: CheckpointData, filesReloaded: number, init: CheckpointerInit) {
    this.data = data;
    this.filesReloaded = filesReloaded;
    this.init = init;
  }

  /** The checkpoint this run starts from: a fresh one, or with `resume` the saved one checked
   *  against the options and against each file as it is now. */
  static async open(init: CheckpointerInit): Promise<Checkpointer> {
    const { path, fingerprint, files, identities } = init;
    let cp: CheckpointData = { version: 1, fingerprint, files: {}, updatedAt: new Date(init.now()).toISOString() };
    if (path && init.resume) {
      const prev = await readCheckpoint(path);
      if (prev) {
        const diff = fingerprintDiff(prev.fingerprint, fingerprint);
        if (diff.length > 0) {
          throw new HashGateError(
            ErrorCodes.INVALID_OPTION,
            `--resume: checkpoint ${path} was written with different options (${diff.join('; ')}); use the same options or drop --resume`,
            { details: { diff } },
          );
        }
        cp = { ...prev, fingerprint };
      }
    }
    let reloaded = 0;
    for (let i = 0; i < files.length; i++) {
      const f = files[i]!;
      const id = identities[i]!;
      const prev = cp.files[f];
      const fresh: FileProgress = { ...id, offset: 0, line: 0, done: false };
      if (prev === undefined) cp.files[f] = fresh;
      else if (!sameIdentity(prev, id)) {
        // replaced or rewritten since the checkpoint (or a checkpoint without identities): what
        // was acknowledged belongs to other bytes, so the whole file loads again
        cp.files[f] = fresh;
        reloaded++;
      } else if (prev.failedFrom !== undefined) {
        // rows of this file went to the failed file: read it again from the first of them, so a
        // resume does not report success for rows the store never acknowledged
        cp.files[f] = { ...id, offset: prev.failedFrom.offset, line: prev.failedFrom.line, done: false, ...(prev.rejectsLine ? { rejectsLine: prev.rejectsLine } : {}) };
        reloaded++;
      }
    }
    return new Checkpointer(cp, reloaded, init);
  }

  /** Where `file` stands (every input has an entry). */
  progress(file: string): FileProgress {
    return this.data.files[file]!;
  }

  /** Adds a segment of file index `file` with `pending` rows not yet settled; returns its id. */
  addSegment(file: number, start: number, startLine: number, end: number, line: number, pending: number, done: boolean): number {
    this.segFile.push(file);
    this.segStart.push(start);
    this.segStartLine.push(startLine);
    this.segEnd.push(end);
    this.segLine.push(line);
    this.segPending.push(pending);
    this.segDone.push(done);
    return this.segBase + this.segFile.length - 1;
  }

  /** Segments added and not yet passed by the checkpoint. */
  get liveSegments(): number {
    return this.segPending.length - this.segHead;
  }

  /** The segment id halfway through the live ones: flushing rows older than it lets the
   *  checkpoint move when a rarely-hit bucket holds old rows. */
  halfwayCut(): number {
    return this.segBase + this.segHead + (this.liveSegments >> 1);
  }

  /** Rows (by segment id) that the store acknowledged or that went to the failed file. */
  settle(segs: Uint32Array, count: number): void {
    const pending = this.segPending;
    const base = this.segBase;
    for (let i = 0; i < count; i++) pending[segs[i]! - base]!--;
  }

  /** Rows (by segment id) written to the failed file: --resume reloads each file from the
   *  earliest region holding one. */
  recordFailed(segs: Uint32Array, count: number): void {
    const files = this.init.files;
    for (let i = 0; i < count; i++) {
      const k = segs[i]! - this.segBase;
      const fp = this.data.files[files[this.segFile[k]!]!]!;
      fp.failed = (fp.failed ?? 0) + 1;
      if (fp.failedFrom === undefined || this.segStart[k]! < fp.failedFrom.offset) fp.failedFrom = { offset: this.segStart[k]!, line: this.segStartLine[k]! };
    }
  }

  /** Moves each file's offset over the settled segments at the head, and saves when due. */
  advance(): void {
    let moved = false;
    const files = this.init.files;
    while (this.segHead < this.segPending.length && this.segPending[this.segHead] === 0) {
      const h = this.segHead;
      const fp = this.data.files[files[this.segFile[h]!]!]!;
      fp.offset = this.segEnd[h]!;
      fp.line = this.segLine[h]!;
      if (this.segDone[h]) fp.done = true;
      this.segHead++;
      moved = true;
    }
    if (this.segHead > COMPACT_AFTER && this.segHead * 2 > this.segPending.length) {
      const arrays = [this.segFile, this.segStart, this.segStartLine, this.segEnd, this.segLine, this.segPending, this.segDone] as unknown[][];
      for (const a of arrays) a.splice(0, this.segHead);
      this.segBase += this.segHead;
      this.segHead = 0;
    }
    if (moved) void this.save(false).catch(this.init.failure.record);
  }

  /** Writes the checkpoint, at most once per interval unless `force`. */
  async save(force: boolean): Promise<void> {
    const path = this.init.path;
    if (!path) return;
    // a skipped save loses nothing: the next one (at the latest the forced one at the end)
    // writes everything up to then
    if (!force && performance.now() - this.lastSave < this.init.intervalMs) return;
    while (this.saving) await this.saving;
    this.lastSave = performance.now();
    this.saving = (async () => {
      // snapshot first: every row it covers had its failed/rejects write completed before it was
      // counted, so flushing those files now makes everything behind the snapshot durable
      this.data.updatedAt = new Date(this.init.now()).toISOString();
      const snap = JSON.stringify(this.data, null, 1);
      for (const out of this.init.outputs) await out?.flush();
      await writeCheckpoint(path, snap);
    })();
    try {
      await this.saving;
    } finally {
      this.saving = undefined;
    }
  }
}

export interface FingerprintOptions {
  delimiter: number;
  fields: number[] | null;
  window: string | undefined;
  windowField: number;
  dateFormat: string;
  windowUnit: string;
  buckets: number;
  secret: boolean;
  extra: Record<string, unknown> | undefined;
}

/** The options a resumed load must share with the one that wrote the checkpoint: everything that
 *  decides which member lands in which key. */
export function loadFingerprint(f: FingerprintOptions): Record<string, unknown> {
  return {
    delimiter: f.delimiter,
    fields: f.fields,
    window: f.window ?? null,
    windowField: f.windowField,
    dateFormat: f.windowField >= 0 ? f.dateFormat : null,
    windowUnit: f.windowUnit,
    buckets: f.buckets,
    secret: f.secret,
    ...f.extra,
  };
}
