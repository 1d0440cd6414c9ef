// Progress for long loads: a cli-progress bar on a TTY, plain periodic lines otherwise (logs,
// CI, `nohup`), always on stderr so `--json` output on stdout stays machine-readable.
import { createRequire } from 'node:module';

// loaded only for a bar on a TTY: a --quiet or logged run starts without it
const requireCjs = createRequire(import.meta.url);

export interface ProgressSnapshot {
  elapsedMs: number;
  bytesDone: number;
  bytesTotal: number;
  filesDone: number;
  filesTotal: number;
  rows: number;
  loaded: number;
  failed: number;
  rejected: number;
  inFlight: number;
}

export interface ProgressReporter {
  update(s: ProgressSnapshot): void;
  stop(s: ProgressSnapshot): void;
}

const fmtBytes = (n: number): string =>
  n >= 1 << 30 ? `${(n / (1 << 30)).toFixed(2)} GiB` : n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB` : `${(n / 1024).toFixed(0)} KiB`;
const fmtRate = (n: number): string => (n >= 1e6 ? `${(n / 1e6).toFixed(2)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : n.toFixed(0));
const fmtEta = (ms: number): string => {
  if (!Number.isFinite(ms) || ms < 0) return '?';
  const s = Math.round(ms / 1000);
  return s >= 3600 ? `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m` : s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
};

function fields(s: ProgressSnapshot): Record<string, string> {
  const rate = s.elapsedMs > 0 ? (s.rows * 1000) / s.elapsedMs : 0;
  const bps = s.elapsedMs > 0 ? (s.bytesDone * 1000) / s.elapsedMs : 0;
  return {
    rate: fmtRate(rate),
    bytes: `${fmtBytes(s.bytesDone)}/${fmtBytes(s.bytesTotal)}`,
    etaText: fmtEta(bps > 0 ? ((s.bytesTotal - s.bytesDone) / bps) * 1000 : Infinity),
    files: `${s.filesDone}/${s.filesTotal}`,
    rows: String(s.rows),
    loaded: String(s.loaded),
    failed: String(s.failed),
    rejected: String(s.rejected),
  };
}

export function createProgress(opts: { tty: boolean; intervalMs: number; stream?: NodeJS.WriteStream; quiet?: boolean }): ProgressReporter {
  const stream = opts.stream ?? process.stderr;
  if (opts.quiet) return { update() {}, stop() {} };
  if (opts.tty) {
    const cliProgress = requireCjs('cli-progress') as typeof import('cli-progress');
    const bar = new cliProgress.SingleBar(
      {
        stream,
        format: 'load [{bar}] {percentage}% | {bytes} | {rate} rows/s | ETA {etaText} | files {files} | loaded {loaded} | failed {failed} | rejected {rejected}',
        hideCursor: true,
        fps: 5,
      },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    return {
      update(s) {
        if (!started) {
          bar.start(Math.max(1, s.bytesTotal), 0, fields(s));
          started = true;
        }
        bar.update(s.bytesDone, fields(s));
      },
      stop(s) {
        if (started) {
          bar.update(s.bytesDone, fields(s));
          bar.stop();
        }
      },
    };
  }
  let last = 0;
  const line = (s: ProgressSnapshot): void => {
    const f = fields(s);
    const pct = s.bytesTotal > 0 ? ((100 * s.bytesDone) / s.bytesTotal).toFixed(1) : '100.0';
    stream.write(
      `load ${pct}% ${f.bytes} files ${f.files} rows ${f.rows} (${f.rate}/s) loaded ${f.loaded} failed ${f.failed} rejected ${f.rejected} eta ${f.etaText}\n`,
    );
  };
  return {
    update(s) {
      if (s.elapsedMs - last >= opts.intervalMs) {
        last = s.elapsedMs;
        line(s);
      }
    },
    stop(s) {
      line(s);
    },
  };
}
