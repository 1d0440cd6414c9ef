// Scale suite: one window at the size the seeds run (100M export rows, 80M distinct keys; 1M in
// quick mode; HASHGATE_SCALE_ROWS overrides), end to end as an operator runs it, each step a
// `hashgate` child process against a private redis-server: gen-export, load with default flags,
// stats, bloom rebuild --file, stats --purge. Reported per step: wall time, and the longest PING
// another client waited meanwhile (a shared Redis's other users see this); after the load: Redis
// used_memory and RSS per key, the bucket fill against set-max-intset-entries (a sub-bucket past
// it turns into a hashtable, about 8x the memory); after the purge: what was freed. An extrapolation
// to 1e9 and 1e10 keys (one Redis, a 3-master Cluster) follows from the measured figures.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHistogram, performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { Suite, type SuiteOptions, type SuiteResult } from './common.js';
import { startBenchRedis } from './redis-server.js';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', 'src', 'cli', 'main.js');
const WINDOW = '2026';
const PREFIX = 'hg:dedup';
const GiB = 2 ** 30;

/** Runs one CLI command; resolves its parsed --json line and wall time. */
async function cli(args: string[]): Promise<{ out: Record<string, unknown>; ms: number }> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  const ms = performance.now() - t0;
  if (code !== 0) throw new Error(`hashgate ${args[0]} exited ${code}: ${err.trim().slice(0, 500)}`);
  const last = out.trim().split('\n').pop() ?? '{}';
  return { out: JSON.parse(last) as Record<string, unknown>, ms };
}

/** PINGs Redis on its own connection every few ms; each step reads the longest wait. */
class Pinger {
  private readonly redis: Redis;
  private hist = createHistogram();
  private running = true;
  private readonly loop: Promise<void>;
  constructor(url: string) {
    this.redis = new Redis(url, { enableAutoPipelining: false });
    this.loop = this.run();
  }
  private async run(): Promise<void> {
    while (this.running) {
      const t0 = process.hrtime.bigint();
      try {
        await this.redis.ping();
        this.hist.record(Number(process.hrtime.bigint() - t0) || 1);
      } catch {
        /* a failed PING ends with the step's error */
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }
  /** Longest and p99 PING wait (ms) since the last call. */
  take(): { maxMs: number; p99Ms: number; pings: number } {
    const h = this.hist;
    this.hist = createHistogram();
    return { maxMs: h.count ? h.max / 1e6 : 0, p99Ms: h.count ? h.percentile(99) / 1e6 : 0, pings: h.count };
  }
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    this.redis.disconnect();
  }
}

async function memory(redis: Redis): Promise<{ used: number; rss: number }> {
  const info = await redis.info('memory');
  const num = (k: string): number => Number(new RegExp(`^${k}:(\\d+)`, 'm').exec(info)?.[1] ?? NaN);
  return { used: num('used_memory'), rss: num('used_memory_rss') };
}

/**
 * Every set of the window (its buckets, and the sub-buckets they split into), by SCAN TYPE set and
 * pipelined SCARDs: how many, the largest and mean, how many exceed `limit`, and how many are not
 * intsets.
 */
async function bucketFill(redis: Redis, limit: number): Promise<{ buckets: number; subBuckets: number; largest: number; mean: number; over: number; notIntset: number }> {
  const buckets = Number(await redis.hget(`${PREFIX}:${WINDOW}:meta`, 'compact.buckets'));
  let largest = 0;
  let sum = 0;
  let over = 0;
  let notIntset = 0;
  let subBuckets = 0;
  let cursor = '0';
  do {
    const [c, keys] = await redis.scan(cursor, 'MATCH', `${PREFIX}:${WINDOW}:c{*`, 'COUNT', 10_000, 'TYPE', 'set');
    cursor = c;
    if (keys.length === 0) continue;
    const pl = redis.pipeline();
    for (const k of keys) pl.scard(k).object('ENCODING', k);
    const res = (await pl.exec()) ?? [];
    for (let i = 0; i < res.length; i += 2) {
      const [e, v] = res[i]!;
      if (e) throw e;
      const n = v as number;
      subBuckets++;
      sum += n;
      if (n > limit) over++;
      if (n > largest) largest = n;
      if (res[i + 1]![1] !== 'intset') notIntset++;
    }
  } while (cursor !== '0');
  return { buckets, subBuckets, largest, mean: sum / Math.max(1, subBuckets), over, notIntset };
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('scale', opts);
  const rows = Number(process.env.HASHGATE_SCALE_ROWS ?? (opts.quick ? 1_000_000 : 100_000_000));
  const srv = await startBenchRedis('scale');
  if (!srv) {
    s.note('skipped: redis-server not found');
    return s.finish();
  }
  const dir = mkdtempSync(join(tmpdir(), 'hashgate-bench-scale-'));
  const redis = new Redis(srv.url);
  const pinger = new Pinger(srv.url);
  try {
    const files = Math.max(1, Math.round(rows / 10_000_000));
    const gen = await cli(['gen-export', '--dir', dir, '--files', String(files), '--rows', String(Math.round(rows / files)), '--duplicate-rate', '0.2', '--json']);
    const distinct = Number(gen.out.distinct);
    pinger.take();
    const limit = Number(((await redis.config('GET', 'set-max-intset-entries')) as string[])[1] ?? 512);
    const before = await memory(redis);

    const load = await cli(['load', dir, '--redis', srv.url, '--window', WINDOW, '--checkpoint', `${dir}.checkpoint.json`, '--json', '--quiet']);
    const loadPing = pinger.take();
    const loaded = Number(load.out.newMembers);
    const after = await memory(redis);
    const fill = await bucketFill(redis, limit);
    const usedPerKey = (after.used - before.used) / loaded;
    const rssPerKey = (after.rss - before.rss) / loaded;
    const loadRate = Number(load.out.rows) / (load.ms / 1000);
    s.addRow({ name: 'load, default flags (wall time incl. start)', impl: 'hashgate load', opsPerSec: loadRate, unit: 'rows/s', extra: { rows: Number(load.out.rows), newMembers: loaded, wallSec: +(load.ms / 1000).toFixed(1), pingMaxMs: +loadPing.maxMs.toFixed(1) } });

    pinger.take();
    const stats = await cli(['stats', '--redis', srv.url, '--window', WINDOW, '--json']);
    const statsPing = pinger.take();
    const rebuild = await cli(['bloom', 'rebuild', '--redis', srv.url, '--name', 'scale:guard', '--file', dir, '--expected-items', String(distinct || loaded), '--fpp', '0.01', '--json', '--quiet']);
    const rebuildPing = pinger.take();
    const purge = await cli(['stats', '--redis', srv.url, '--window', WINDOW, '--purge', '--json']);
    const purgePing = pinger.take();
    const purged = await memory(redis);
    await redis.call('MEMORY', 'PURGE');
    const allocatorPurged = await memory(redis);

    const steps: [string, number, { maxMs: number; p99Ms: number }][] = [
      ['load', load.ms, loadPing],
      ['stats (exact count)', stats.ms, statsPing],
      ['bloom rebuild --file', rebuild.ms, rebuildPing],
      ['stats --purge', purge.ms, purgePing],
    ];
    for (const [step, ms, p] of steps) {
      s.addRow({ name: `step: ${step}`, impl: 'hashgate', opsPerSec: 1000 / ms, unit: 'runs/s', extra: { wallSec: +(ms / 1000).toFixed(2), pingMaxMs: +p.maxMs.toFixed(1), pingP99Ms: +p.p99Ms.toFixed(2) } });
    }
    s.note(`${rows.toLocaleString('en')} export rows, ${loaded.toLocaleString('en')} distinct keys loaded with default flags into one redis-server (no persistence) on this machine.`);
    s.note(`Memory after the load: used_memory ${usedPerKey.toFixed(1)} B/key, RSS ${rssPerKey.toFixed(1)} B/key (${(after.used / GiB).toFixed(2)} GiB used, ${(after.rss / GiB).toFixed(2)} GiB RSS).`);
    s.note(`Bucket fill: ${fill.buckets} buckets (the default; no sizing flags) split into ${fill.subBuckets.toLocaleString('en')} sub-buckets, mean ${fill.mean.toFixed(0)} and largest ${fill.largest} members against set-max-intset-entries ${limit}; ${fill.over} past it, ${fill.notIntset} not encoded as an intset.`);
    s.note(`Counted ${Number(stats.out.exact).toLocaleString('en')} members exactly in ${(stats.ms / 1000).toFixed(1)} s; the purge deleted ${Number(purge.out.deletedKeys).toLocaleString('en')} keys in ${(purge.ms / 1000).toFixed(1)} s; used_memory then ${(purged.used / GiB).toFixed(2)} GiB, RSS ${(purged.rss / GiB).toFixed(2)} GiB, and after MEMORY PURGE RSS ${(allocatorPurged.rss / GiB).toFixed(2)} GiB.`);
    s.note(`Longest PING another client waited: load ${loadPing.maxMs.toFixed(1)} ms, stats ${statsPing.maxMs.toFixed(1)} ms, bloom rebuild ${rebuildPing.maxMs.toFixed(1)} ms, purge ${purgePing.maxMs.toFixed(1)} ms.`);
    for (const n of [1e9, 1e10]) {
      const one = { gib: (usedPerKey * n) / GiB, hours: n / loadRate / 3600 };
      s.note(`Extrapolated to ${n.toExponential(0)} keys from the measured per-key figures (not measured): one Redis ${one.gib.toFixed(0)} GiB used and ${one.hours.toFixed(1)} h to load; a 3-master Cluster ${(one.gib / 3).toFixed(0)} GiB per master and about ${(one.hours / 3).toFixed(1)} h if the masters load in parallel at the one-Redis rate. Buckets split as they fill, so the per-key figure does not depend on the volume.`);
    }
    s.target('load rate into one Redis, default flags', '>=', 600_000, loadRate, ' rows/s');
    s.target('Redis used_memory per key after the load', '<=', 16, usedPerKey, ' B');
    s.target('sub-buckets past set-max-intset-entries', '<=', 0, fill.over);
    s.target('sub-buckets not encoded as intsets', '<=', 0, fill.notIntset);
    s.target('longest PING wait during any step', '<=', 50, Math.max(...steps.map(([, , p]) => p.maxMs)), ' ms');
  } finally {
    await pinger.stop();
    redis.disconnect();
    await srv.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(`${dir}.checkpoint.json`, { force: true });
  }
  return s.finish();
}
