// Rebuild of a shared Redis-held filter (Redisson layout) on a private redis-server: hashgate's
// rebuildRedisBloom (bitmap built in process memory and uploaded, or scripted SETBITs in Redis, and
// from an export file through the loader's parser) against what a Node user would otherwise write:
// Redisson's add pattern (one script call per key doing SETBIT per index) into a temporary filter
// with ioredis auto-pipelining, then RENAME over the live keys.
import { Redis } from 'ioredis';
import { loadavg, tmpdir } from 'node:os';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Suite, size, type SuiteOptions, type SuiteResult } from './common.js';
import { startBenchRedis } from './redis-server.js';
import { RedisBloom } from '../src/bloom/redis-bloom.js';
import { rebuildRedisBloom } from '../src/bloom/redis-rebuild.js';
import { ExportFileKeys } from '../src/bloom/rebuild-sources.js';
import { redissonKeyIndexes, redissonConfigKey } from '../src/bloom/redisson.js';

/** Redisson's per-call add logic for one key, re-stated: config check, then SETBIT per index. */
const PER_KEY_ADD = `local size = redis.call('hget', KEYS[1], 'size')
local k = redis.call('hget', KEYS[1], 'hashIterations')
if size ~= ARGV[1] or k ~= ARGV[2] then return redis.error_reply('config changed') end
local c = 0
for i = 3, #ARGV do
  if redis.call('setbit', KEYS[2], ARGV[i], 1) == 0 then c = 1 end
end
return c`;

function makeRows(n: number): Array<[string, string]> {
  const names = ['张伟', '王芳', '李娜', '刘洋', '陈静', '杨磊', '赵敏', '黄勇'];
  return Array.from({ length: n }, (_, i) => [i % 2 === 0 ? names[i % 8]! : `user${i}`, `11010119${String(900000 + i).padStart(10, '0')}`]);
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('bloom-rebuild', opts);
  const N = size(opts, 1_000_000, 50_000);
  const PEER = size(opts, 200_000, 20_000);
  const runs = opts.quick ? 1 : 3;
  const fpp = 0.01;
  const srv = await startBenchRedis('bloom-rebuild');
  if (!srv) {
    s.note('redis-server not available: nothing measured');
    s.target('rebuild vs Redisson-style per-key adds', '>=', 10, null, 'x', 'redis-server not installed');
    return s.finish();
  }
  const redis = new Redis(srv.url);
  const auto = new Redis(srv.url, { enableAutoPipelining: true });
  const dir = mkdtempSync(join(tmpdir(), 'hashgate-bench-rebuild-'));
  try {
    const name = 'guard';
    const live = await RedisBloom.open({ redis, name, expectedItems: N, fpp });
    await live.tryInit();
    const rows = makeRows(N);
    const keys = rows.map(([a, b]) => a + b);
    const file = join(dir, 'export.txt');
    writeFileSync(file, rows.map(([a, b]) => `${a}|${b}\n`).join(''), { mode: 0o600 });
    const measure = `rebuild + swap, ${N}-key generation (fpp ${fpp})`;
    // each check runs its rebuild once and then reads the swapped-in generation
    const checked = (rebuild: () => Promise<unknown>) => async (): Promise<string | true> => {
      await redis.del(name);
      await rebuild();
      const r = await live.containsAll(keys);
      return r.every((b) => b === 1) || 'false negative after the swap';
    };
    const inMemory = () => rebuildRedisBloom({ redis, name, keys: [keys] });
    const fromFile = () => rebuildRedisBloom({ redis, name, keys: new ExportFileKeys({ inputs: [file] }) });
    const inRedis = () => rebuildRedisBloom({ redis, name, keys: [keys], local: false });
    await s.sample({
      name: measure, impl: 'hashgate rebuildRedisBloom (built in memory, uploaded)', runs, warmup: 0, unit: 'keys/s', check: checked(inMemory),
      fn: async () => (await inMemory()).keys,
    });
    await s.sample({
      name: measure, impl: 'hashgate rebuildRedisBloom from the export file', runs, warmup: 0, unit: 'keys/s', check: checked(fromFile),
      fn: async () => (await fromFile()).keys,
    });
    await s.sample({
      name: measure, impl: 'hashgate rebuildRedisBloom (scripted SETBITs in Redis)', runs: 1, warmup: 0, unit: 'keys/s', check: checked(inRedis),
      fn: async () => (await inRedis()).keys,
    });

    // peer: Redisson's add, one script per key, 256 in flight, into a temp filter; then RENAME
    const k = live.hashIterations;
    const m = live.size;
    const scratch = Buffer.allocUnsafe(4096);
    const idx = new Uint32Array(k);
    const sha = String(await redis.script('LOAD', PER_KEY_ADD));
    const temp = `${name}:tmp`;
    const tempConf = redissonConfigKey(temp);
    const peerKeys = keys.slice(0, PEER);
    await s.sample({
      name: measure, impl: `Redisson-style: one add script per key, 256 in flight, then RENAME (${PEER} keys)`, role: 'peer', runs: 1, warmup: 0, unit: 'keys/s',
      fn: async () => {
        await redis.del(temp);
        await redis.hset(tempConf, 'size', String(m), 'hashIterations', String(k));
        let next = 0;
        await Promise.all(
          Array.from({ length: 256 }, async () => {
            while (next < PEER) {
              redissonKeyIndexes(peerKeys[next++]!, scratch, k, m, idx, 0);
              await auto.evalsha(sha, 2, tempConf, temp, String(m), String(k), ...Array.from(idx, String));
            }
          }),
        );
        await redis.multi().rename(temp, `${name}:peer`).rename(tempConf, redissonConfigKey(`${name}:peer`)).exec();
        return PEER;
      },
    });
    const ratio = s.ratio(measure, 'hashgate rebuildRedisBloom (built in memory, uploaded)', `Redisson-style: one add script per key, 256 in flight, then RENAME (${PEER} keys)`);
    s.target('rebuild vs Redisson-style per-key adds', '>=', 10, ratio, 'x');
    s.note(`filter: size ${m} bits (${(m / 8 / 1024 / 1024).toFixed(2)} MiB), k=${k}. Load average at the end: ${loadavg().map((x) => x.toFixed(1)).join(' ')} (2-core machine shared with other work)`);
  } finally {
    redis.disconnect();
    auto.disconnect();
    rmSync(dir, { recursive: true, force: true });
    await srv.stop();
  }
  return s.finish();
}
