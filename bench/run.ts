// `npm run bench` (= build, then node dist/bench/run.js [--quick] [--only hash,bloom] [...]).
//
// Discovers suites dynamically: every module next to this file (dist/bench/*.js) that exports
// `run({ quick })` is a suite, named after its file. Each suite runs in its own child process
// (fork of this file with --child), one after another: a suite that leaks a socket, crashes the
// process or hangs past --timeout is recorded as failed and the rest still run. Results come back
// over IPC (and are written to bench/results/<suite>.json); then REPORT.md and the charts are
// written from this run's results plus, with --keep-old, older JSON files of suites not run now.

import { fork } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { readResult, repoRoot, resultPath, writeResult, machineInfo } from './common.js';
import type { SuiteResult } from './common.js';
import { loadResults, sortSuites, writeReport } from './report.js';
import { isMainModule } from '../src/util/main-module.js';

/** Suites the issues ask for, in report order; others found on disk follow alphabetically. */
export const KNOWN_SUITES = ['hash', 'bloom', 'pool', 'dedup', 'seen-cache', 'load', 'lookup', 'fingerprint', 'scaling', 'concurrency', 'store', 'redis-bloom', 'bloom-rebuild', 'replay', 'scale'] as const;
/** Modules in bench/ that are helpers, never suites. */
export const HELPER_MODULES = new Set(['common', 'run', 'report', 'svg']);

export interface RunOptions {
  quick: boolean;
  only?: string[];
  skip?: string[];
  /** Directory holding the compiled suites (default: this file's directory). */
  dir?: string;
  /** Per-suite timeout in ms (default 30 min, quick 5 min). */
  timeoutMs?: number;
  /** Run suites in this process instead of children (tests; no crash isolation). */
  inProcess?: boolean;
  /** Also report older results of suites not run now. */
  keepOld?: boolean;
  /** Where REPORT.md and charts/ go (default <repo>/bench). */
  outDir?: string;
  /** Splice the summary into README.md at its markers (default: when writing to <repo>/bench). */
  readme?: boolean;
  log?: (line: string) => void;
}

export interface SuiteFile {
  suite: string;
  file: string;
}

/** Candidate suite modules in `dir` (helpers excluded); whether each exports run() is checked on import. */
export function discoverSuites(dir: string): SuiteFile[] {
  if (!existsSync(dir)) return [];
  const found: SuiteFile[] = [];
  for (const f of readdirSync(dir)) {
    if (!/\.(m?js)$/.test(f) || f.endsWith('.d.ts')) continue;
    const suite = basename(f).replace(/\.m?js$/, '');
    if (HELPER_MODULES.has(suite) || suite.startsWith('_') || suite.endsWith('.test')) continue;
    const file = join(dir, f);
    if (!statSync(file).isFile()) continue;
    found.push({ suite, file });
  }
  const rank = (s: string) => {
    const i = (KNOWN_SUITES as readonly string[]).indexOf(s);
    return i < 0 ? KNOWN_SUITES.length : i;
  };
  return found.sort((a, b) => rank(a.suite) - rank(b.suite) || a.suite.localeCompare(b.suite));
}

function errText(err: unknown): string {
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}

function failed(suite: string, quick: boolean, error: string): SuiteResult {
  return { suite, machine: machineInfo(), quick, rows: [], targets: [], error };
}

function isSuiteResult(v: unknown): v is SuiteResult {
  return !!v && typeof v === 'object' && Array.isArray((v as SuiteResult).rows);
}

type ChildOutcome = { kind: 'result'; result: SuiteResult } | { kind: 'not-a-suite' } | { kind: 'error'; error: string };

/** Imports one suite module and runs it (used in the child, or in-process for tests). */
export async function runSuiteModule(file: string, suite: string, quick: boolean): Promise<ChildOutcome> {
  let mod: { run?: unknown };
  try {
    mod = (await import(pathToFileURL(file).href)) as { run?: unknown };
  } catch (err) {
    return { kind: 'error', error: `import failed: ${errText(err)}` };
  }
  if (typeof mod.run !== 'function') return { kind: 'not-a-suite' };
  try {
    const r: unknown = await (mod.run as (o: { quick: boolean }) => unknown)({ quick });
    if (isSuiteResult(r)) return { kind: 'result', result: { ...r, suite: r.suite || suite } };
    // A suite that only wrote its JSON (older convention) is still fine.
    const onDisk = readResult(suite);
    if (onDisk) return { kind: 'result', result: onDisk };
    return { kind: 'error', error: 'run() returned no result and wrote no bench/results JSON' };
  } catch (err) {
    return { kind: 'error', error: errText(err) };
  }
}

function runChild(self: string, s: SuiteFile, quick: boolean, timeoutMs: number): Promise<ChildOutcome> {
  return new Promise((resolvePromise) => {
    const args = ['--child', s.file, '--suite', s.suite];
    if (quick) args.push('--quick');
    // --expose-gc lets memory measures settle the heap before reading RSS.
    const child = fork(self, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [...process.execArgv, '--expose-gc'] });
    let outcome: ChildOutcome | undefined;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) child.kill('SIGKILL');
    }, timeoutMs);
    child.on('message', (m) => {
      outcome = m as ChildOutcome;
    });
    child.on('error', (err) => {
      outcome ??= { kind: 'error', error: `could not start: ${errText(err)}` };
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (timedOut) resolvePromise({ kind: 'error', error: `timed out after ${Math.round(timeoutMs / 1000)} s (killed)` });
      else if (outcome) resolvePromise(outcome);
      else resolvePromise({ kind: 'error', error: `child exited with ${signal ? `signal ${signal}` : `code ${code}`} before reporting a result` });
    });
  });
}

export async function runAll(o: RunOptions): Promise<{ results: SuiteResult[]; report: string; charts: string[]; exitCode: number }> {
  const log = o.log ?? ((l: string) => console.log(l));
  const here = dirname(fileURLToPath(import.meta.url));
  const dir = o.dir ?? here;
  const files = discoverSuites(dir);
  const byName = new Map(files.map((f) => [f.suite, f]));
  const wanted = o.only?.length ? o.only : [...new Set([...KNOWN_SUITES, ...files.map((f) => f.suite)])];
  const skip = new Set(o.skip ?? []);
  const results: SuiteResult[] = [];
  const timeoutMs = o.timeoutMs ?? (o.quick ? 5 * 60_000 : 30 * 60_000);
  let exitCode = 0;

  for (const name of wanted) {
    if (skip.has(name)) {
      log(`[bench] ${name}: skipped (--skip)`);
      continue;
    }
    const s = byName.get(name);
    if (!s) {
      log(`[bench] ${name}: skipped - no bench/${name}.ts built into ${dir}`);
      if (o.only?.length) exitCode = 1;
      continue;
    }
    log(`[bench] ${name}: running${o.quick ? ' (quick)' : ''} ...`);
    const t0 = Date.now();
    const outcome = o.inProcess ? await runSuiteModule(s.file, s.suite, o.quick) : await runChild(fileURLToPath(import.meta.url), s, o.quick, timeoutMs);
    if (outcome.kind === 'not-a-suite') {
      log(`[bench] ${name}: ${basename(s.file)} exports no run(); not a suite`);
      continue;
    }
    if (outcome.kind === 'error') {
      exitCode = 1;
      log(`[bench] ${name}: FAILED after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${outcome.error.split('\n')[0]}`);
      results.push(failed(name, o.quick, outcome.error));
      continue;
    }
    const r = outcome.result;
    r.durationMs ??= Date.now() - t0;
    r.quick ??= o.quick;
    // The suite should have written its JSON; write it if it did not (or wrote it elsewhere).
    if (!existsSync(resultPath(r.suite)) || statSync(resultPath(r.suite)).mtimeMs < t0) writeResult(r);
    const wrong = r.rows.filter((x) => x.ok === false).length;
    const missed = r.targets.filter((t) => t.met === false).length;
    log(`[bench] ${name}: done in ${((Date.now() - t0) / 1000).toFixed(1)} s, ${r.rows.length} rows, ${wrong} wrong, ${missed} targets missed`);
    results.push(r);
  }

  let all = results;
  if (o.keepOld) {
    const ran = new Set(results.map((r) => r.suite));
    all = sortSuites([...results, ...loadResults().filter((r) => !ran.has(r.suite))], KNOWN_SUITES);
  }
  const command = `npm run bench${o.quick || o.only?.length ? ' --' : ''}${o.quick ? ' --quick' : ''}${o.only?.length ? ` --only ${o.only.join(',')}` : ''}`;
  const readme = o.readme ?? o.outDir === undefined;
  const written = writeReport(all, { command, ...(o.outDir ? { outDir: o.outDir } : {}), ...(readme ? { readme: join(repoRoot(), 'README.md') } : {}) });
  log(`[bench] wrote ${written.report} and ${written.charts.length} chart(s)${written.readmeUpdated ? '; README.md performance table updated' : ''}`);
  return { results: all, report: written.report, charts: written.charts, exitCode };
}

export function parseArgs(argv: readonly string[]): RunOptions & { help?: boolean; reportOnly?: boolean } {
  const o: RunOptions & { help?: boolean; reportOnly?: boolean } = { quick: false };
  const list = (v: string | undefined, flag: string) => {
    if (!v) throw new Error(`${flag} needs a comma-separated list of suites`);
    return v.split(',').map((x) => x.trim()).filter(Boolean);
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    const [flag, inline] = a.includes('=') ? (a.split(/=(.*)/s, 2) as [string, string]) : [a, undefined];
    const value = () => inline ?? argv[++i];
    if (flag === '--quick') o.quick = true;
    else if (flag === '--only') o.only = list(value(), '--only');
    else if (flag === '--skip') o.skip = list(value(), '--skip');
    else if (flag === '--timeout') {
      const s = Number(value());
      if (!(s > 0)) throw new Error('--timeout needs seconds > 0');
      o.timeoutMs = s * 1000;
    } else if (flag === '--in-process') o.inProcess = true;
    else if (flag === '--keep-old') o.keepOld = true;
    else if (flag === '--report-only') o.reportOnly = true;
    else if (flag === '--no-readme') o.readme = false;
    else if (flag === '--out') {
      const v = value();
      if (!v) throw new Error('--out needs a directory');
      o.outDir = v;
      // A scratch run must not overwrite the committed full results: suites (child processes)
      // write their JSON under DIR/results too, unless HASHGATE_BENCH_OUT says otherwise.
      process.env.HASHGATE_BENCH_OUT ??= join(v, 'results');
    }
    else if (flag === '--help' || flag === '-h') o.help = true;
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

const USAGE = `usage: npm run bench -- [--quick] [--only hash,bloom] [--skip load] [--timeout SECONDS]
                         [--keep-old] [--in-process] [--report-only] [--out DIR] [--no-readme]
  --quick        tiny sizes (CI smoke); numbers are not meaningful
  --only LIST    run only these suites (known: ${KNOWN_SUITES.join(', ')})
  --keep-old     include older bench/results/*.json of suites not run now in REPORT.md
  --report-only  regenerate REPORT.md and charts from bench/results/*.json without running anything
  --out DIR      write REPORT.md, charts/ and results/ under DIR instead of bench/ (HASHGATE_BENCH_OUT overrides results/)
  --no-readme    do not splice the summary into README.md (done by default, between its markers)`;

async function childMain(argv: string[]): Promise<void> {
  const file = argv[argv.indexOf('--child') + 1] as string;
  const suite = argv[argv.indexOf('--suite') + 1] as string;
  const outcome = await runSuiteModule(file, suite, argv.includes('--quick'));
  // Exit explicitly: a suite that left a socket open must not hang the whole run.
  process.send?.(outcome, () => process.exit(outcome.kind === 'error' ? 1 : 0));
}

async function main(argv: string[]): Promise<number> {
  if (argv.includes('--child')) {
    await childMain(argv);
    return -1;
  }
  let o;
  try {
    o = parseArgs(argv);
  } catch (err) {
    console.error(`${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  if (o.help) {
    console.log(USAGE);
    return 0;
  }
  if (o.reportOnly) {
    const readme = o.readme ?? o.outDir === undefined;
    const w = writeReport(loadResults(undefined, KNOWN_SUITES), {
      command: 'npm run bench -- --report-only',
      ...(o.outDir ? { outDir: o.outDir } : {}),
      ...(readme ? { readme: join(repoRoot(), 'README.md') } : {}),
    });
    console.log(`[bench] wrote ${w.report} and ${w.charts.length} chart(s)${w.readmeUpdated ? '; README.md performance table updated' : ''}`);
    return 0;
  }
  const { exitCode } = await runAll(o);
  return exitCode;
}


if (isMainModule(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => {
      if (code >= 0) process.exitCode = code;
    },
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
