// `hashgate load <file|dir|glob>...`: bulk-load pipe-delimited export files into the dedup store.
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DEFAULTS as DEDUP_DEFAULTS, warnHllOnce } from '../../dedup/options.js';
import { ErrorCodes, HashGateError, HashGateTypeError, HashGateRangeError } from '../../errors.js';
import { DEFAULTS, load, type LoadOptions, type LoadSummary } from '../../loader/loader.js';
import { createProgress } from '../../loader/progress.js';
import type { LoaderLayout, RedisLayoutSink } from '../../loader/sink.js';
import type { LmdbLoadSink } from '../../loader/lmdb-sink.js';
import type { BloomFilter } from '../../bloom/index.js';
import type { WindowKind } from '../../dedup/window.js';
import { redact } from '../../util/redact.js';
import { flagError } from '../flags.js';
import { fail, wantsJson } from '../output.js';
import { delimiterByte, fieldList, intFlag as int, usage } from '../line-flags.js';

/** The dedup store's defaults: same prefix, layout and bucket counts as `HashGate.open`. */
export const STORE_DEFAULTS = {
  prefix: DEDUP_DEFAULTS.prefix,
  layout: DEDUP_DEFAULTS.layout as LoaderLayout,
  setsBuckets: DEDUP_DEFAULTS.setsBuckets,
  compactBuckets: DEDUP_DEFAULTS.compactBuckets,
  lmdbCompactBuckets: DEDUP_DEFAULTS.lmdbCompactBuckets,
};

/** The help text; takes ../redis-url.js, which a dry run never loads (it pulls in the Redis client). */
export const helpText = ({ REDIS_HELP, CONNECT_TIMEOUT_HELP }: typeof import('../redis-url.js')): string => `usage: hashgate load <file|dir|glob>... [flags]

Loads pipe-delimited export files (e.g. Hive's 000000_0, 000001_0, ...) into the dedup store.

Store
  --store PATH              the durable embedded store (LMDB directory, dedup.path) instead of Redis
${REDIS_HELP}
  --cluster HOST:PORT,...   Redis Cluster startup nodes instead of --redis
${CONNECT_TIMEOUT_HELP}
  --layout sets|compact     Redis layout (default ${STORE_DEFAULTS.layout}; 'sets' = raw keys in
                            {prefix}:{window}:{bucket} sets, readable by plain SISMEMBER)
  --prefix P                key prefix (default ${STORE_DEFAULTS.prefix})
  --buckets N               buckets (default: the count recorded for the window, else
                            ${STORE_DEFAULTS.setsBuckets} for sets / ${STORE_DEFAULTS.compactBuckets} for compact,
                            whose buckets split as they fill; ${STORE_DEFAULTS.lmdbCompactBuckets} with --store)
  --no-hll                  deprecated, ignored (the window count is always kept)
  --secret-env NAME         compact layout: HMAC secret (the store's dedup.secret) from env var NAME
Windows
  --window ID               fixed window id, e.g. 2026 (default: current year in --time-zone)
  --window-from-field N     take each row's window from field N (0-based)
  --date-format F           format of that field: yyyyMMdd (default), yyyy-MM-dd, ..., epoch-s, epoch-ms
  --window-unit U           year (default) | month | day
  --max-windows N           most distinct windows in one load (default ${DEFAULTS.maxWindows}: a year of
                            days); rows past it are rejected as too-many-windows
  --time-zone TZ            IANA zone for windows (default ${DEFAULTS.timeZone})
Input
  --delimiter C             field delimiter, one byte (default '|'; 'tab' for TAB)
  --fields 0,1              fields forming the key, in order (default: all fields concatenated)
  --field-count N           expected fields per line (default: the count most of a sample of up to
                            10,000 lines share; refused when no count has a majority)
  --max-line-bytes N        longer lines are rejected (default ${DEFAULTS.maxLineBytes})
  --max-key-bytes N         longer keys are rejected as key-too-long (default ${DEFAULTS.maxKeyBytes},
                            the library's dedup.maxKeyBytes default, so every loaded key can be queried)
  --max-reject-ratio R      rejected/lines above R fails the load with exit 4 (default ${DEFAULTS.maxRejectRatio})
                            Files that are not text (NUL bytes, control bytes, gzip/ORC/Parquet...)
                            are refused before anything is loaded (exit 4).
Throughput and memory
  --batch N                 rows per bucket batch (default ${DEFAULTS.batch})
  --concurrency N           batches in flight (default ${DEFAULTS.concurrency})
  --max-buffer-mb N         cap on buffered rows across buckets, forcing early flushes (default ${DEFAULTS.maxBufferedBytes >> 20})
  --retries N               retries per batch on transient errors (default ${DEFAULTS.retries})
  --retry-delay MS          first backoff delay, doubled per retry (default ${DEFAULTS.retryDelayMs})
Failures and resume
  --failed-file F           rows of batches that failed after retries, in the input format,
                            re-feedable with the same command (default hashgate-load.failed.txt)
  --rejects-file R          unparseable rows: file<TAB>line<TAB>reason<TAB>content (default hashgate-load.rejects.tsv)
  --checkpoint F            checkpoint file (default ${DEFAULTS.checkpointFile})
  --resume                  continue from the checkpoint (same options required); files changed
                            since (size, mtime, head/tail hash) load again, files with rows in the
                            failed file load again from the first failed row
                            The loader's own files (checkpoint, failed, rejects) are never inputs.
Other
  --dry-run                 parse, hash, bucket and count; no Redis
  --threads N|auto          dry run: worker threads parsing, hashing and bucketing file regions;
                            0 = the main thread alone. Default auto: none under
                            ${DEFAULTS.autoThreadsMinBytes / 2 ** 30} GiB of input or on one core, else one per ${DEFAULTS.autoBytesPerThread >> 20} MiB of input,
                            at most the cores (the summary's 'threads' says what ran). Not with
                            --window-from-field or --bloom (those run on the main thread).
  --bloom OUT               also write a Bloom filter (Guava writeTo format) of every key
  --bloom-fpp P             its false-positive rate (default 0.01)
  --bloom-expected N        its expected keys (default: estimated from the input size)
  --json                    print the summary as one line of JSON on stdout
  --progress / --no-progress  force the progress bar on/off (default: bar on a TTY, lines otherwise)
  --quiet                   no progress output
Exit codes: 0 done (rejects, if any, under --max-reject-ratio and listed in --rejects-file),
  1 error (Redis unreachable, I/O), 2 usage, 3 some rows failed (see --failed-file; --resume
  reloads them), 4 input refused (reject ratio exceeded, a file not text, no majority field count),
  130 interrupted (--resume continues).`;

function fmtSummary(s: LoadSummary): string {
  const mb = (n: number): string => `${(n / (1 << 20)).toFixed(1)} MiB`;
  const reasons = Object.entries(s.rejectedByReason).map(([k, v]) => `${k} ${v}`).join(', ');
  return [
    `${s.dryRun ? 'dry run' : 'load'} ${s.interrupted ? 'INTERRUPTED' : s.ok ? 'done' : s.failed > 0 ? 'done with failures' : 'done, TOO MANY REJECTS'}: ${s.files} files (${s.filesSkipped} skipped by checkpoint${s.filesReloaded > 0 ? `, ${s.filesReloaded} reloaded` : ''}), ${mb(s.bytes)}, ${s.lines} lines`,
    `  rows ${s.rows}, loaded ${s.loaded}, new members ${s.newMembers}, failed ${s.failed} (${s.failedBatches} batches, ${s.retries} retries), rejected ${s.rejected}${reasons ? ` (${reasons})` : ''}`,
    `  windows ${s.windows.join(', ') || '-'}; ${s.buckets} buckets, rows per bucket min ${s.bucketRows.min} max ${s.bucketRows.max} mean ${s.bucketRows.mean.toFixed(1)}`,
    `  ${(s.elapsedMs / 1000).toFixed(2)} s, ${Math.round(s.rowsPerSec)} rows/s (${Math.round(s.rowsPerCpuSec)} rows per CPU second), peak RSS ${mb(s.peakRssBytes)}`,
    ...(s.failed > 0 ? [`  failed rows written to ${s.failedFile}; re-run with --resume (reloads them), or load that file as input with another --failed-file (last error: ${redact(s.lastError ?? '')})`] : []),
    ...(s.rejected > 0 && s.rejectsFile ? [`  rejected rows listed in ${s.rejectsFile}`] : []),
    ...(s.rejectRatioExceeded ? [`  ${(s.rejectRatio * 100).toFixed(2)}% of lines rejected, above --max-reject-ratio ${s.maxRejectRatio}: check --delimiter/--fields/--field-count and the input files`] : []),
  ].join('\n');
}

const FLAGS = {
  store: { type: 'string' },
  redis: { type: 'string' },
  cluster: { type: 'string' },
  // CONNECT_TIMEOUT_FLAG of ../redis-url.js, spelled out so a dry run starts without the Redis client
  'connect-timeout-ms': { type: 'string' },
  layout: { type: 'string' },
  prefix: { type: 'string' },
  buckets: { type: 'string' },
  'no-hll': { type: 'boolean' },
  'secret-env': { type: 'string' },
  window: { type: 'string' },
  'window-from-field': { type: 'string' },
  'date-format': { type: 'string' },
  'window-unit': { type: 'string' },
  'time-zone': { type: 'string' },
  delimiter: { type: 'string' },
  fields: { type: 'string' },
  'field-count': { type: 'string' },
  'max-key-bytes': { type: 'string' },
  'max-reject-ratio': { type: 'string' },
  'max-windows': { type: 'string' },
  'max-line-bytes': { type: 'string' },
  batch: { type: 'string' },
  concurrency: { type: 'string' },
  'max-buffer-mb': { type: 'string' },
  retries: { type: 'string' },
  'retry-delay': { type: 'string' },
  'failed-file': { type: 'string' },
  'rejects-file': { type: 'string' },
  checkpoint: { type: 'string' },
  resume: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  threads: { type: 'string' },
  bloom: { type: 'string' },
  'bloom-fpp': { type: 'string' },
  'bloom-expected': { type: 'string' },
  json: { type: 'boolean' },
  progress: { type: 'boolean' },
  'no-progress': { type: 'boolean' },
  quiet: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** --threads: a count, or 'auto' (the same as leaving it out: chosen from input size and cores). */
function threadsFlag(v: string | undefined): number | undefined {
  if (v === undefined || v === 'auto') return undefined;
  if (!/^\d+$/.test(v.trim())) throw usage(`--threads must be a thread count or 'auto', got ${JSON.stringify(v)}`);
  return int('--threads', v, 0, 256);
}

export async function run(argv: string[]): Promise<number> {
  const json = wantsJson(argv);
  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: argv, allowPositionals: true, strict: true, options: FLAGS }) as { values: Record<string, string | boolean | undefined>; positionals: string[] });
  } catch (err) {
    return fail('load', flagError(err, FLAGS), 2, { json });
  }
  // a dry run loads neither the Redis client nor the sinks: process start is part of its speed
  const redisUrl = (): Promise<typeof import('../redis-url.js')> => import('../redis-url.js');
  if (values.help) {
    console.log(helpText(await redisUrl()));
    return 0;
  }
  const str = (k: string): string | undefined => values[k] as string | undefined;
  let opts: LoadOptions;
  let layout: LoaderLayout;
  let bucketsFlag: number | undefined;
  let bloomFpp = 0.01;
  let connectMs: number;
  try {
    // a dry run connects nowhere: the flag is only checked when given
    const dry = values['dry-run'] === true;
    connectMs = dry && values['connect-timeout-ms'] === undefined ? 0 : (await redisUrl()).connectTimeoutMs(values['connect-timeout-ms']);
    if (positionals.length === 0) throw usage('no input: give files, directories or globs (hashgate load --help)');
    layout = (str('layout') ?? STORE_DEFAULTS.layout) as LoaderLayout;
    if (layout !== 'sets' && layout !== 'compact') throw usage(`--layout must be 'sets' or 'compact', got ${JSON.stringify(layout)}`);
    const unit = (str('window-unit') ?? 'year') as WindowKind;
    if (!['year', 'month', 'day'].includes(unit)) throw usage(`--window-unit must be year, month or day, got ${JSON.stringify(unit)}`);
    if (str('window') !== undefined && str('window-from-field') !== undefined) throw usage('--window and --window-from-field are mutually exclusive');
    const win = str('window');
    if (win !== undefined && (win === '' || /[:{}*?[\]\s]/.test(win))) throw usage(`--window must be a non-empty id without ':', braces, glob characters or spaces, got ${JSON.stringify(win)}`);
    if (str('redis') !== undefined && str('cluster') !== undefined) throw usage('--redis and --cluster are mutually exclusive');
    if (str('store') !== undefined && (str('redis') !== undefined || str('cluster') !== undefined)) throw usage('--store and --redis/--cluster are mutually exclusive');
    if (str('store') === '') throw usage('--store must be a directory path');
    const tz = str('time-zone');
    if (tz !== undefined) {
      try {
        new Intl.DateTimeFormat('en', { timeZone: tz });
      } catch {
        throw usage(`--time-zone must be an IANA time zone, got ${JSON.stringify(tz)}`);
      }
    }
    if (str('bloom-fpp') !== undefined) {
      bloomFpp = Number(str('bloom-fpp'));
      if (!(bloomFpp > 0 && bloomFpp < 1)) throw new HashGateRangeError(ErrorCodes.INVALID_OPTION, `--bloom-fpp must be in (0, 1), got ${str('bloom-fpp')}`, { name: '--bloom-fpp' });
    }
    bucketsFlag = int('--buckets', str('buckets'), 1, 2 ** 30);
    const maxBufMb = int('--max-buffer-mb', str('max-buffer-mb'), 1, 1 << 20);
    let maxRejectRatio: number | undefined;
    if (str('max-reject-ratio') !== undefined) {
      maxRejectRatio = Number(str('max-reject-ratio'));
      if (str('max-reject-ratio')!.trim() === '' || !(maxRejectRatio >= 0 && maxRejectRatio <= 1)) {
        throw new HashGateRangeError(ErrorCodes.INVALID_OPTION, `--max-reject-ratio must be a number in [0, 1], got ${JSON.stringify(str('max-reject-ratio'))}`, { name: '--max-reject-ratio' });
      }
    }
    opts = {
      inputs: positionals,
      delimiter: delimiterByte(str('delimiter')),
      fields: fieldList(str('fields')),
      fieldCount: int('--field-count', str('field-count'), 1, 256),
      maxKeyBytes: int('--max-key-bytes', str('max-key-bytes'), 1, 64 << 20),
      maxRejectRatio,
      maxWindows: int('--max-windows', str('max-windows'), 1, 100_000),
      window: win,
      windowField: int('--window-from-field', str('window-from-field'), 0, 255),
      dateFormat: str('date-format'),
      windowUnit: unit,
      timeZone: tz,
      batch: int('--batch', str('batch'), 1, 1_000_000),
      concurrency: int('--concurrency', str('concurrency'), 1, 4096),
      maxLineBytes: int('--max-line-bytes', str('max-line-bytes'), 1, 64 << 20),
      maxBufferedBytes: maxBufMb === undefined ? undefined : maxBufMb << 20,
      retries: int('--retries', str('retries'), 0, 1000),
      retryDelayMs: int('--retry-delay', str('retry-delay'), 0, 3_600_000),
      failedFile: str('failed-file') ?? 'hashgate-load.failed.txt',
      rejectsFile: str('rejects-file') ?? 'hashgate-load.rejects.tsv',
      checkpointFile: str('checkpoint'),
      resume: values.resume === true,
      dryRun: values['dry-run'] === true,
      layout,
      threads: threadsFlag(str('threads')),
    };
    if (opts.dryRun && opts.resume) throw usage('--resume has no meaning with --dry-run');
    const se = str('secret-env');
    if (se !== undefined) {
      if (layout !== 'compact') throw usage(`--secret-env needs --layout compact (the 'sets' layout stores raw keys)`);
      const v = process.env[se];
      if (v === undefined || v === '') throw usage(`--secret-env: environment variable ${se} is not set or empty`);
      opts.secret = new TextEncoder().encode(v);
    }
    // checked last, so a bad flag is reported as itself even without a target
    if (!opts.dryRun && str('redis') === undefined && str('cluster') === undefined && str('store') === undefined) (await redisUrl()).defaultRedisUrl();
  } catch (err) {
    return fail('load', err, 2, { json });
  }

  const prefix = str('prefix') ?? STORE_DEFAULTS.prefix;
  const ac = new AbortController();
  let sigints = 0;
  const onSigint = (): void => {
    sigints++;
    if (sigints === 1) {
      process.stderr.write('\nhashgate load: stopping after batches in flight (Ctrl-C again to exit at once)\n');
      ac.abort();
    } else process.exit(130);
  };
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigint);
  let sink: RedisLayoutSink | LmdbLoadSink | undefined;
  try {
    const storePath = str('store');
    let buckets = bucketsFlag ?? (layout === 'sets' ? STORE_DEFAULTS.setsBuckets : storePath !== undefined && !opts.dryRun ? STORE_DEFAULTS.lmdbCompactBuckets : STORE_DEFAULTS.compactBuckets);
    if (!opts.dryRun && storePath !== undefined) {
      const { LmdbLoadSink } = await import('../../loader/lmdb-sink.js');
      sink = new LmdbLoadSink({ path: storePath, layout, buckets });
      if (opts.window !== undefined && bucketsFlag === undefined) {
        const rec = sink.recordedBuckets(opts.window);
        if (rec !== undefined && rec !== buckets) {
          await sink.close();
          buckets = rec;
          sink = new LmdbLoadSink({ path: storePath, layout, buckets });
        }
      }
    } else if (!opts.dryRun) {
      const [{ connectCliRedis }, { RedisLayoutSink }, { defaultRedisUrl }] = await Promise.all([import('../../redis/client.js'), import('../../loader/sink.js'), redisUrl()]);
      const cl = str('cluster');
      const redis = await connectCliRedis({
        ...(cl ? { cluster: cl } : { url: str('redis') ?? defaultRedisUrl() }),
        commandTimeoutMs: 30_000,
        connectTimeoutMs: connectMs,
        standalone: { enableAutoPipelining: false },
      });
      if (values['no-hll'] === true) warnHllOnce('--no-hll');
      sink = new RedisLayoutSink(redis, { layout, prefix, buckets });
      // a window keeps the bucket count it was first written with
      if (opts.window !== undefined && bucketsFlag === undefined) {
        const rec = await sink.recordedBuckets(opts.window);
        if (rec !== undefined && rec !== buckets) {
          buckets = rec;
          sink = new RedisLayoutSink(redis, { layout, prefix, buckets });
        }
      }
    }
    opts.buckets = buckets;
    opts.extraFingerprint = storePath === undefined ? { layout, prefix } : { layout, store: storePath };
    const tty = values['no-progress'] ? false : values.progress === true || process.stderr.isTTY === true;
    const progress = createProgress({ tty, intervalMs: DEFAULTS.progressIntervalMs, quiet: values.quiet === true || (values['no-progress'] === true && values.json === true) });

    let bloom: BloomFilter | undefined;
    const bloomOut = str('bloom');
    // imported only when a filter is asked for (set exactly when bloomOut is)
    const BloomFilter = bloomOut ? (await import('../../bloom/bloom-filter.js')).BloomFilter : undefined;
    let bloomExpected = int('--bloom-expected', str('bloom-expected'), 1, 2 ** 40);
    const onKeys = bloomOut
      ? (bytes: Uint8Array, offsets: Uint32Array, count: number): void => {
          if (count === 0) return;
          if (!bloom) {
            bloomExpected ??= 1_000_000;
            bloom = BloomFilter!.create({ expectedItems: bloomExpected, fpp: bloomFpp });
          }
          bloom.addAll({ bytes, offsets, count });
        }
      : undefined;
    if (bloomOut && bloomExpected === undefined) {
      // ~1 key per 24 input bytes (name + 18-char ID + delimiter + newline) unless told otherwise
      const { expandInputs } = await import('../../loader/inputs.js');
      const { statSync } = await import('node:fs');
      const files = await expandInputs(opts.inputs, { own: [opts.failedFile, opts.rejectsFile, opts.checkpointFile ?? DEFAULTS.checkpointFile].filter((f): f is string => f !== undefined) });
      const total = files.reduce((a, f) => a + statSync(f).size, 0);
      bloomExpected = Math.max(1000, Math.ceil(total / 24));
    }
    const summary = await load(opts, { sink, progress, signal: ac.signal, ...(onKeys ? { onKeys } : {}) });
    if (bloomOut) {
      bloom ??= BloomFilter!.create({ expectedItems: bloomExpected ?? 1000, fpp: bloomFpp });
      writeFileSync(bloomOut, bloom.writeTo());
    }
    const out = { ...summary, layout, prefix, ...(bloomOut ? { bloom: bloomOut, bloomExpectedItems: bloomExpected, bloomFpp } : {}) };
    if (values.json) console.log(JSON.stringify(out));
    else console.error(fmtSummary(summary) + (bloomOut ? `\n  Bloom filter written to ${bloomOut}` : ''));
    return summary.interrupted ? 130 : summary.failed > 0 ? 3 : summary.rejectRatioExceeded ? 4 : 0;
  } catch (err) {
    const e = err as HashGateError;
    const exit =
      e.code === ErrorCodes.PARSE && (e.details?.reason === 'not-text' || e.details?.reason === 'field-count') ? 4
      : e instanceof HashGateTypeError || e instanceof HashGateRangeError || e.code === ErrorCodes.INVALID_OPTION || e.code === ErrorCodes.INVALID_ARG ? 2
      : 1;
    return fail('load', err, exit, { json });
  } finally {
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigint);
    await sink?.close();
  }
}
