// Redis-held Bloom filter (Redisson layout) on a private redis-server: RedisBloom.containsAll /
// addAll against what a Node user would otherwise write for a Redisson filter: Redisson's own
// pattern of one script call per key (awaited, as RBloomFilter.contains does), one pipelined
// GETBIT-per-index round trip per key, and per-key script calls issued concurrently through
// ioredis auto-pipelining. Plus single-key contains() latency percentiles under concurrency.
import { Redis } from 'ioredis';
import { createHistogram } from 'node:perf_hooks';
import { loadavg } from 'node:os';
import { Suite, size, type SuiteOptions, type SuiteResult } from './common.js';
import { startBenchRedis } from './redis-server.js';
import { RedisBloom } from '../src/bloom/redis-bloom.js';
import { RedisBloomReplica } from '../src/bloom/redis-replica.js';
import { redissonKeyIndexes, redissonConfigKey } from '../src/bloom/redisson.js';

/** Redisson's per-call contains logic for one key, re-stated: config check, then GETBIT per index. */
const PER_KEY_CONTAINS = `local size = redis.call('hget', KEYS[1], 'size')
local k = redis.call('hget', KEYS[1], 'hashIterations')
if size ~= ARGV[1] or k ~= ARGV[2] then return 0 end
for i = 3, #ARGV do
  if redis.call('getbit', KEYS[2], ARGV[i]) == 0 then return 0 end
end
return 1`;

function makeKeys(prefix: string, n: number): string[] {
  const names = ['张伟', '王芳', '李娜', '刘洋', '陈静', '杨磊', '赵敏', '黄勇'];
  const out: string[] = new Array(n);
  for (let i = 0; i < n; i++) out[i] = i % 2 === 0 ? `${prefix}${names[i % 8]}|11010119${String(900000 + i).padStart(10, '0')}` : `${prefix}user:${i}`;
  return out;
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('redis-bloom', opts);
  const N = size(opts, 1_000_000, 20_000);
  const P = size(opts, 200_000, 10_000);
  const LOOP = size(opts, 4_000, 300);
  const runs = opts.quick ? 2 : 5;
  const fpp = 0.01;
  const srv = await startBenchRedis('redis-bloom');
  if (!srv) {
    s.note('redis-server not available: nothing measured');
    s.target('containsAll vs Redisson-style per-key loop', '>=', 30, null, 'x', 'redis-server not installed');
    s.target('containsAll throughput', '>=', 200_000, null, ' keys/s', 'redis-server not installed');
    return s.finish();
  }
  const redis = new Redis(srv.url);
  const auto = new Redis(srv.url, { enableAutoPipelining: true });
  try {
    const name = 'guard';
    const bloom = await RedisBloom.open({ redis, name, expectedItems: N, fpp });
    await bloom.tryInit();
    const present = makeKeys('p', N);
    const absent = makeKeys('a', P);
    // probes: half present, half absent, interleaved
    const probe: string[] = new Array(P);
    for (let i = 0; i < P; i++) probe[i] = i % 2 === 0 ? present[(i * 7919) % N]! : absent[i]!;

    await s.sample({
      name: `addAll ${N} keys into a fresh filter (fpp ${fpp})`, impl: 'hashgate RedisBloom.addAll', runs: 1, warmup: 0, unit: 'keys/s',
      fn: async () => {
        await bloom.addAll(present);
        return N;
      },
      extra: { size: bloom.size, k: bloom.hashIterations },
    });
    const expected = await bloom.containsAll(probe);
    const positives = expected.reduce((a, b) => a + b, 0);
    s.note(`filter ${name}: ${N} keys, size ${bloom.size} bits (${(bloom.size / 8 / 1024 / 1024).toFixed(2)} MiB), k=${bloom.hashIterations}; probes ${P}, ${positives} answered present (${P / 2} added)`);

    const measure = `containsAll, ${N}-key filter, 50% present`;
    const sameAs = (got: ArrayLike<number>, from = 0): string | true => {
      for (let i = 0; i < got.length; i++) if (got[i] !== expected[from + i]) return `answer ${from + i} differs`;
      return true;
    };
    await s.sample({
      name: measure, impl: 'hashgate RedisBloom.containsAll', runs, unit: 'keys/s', extra: { batch: P },
      check: async () => {
        const r = await bloom.containsAll(probe);
        for (let i = 0; i < P; i += 2) if (r[i] !== 1) return `false negative at ${i}`;
        return sameAs(r);
      },
      fn: async () => {
        await bloom.containsAll(probe);
        return P;
      },
    });
    const viaScript = await RedisBloom.open({ redis, name, clientSnapshotBytesPerProbe: 0 });
    await s.sample({
      name: measure, impl: 'hashgate RedisBloom.containsAll (Lua script, bitmap snapshot in Redis)', runs, unit: 'keys/s',
      check: async () => sameAs(await viaScript.containsAll(probe)),
      fn: async () => {
        await viaScript.containsAll(probe);
        return P;
      },
    });
    const perProbe = await RedisBloom.open({ redis, name, snapshotBytesPerProbe: 0, clientSnapshotBytesPerProbe: 0 });
    await s.sample({
      name: measure, impl: 'hashgate RedisBloom.containsAll (Lua script, GETBIT per probe)', runs, unit: 'keys/s',
      check: async () => sameAs(await perProbe.containsAll(probe)),
      fn: async () => {
        await perProbe.containsAll(probe);
        return P;
      },
    });
    // request-sized batches: each call is one script round trip
    const SMALL = 100;
    const smallCalls = size(opts, 200, 20);
    await s.sample({
      name: measure, impl: `hashgate RedisBloom.containsAll, batches of ${SMALL} awaited one by one`, runs, unit: 'keys/s', extra: { batch: SMALL },
      check: async () => sameAs(await bloom.containsAll(probe.slice(0, SMALL))),
      fn: async () => {
        for (let c = 0; c < smallCalls; c++) await bloom.containsAll(probe.slice(c * SMALL, (c + 1) * SMALL));
        return smallCalls * SMALL;
      },
    });

    // the same checks against a local replica (no round trip)
    const replica = await RedisBloomReplica.open({ redis, name, resyncIntervalMs: 0 });
    await s.sample({
      name: measure, impl: 'hashgate RedisBloomReplica.containsAll (local copy)', runs, unit: 'keys/s',
      check: () => sameAs(replica.containsAll(probe)),
      fn: () => {
        replica.containsAll(probe);
        return P;
      },
      teardown: () => replica.close(),
    });

    // peers: the client computes indexes (as Redisson does), Redis checks one key per call
    const k = bloom.hashIterations;
    const m = bloom.size;
    const scratch = Buffer.allocUnsafe(4096);
    const idx = new Uint32Array(k);
    const argsOf = (key: string): string[] => {
      redissonKeyIndexes(key, scratch, k, m, idx, 0);
      return Array.from(idx, String);
    };
    const conf = redissonConfigKey(name);
    const loopKeys = probe.slice(0, LOOP);
    const sm = String(m);
    const sk = String(k);
    // EVALSHA, as Redisson sends its scripts once cached
    const sha = String(await redis.script('LOAD', PER_KEY_CONTAINS));
    const perKeyScript = async (c: Redis, key: string): Promise<number> => Number(await c.evalsha(sha, 2, conf, name, sm, sk, ...argsOf(key)));
    await s.sample({
      name: measure, impl: 'Redisson-style: one script call per key, awaited', role: 'peer', runs, unit: 'keys/s',
      check: async () => {
        const r = [];
        for (const key of loopKeys.slice(0, 200)) r.push(await perKeyScript(redis, key));
        return sameAs(r);
      },
      fn: async () => {
        for (const key of loopKeys) await perKeyScript(redis, key);
        return LOOP;
      },
    });
    await s.sample({
      name: measure, impl: 'one pipelined GETBIT per index per key, awaited', role: 'peer', runs, unit: 'keys/s',
      fn: async () => {
        for (const key of loopKeys) {
          const p = redis.pipeline();
          for (const i of argsOf(key)) p.getbit(name, i);
          await p.exec();
        }
        return LOOP;
      },
    });
    const CONC = 256;
    await s.sample({
      name: measure, impl: `one script call per key, ${CONC} in flight (ioredis auto-pipelining)`, role: 'peer', runs, unit: 'keys/s',
      check: async () => sameAs(await Promise.all(probe.slice(0, 2000).map((key) => perKeyScript(auto, key)))),
      fn: async () => {
        const n = Math.min(P, LOOP * 10);
        let next = 0;
        await Promise.all(
          Array.from({ length: CONC }, async () => {
            while (next < n) await perKeyScript(auto, probe[next++]!);
          }),
        );
        return n;
      },
    });

    // single-key latency under concurrency: each contains() is one script call
    const h = createHistogram();
    const L = size(opts, 20_000, 1_000);
    let li = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (li < L) {
          const key = probe[li++ % P]!;
          const a = performance.now();
          await bloom.contains(key);
          h.record(Math.max(1, Math.round((performance.now() - a) * 1000)));
        }
      }),
    );
    const dt = (performance.now() - t0) / 1000;
    const us = (q: number) => h.percentile(q) / 1000;
    s.addRow({
      name: 'single-key contains(), 64 concurrent callers', impl: 'hashgate RedisBloom.contains', role: 'hashgate', opsPerSec: L / dt, unit: 'keys/s', ok: true,
      extra: { p50ms: Number(us(50).toFixed(3)), p99ms: Number(us(99).toFixed(3)), p999ms: Number(us(99.9).toFixed(3)) },
    });
    s.note(`single-key contains() with 64 callers: p50 ${us(50).toFixed(2)} ms, p99 ${us(99).toFixed(2)} ms, p99.9 ${us(99.9).toFixed(2)} ms`);

    const ratio = s.ratio(measure, 'hashgate RedisBloom.containsAll', 'Redisson-style: one script call per key, awaited');
    s.target('containsAll vs Redisson-style per-key loop', '>=', 30, ratio, 'x');
    s.target('containsAll throughput', '>=', 200_000, s.find(measure, 'hashgate RedisBloom.containsAll')?.opsPerSec, ' keys/s');
    s.note(`load average at the end: ${loadavg().map((x) => x.toFixed(1)).join(' ')} (2-core machine shared with other work)`);
  } finally {
    redis.disconnect();
    auto.disconnect();
    await srv.stop();
  }
  return s.finish();
}
