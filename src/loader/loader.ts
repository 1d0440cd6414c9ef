// The bulk loader's entry point: load() wires the parts of a load together and runs them.
// files -> byte regions -> packed keys in kernel memory -> buckets -> per-bucket batches -> store:
// the scan reads, the batcher buffers, the dispatcher sends (retries, failed file, back-pressure),
// the reject writer lists bad lines, the checkpointer records only rows the store acknowledged or
// that went to the failed file, and the summary reports.
import { rm } from 'node:fs/promises';
import { windowId } from '../dedup/window.js';
import { AppendFile } from './append-file.js';
import { Batcher } from './batcher.js';
import { BucketCounts } from './bucket-counts.js';
import { BufferPool } from './buffers.js';
import { Checkpointer, loadFingerprint } from './checkpointer.js';
import { LoadFailure } from './failure.js';
import { expandInputs } from './inputs.js';
import { inspectInputs } from './inspect.js';
import { DEFAULTS, resolveOptions, type LoadDeps, type LoadOptions } from './options.js';
import { RejectWriter } from './rejects.js';
import { InputScan } from './scan.js';
import { SummaryBuilder, type LoadSummary } from './summary.js';
import { makeWindowCoder, WindowTable } from './window.js';

export { DEFAULTS, type LoadDeps, type LoadOptions } from './options.js';
export type { LoadSummary } from './summary.js';

export async function load(options: LoadOptions, deps: LoadDeps = {}): Promise<LoadSummary> {
  const summary = new SummaryBuilder();
  const now = deps.now ?? Date.now;
  const o = resolveOptions(options, deps);
  const fixedWindow = options.window ?? (o.windowField < 0 ? windowId(now(), o.windowUnit, o.timeZone) : undefined);
  // the loader's own files are never inputs: a directory or glob skips them, naming one is an error
  const files = await expandInputs(options.inputs, { own: o.ownFiles });
  const input = await inspectInputs(files, o.delimiter, o.fieldCount);
  o.fieldCount = input.fieldCount;
  // a store that grows as it fills (compact Redis buckets) can size itself for the whole load
  // first, while it is cheap: before a member is written, nothing has to move
  if (!o.dryRun && fixedWindow !== undefined && input.bytesPerLine > 0) {
    await deps.sink?.plan?.({ window: fixedWindow, rows: Math.ceil(input.bytesTotal / input.bytesPerLine) });
  }

  const failure = new LoadFailure();
  const failedOut = o.failedPath ? new AppendFile(o.failedPath, true) : undefined;
  const rejectsOut = o.rejectsPath ? new AppendFile(o.rejectsPath, !o.resume) : undefined;
  const checkpointer = await Checkpointer.open({
    path: o.checkpointPath,
    resume: o.resume,
    fingerprint: loadFingerprint({ ...o, window: fixedWindow, secret: options.secret !== undefined, extra: options.extraFingerprint }),
    files,
    identities: input.identities,
    intervalMs: o.checkpointIntervalMs,
    now,
    outputs: [failedOut, rejectsOut],
    failure,
  });
  // Every row in an earlier failed file is re-read by this run (it lies past its file's
  // checkpoint offset, or behind a recorded failedFrom), so the file restarts empty: after a
  // clean resume it no longer lists rows that are now loaded.
  if (failedOut && !o.dryRun) await rm(failedOut.path, { force: true });
  const rejects = new RejectWriter(rejectsOut, checkpointer, files, failure);

  // a dry run has no sink: it counts the buckets of the layout it was given
  const compact = (deps.sink?.layout ?? (o.dryRun ? options.layout : undefined)) === 'compact';
  // Many buckets (compact: 65_536) would mean tiny per-bucket batches: buffer per group of
  // buckets instead and let the sink write one SADD per bucket of the group in one go.
  const groups = Math.min(o.buckets, DEFAULTS.maxGroups);
  const bucketRows = new BucketCounts(o.buckets, groups);
  const batcher = new Batcher(new BufferPool(o.batch, 128, o.concurrency + 64), groups, compact, bucketRows, 1);
  const coder = o.windowField >= 0 ? makeWindowCoder({ format: o.dateFormat, unit: o.windowUnit, timeZone: o.timeZone }) : undefined;
  const windows = new WindowTable(coder, fixedWindow, o.windowUnit, o.maxWindows, (n) => batcher.ensureWindows(n));
  // imported only to send: the dispatcher pulls in the Redis sink code a dry run does not need
  const dispatcher =
    !o.dryRun && deps.sink
      ? new (await import('./dispatcher.js')).Dispatcher({ ...o, sink: deps.sink, batcher, windows: windows.ids, maxLiveSegments: DEFAULTS.maxLiveSegments, failedOut, checkpointer, failure })
      : undefined;
  const scan = new InputScan({
    o,
    files,
    sizes: input.sizes,
    bytesTotal: input.bytesTotal,
    compact,
    secret: options.secret,
    checkpointer,
    rejects,
    windows,
    bucketRows,
    send: dispatcher ? { batcher, dispatcher } : undefined,
    onKeys: deps.onKeys,
    signal: deps.signal,
    onProgress: () => deps.progress?.update(summary.snapshot()),
    failure,
  });
  const interrupted = (): boolean => deps.signal?.aborted === true;
  summary.track({ files: files.length, bytesTotal: input.bytesTotal, read: scan, rejects, dispatcher, windows: windows.ids, bucketRows, interrupted });

  try {
    await scan.run();
    if (!scan.stopped) await dispatcher?.flushWhere(() => true);
    await dispatcher?.drain();
    failure.throwIfFailed();
  } finally {
    // on any exit: wait for acknowledgements in flight, then record what they covered
    await dispatcher?.drain();
    // rows a stopped load still holds are counted in the summary as read, though never sent
    batcher.countHeld();
    checkpointer.advance();
    await checkpointer.save(true).catch(failure.record);
    await failedOut?.close();
    await rejectsOut?.close();
    deps.progress?.stop(summary.snapshot());
  }
  failure.throwIfFailed();
  return summary.build({
    dryRun: o.dryRun,
    threads: scan.threads,
    filesReloaded: checkpointer.filesReloaded,
    fieldCount: scan.parser.fieldCount,
    maxRejectRatio: o.maxRejectRatio,
    failedFile: o.failedPath,
    rejectsFile: o.rejectsPath,
    checkpointFile: o.checkpointPath,
  });
}
