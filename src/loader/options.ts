// The bulk loader's options and their defaults, resolved once per load.
// The store's layout, prefix and bucket counts are not here: they are the dedup store's (the CLI
// takes them from there), so a load and HashGate.open never disagree.
import { resolve } from 'node:path';
import { ErrorCodes, HashGateError } from '../errors.js';
import { checkTimeZone, type WindowKind } from '../dedup/window.js';
import { MAX_KEY_BYTES } from '../util/limits.js';
import type { ProgressReporter } from './progress.js';
import type { LoadSink } from './sink.js';

export const DEFAULTS = {
  delimiter: '|',
  buckets: 1000,
  batch: 1000,
  concurrency: 16,
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
  /** A dry run uses worker threads by default only from this much input: below it, starting
   *  them costs more than they save (measured on a shared 2-core box, where a 270 MiB export
   *  ran faster on the main thread alone; see dryRunThreads). */
  autoThreadsMinBytes: 1 << 30,
  /** ... and then one thread per this much input, up to the cores. */
  autoBytesPerThread: 512 << 20,
} as const;

/**
 * Worker threads a dry run uses when not told (`threads` unset, `--threads auto`): none for
 * inputs under DEFAULTS.autoThreadsMinBytes or on one core, else one per
 * DEFAULTS.autoBytesPerThread of input, at most `cores` (the main thread only merges counts).
 * A function of its arguments only, so the choice can be checked; the loader passes
 * os.availableParallelism() as `cores`.
 */
export function dryRunThreads(bytes: number, cores: number): number {
  if (cores < 2 || !(bytes >= DEFAULTS.autoThreadsMinBytes)) return 0;
  return Math.min(Math.floor(cores), Math.floor(bytes / DEFAULTS.autoBytesPerThread));
}

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
  /** Worker threads for a dry run (parse + hash + bucket per file region); 0 = main thread only;
   *  unset = chosen from the input size and the cores (dryRunThreads). Used when rows need not
   *  reach the main thread: no sink, no onKeys, a fixed window. */
  threads?: number;
  /** Bytes per region handed to a worker (default 8 MiB). */
  regionBytes?: number;
  /** Layout whose buckets a dry run counts (default 'sets'); with a sink, the sink's layout.
   *  'compact' buckets by digest bytes 8..15 (HMAC digests with `secret`), as the store does. */
  layout?: 'sets' | 'compact';
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

/** Every option with its default applied, and the loader's own files as absolute paths. */
export interface ResolvedOptions {
  delimiter: number;
  fields: number[] | null;
  /** 0 until the inputs are sampled. */
  fieldCount: number;
  windowField: number;
  dateFormat: string;
  windowUnit: WindowKind;
  timeZone: string;
  buckets: number;
  batch: number;
  concurrency: number;
  maxLineBytes: number;
  readBufferBytes: number;
  maxBufferedBytes: number;
  retries: number;
  retryDelayMs: number;
  retryMaxDelayMs: number;
  checkpointIntervalMs: number;
  maxKeyBytes: number;
  maxWindows: number;
  maxRejectRatio: number;
  dryRun: boolean;
  resume: boolean;
  /** undefined: chosen from the input size and the cores once the inputs are known. */
  threads: number | undefined;
  regionBytes: number | undefined;
  failedPath: string | undefined;
  rejectsPath: string | undefined;
  /** Where the checkpoint is written; undefined on a dry run, which records nothing. */
  checkpointPath: string | undefined;
  /** The loader's own files, never read as inputs (the checkpoint path counts on a dry run too). */
  ownFiles: string[];
}

export function resolveOptions(options: LoadOptions, deps: LoadDeps): ResolvedOptions {
  const dryRun = options.dryRun ?? false;
  if (!dryRun && !deps.sink) throw new HashGateError(ErrorCodes.INVALID_ARG, 'load needs a sink unless dryRun is set');
  const maxLineBytes = options.maxLineBytes ?? DEFAULTS.maxLineBytes;
  const failedPath = options.failedFile ? resolve(options.failedFile) : undefined;
  const rejectsPath = options.rejectsFile ? resolve(options.rejectsFile) : undefined;
  const checkpoint = resolve(options.checkpointFile ?? DEFAULTS.checkpointFile);
  return {
    delimiter: options.delimiter ?? DEFAULTS.delimiter.charCodeAt(0),
    fields: options.fields ?? null,
    fieldCount: options.fieldCount ?? 0,
    windowField: options.windowField ?? -1,
    dateFormat: options.dateFormat ?? DEFAULTS.dateFormat,
    windowUnit: options.windowUnit ?? DEFAULTS.windowUnit,
    timeZone: checkTimeZone(options.timeZone ?? DEFAULTS.timeZone, 'timeZone'),
    buckets: options.buckets ?? DEFAULTS.buckets,
    batch: options.batch ?? DEFAULTS.batch,
    concurrency: options.concurrency ?? DEFAULTS.concurrency,
    maxLineBytes,
    // a region must hold at least two of the longest lines, or a long line could never be parsed
    readBufferBytes: Math.max(options.readBufferBytes ?? DEFAULTS.readBufferBytes, maxLineBytes * 2),
    maxBufferedBytes: options.maxBufferedBytes ?? DEFAULTS.maxBufferedBytes,
    retries: options.retries ?? DEFAULTS.retries,
    retryDelayMs: options.retryDelayMs ?? DEFAULTS.retryDelayMs,
    retryMaxDelayMs: options.retryMaxDelayMs ?? DEFAULTS.retryMaxDelayMs,
    checkpointIntervalMs: options.checkpointIntervalMs ?? DEFAULTS.checkpointIntervalMs,
    maxKeyBytes: options.maxKeyBytes ?? DEFAULTS.maxKeyBytes,
    maxWindows: options.maxWindows ?? DEFAULTS.maxWindows,
    maxRejectRatio: options.maxRejectRatio ?? DEFAULTS.maxRejectRatio,
    dryRun,
    resume: options.resume ?? false,
    threads: options.threads,
    regionBytes: options.regionBytes,
    failedPath,
    rejectsPath,
    checkpointPath: dryRun ? undefined : checkpoint,
    ownFiles: [failedPath, rejectsPath, checkpoint].filter((p): p is string => p !== undefined),
  };
}
