// Shared helpers for every bench suite (bench/<suite>.ts -> dist/bench/<suite>.js).
//
// Contract with bench/run.ts: a suite module exports
//   export async function run(opts: { quick: boolean }): Promise<SuiteResult>
// and writes bench/results/<suite>.json via `writeResult` (run.ts also writes it from the returned
// value if the suite forgot). The JSON shape below only ever grows: report.ts reads old files too.
//
// Typical suite:
//   const s = new Suite('hash', opts);
//   await s.bench({ name: 'murmur3_128 shape A', impl: 'hashgate', opsPerCall: keys.length,
//     check: () => equalBytes(ours(keys), expected), fn: () => { ours(keys); } });
//   await s.bench({ name: 'murmur3_128 shape A', impl: 'murmurhash-native', role: 'peer', ... });
//   s.target('batch murmur3_128 strings vs native string call', '>=', 1.5,
//            s.ratio('murmur3_128 shape A', 'hashgate', 'murmurhash-native'), 'x');
//   return s.finish();   // computes ratios, prints a table, writes bench/results/hash.json
//
// Correctness before timing: an implementation whose `check` fails (returns false or a string,
// or throws) is recorded with `ok: false` and the reason, is never timed and never ranked; it
// cannot become "best peer" and gets no ratio.

import { mkdirSync, writeFileSync, existsSync, readFileSync, renameSync } from 'node:fs';
import { availableParallelism, cpus, totalmem, platform, arch, release } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHistogram, performance } from 'node:perf_hooks';
import { Bench } from 'tinybench';
import { isMainModule } from '../src/util/main-module.js';
import { prng } from '../src/util/prng.js';

export const SCHEMA_VERSION = 1;

/** Deterministic PRNG so every implementation sees the same keys in every run. */
export { prng };

/** Who an implementation is, so ratios compare hashgate against the field, not itself. */
export type Role = 'hashgate' | 'peer' | 'baseline';

export interface MachineInfo {
  cores: number;
  node: string;
  platform: string;
  arch: string;
  cpuModel: string;
  totalMemBytes: number;
  osRelease: string;
  v8: string;
}

export interface BenchRow {
  /** The measure, e.g. 'murmur3_128 shape A 1M keys'. Rows with the same name are compared. */
  name: string;
  /** The implementation, e.g. 'hashgate', 'murmurhash-native (string)'. */
  impl: string;
  /** Mean operations (keys, rows, lookups) per second; 0 when not timed. */
  opsPerSec: number;
  role?: Role;
  /** Per-sample ops/s (capped to MAX_SAMPLES evenly spaced points, sorted ascending). */
  samples?: number[];
  sampleCount?: number;
  min?: number;
  median?: number;
  max?: number;
  /** Relative margin of error (percent) as tinybench reports it. */
  rme?: number;
  /** opsPerSec / best ok peer's opsPerSec in the same `name` group (peers included). */
  ratioToBestPeer?: number;
  bestPeer?: string;
  /** false = failed its correctness check: shown, marked, never ranked. */
  ok?: boolean;
  error?: string;
  /** Unit of opsPerSec when it is not "ops": e.g. 'keys/s', 'MB/s'. */
  unit?: string;
  /** Other measured values worth a column: bytesPerKey, fpp, rssBytes, batch, threads, ... */
  extra?: Record<string, number | string>;
}

export type Comparator = '>=' | '<=' | '>' | '<';

export interface TargetResult {
  name: string;
  /** Threshold as a number, or a free-form description for targets that are not numeric. */
  target: number | string;
  actual: number | string | null;
  /** null = not measured in this run (e.g. the service was unavailable). */
  met: boolean | null;
  comparator?: Comparator;
  unit?: string;
  note?: string;
}

export interface SweepPoint {
  x: number;
  y: number;
}
export interface SweepSeries {
  name: string;
  points: SweepPoint[];
}
/** A line chart's data: throughput vs thread count, batch size, key count, ... */
export interface Sweep {
  name: string;
  xLabel: string;
  yLabel: string;
  logX?: boolean;
  logY?: boolean;
  series: SweepSeries[];
}

export interface SuiteResult {
  suite: string;
  schema?: number;
  machine: MachineInfo | { cores: number; node: string };
  quick?: boolean;
  startedAt?: string;
  durationMs?: number;
  rows: BenchRow[];
  targets: TargetResult[];
  sweeps?: Sweep[];
  notes?: string[];
  /** Set by run.ts when the suite threw or timed out. */
  error?: string;
  /** Set by run.ts when the suite was deliberately not run (missing module, service absent). */
  skipped?: string;
}

export interface SuiteOptions {
  quick: boolean;
}

/** Samples kept per row in the JSON (enough for a spread plot, small enough to diff). */
export const MAX_SAMPLES = 64;

export function machineInfo(): MachineInfo {
  const c = cpus();
  return {
    cores: typeof availableParallelism === 'function' ? availableParallelism() : c.length,
    node: process.version,
    platform: platform(),
    arch: arch(),
    cpuModel: c[0]?.model?.trim() ?? 'unknown',
    totalMemBytes: totalmem(),
    osRelease: release(),
    v8: process.versions.v8,
  };
}

/** Repository root: the nearest ancestor of this file holding package.json (works from src and dist). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return process.cwd();
}

/** Where results go: HASHGATE_BENCH_OUT overrides (tests use a temp dir). */
export function resultsDir(): string {
  return process.env.HASHGATE_BENCH_OUT ? resolve(process.env.HASHGATE_BENCH_OUT) : join(repoRoot(), 'bench', 'results');
}

export function resultPath(suite: string): string {
  return join(resultsDir(), `${suite}.json`);
}

/** Writes bench/results/<suite>.json atomically (tmp + rename) so a killed run leaves the old file. */
export function writeResult(result: SuiteResult): string {
  const dir = resultsDir();
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${result.suite}.json`);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify({ schema: SCHEMA_VERSION, ...result }, null, 2) + '\n');
  renameSync(tmp, file);
  return file;
}

export function readResult(suite: string): SuiteResult | undefined {
  const file = resultPath(suite);
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, 'utf8')) as SuiteResult;
}

/** Pick the size for this run: `quick` keeps CI smoke runs tiny. */
export function size(opts: SuiteOptions, full: number, quick: number): number {
  return opts.quick ? quick : full;
}

function roleOf(row: BenchRow): Role {
  if (row.role) return row.role;
  return row.impl.toLowerCase().startsWith('hashgate') ? 'hashgate' : 'peer';
}

/**
 * Fills ratioToBestPeer/bestPeer for every ok row, per `name` group. The best peer is the fastest
 * ok row with role 'peer' (baselines such as "one awaited SADD per key" are shown but not the bar
 * to beat). Rows that failed their check get no ratio. Returns the same array.
 */
export function computeRatios(rows: BenchRow[]): BenchRow[] {
  const best = new Map<string, BenchRow>();
  for (const r of rows) {
    if (r.ok === false || roleOf(r) !== 'peer' || !(r.opsPerSec > 0)) continue;
    const b = best.get(r.name);
    if (!b || r.opsPerSec > b.opsPerSec) best.set(r.name, r);
  }
  for (const r of rows) {
    const b = best.get(r.name);
    if (r.ok === false || !b) {
      delete r.ratioToBestPeer;
      delete r.bestPeer;
      continue;
    }
    r.ratioToBestPeer = r.opsPerSec / b.opsPerSec;
    r.bestPeer = b.impl;
  }
  return rows;
}

/** Evaluates `actual <cmp> threshold`; a missing actual gives met: null (not measured). */
export function makeTarget(
  name: string,
  comparator: Comparator,
  threshold: number,
  actual: number | null | undefined,
  unit?: string,
  note?: string,
): TargetResult {
  const a = actual === undefined || actual === null || Number.isNaN(actual) ? null : actual;
  let met: boolean | null = null;
  if (a !== null) {
    met =
      comparator === '>=' ? a >= threshold : comparator === '<=' ? a <= threshold : comparator === '>' ? a > threshold : a < threshold;
  }
  const t: TargetResult = { name, target: threshold, actual: a, met, comparator };
  if (unit !== undefined) t.unit = unit;
  if (note !== undefined) t.note = note;
  return t;
}

/** Sorted ascending copy, thinned to at most `max` evenly spaced points (keeps min and max). */
export function thinSamples(values: ArrayLike<number>, max = MAX_SAMPLES): number[] {
  const sorted = Array.from(values).filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length <= max) return sorted;
  const out: number[] = [];
  for (let i = 0; i < max; i++) out.push(sorted[Math.round((i * (sorted.length - 1)) / (max - 1))] as number);
  return out;
}

export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (pos - lo);
}

/** Builds the spread fields of a row from per-sample ops/s values. */
export function spread(opsSamples: ArrayLike<number>): Pick<BenchRow, 'samples' | 'sampleCount' | 'min' | 'median' | 'max'> {
  const sorted = Array.from(opsSamples).filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  return {
    samples: thinSamples(sorted),
    sampleCount: sorted.length,
    min: sorted[0] ?? 0,
    median: quantile(sorted, 0.5),
    max: sorted[sorted.length - 1] ?? 0,
  };
}

/** A correctness check: true = correct; false or a string (the reason) = wrong; may be async. */
export type Check = () => boolean | string | Promise<boolean | string>;

async function runCheck(check: Check | undefined): Promise<string | undefined> {
  if (!check) return undefined;
  try {
    const r = await check();
    if (r === true) return undefined;
    return typeof r === 'string' ? r : 'wrong answer';
  } catch (err) {
    return `check threw: ${err instanceof Error ? err.message : String(err)}`;
  }
}

export interface BenchSpec {
  name: string;
  impl: string;
  role?: Role;
  /** Operations per call of fn (e.g. keys in the batch); ops/s = opsPerCall / seconds per call. */
  opsPerCall?: number;
  check?: Check;
  fn: () => unknown;
  /** tinybench time budget per task in ms (default 1000, quick 100). */
  timeMs?: number;
  /** Minimum iterations (default 10, quick 3). */
  iterations?: number;
  unit?: string;
  extra?: Record<string, number | string>;
  /** Called once after timing (close clients etc.), also when the check failed. */
  teardown?: () => unknown;
}

export interface SampleSpec {
  name: string;
  impl: string;
  role?: Role;
  check?: Check;
  /** One timed run; returns how many operations it did (e.g. keys loaded). */
  fn: () => number | Promise<number>;
  /** Number of timed runs (default 5, quick 2). */
  runs?: number;
  /** Untimed warm-up runs (default 1, quick 0). */
  warmup?: number;
  /** Runs before each timed run, untimed (e.g. FLUSHDB). */
  beforeEach?: () => unknown;
  unit?: string;
  extra?: Record<string, number | string>;
  teardown?: () => unknown;
}

function fmtOps(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  if (v >= 1e9) return `${(v / 1e9).toFixed(2)} G`;
  if (v >= 1e6) return `${(v / 1e6).toFixed(2)} M`;
  if (v >= 1e3) return `${(v / 1e3).toFixed(1)} k`;
  return v.toFixed(1);
}

/**
 * Collects rows and targets for one suite. `bench` uses tinybench (many short calls);
 * `sample` times whole runs by hand (one big batch, async pipelines, a file load).
 */
export class Suite {
  readonly suite: string;
  readonly quick: boolean;
  readonly rows: BenchRow[] = [];
  readonly targets: TargetResult[] = [];
  readonly sweeps: Sweep[] = [];
  readonly notes: string[] = [];
  private readonly started = performance.now();
  private readonly startedAt = new Date().toISOString();

  constructor(suite: string, opts: SuiteOptions) {
    this.suite = suite;
    this.quick = opts.quick;
  }

  private fail(spec: { name: string; impl: string; role?: Role; unit?: string; extra?: Record<string, number | string> }, reason: string): BenchRow {
    const row: BenchRow = { name: spec.name, impl: spec.impl, role: spec.role ?? roleOf({ name: spec.name, impl: spec.impl, opsPerSec: 0 }), opsPerSec: 0, ok: false, error: reason };
    if (spec.unit) row.unit = spec.unit;
    if (spec.extra) row.extra = spec.extra;
    console.warn(`[${this.suite}] ${spec.impl} @ ${spec.name}: WRONG (${reason}) - not timed, not ranked`);
    this.rows.push(row);
    return row;
  }

  /** Checks, then times `fn` with tinybench. */
  async bench(spec: BenchSpec): Promise<BenchRow> {
    try {
      const bad = await runCheck(spec.check);
      if (bad !== undefined) return this.fail(spec, bad);
      const opsPerCall = spec.opsPerCall ?? 1;
      const b = new Bench({
        time: spec.timeMs ?? (this.quick ? 100 : 1000),
        iterations: spec.iterations ?? (this.quick ? 3 : 10),
        warmupTime: this.quick ? 20 : 200,
        warmupIterations: this.quick ? 1 : 5,
        retainSamples: true,
        throws: true,
      });
      b.add(`${spec.impl} @ ${spec.name}`, spec.fn);
      const [task] = await b.run();
      const res = task?.result;
      if (!res || (res.state !== 'completed' && res.state !== 'aborted-with-statistics')) {
        const msg = res && res.state === 'errored' ? res.error.message : `task state ${res?.state ?? 'missing'}`;
        return this.fail(spec, `threw while timed: ${msg}`);
      }
      const lat = res.latency.samples ?? [];
      const perSample = Array.from(lat, (ms) => (ms > 0 ? (opsPerCall * 1000) / ms : NaN));
      const row: BenchRow = {
        name: spec.name,
        impl: spec.impl,
        role: spec.role ?? roleOf({ name: spec.name, impl: spec.impl, opsPerSec: 0 }),
        opsPerSec: res.period > 0 ? (opsPerCall * 1000) / res.period : 0,
        ...spread(perSample),
        rme: res.latency.rme,
        ok: true,
      };
      if (spec.unit) row.unit = spec.unit;
      if (spec.extra) row.extra = spec.extra;
      this.rows.push(row);
      console.log(`[${this.suite}] ${spec.name} | ${spec.impl}: ${fmtOps(row.opsPerSec)} ops/s (±${(row.rme ?? 0).toFixed(1)}%)`);
      return row;
    } catch (err) {
      return this.fail(spec, `threw: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      await spec.teardown?.();
    }
  }

  /** Checks, then times whole runs by hand; each run is one sample of ops/s. */
  async sample(spec: SampleSpec): Promise<BenchRow> {
    try {
      const bad = await runCheck(spec.check);
      if (bad !== undefined) return this.fail(spec, bad);
      const warm = spec.warmup ?? (this.quick ? 0 : 1);
      for (let i = 0; i < warm; i++) {
        await spec.beforeEach?.();
        await spec.fn();
      }
      const runs = Math.max(1, spec.runs ?? (this.quick ? 2 : 5));
      const per: number[] = [];
      let totalOps = 0;
      let totalSec = 0;
      for (let i = 0; i < runs; i++) {
        await spec.beforeEach?.();
        const t0 = performance.now();
        const ops = await spec.fn();
        const sec = (performance.now() - t0) / 1000;
        totalOps += ops;
        totalSec += sec;
        per.push(sec > 0 ? ops / sec : NaN);
      }
      const row: BenchRow = {
        name: spec.name,
        impl: spec.impl,
        role: spec.role ?? roleOf({ name: spec.name, impl: spec.impl, opsPerSec: 0 }),
        opsPerSec: totalSec > 0 ? totalOps / totalSec : 0,
        ...spread(per),
        ok: true,
      };
      if (spec.unit) row.unit = spec.unit;
      if (spec.extra) row.extra = spec.extra;
      this.rows.push(row);
      console.log(`[${this.suite}] ${spec.name} | ${spec.impl}: ${fmtOps(row.opsPerSec)} ops/s (${runs} runs)`);
      return row;
    } catch (err) {
      return this.fail(spec, `threw: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      await spec.teardown?.();
    }
  }

  /** Adds a row measured elsewhere (e.g. inside a child process). */
  addRow(row: BenchRow): BenchRow {
    this.rows.push(row);
    return row;
  }

  find(name: string, impl: string): BenchRow | undefined {
    return this.rows.find((r) => r.name === name && r.impl === impl);
  }

  /** opsPerSec(a) / opsPerSec(b) within measure `name`; undefined when either is missing or wrong. */
  ratio(name: string, implA: string, implB: string): number | undefined {
    const a = this.find(name, implA);
    const b = this.find(name, implB);
    if (!a || !b || a.ok === false || b.ok === false || !(b.opsPerSec > 0)) return undefined;
    return a.opsPerSec / b.opsPerSec;
  }

  target(name: string, comparator: Comparator, threshold: number, actual: number | null | undefined, unit?: string, note?: string): TargetResult {
    const t = makeTarget(name, comparator, threshold, actual, unit, note);
    this.targets.push(t);
    return t;
  }

  sweep(s: Sweep): void {
    this.sweeps.push(s);
  }

  note(text: string): void {
    this.notes.push(text);
  }

  /** Computes ratios, prints a summary, writes bench/results/<suite>.json, returns the result. */
  finish(): SuiteResult {
    computeRatios(this.rows);
    const result: SuiteResult = {
      suite: this.suite,
      schema: SCHEMA_VERSION,
      machine: machineInfo(),
      quick: this.quick,
      startedAt: this.startedAt,
      durationMs: Math.round(performance.now() - this.started),
      rows: this.rows,
      targets: this.targets,
    };
    if (this.sweeps.length) result.sweeps = this.sweeps;
    if (this.notes.length) result.notes = this.notes;
    printSummary(result);
    writeResult(result);
    return result;
  }
}

/**
 * Lets a suite also run by hand (node dist/bench/<suite>.js [--quick]): when `metaUrl` is the
 * script node started, runs the suite and exits 0, or prints the error and exits 1. When run.ts
 * imports the suite, it does nothing.
 */
export function runWhenMain(metaUrl: string, run: (opts: SuiteOptions) => Promise<SuiteResult>): void {
  if (!isMainModule(metaUrl)) return;
  run({ quick: process.argv.includes('--quick') }).then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}

export function printSummary(result: SuiteResult): void {
  const table = result.rows.map((r) => ({
    measure: r.name,
    impl: r.impl,
    'ops/s': r.ok === false ? 'WRONG' : fmtOps(r.opsPerSec),
    'vs best peer': r.ratioToBestPeer === undefined ? '' : `${r.ratioToBestPeer.toFixed(2)}x`,
    'min..max': r.min === undefined || r.ok === false ? '' : `${fmtOps(r.min)}..${fmtOps(r.max ?? 0)}`,
  }));
  console.log(`\n== ${result.suite} ==`);
  if (table.length) console.table(table);
  for (const t of result.targets) {
    const mark = t.met === null ? 'NOT MEASURED' : t.met ? 'met' : 'MISSED';
    const actual = t.actual === null ? 'n/a' : typeof t.actual === 'number' ? `${t.actual.toFixed(3)}${t.unit ?? ''}` : t.actual;
    console.log(`  target ${t.name}: ${t.comparator ?? ''} ${t.target}${t.unit ?? ''}, actual ${actual} -> ${mark}`);
  }
}

/** Byte-wise equality, handy in checks. */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Peak resident set size of this process so far, in bytes. */
export function peakRssBytes(): number {
  return process.resourceUsage().maxRSS * 1024;
}


const SURNAMES = '王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢';
const GIVEN = '伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍红建国志文斌宁浩宇轩梓涵子睿欣怡佳琪思雨嘉';

/** Shape A key: Chinese name + 18-digit ID number (name+idNo). Deterministic per index. */
export function shapeAKey(i: number, rnd = prng(i * 2654435761)): string {
  const s = SURNAMES[Math.floor(rnd() * SURNAMES.length)] as string;
  let g = '';
  const len = 1 + Math.floor(rnd() * 2);
  for (let j = 0; j < len; j++) g += GIVEN[Math.floor(rnd() * GIVEN.length)];
  // Region code and sequence come from i, so keys are unique for i < 5.4e8 (benches rely on it).
  const region = 110000 + (Math.floor(i / 1000) % 540000);
  const y = 1950 + Math.floor(rnd() * 55);
  const m = 1 + Math.floor(rnd() * 12);
  const d = 1 + Math.floor(rnd() * 28);
  const seq = (i % 1000).toString().padStart(3, '0');
  const check = '0123456789X'[Math.floor(rnd() * 11)];
  return `${s}${g}${region}${y}${String(m).padStart(2, '0')}${String(d).padStart(2, '0')}${seq}${check}`;
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** Shape B key: 56-byte base64-looking string. */
export function shapeBKey(i: number, rnd = prng(i ^ 0x5bd1e995)): string {
  let s = '';
  for (let j = 0; j < 56; j++) s += B64[Math.floor(rnd() * 64)];
  return s;
}

/** n keys of a shape; shape A is unique by construction, shape B with overwhelming probability. */
export function makeKeys(n: number, shape: 'A' | 'B', seed = 1): string[] {
  const rnd = prng(seed);
  const out = new Array<string>(n);
  for (let i = 0; i < n; i++) out[i] = shape === 'A' ? shapeAKey(i, rnd) : shapeBKey(i, rnd);
  return out;
}

/** Key i of the dedup workloads (unique per i, name + ID number shaped). */
export const dedupKey = (i: number): string => shapeAKey(i, prng(i + 1));

/** 2 * distinct positions, each distinct key twice, shuffled deterministically (50% duplicates). */
export function twiceShuffled(distinct: number): Uint32Array {
  const seq = new Uint32Array(distinct * 2);
  for (let i = 0; i < seq.length; i++) seq[i] = i % distinct;
  const rnd = prng(42);
  for (let i = seq.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    const t = seq[i]!;
    seq[i] = seq[j]!;
    seq[j] = t;
  }
  return seq;
}

/** One timed run of concurrent callers: wall time, keys answered and per-call latency percentiles (us). */
export interface Drive {
  secs: number;
  keys: number;
  p50: number;
  p99: number;
  p999: number;
}

/** `callers` loops, each awaiting `call` on its next slice of `calls` until none is left. */
export async function drive(callers: number, calls: string[][], call: (keys: string[]) => Promise<unknown>): Promise<Drive> {
  const h = createHistogram();
  let next = 0;
  let keys = 0;
  const worker = async (): Promise<void> => {
    while (next < calls.length) {
      const b = calls[next++]!;
      const t = process.hrtime.bigint();
      await call(b);
      h.record(Number(process.hrtime.bigint() - t) || 1);
      keys += b.length;
    }
  };
  const t0 = process.hrtime.bigint();
  const ws: Promise<void>[] = [];
  for (let i = 0; i < callers; i++) ws.push(worker());
  await Promise.all(ws);
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  return { secs, keys, p50: h.percentile(50) / 1000, p99: h.percentile(99) / 1000, p999: h.percentile(99.9) / 1000 };
}
