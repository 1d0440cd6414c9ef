// Report generation on a tiny config: correctness of the JSON, markdown and SVG only; no timing
// assertions (the numbers measured here are whatever the machine gives).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Suite, computeRatios, makeTarget, spread, makeKeys, shapeAKey } from '../bench/common.js';
import type { BenchRow, SuiteResult } from '../bench/common.js';
import { readmeBlock, renderReport, renderSummary, suiteChart, sweepChart, writeReport, loadResults, spliceReadme, SUMMARY_START, SUMMARY_END } from '../bench/report.js';
import { barChart, escapeXml, formatSi, lineChart, niceTicks } from '../bench/svg.js';
import { discoverSuites, parseArgs, runAll } from '../bench/run.js';

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'hashgate-bench-report-'));
  process.env.HASHGATE_BENCH_OUT = join(tmp, 'results');
});
afterAll(() => {
  delete process.env.HASHGATE_BENCH_OUT;
  rmSync(tmp, { recursive: true, force: true });
});

/** Minimal XML well-formedness check: balanced tags, quoted attributes, no raw '&' or '<' in text. */
function assertWellFormedSvg(svg: string): { tags: Map<string, number> } {
  const stack: string[] = [];
  const tags = new Map<string, number>();
  const re = /<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>|&(?!(?:lt|gt|amp|quot|apos);)|<(?![a-zA-Z/])/g;
  let m: RegExpExecArray | null;
  let last = 0;
  while ((m = re.exec(svg))) {
    const between = svg.slice(last, m.index);
    if (/[<>]/.test(between.replace(/\s/g, '')) && between.includes('<')) throw new Error(`stray '<' near ${m.index}`);
    last = re.lastIndex;
    if (m[2] === undefined) throw new Error(`unescaped markup near ${m.index}: ${svg.slice(m.index, m.index + 30)}`);
    const [, close, name, , selfClose] = m as unknown as [string, string, string, string, string];
    if (!close) tags.set(name, (tags.get(name) ?? 0) + 1);
    if (close) {
      const open = stack.pop();
      if (open !== name) throw new Error(`</${name}> closes <${open}>`);
    } else if (!selfClose) stack.push(name);
  }
  if (stack.length) throw new Error(`unclosed: ${stack.join(',')}`);
  expect(svg.trimStart().startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
  return { tags };
}

/** Parses a GitHub markdown table that starts at the line matching `header`. */
function table(md: string, header: RegExp): string[][] {
  const lines = md.split('\n');
  const start = lines.findIndex((l) => header.test(l));
  if (start < 0) throw new Error(`table ${header} not found`);
  const rows: string[][] = [];
  for (let i = start + 2; i < lines.length && (lines[i] as string).startsWith('|'); i++) {
    rows.push((lines[i] as string).slice(1, -1).split(/(?<!\\)\|/).map((c) => c.trim()));
  }
  return rows;
}

function synthetic(): SuiteResult {
  const rows: BenchRow[] = [
    { name: 'murmur3_128 shape A', impl: 'hashgate batch', opsPerSec: 9_000_000, ...spread([8e6, 9e6, 1e7]) },
    { name: 'murmur3_128 shape A', impl: 'murmurhash-native', opsPerSec: 6_000_000, ...spread([5e6, 6e6, 7e6]) },
    { name: 'murmur3_128 shape A', impl: 'murmurhash3js', opsPerSec: 1_000_000 },
    { name: 'murmur3_128 shape A', impl: 'murmurhash-wasm', opsPerSec: 50_000_000, ok: false, error: 'wrong hash for bytes >= 0x80' },
    { name: 'murmur3_128 shape A', impl: 'one call per key', role: 'baseline', opsPerSec: 12_000_000 },
    { name: '64 KiB input', impl: 'hashgate', opsPerSec: 1500, unit: 'MB/s', extra: { bytes: 65536 } },
    { name: '64 KiB input', impl: 'murmurhash-native', opsPerSec: 2000, unit: 'MB/s', extra: { bytes: 65536 } },
  ];
  return {
    suite: 'hash',
    machine: { cores: 2, node: 'v20.0.0' },
    quick: true,
    rows,
    targets: [
      makeTarget('batch vs native string call', '>=', 1.5, 1.5, 'x'),
      makeTarget('64 KiB vs native', '>=', 0.6, 0.75, 'x'),
      makeTarget('packed vs native Buffer', '>=', 2, undefined, 'x', 'native module missing'),
      { name: 'free-form', target: 'p99 < 2 ms', actual: '1.1 ms', met: true },
      makeTarget('bytes per key', '<=', 24, 31.5, ' B'),
    ],
    sweeps: [
      {
        name: 'threads',
        xLabel: 'worker threads',
        yLabel: 'checks/s',
        series: [
          { name: 'pool', points: [{ x: 1, y: 1e6 }, { x: 2, y: 1.8e6 }] },
          { name: 'inline <&>', points: [{ x: 1, y: 1.2e6 }, { x: 2, y: 1.2e6 }] },
        ],
      },
    ],
    notes: ['packed keys: 2 cores shared with 6 agents'],
  };
}

describe('bench/common', () => {
  it('computeRatios: best ok peer per measure; wrong rows and baselines are never the bar', () => {
    const r = computeRatios(synthetic().rows);
    const by = (impl: string, name = 'murmur3_128 shape A') => r.find((x) => x.impl === impl && x.name === name) as BenchRow;
    expect(by('hashgate batch').ratioToBestPeer).toBeCloseTo(1.5, 12);
    expect(by('hashgate batch').bestPeer).toBe('murmurhash-native');
    expect(by('murmurhash-native').ratioToBestPeer).toBe(1);
    expect(by('murmurhash-wasm').ratioToBestPeer).toBeUndefined();
    expect(by('one call per key').ratioToBestPeer).toBeCloseTo(2, 12);
    expect(by('hashgate', '64 KiB input').ratioToBestPeer).toBeCloseTo(0.75, 12);
  });

  it('makeTarget and spread', () => {
    expect(makeTarget('a', '>=', 1.5, 1.49).met).toBe(false);
    expect(makeTarget('a', '>=', 1.5, 1.5).met).toBe(true);
    expect(makeTarget('a', '<=', 24, 23).met).toBe(true);
    expect(makeTarget('a', '<', 24, 24).met).toBe(false);
    expect(makeTarget('a', '>=', 1, null).met).toBeNull();
    expect(makeTarget('a', '>=', 1, NaN).actual).toBeNull();
    const s = spread([3, 1, 2, 5, 4]);
    expect([s.min, s.median, s.max, s.sampleCount]).toEqual([1, 3, 5, 5]);
    expect(spread(Array.from({ length: 1000 }, (_, i) => i)).samples).toHaveLength(64);
  });

  it('Suite: a wrong implementation is marked, never timed or ranked; results JSON is written', async () => {
    const s = new Suite('tiny', { quick: true });
    let timedWrong = 0;
    const keys = makeKeys(64, 'A');
    expect(new Set(keys).size).toBe(64);
    expect(shapeAKey(5)).toMatch(/^\p{Script=Han}{2,3}\d{17}[\dX]$/u);
    await s.bench({ name: 'sum', impl: 'hashgate', opsPerCall: 64, check: () => keys.length === 64, fn: () => keys.join('').length, timeMs: 5, iterations: 2 });
    await s.bench({ name: 'sum', impl: 'peer-ok', opsPerCall: 64, check: () => true, fn: () => keys.map((k) => k.length), timeMs: 5, iterations: 2 });
    await s.bench({ name: 'sum', impl: 'peer-wrong', opsPerCall: 64, check: () => 'returned 41', fn: () => timedWrong++, timeMs: 5, iterations: 2 });
    await s.bench({ name: 'sum', impl: 'peer-throws', check: () => { throw new Error('native module missing'); }, fn: () => timedWrong++ });
    await s.sample({ name: 'load', impl: 'hashgate', runs: 3, fn: async () => 1000 });
    await s.sample({ name: 'load', impl: 'naive', role: 'peer', runs: 2, check: async () => true, fn: () => 10 });
    s.target('hashgate vs peer', '>=', 0.000001, s.ratio('sum', 'hashgate', 'peer-ok'), 'x');
    s.target('ratio against a wrong peer is not measured', '>=', 1, s.ratio('sum', 'hashgate', 'peer-wrong'), 'x');
    const r = s.finish();
    expect(timedWrong).toBe(0);
    const wrong = r.rows.find((x) => x.impl === 'peer-wrong') as BenchRow;
    expect(wrong.ok).toBe(false);
    expect(wrong.error).toBe('returned 41');
    expect(wrong.ratioToBestPeer).toBeUndefined();
    expect((r.rows.find((x) => x.impl === 'peer-throws') as BenchRow).error).toMatch(/native module missing/);
    const ours = r.rows.find((x) => x.impl === 'hashgate' && x.name === 'sum') as BenchRow;
    expect(ours.ok).toBe(true);
    expect(ours.opsPerSec).toBeGreaterThan(0);
    expect(ours.bestPeer).toBe('peer-ok');
    expect(ours.min! <= ours.median! && ours.median! <= ours.max!).toBe(true);
    expect((r.rows.find((x) => x.name === 'load' && x.impl === 'hashgate') as BenchRow).sampleCount).toBe(3);
    expect(r.targets[0]?.met).toBe(true);
    expect(r.targets[1]?.met).toBeNull();
    const onDisk = JSON.parse(readFileSync(join(tmp, 'results', 'tiny.json'), 'utf8')) as SuiteResult;
    expect(onDisk.suite).toBe('tiny');
    expect(onDisk.rows).toHaveLength(6);
    expect(onDisk.machine.cores).toBeGreaterThan(0);
  });
});

describe('bench/report', () => {
  it('markdown: summary and per-suite tables with ratios, spread, WRONG marks and target status', () => {
    const md = renderReport([synthetic()], { generatedAt: '2026-01-01T00:00:00Z', charts: new Map([['hash', ['charts/hash.svg', 'charts/hash-threads.svg']]]) });
    expect(md.indexOf(SUMMARY_START)).toBeGreaterThan(0);
    expect(md.indexOf(SUMMARY_END)).toBeGreaterThan(md.indexOf(SUMMARY_START));
    const summary = table(md, /^\| Suite \| Measure \| hashgate/);
    expect(summary).toHaveLength(2);
    expect(summary[0]).toEqual(['hash', 'murmur3_128 shape A', 'hashgate batch', '9M', 'murmurhash-native', '6M', '**1.50x**']);
    expect(summary[1]?.[6]).toBe('**0.75x**');
    const targets = table(md, /^\| Suite \| Target \|/);
    expect(targets.map((t) => t[4]?.split(' - ')[0])).toEqual(['met', 'met', 'not measured', 'met', '**MISSED**']);
    expect(md).toContain('Targets: 3 met, 1 missed, 1 not measured.');
    const suite = table(md, /^\| Measure \| Implementation \| Role/);
    const wasm = suite.find((r) => r[1] === 'murmurhash-wasm') as string[];
    expect(wasm[3]).toMatch(/^WRONG: wrong hash for bytes >= 0x80 \(not ranked\)$/);
    expect(wasm[4]).toBe('');
    const crashed = { ...synthetic(), rows: [{ name: 'm', impl: 'p', opsPerSec: 0, ok: false, error: 'threw: boom' }, { name: 'm', impl: 'hashgate', opsPerSec: 1 }] };
    expect(renderReport([crashed])).toContain('FAILED: threw: boom (not ranked)');
    expect(suiteChart(crashed)).toContain('FAILED: threw: boom');
    const ours = suite.find((r) => r[1] === '**hashgate batch**') as string[];
    expect(ours[4]).toBe('1.50x');
    expect(ours[5]).toBe('8M / 9M / 10M');
    expect(ours[6]).toBe('3');
    // wrong rows sort last within their measure; extra columns are present
    const firstMeasure = suite.filter((r) => r[0] === 'murmur3_128 shape A').map((r) => r[1]);
    expect(firstMeasure[firstMeasure.length - 1]).toBe('murmurhash-wasm');
    expect(suite.find((r) => r[0] === '64 KiB input')?.[7]).toBe('65.5k');
    expect(md).toContain('![hash throughput](charts/hash.svg)');
    expect(md).toContain('![hash sweep](charts/hash-threads.svg)');
    expect(md).toContain('- packed keys: 2 cores shared with 6 agents');
    expect(md).toContain('quick run');
  });

  it('summary: one line per measure with a peer (hashgate best correct variant); peerless measures counted', () => {
    const r = synthetic();
    r.rows.push({ name: 'murmur3_128 shape A', impl: 'hashgate per key', opsPerSec: 100 });
    r.rows.push({ name: 'murmur3_128 shape A', impl: 'hashgate broken', opsPerSec: 1e9, ok: false, error: 'x' });
    r.rows.push({ name: 'threads=2', impl: 'hashgate pool', opsPerSec: 5 });
    const md = renderSummary([r]);
    const rows = table(md, /^\| Suite \| Measure \| hashgate/);
    expect(rows.map((x) => x[2])).toEqual(['hashgate batch', 'hashgate']);
    expect(md).toContain('1 more measure(s) without a peer');
  });

  it('a failed or empty suite is reported, not dropped', () => {
    const md = renderReport([{ suite: 'dedup', machine: { cores: 2, node: 'v20' }, rows: [], targets: [], error: 'Error: redis-server exited\n    at x' }]);
    expect(md).toContain('## dedup');
    expect(md).toContain('**This suite failed:**');
    expect(md).toContain('redis-server exited');
    expect(renderSummary([])).toContain('no hashgate row measured against a peer');
  });

  it('suites measured on different CPUs: the report and README lines name every model, not the first suite\'s alone', () => {
    const m = (cpuModel: string) => ({ cores: 2, node: 'v20', platform: 'linux', arch: 'x64', cpuModel, totalMemBytes: 2 ** 30, osRelease: '6', v8: '11' });
    const results: SuiteResult[] = [
      { suite: 'bloom', machine: m('CPU A'), rows: [], targets: [] },
      { suite: 'dedup', machine: m('CPU A'), rows: [], targets: [] },
      { suite: 'redis-path', machine: m('CPU B'), rows: [], targets: [] },
    ];
    const head = renderReport(results).split('\n')[2]!;
    expect(head).toContain('suites measured on different CPUs; CPU A: bloom, dedup; CPU B: redis-path');
    expect(head).not.toMatch(/2 cores, CPU A/);
    const readme = readmeBlock(results, 'bench/REPORT.md');
    expect(readme).toContain('CPU B: redis-path');
    // one CPU: named once, as before
    expect(renderReport(results.slice(0, 2)).split('\n')[2]).toContain('on 2 cores, CPU A, 1.0 GiB RAM');
  });

  it('SVG bar chart: well-formed, one bar per row, wrong rows drawn as such, text escaped', () => {
    const svg = suiteChart(synthetic()) as string;
    const { tags } = assertWellFormedSvg(svg);
    expect(tags.get('svg')).toBe(1);
    const bars = [...svg.matchAll(/<g class="bar" data-kind="(\w+)" data-value="([^"]+)"/g)];
    expect(bars).toHaveLength(7);
    expect(bars.filter((b) => b[1] === 'wrong')).toHaveLength(1);
    expect(bars.filter((b) => b[1] === 'hashgate').map((b) => Number(b[2]))).toEqual([9e6, 1500]);
    expect(svg).toContain('WRONG: wrong hash for bytes &gt;= 0x80');
    // within a measure the fastest correct bar has the full width, others are proportional
    const widths = [...svg.matchAll(/<rect x="300" y="[\d.]+" width="([\d.]+)"/g)].map((m) => Number(m[1]));
    expect(Math.max(...widths)).toBeCloseTo(460, 0);
    const evil = barChart({ title: 'a<b & "c"', groups: [{ label: "it's", bars: [{ label: '<script>', value: 1, kind: 'peer' }] }] });
    assertWellFormedSvg(evil);
    expect(evil).not.toContain('<script>');
  });

  it('memory rows (extra.bytesPerKey) are charted as bytes/key, never as their load rate in keys/s', () => {
    const mem = (impl: string, bytesPerKey: number, ok = true): BenchRow => ({
      name: 'Redis memory, 1000000 distinct keys', impl, role: 'hashgate', opsPerSec: 250_000, unit: 'keys/s', ok,
      ...(ok ? {} : { error: 'expected 1000000 first-seen, got 3' }),
      extra: { bytesPerKey, usedMemoryDelta: bytesPerKey * 1e6 },
    });
    const result: SuiteResult = {
      ...synthetic(),
      suite: 'dedup',
      rows: [
        { name: 'firstSeen 100k keys', impl: 'hashgate firstSeen (compact)', role: 'hashgate', opsPerSec: 900_000, unit: 'keys/s' },
        { name: 'firstSeen 100k keys', impl: 'ioredis pipelined SADD', role: 'peer', opsPerSec: 300_000, unit: 'keys/s' },
        mem('hashgate sets', 92.5),
        mem('hashgate compact', 18.25),
        mem('hashgate broken', 1, false),
      ],
      sweeps: [],
    };
    const svg = suiteChart(result) as string;
    assertWellFormedSvg(svg);
    const bars = [...svg.matchAll(/<g class="bar" data-kind="(\w+)" data-value="([^"]+)">\s*<title>([^<]*)<\/title>/g)];
    expect(bars.map((b) => b[3])).toEqual([
      'hashgate firstSeen (compact): 900k keys/s',
      'ioredis pipelined SADD: 300k keys/s',
      'hashgate compact: 18.3 B/key', // smallest footprint first
      'hashgate sets: 92.5 B/key',
      'hashgate broken: wrong answers',
    ]);
    expect(svg).toContain('Redis memory, 1000000 distinct keys (bytes/key, lower is better)');
    expect(svg).toContain('WRONG: expected 1000000 first-seen, got 3');
    expect(svg).not.toMatch(/250k keys\/s/); // the load rate is not what a memory row measures
  });

  it('SVG line chart for sweeps: well-formed, one polyline per series, legend escaped', () => {
    const svg = sweepChart('bloom', synthetic().sweeps![0]!);
    const { tags } = assertWellFormedSvg(svg);
    expect(tags.get('polyline')).toBe(2);
    expect(tags.get('circle')).toBe(4);
    expect(svg).toContain('inline &lt;&amp;&gt;');
    expect(svg).toContain('worker threads');
  });

  it('log y axis: decade ticks, every point inside the plot', () => {
    const svg = lineChart({ title: 't', xLabel: 'x', yLabel: 'y', logX: true, logY: true, series: [{ name: 'a', points: [{ x: 10, y: 2000 }, { x: 1000, y: 250 }] }, { name: 'b', points: [{ x: 10, y: 1.8 }, { x: 1000, y: 1.8 }] }] });
    assertWellFormedSvg(svg);
    const ticks = [...svg.matchAll(/text-anchor="end" fill="#4b5563">([^<]+)</g)].map((m) => m[1]);
    expect(ticks).toEqual(['1', '10', '100', '1k', '10k']);
    const ys = [...svg.matchAll(/<circle cx="[\d.]+" cy="([\d.]+)"/g)].map((m) => Number(m[1]));
    expect(ys).toHaveLength(4);
    for (const y of ys) expect(y >= 46 && y <= 420 - 56).toBe(true);
    expect(svg).toContain('y (log scale)');
  });

  it('svg helpers', () => {
    expect(formatSi(1_234_567)).toBe('1.23M');
    expect(formatSi(1000)).toBe('1k');
    expect(formatSi(0.5)).toBe('0.5');
    expect(escapeXml(`<&>"'`)).toBe('&lt;&amp;&gt;&quot;&apos;');
    expect(niceTicks(0, 10)).toEqual([0, 2, 4, 6, 8, 10]);
  });

  it('writeReport writes REPORT.md and the charts; loadResults reads results back', () => {
    const out = join(tmp, 'out');
    const w = writeReport([synthetic()], { outDir: out });
    expect(existsSync(w.report)).toBe(true);
    expect(w.charts.map((c) => c.slice(out.length + 1)).sort()).toEqual(['charts/hash-threads.svg', 'charts/hash.svg']);
    for (const c of w.charts) assertWellFormedSvg(readFileSync(c, 'utf8'));
    expect(w.readmeUpdated).toBe(false);
    const dir = join(tmp, 'loaded');
    rmSync(dir, { recursive: true, force: true });
    expect(loadResults(dir)).toEqual([]);
  });
});

describe('README performance table', () => {
  it('splices at the placeholder, then replaces its own block on the next run; no marker = untouched', () => {
    const readme = join(tmp, 'README.md');
    writeFileSync(readme, '# x\n\n## Performance\n\n<!-- PERF-TABLE -->\n\nafter\n');
    const out = join(tmp, 'readme-out');
    expect(writeReport([synthetic()], { outDir: out, readme }).readmeUpdated).toBe(true);
    const first = readFileSync(readme, 'utf8');
    expect(first).toContain(SUMMARY_START);
    expect(first).not.toContain('<!-- PERF-TABLE -->');
    expect(first.endsWith('\n\nafter\n')).toBe(true);
    expect(table(first, /^\| Suite \| Measures vs a peer/)[0]?.slice(0, 3)).toEqual(['hash', '2', '1.13x']);
    expect(table(first, /^\| Suite \| Measures vs a peer/)[0]?.slice(3)).toEqual(['0.75x', '1.50x', '3 of 5']);
    expect(first).not.toContain('charts/hash.svg');
    expect(first).toContain('(readme-out/REPORT.md)');
    const changed = synthetic();
    changed.rows[0]!.opsPerSec = 12_000_000;
    writeReport([changed], { outDir: out, readme });
    const second = readFileSync(readme, 'utf8');
    expect(second.split(SUMMARY_START)).toHaveLength(2);
    expect(table(second, /^\| Suite \| Measures vs a peer/)[0]?.[4]).toBe('2.00x');
    expect(spliceReadme('# no markers\n', 'x')).toBeUndefined();
  });
});

describe('bench/run', () => {
  it('parses its flags', () => {
    expect(parseArgs(['--quick', '--only', 'hash,bloom'])).toMatchObject({ quick: true, only: ['hash', 'bloom'] });
    expect(parseArgs(['--only=dedup', '--timeout', '60'])).toMatchObject({ only: ['dedup'], timeoutMs: 60_000 });
    expect(() => parseArgs(['--bogus'])).toThrow(/unknown option/);
    expect(() => parseArgs(['--only'])).toThrow(/--only/);
  });

  it('discovers suites dynamically, runs them, records a throwing suite and skips missing ones', async () => {
    const dir = join(tmp, 'suites');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(dir, { recursive: true });
    const common = new URL('../bench/common.ts', import.meta.url).href;
    writeFileSync(
      join(dir, 'hash.mjs'),
      `export async function run({ quick }) {
         const { Suite } = await import(${JSON.stringify(common)});
         const s = new Suite('hash', { quick });
         await s.sample({ name: 'm', impl: 'hashgate', runs: 2, fn: () => 100 });
         await s.sample({ name: 'm', impl: 'peer', runs: 2, fn: () => 50, check: () => true });
         s.addRow({ name: 'fixed', impl: 'hashgate', opsPerSec: 300 });
         s.addRow({ name: 'fixed', impl: 'peer', opsPerSec: 200 });
         s.target('t', '>=', 0, 1);
         return s.finish();
       }`,
    );
    writeFileSync(join(dir, 'bloom.mjs'), `export async function run() { throw new Error('bloom exploded'); }`);
    writeFileSync(join(dir, 'helper.mjs'), `export const notASuite = 1;`);
    writeFileSync(join(dir, 'common.mjs'), `export async function run() { throw new Error('helpers are never run'); }`);
    writeFileSync(
      join(dir, 'zeta.mjs'),
      `export async function run() { return { suite: 'zeta', machine: { cores: 1, node: 'v20' }, rows: [{ name: 'x', impl: 'hashgate', opsPerSec: 3 }, { name: 'x', impl: 'p', opsPerSec: 2 }], targets: [] }; }`,
    );
    expect(discoverSuites(dir).map((s) => s.suite)).toEqual(['hash', 'bloom', 'helper', 'zeta']);
    const lines: string[] = [];
    const out = join(tmp, 'run-out');
    const res = await runAll({ quick: true, dir, inProcess: true, outDir: out, log: (l) => lines.push(l) });
    expect(res.results.map((r) => r.suite)).toEqual(['hash', 'bloom', 'zeta']);
    expect(res.results[1]?.error).toMatch(/bloom exploded/);
    expect(res.exitCode).toBe(1);
    expect(lines.some((l) => /dedup: skipped - no bench\/dedup\.ts/.test(l))).toBe(true);
    expect(lines.some((l) => /helper: .*exports no run\(\)/.test(l))).toBe(true);
    // zeta returned plain JSON without ratios and without writing it: run.ts writes it, report ranks it
    expect(existsSync(join(tmp, 'results', 'zeta.json'))).toBe(true);
    const md = readFileSync(res.report, 'utf8');
    expect(md).toContain('**This suite failed:**');
    const summary = table(md, /^\| Suite \| Measure \| hashgate/).filter((r) => r[1] !== 'm');
    expect(summary.map((r) => `${r[0]}:${r[1]}:${r[6]}`)).toEqual(['hash:fixed:**1.50x**', 'zeta:x:**1.50x**']);
    expect(readdirSync(join(out, 'charts')).sort()).toEqual(['hash.svg', 'zeta.svg']);

    const only = await runAll({ quick: true, dir, inProcess: true, outDir: out, only: ['zeta', 'nope'], log: () => {} });
    expect(only.results.map((r) => r.suite)).toEqual(['zeta']);
    expect(only.exitCode).toBe(1);
  });
});
