// Invalidation bus latency across three OS processes on one redis-server: each write goes through
// one instance's HotColdStore (Redis SET, then PUBLISH), the other two report when their local
// tier dropped the key. Write-to-eviction = eviction time on the reader - time write() was called
// on the writer (both epoch ms from performance.timeOrigin + now(), one machine, so one clock).
// Recorded in a node:perf_hooks histogram; target p99 <= 50 ms.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import { createHistogram } from 'node:perf_hooks';
import { Suite, repoRoot, size, type SuiteOptions, type SuiteResult } from './common.js';
import { startBenchRedis } from './redis-server.js';
import { startInstance, type Instance } from './_fleet.js';

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('bus', opts);
  const N = size(opts, 2_000, 300);
  const PACE_MS = 2;
  const child = join(repoRoot(), 'dist/bench/_bus-child.js');
  if (!existsSync(child)) {
    s.note('dist/bench/_bus-child.js missing (build first): not measured');
    return s.finish();
  }
  const srv = await startBenchRedis('bus');
  if (!srv) {
    s.note('redis-server not available: not measured');
    return s.finish();
  }
  try {
    for (const replay of [false, true]) await scenario(s, child, srv.url, N, PACE_MS, replay);
  } finally {
    await srv.stop();
  }
  return s.finish();
}

async function scenario(s: Suite, child: string, url: string, N: number, PACE_MS: number, replay: boolean): Promise<void> {
  const fleet: Instance[] = [];
  const impl = replay ? 'hashgate InvalidationBus + replay log (script: XADD + PUBLISH)' : 'hashgate InvalidationBus (Redis pub/sub)';
  try {
    for (let i = 0; i < 3; i++) fleet.push(await startInstance(child, url, replay ? 'hg:bench:bus:replay' : 'hg:bench:bus', undefined, replay));
    const table = replay ? 'bench-replay' : 'bench';
    const keys = Array.from({ length: N }, (_, i) => `user:${i}`);
    // every instance caches every key as absent first, so each eviction drops a real entry
    for (const x of fleet) for (let o = 0; o < N; o += 500) await x.call('lookup', { table, keys: keys.slice(o, o + 500) });

    const t0 = new Map<string, number>();
    const writers = new Map<string, number>();
    const started = performance.now();
    for (let i = 0; i < N; i++) {
      const w = i % 3;
      const key = keys[i]!;
      writers.set(key, w);
      const r = await fleet[w]!.call<{ t0: number }>('write', { table, entries: [{ key, value: { i } }] });
      t0.set(key, r.t0);
      await new Promise((res) => setTimeout(res, PACE_MS));
    }
    const elapsed = performance.now() - started;
    // let the last messages land: every reader must have seen the last key
    const last = keys[N - 1]!;
    for (const [w, x] of fleet.entries()) if (writers.get(last) !== w) await x.evictionOf(table, last, 5_000).catch(() => undefined);

    const h = createHistogram({ lowest: 1, highest: 60_000_000, figures: 3 });
    let missing = 0;
    let evictions = 0;
    for (let w = 0; w < 3; w++) {
      const seen = new Map<string, number>();
      for (const e of fleet[w]!.evicted) if (e.table === table) for (const k of e.keys) if (!seen.has(k)) seen.set(k, e.at);
      for (const key of keys) {
        if (writers.get(key) === w) continue;
        const at = seen.get(key);
        if (at === undefined) {
          missing++;
          continue;
        }
        evictions++;
        h.record(Math.max(1, Math.round((at - t0.get(key)!) * 1000)));
      }
    }
    // correctness: a reader now sees every written value (its negative entries were dropped)
    const check = await fleet[1]!.call<{ values: Array<{ i: number } | null> }>('lookup', { table, keys: keys.slice(0, 500) });
    const wrong = check.values.filter((v, i) => v === null || v.i !== i).length;
    const ms = (us: number): number => us / 1000;
    const p50 = ms(h.percentile(50));
    const p99 = ms(h.percentile(99));
    const max = ms(h.max);
    const lag = await Promise.all(fleet.map((x) => x.call<{ bus: { lagMs: { p50: number; p99: number } } }>('stats')));
    s.addRow({
      name: 'write-to-eviction on 2 other processes',
      impl,
      role: 'hashgate',
      opsPerSec: evictions / (elapsed / 1000),
      unit: 'evictions/s',
      ok: missing === 0 && wrong === 0,
      ...(missing || wrong ? { error: `${missing} evictions never arrived, ${wrong} stale reads` } : {}),
      extra: {
        writes: N,
        evictions,
        p50Ms: +p50.toFixed(3),
        p99Ms: +p99.toFixed(3),
        maxMs: +max.toFixed(3),
        busLagP99Ms: +Math.max(...lag.map((l) => l.bus.lagMs.p99)).toFixed(3),
      },
    });
    s.note(
      `${replay ? 'With the replay log: ' : ''}${N} single-key writes, one every ~${PACE_MS} ms, rotating over 3 forked instances; each eviction timed on the 2 others. ` +
        `write-to-eviction p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms, max ${max.toFixed(2)} ms (includes the Redis SET before the PUBLISH); ` +
        `load average during the run ${loadavg()[0]!.toFixed(1)} on this 2-core machine (tails follow CPU contention).`,
    );
    s.target(`bus write-to-eviction p99 (3 processes${replay ? ', replay log' : ''})`, '<=', 50, missing === 0 ? p99 : null, ' ms');
  } finally {
    for (const x of fleet) x.kill();
  }
}
