// Scaling suite: memory against key count, so a user can extrapolate to a year of keys.
//   - embedded gate (Bloom at p = 0.001 sized for n + in-memory exact store): process RSS growth
//     after firstSeen of n distinct keys, each n in a fresh child process (RSS never shrinks, so
//     measuring several n in one process would only show the largest);
//   - Redis used_memory per key for the `compact` and `sets` layouts at growing n (a private
//     redis-server on a free loopback port; skipped with a note when redis-server is missing).
// Thread-count and batch-size sweeps live in bench/pool.ts.
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { Suite, makeKeys } from './common.js';
import { startBenchRedis } from './redis-server.js';
import type { SuiteOptions, SuiteResult, SweepSeries } from './common.js';

const BATCH = 8192;
const FPP = 0.001;

interface ChildReport {
  n: number;
  rssBefore: number;
  rssAfter: number;
  heapAfter: number;
  bloomBytes: number;
  firstSeen: number;
  keysPerSec: number;
}

/** Runs in a child: an embedded gate, n distinct keys through firstSeen, memory reported. */
async function childMeasure(n: number): Promise<ChildReport> {
  const { HashGate } = await import('../src/gate.js');
  const keys = makeKeys(n, 'A', 7);
  const gate = await HashGate.open({ threads: 0, firstSeenBloom: { expectedItems: n, fpp: FPP }, dedup: { replayIntervalMs: 0 } });
  // Baseline after the gate is open and warm (modules, WASM instance, JIT): what remains is the
  // marginal memory of n keys (exact store entries, seen-cache, Bloom pages actually touched).
  await gate.firstSeen(['warm-up key']);
  global.gc?.();
  const rssBefore = process.memoryUsage().rss;
  let first = 0;
  const t0 = performance.now();
  for (let o = 0; o < n; o += BATCH) {
    const a = await gate.firstSeen(keys.slice(o, o + BATCH));
    for (let i = 0; i < a.length; i++) first += a[i]!;
  }
  const sec = (performance.now() - t0) / 1000;
  global.gc?.();
  const mu = process.memoryUsage();
  const st = gate.stats();
  const report: ChildReport = {
    n,
    rssBefore,
    rssAfter: mu.rss,
    heapAfter: mu.heapUsed,
    bloomBytes: st.firstSeenBloom ? Math.ceil(st.firstSeenBloom.bitSize / 8) : 0,
    firstSeen: first,
    keysPerSec: n / sec,
  };
  await gate.close();
  return report;
}

function measureInChild(n: number): Promise<ChildReport> {
  return new Promise((resolvePromise, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ['--scaling-child', String(n)], {
      execArgv: ['--expose-gc'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let report: ChildReport | undefined;
    child.on('message', (m) => {
      report = m as ChildReport;
    });
    child.on('error', reject);
    child.on('exit', (code) => (report ? resolvePromise(report) : reject(new Error(`scaling child for n=${n} exited with ${code}`))));
  });
}



async function usedMemory(r: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await r.info('memory'))?.[1] ?? NaN);
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('scaling', opts);
  const sizes = opts.quick ? [2_000, 10_000] : [10_000, 100_000, 1_000_000];
  s.note(`Memory vs distinct keys: shape-A keys (Chinese name + 18-digit ID), firstSeen in batches of ${BATCH}.`);
  s.note('Redis load rows include opening and closing the DedupService (connect, bucket sizing), which dominates at small n.');

  // Embedded gate: RSS growth per key, each n in its own process.
  const rssSeries: SweepSeries = { name: 'embedded gate RSS growth (B/key)', points: [] };
  s.note('Embedded RSS growth is measured from a warm, open gate, so it is the marginal cost of the keys; the Bloom series is its full bit array per key.');
  const bloomSeries: SweepSeries = { name: `Bloom bits (B/key, p=${FPP})`, points: [] };
  for (const n of sizes) {
    const name = `embedded firstSeen, ${n} distinct keys`;
    const impl = 'hashgate (Bloom + in-memory store)';
    let rep: ChildReport;
    try {
      rep = await measureInChild(n);
    } catch (err) {
      s.addRow({ name, impl, role: 'hashgate', opsPerSec: 0, ok: false, error: (err as Error).message });
      continue;
    }
    const perKey = (rep.rssAfter - rep.rssBefore) / n;
    const extra = { rssGrowthMB: Number(((rep.rssAfter - rep.rssBefore) / 2 ** 20).toFixed(1)), rssBytesPerKey: Number(perKey.toFixed(1)), bloomBytes: rep.bloomBytes };
    if (rep.firstSeen !== n) {
      s.addRow({ name, impl, role: 'hashgate', opsPerSec: 0, ok: false, error: `answered ${rep.firstSeen} new of ${n} distinct keys`, extra });
      continue;
    }
    // Throughput measured inside the child (process start-up excluded); one run per size.
    s.addRow({ name, impl, role: 'hashgate', unit: 'keys/s', opsPerSec: rep.keysPerSec, ok: true, sampleCount: 1, extra });
    console.log(`[scaling] ${name}: ${(rep.keysPerSec / 1000).toFixed(0)} k keys/s, RSS +${extra.rssGrowthMB} MB (${extra.rssBytesPerKey} B/key)`);
    rssSeries.points.push({ x: n, y: perKey });
    bloomSeries.points.push({ x: n, y: rep.bloomBytes / n });
  }
  s.sweep({ name: 'embedded memory per key vs keys', xLabel: 'distinct keys', yLabel: 'bytes per key', logX: true, logY: true, series: [rssSeries, bloomSeries] });

  // Redis memory per key by layout.
  const srv = await startBenchRedis('scaling');
  if (!srv) {
    s.note('redis-server not installed: Redis memory vs key count not measured.');
    return s.finish();
  }
  const admin = new Redis(srv.url);
  try {
    const { DedupService } = await import('../src/dedup/index.js');
    const series: SweepSeries[] = [];
    const journalDir = mkdtempSync(join(tmpdir(), 'hashgate-bench-scaling-journal-'));
    for (const layout of ['compact', 'sets'] as const) {
      const ser: SweepSeries = { name: `Redis ${layout} (B/key)`, points: [] };
      for (const n of sizes) {
        await admin.flushall();
        const keys = makeKeys(n, 'A', 11);
        let perKey = NaN;
        await s.sample({
          name: `Redis firstSeen load, ${n} distinct keys`,
          impl: `hashgate ${layout}`,
          role: 'hashgate',
          unit: 'keys/s',
          runs: 1,
          warmup: 0,
          fn: async () => {
            const before = await usedMemory(admin);
            const svc = new DedupService({ redis: srv.url, dedup: { layout, expectedKeys: n, replayIntervalMs: 0, journalDir } });
            let first = 0;
            try {
              for (let o = 0; o < n; o += BATCH) {
                const a = await svc.firstSeen(keys.slice(o, o + BATCH));
                for (let i = 0; i < a.length; i++) first += a[i]!;
              }
            } finally {
              await svc.close();
            }
            if (first !== n) throw new Error(`firstSeen answered ${first} new of ${n} distinct keys`);
            perKey = ((await usedMemory(admin)) - before) / n;
            return n;
          },
        });
        const row = s.rows[s.rows.length - 1];
        if (row && Number.isFinite(perKey)) row.extra = { redisBytesPerKey: Number(perKey.toFixed(1)) };
        if (Number.isFinite(perKey)) ser.points.push({ x: n, y: perKey });
      }
      series.push(ser);
    }
    rmSync(journalDir, { recursive: true, force: true });
    s.sweep({ name: 'Redis memory per key vs keys', xLabel: 'distinct keys', yLabel: 'bytes per key (INFO used_memory delta)', logX: true, series });
    const last = series[0]?.points.at(-1);
    s.target(`compact layout bytes/key at ${sizes.at(-1)} keys`, '<=', 24, last?.y ?? null, ' B');
  } finally {
    admin.disconnect();
    await srv.stop();
  }
  return s.finish();
}

if (process.argv.includes('--scaling-child')) {
  const n = Number(process.argv[process.argv.indexOf('--scaling-child') + 1]);
  childMeasure(n).then(
    (r) => process.send?.(r, () => process.exit(0)),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
