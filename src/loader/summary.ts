// Builds what a load reports: progress snapshots while it runs and the summary at the end.
// Both are read from the counters of the parts that did the work.
import type { BucketCounts, BucketRowStats } from './bucket-counts.js';
import type { Dispatcher } from './dispatcher.js';
import type { ProgressSnapshot } from './progress.js';
import type { RejectWriter } from './rejects.js';
import type { RejectName } from './parse.js';

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
  bucketRows: BucketRowStats;
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

/** What the reading side counted. */
export interface ReadCounts {
  bytes: number;
  lines: number;
  rows: number;
  filesDone: number;
  filesSkipped: number;
}

/** The parts a summary is built from. */
export interface SummarySources {
  files: number;
  bytesTotal: number;
  read: ReadCounts;
  rejects: RejectWriter;
  /** undefined on a dry run: nothing was sent. */
  dispatcher: Dispatcher | undefined;
  windows: string[];
  bucketRows: BucketCounts;
  interrupted: () => boolean;
}

/** Settings and outcomes the summary repeats. */
export interface SummaryFacts {
  dryRun: boolean;
  threads: number;
  filesReloaded: number;
  fieldCount: number;
  maxRejectRatio: number;
  failedFile: string | undefined;
  rejectsFile: string | undefined;
  checkpointFile: string | undefined;
}

function peakRss(): number {
  return Math.max(process.resourceUsage().maxRSS * 1024, process.memoryUsage.rss());
}

export class SummaryBuilder {
  // taken when the load starts: elapsed and CPU time cover input inspection too
  private readonly t0 = performance.now();
  private readonly cpu0 = process.cpuUsage();
  private src: SummarySources | undefined;

  /** Names the counters to report; snapshots and the summary read them when asked. */
  track(src: SummarySources): void {
    this.src = src;
  }

  snapshot(): ProgressSnapshot {
    const s = this.src!;
    return {
      elapsedMs: performance.now() - this.t0,
      bytesDone: s.read.bytes,
      bytesTotal: s.bytesTotal,
      filesDone: s.read.filesDone,
      filesTotal: s.files,
      rows: s.read.rows,
      loaded: s.dispatcher?.loaded ?? 0,
      failed: s.dispatcher?.failed ?? 0,
      rejected: s.rejects.rejected,
      inFlight: s.dispatcher?.inFlight ?? 0,
    };
  }

  build(f: SummaryFacts): LoadSummary {
    const s = this.src!;
    const elapsedMs = performance.now() - this.t0;
    const cpu = process.cpuUsage(this.cpu0);
    const cpuMs = (cpu.user + cpu.system) / 1000;
    const ratio = s.rejects.ratio(s.read.lines, f.maxRejectRatio);
    const d = s.dispatcher;
    const failed = d?.failed ?? 0;
    const interrupted = s.interrupted();
    return {
      ok: failed === 0 && !interrupted && !ratio.rejectRatioExceeded,
      interrupted,
      dryRun: f.dryRun,
      files: s.files,
      filesSkipped: s.read.filesSkipped,
      filesReloaded: f.filesReloaded,
      threads: f.threads,
      bytes: s.read.bytes,
      lines: s.read.lines,
      rows: s.read.rows,
      rejected: s.rejects.rejected,
      rejectedByReason: s.rejects.byReason,
      ...ratio,
      loaded: d?.loaded ?? 0,
      failed,
      newMembers: d?.newMembers ?? 0,
      batches: d?.batches ?? 0,
      failedBatches: d?.failedBatches ?? 0,
      retries: d?.retries ?? 0,
      windows: s.windows,
      buckets: s.bucketRows.buckets,
      bucketRows: s.bucketRows.stats(),
      fieldCount: f.fieldCount,
      elapsedMs,
      rowsPerSec: elapsedMs > 0 ? (s.read.rows * 1000) / elapsedMs : 0,
      cpuMs,
      rowsPerCpuSec: cpuMs > 0 ? (s.read.rows * 1000) / cpuMs : 0,
      peakRssBytes: peakRss(),
      failedFile: f.failedFile,
      rejectsFile: f.rejectsFile,
      checkpointFile: f.checkpointFile,
      lastError: d?.lastError,
    };
  }
}
