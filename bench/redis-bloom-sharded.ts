// ShardedRedisBloom against one RedisBloom of the same total sizing on a private redis-server:
// addAll into a fresh filter and containsAll (50% present), both layouts' default read paths and
// the Lua script path. What sharding costs (routing hash, one call per slice) where one filter
// would still do; past about 448M keys at 1% only the sharded filter exists.
import { Redis } from 'ioredis';
import { Suite, size, type SuiteOptions, type SuiteResult } from './common.js';
import { startBenchRedis } from './redis-server.js';
import { RedisBloom } from '../src/bloom/redis-bloom.js';
import { ShardedRedisBloom } from '../src/bloom/redis-sharded.js';

function makeKeys(prefix: string, n: number): string[] {
  const out: string[] = new Array(n);
  for (let i = 0; i < n; i++) out[i] = i % 2 === 0 ? `${prefix}张伟|11010119${String(900000 + i).padStart(10, '0')}` : `${prefix}user:${i}`;
  return out;
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('redis-bloom-sharded', opts);
  const N = size(opts, 1_000_000, 200_000);
  const P = size(opts, 200_000, 100_000);
  const SHARDS = 16;
  const runs = opts.quick ? 3 : 5;
  const fpp = 0.01;
  const srv = await startBenchRedis('redis-bloom-sharded');
  if (!srv) {
    s.note('redis-server not available: nothing measured');
    return s.finish();
  }
  const redis = new Redis(srv.url);
  try {
    const present = makeKeys('p', N);
    const absent = makeKeys('a', P);
    const probe: string[] = new Array(P);
    for (let i = 0; i < P; i++) probe[i] = i % 2 === 0 ? present[(i * 7919) % N]! : absent[i]!;
    const one = await RedisBloom.open({ redis, name: 'one', expectedItems: N, fpp });
    await one.tryInit();
    const sharded = await ShardedRedisBloom.open({ redis, name: 'sharded', expectedItems: N, fpp, shards: SHARDS });
    await sharded.tryInit();
    s.note(`${N} keys at fpp ${fpp}: one filter of ${one.size} bits; ${SHARDS} slices of ${sharded.slices[0]!.size} bits; ${P} probes, half present`);

    const add = `addAll ${N} keys into a fresh filter (fpp ${fpp})`;
    await s.sample({ name: add, impl: 'hashgate RedisBloom.addAll (one filter)', runs: 1, warmup: 0, unit: 'keys/s', fn: async () => (await one.addAll(present), N) });
    await s.sample({ name: add, impl: `hashgate ShardedRedisBloom.addAll (${SHARDS} slices)`, runs: 1, warmup: 0, unit: 'keys/s', fn: async () => (await sharded.addAll(present), N) });

    const expected = await one.containsAll(probe);
    const noFalseNegative = (r: Uint8Array): string | true => {
      for (let i = 0; i < P; i += 2) if (r[i] !== 1) return `false negative at ${i}`;
      return true;
    };
    const read = `containsAll, ${N}-key filter, 50% present`;
    await s.sample({
      name: read, impl: 'hashgate RedisBloom.containsAll (one filter)', runs, unit: 'keys/s',
      check: async () => noFalseNegative(await one.containsAll(probe)),
      fn: async () => (await one.containsAll(probe), P),
    });
    await s.sample({
      name: read, impl: `hashgate ShardedRedisBloom.containsAll (${SHARDS} slices)`, runs, unit: 'keys/s',
      check: async () => noFalseNegative(await sharded.containsAll(probe)),
      fn: async () => (await sharded.containsAll(probe), P),
    });
    const fp = (r: Uint8Array) => r.reduce((a, b, i) => a + (i % 2 === 1 ? b : 0), 0) / (P / 2);
    s.note(`false positives among absent probes: one filter ${fp(expected).toFixed(4)}, sharded ${fp(await sharded.containsAll(probe)).toFixed(4)}`);
  } finally {
    redis.disconnect();
    await srv.stop();
  }
  return s.finish();
}
