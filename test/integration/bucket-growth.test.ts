// Compact buckets that split as they fill, on real redis-servers with a small set-max-intset-entries
// (so a few thousand keys make them split): exact answers against a model, no sub-bucket past the
// limit, a window written by the old fixed layout taken over, two writers at once, the loader,
// memory per key with no sizing options, health against a lowered limit, and the purge report.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import fc from 'fast-check';
import { HashGate } from 'hashgate';
import { Registry } from 'prom-client';
import { requireRedisOrSkip, scardSum, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { encodeKeys } from '../helpers/layout.js';
import { MAX_SUB_BUCKETS, TABLE_LUA, decimalLow20, decodeTableState, putLow20, subBucketOf, tableStateKey } from '../../src/dedup/growth.js';

const has = requireRedisOrSkip('bucket growth');
const CLI = resolve(import.meta.dirname, '../../dist/src/cli/main.js');
const LIMIT = 64;

/** Every set of the window: its encoding and size. */
async function sets(r: Redis, pattern: string): Promise<Array<{ key: string; encoding: string; size: number }>> {
  const out: Array<{ key: string; encoding: string; size: number }> = [];
  let cursor = '0';
  do {
    const [c, keys] = await r.scan(cursor, 'MATCH', pattern, 'COUNT', 1000, 'TYPE', 'set');
    cursor = c;
    for (const key of keys) out.push({ key, encoding: String(await r.object('ENCODING', key)), size: await r.scard(key) });
  } while (cursor !== '0');
  return out;
}

const ones = (a: ArrayLike<number>): number => Array.from(a).reduce((x, y) => x + y, 0);

/** Members of the window's sets that are not in the sub-bucket the documented rule gives them (throws when there are none to check). */
async function misplaced(r: Redis, pattern: string): Promise<number> {
  let bad = 0;
  let checked = 0;
  for (const { key } of await sets(r, pattern)) {
    const cut = key.indexOf(':{');
    const base = cut < 0 ? key : key.slice(0, cut);
    const s = cut < 0 ? 0 : Number(key.slice(key.lastIndexOf(':') + 1));
    const n = decodeTableState(await r.get(tableStateKey(base)))?.subBuckets ?? 1;
    for (const m of await r.smembers(key)) {
      checked++;
      if (subBucketOf(decimalLow20(m), n) !== s) bad++;
    }
  }
  if (checked === 0) throw new Error(`no members under ${pattern}`);
  return bad;
}

describe.skipIf(!has)('compact buckets split as they fill', () => {
  let srv: RedisServer;
  let r: Redis;
  let dir: string;
  let n = 0;
  beforeAll(async () => {
    srv = await startRedis({ args: ['--set-max-intset-entries', String(LIMIT)] });
    r = new Redis(srv.url);
    dir = mkdtempSync(join(tmpdir(), 'hg-growth-'));
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const open = (dedup: Record<string, unknown>, url = srv.url) =>
    HashGate.open({ threads: 0, redis: url, dedup: { journalDir: join(dir, `j${n++}`), replayIntervalMs: 0, cacheMaxEntries: 0, ...dedup } });

  it('answers exactly like a set, whatever the call shape, while no sub-bucket passes the intset limit', async () => {
    const pool = Array.from({ length: 6000 }, (_, i) => `用户${i}|${110101199001010000 + i}`);
    let round = 0;
    let most = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ at: fc.nat(5999), len: fc.integer({ min: 1, max: 700 }), retry: fc.boolean() }), { minLength: 5, maxLength: 25 }),
        async (calls) => {
          const window = `p${round++}`;
          const gate = await open({ buckets: 2, prefix: 'prop', window: () => window });
          const model = new Set<string>();
          try {
            for (const [c, { at, len, retry }] of calls.entries()) {
              const keys = Array.from({ length: len }, (_, j) => pool[(at + j * 7) % pool.length]!);
              const want = keys.map((k) => {
                const fresh = !model.has(k);
                model.add(k);
                return fresh ? 1 : 0;
              });
              const got = Array.from(await gate.firstSeen(keys, retry ? { requestId: `${window}-${c}` } : undefined));
              expect(got).toEqual(want);
            }
            const st = await gate.dedupStats(window);
            expect(st.exact).toBe(model.size);
            expect(st.largestBucket!).toBeLessThanOrEqual(LIMIT);
            const all = await sets(r, `prop:${window}:c:*`);
            expect(all.every((s) => s.encoding === 'intset' && s.size <= LIMIT)).toBe(true);
            expect(all.length).toBeLessThanOrEqual(st.subBuckets!);
            expect(await misplaced(r, `prop:${window}:c:*`)).toBe(0);
            most = Math.max(most, st.subBuckets!);
          } finally {
            await gate.close();
          }
        },
      ),
      { numRuns: 12, seed: 20261201 },
    );
    expect(most).toBeGreaterThan(100); // the runs did split the two buckets many times
  }, 240_000);

  it('the scripts place a member in the sub-bucket the documented rule gives (the Java reader uses it too)', async () => {
    const edges = [0n, 1n, -1n, 2n ** 63n - 1n, -(2n ** 63n), 10n ** 15n, -(10n ** 15n), 999_999_999_999_999n, 2n ** 53n + 1n];
    // place() from the 3-byte lows entries the service sends (putLow20) gives the same sub-bucket
    const placed = `local alpha = 1\n${TABLE_LUA}\nlocal lows = ARGV[1]\nlocal out = {}\nfor i = 2, #ARGV do\n  local n = tonumber(ARGV[i])\n  local k = place('b', 'p', n, pow2le(n), low_at(lows, i - 1))\n  if k == 'b' then out[#out + 1] = 0 else out[#out + 1] = tonumber(string.sub(k, 2)) end\nend\nreturn out`;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.oneof(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.constantFrom(...edges)), fc.integer({ min: 1, max: MAX_SUB_BUCKETS })), { minLength: 1, maxLength: 200 }),
        async (cases) => {
          const lows = Buffer.alloc(3 * cases.length);
          cases.forEach(([m], i) => putLow20(lows, 3 * i, decimalLow20(m.toString())));
          const got = (await r.eval(placed, 0, lows, ...cases.map(([, n]) => String(n)))) as number[];
          expect(got).toEqual(cases.map(([m, n]) => subBucketOf(Number(BigInt.asUintN(64, m) & 0xfffffn), n)));
        },
      ),
      { numRuns: 200, seed: 9 },
    );
    // the bit a split reads (which half of a sub-bucket a member moves to) agrees with the rule too
    const bits = `local alpha = 1\n${TABLE_LUA}\nlocal out = {}\nfor i = 1, #ARGV, 2 do\n  local l2 = tonumber(ARGV[i + 1])\n  out[#out + 1] = bit_of(ARGV[i], l2, digits_for(l2))\nend\nreturn out`;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.oneof(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.constantFrom(...edges)), fc.integer({ min: 0, max: 19 })), { minLength: 1, maxLength: 200 }),
        async (cases) => {
          const args = cases.flatMap(([m, j]) => [m.toString(), String(2 ** j)]);
          const got = (await r.eval(bits, 0, ...args)) as number[];
          const want = cases.map(([m, j]) => Number((BigInt.asUintN(64, m) >> BigInt(j)) & 1n));
          expect(got).toEqual(want);
        },
      ),
      { numRuns: 200, seed: 11 },
    );
  });

  it('a retried requestId call gets its original answers after the buckets split in between', async () => {
    const gate = await open({ buckets: 1, prefix: 'rq', window: () => '2030' });
    try {
      const keys = Array.from({ length: 300 }, (_, i) => `rq-${i}`);
      expect(ones(await gate.firstSeen(keys, { requestId: 'once' }))).toBe(300);
      const before = (await gate.dedupStats('2030')).subBuckets!;
      await gate.firstSeen(Array.from({ length: 3000 }, (_, i) => `filler-${i}`));
      expect((await gate.dedupStats('2030')).subBuckets!).toBeGreaterThan(before * 4);
      expect(ones(await gate.firstSeen(keys, { requestId: 'once' }))).toBe(300);
      expect(ones(await gate.firstSeen(keys))).toBe(0);
    } finally {
      await gate.close();
    }
  });

  it('takes over a window the fixed layout wrote with buckets past the limit: same answers, back to intsets', async () => {
    // the old writers: member = digest bytes 0..7, bucket = bytes 8..15 mod the recorded count, plain SADD
    const buckets = 4;
    const old = Array.from({ length: 2000 }, (_, i) => `old-${i}`);
    const enc = encodeKeys(old, { layout: 'compact', prefix: 'legacy', buckets });
    await r.hset('legacy:2030:meta', 'compact.buckets', String(buckets));
    const p = r.pipeline();
    for (let i = 0; i < old.length; i++) p.sadd(`legacy:2030:c:${enc.buckets[i]!}`, enc.members[i] as string);
    await p.exec();
    expect((await sets(r, 'legacy:2030:*')).every((s) => s.encoding === 'hashtable')).toBe(true);

    const gate = await open({ prefix: 'legacy', window: () => '2030' });
    try {
      expect(ones(await gate.firstSeen(old.slice(0, 1000)))).toBe(0);
      const fresh = Array.from({ length: 2000 }, (_, i) => `new-${i}`);
      for (let o = 0; o < fresh.length; o += 100) expect(ones(await gate.firstSeen(fresh.slice(o, o + 100)))).toBe(100);
      expect(ones(await gate.firstSeen([...old, ...fresh]))).toBe(0);
      const st = await gate.dedupStats('2030');
      expect(st.buckets).toBe(buckets);
      expect(st.exact).toBe(4000);
      const all = await sets(r, 'legacy:2030:*');
      expect(all.every((s) => s.encoding === 'intset' && s.size <= LIMIT)).toBe(true);
    } finally {
      await gate.close();
    }
  });

  it('two writers on their own connections, the same keys at once: each key is first seen exactly once', async () => {
    const a = await open({ buckets: 2, prefix: 'two', window: () => '2030' });
    const b = await open({ buckets: 2, prefix: 'two', window: () => '2030' });
    try {
      const keys = Array.from({ length: 8000 }, (_, i) => `both-${i}`);
      const calls: Array<Promise<Uint8Array>> = [];
      for (let o = 0; o < keys.length; o += 250) {
        calls.push(a.firstSeen(keys.slice(o, o + 250)));
        calls.push(b.firstSeen(keys.slice(o, o + 250).reverse()));
      }
      const res = await Promise.all(calls);
      const first = new Map<string, number>();
      res.forEach((ans, c) => {
        const slice = keys.slice((c >> 1) * 250, (c >> 1) * 250 + 250);
        if (c % 2 === 1) slice.reverse();
        slice.forEach((k, i) => first.set(k, (first.get(k) ?? 0) + ans[i]!));
      });
      expect(first.size).toBe(keys.length);
      expect([...first.values()].every((v) => v === 1)).toBe(true);
      expect(await scardSum(r, 'two:2030:c:*')).toBe(keys.length);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('hashgate load splits buckets as it loads: exact new members, every key then seen, all intsets', () => {
    const file = join(dir, 'export.txt');
    const rows = Array.from({ length: 30_000 }, (_, i) => `张${i % 20_000}|${220101199001010000 + (i % 20_000)}`);
    writeFileSync(file, `${rows.join('\n')}\n`);
    const run = spawnSync(process.execPath, [CLI, 'load', file, '--redis', srv.url, '--prefix', 'ld', '--window', '2030', '--buckets', '8', '--checkpoint', join(dir, 'load.cp'), '--json', '--quiet'], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout.trim())).toMatchObject({ rows: 30_000, failed: 0, newMembers: 20_000 });
    return (async () => {
      const all = await sets(r, 'ld:2030:*');
      expect(all.length).toBeGreaterThan(8 * 8);
      expect(all.every((s) => s.encoding === 'intset' && s.size <= LIMIT)).toBe(true);
      expect(await misplaced(r, 'ld:2030:c:*')).toBe(0);
      const gate = await open({ prefix: 'ld', window: () => '2030' });
      try {
        expect(ones(await gate.firstSeen(rows.slice(0, 20_000).map((l) => l.replace('|', ''))))).toBe(0);
      } finally {
        await gate.close();
      }
    })();
  });

  it('health turns degraded when the intset limit is lowered below what the window holds; the metric follows', async () => {
    const registry = new Registry();
    const gate = await HashGate.open({ threads: 0, redis: srv.url, metrics: { registry }, dedup: { buckets: 4, prefix: 'hl', window: () => '2031', journalDir: join(dir, 'hl'), replayIntervalMs: 0 } });
    try {
      for (let o = 0; o < 8000; o += 2000) await gate.firstSeen(Array.from({ length: 2000 }, (_, i) => `hl-${o + i}`));
      const h = await gate.health();
      expect(h.tiers.dedup.status).toBe('up');
      expect(h.tiers.dedup.bucketFill).toMatchObject({ window: '2031', buckets: 4, limit: LIMIT });
      expect(h.tiers.dedup.bucketFill!.ratio).toBeLessThan(0.9);
      const st = await gate.dedupStats('2031');
      // the prediction (from one PFCOUNT and the split rule) is near the real largest sub-bucket
      expect(Math.abs(h.tiers.dedup.bucketFill!.predictedLargest - st.largestBucket!)).toBeLessThan(15);
      expect(Math.abs(h.tiers.dedup.bucketFill!.subBuckets - st.subBuckets!)).toBeLessThan(st.subBuckets! / 10);
      const text1 = await registry.metrics();
      await new Promise((res) => setTimeout(res, 100)); // the first scrape starts the background reading
      const text2 = await registry.metrics();
      const line = `${text1}\n${text2}`.split('\n').find((l) => l.startsWith('hashgate_dedup_bucket_fill_ratio{'));
      expect(Number(line!.split(' ').pop())).toBeCloseTo(h.tiers.dedup.bucketFill!.ratio, 1);
    } finally {
      await gate.close();
    }
    await r.config('SET', 'set-max-intset-entries', '16');
    const later = await open({ buckets: 4, prefix: 'hl', window: () => '2031' });
    try {
      const h = await later.health();
      expect(h.tiers.dedup.status).toBe('degraded');
      expect(h.tiers.dedup.reason).toMatch(/largest bucket expected at \d+ of 16/);
      // it splits further as it writes, to the new limit's share
      const before = (await later.dedupStats('2031')).subBuckets!;
      await later.firstSeen(Array.from({ length: 2000 }, (_, i) => `hl-more-${i}`));
      expect((await later.dedupStats('2031')).subBuckets!).toBeGreaterThan(before + 300);
    } finally {
      await later.close();
      await r.config('SET', 'set-max-intset-entries', String(LIMIT));
    }
  });

  it('`hashgate stats --purge --json` counts sub-buckets and reports the memory the purge freed', async () => {
    const gate = await open({ buckets: 64, prefix: 'hg:dedup', window: () => '2032' });
    for (let o = 0; o < 100_000; o += 10_000) await gate.firstSeen(Array.from({ length: 10_000 }, (_, i) => `purge-${o + i}`));
    const subs = (await gate.dedupStats('2032')).subBuckets!;
    await gate.close();
    const st = spawnSync(process.execPath, [CLI, 'stats', '--redis', srv.url, '--window', '2032', '--json'], { encoding: 'utf8' });
    expect(JSON.parse(st.stdout.trim())).toMatchObject({ exact: 100_000, subBuckets: subs, bucketLimit: LIMIT });
    const res = spawnSync(process.execPath, [CLI, 'stats', '--redis', srv.url, '--window', '2032', '--purge', '--json'], { encoding: 'utf8' });
    expect(res.status, res.stderr).toBe(0);
    const out = JSON.parse(res.stdout.trim()) as Record<string, number>;
    // sub-buckets, their state keys (one per bucket), the HyperLogLog and the meta hash
    expect(out.deletedKeys).toBe(subs + 64 + 2);
    expect(out.usedMemoryBefore! - out.usedMemoryAfter!).toBeGreaterThan(500_000);
    expect(typeof out.rssAfter).toBe('number');
  });
});

describe.skipIf(!has)('memory per key with no sizing options (Redis defaults)', () => {
  let srv: RedisServer;
  let dir: string;
  beforeAll(async () => {
    srv = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'hg-growth-mem-'));
  });
  afterAll(async () => {
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('1e5 and then 1e6 keys stay at <= 16 B a key of used_memory, every set an intset', async () => {
    const r = new Redis(srv.url);
    const used = async (): Promise<number> => Number(/^used_memory:(\d+)/m.exec(await r.info('memory'))![1]);
    const gate = await HashGate.open({ threads: 0, redis: srv.url, dedup: { hll: false, cacheMaxEntries: 0, journalDir: join(dir, 'j'), window: () => '2030', replayIntervalMs: 0 } });
    try {
      const m0 = await used();
      let done = 0;
      for (const target of [100_000, 1_000_000]) {
        for (; done < target; done += 10_000) await gate.firstSeen(Array.from({ length: 10_000 }, (_, i) => `mem-${done + i}`));
        const perKey = ((await used()) - m0) / target;
        expect(perKey).toBeLessThanOrEqual(16);
        const st = await gate.dedupStats('2030');
        expect(st.exact).toBe(target);
        expect(st.largestBucket!).toBeLessThanOrEqual(st.bucketLimit!);
      }
      const enc = await sets(r, 'hg:dedup:2030:*');
      expect(enc.every((s) => s.encoding === 'intset')).toBe(true);
    } finally {
      await gate.close();
      r.disconnect();
    }
  }, 240_000);
});
