// Compact tables that split as they fill, on real redis-servers with a small set-max-intset-entries
// (so a few thousand keys make them split): exact answers against a model, no sub-bucket past the
// limit, every member where the documented rule puts it, writers whose cached table counts went
// stale, two writers at once, connections cut while tables split, the loader sizing a window
// before it writes, a window of the older layout refused, memory per key with no sizing options,
// health against a lowered limit, and the purge report.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import fc from 'fast-check';
import { ErrorCodes, HashGate } from 'hashgate';
import { Registry } from 'prom-client';
import { requireRedisOrSkip, scardSum, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { compactSets, misplaced } from '../helpers/layout.js';
import { startProxy } from '../helpers/tcp-proxy.js';
import { PipeRouter } from '../../src/redis/pipes.js';
import { SEALS, SPLIT, TableGrowth, flushKeysFor, intsetLimitOf } from '../../src/dedup/tables.js';
import { MemberStatus, RedisWriter, type MemberSource } from '../../src/dedup/redis-writer.js';
import { intsetPayload, lowerBound, readIntsetDump } from '../../src/redis/dump.js';
import { MAX_SUB_BUCKETS, PLACE_LUA, addressOf, crossings, depthOf, putAddress, splitBoundary, splitLoad, subBucketOf, targetSubBuckets } from '../../src/dedup/growth.js';

const has = requireRedisOrSkip('bucket growth');
const CLI = resolve(import.meta.dirname, '../../dist/src/cli/main.js');
const LIMIT = 64;

const ones = (a: ArrayLike<number>): number => Array.from(a).reduce((x, y) => x + y, 0);

/** One field of a command's INFO commandstats line (cmdstat_sadd:calls=3,usec=1,...), 0 when it never ran. */
const commandStat = async (r: Redis, cmd: string, field: string): Promise<number> => {
  const line = (await r.info('commandstats')).split('\n').find((l) => l.startsWith(`cmdstat_${cmd}:`)) ?? '';
  return Number(line.slice(line.indexOf(':') + 1).split(',').find((kv) => kv.startsWith(`${field}=`))?.split('=')[1] ?? 0);
};

/**
 * Members of the compact window under `base`, for a writer of our own: digest bytes 0..7 (the
 * member) pseudo-random from `seed`, member j in table j % tables.
 */
function memberSource(base: string, count: number, seed: number, tables = 1): MemberSource {
  const bytes = new Uint8Array(count * 16);
  let x = seed;
  for (let i = 0; i < bytes.length; i++) bytes[i] = (x = (Math.imul(x, 1_103_515_245) + 12_345) >>> 0) >>> 24;
  const offs = new Uint32Array(count);
  const bucket = new Uint32Array(count);
  for (let j = 0; j < count; j++) {
    offs[j] = j * 16;
    bucket[j] = j % tables;
  }
  return { base, layout: 'compact', buckets: tables, count, bucket, dv: new DataView(bytes.buffer), offs };
}

describe.skipIf(!has)('compact tables split as they fill', () => {
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

  /** The pipes, tables and writer a store builds, on the test server, and their close. */
  const ownWriter = () => {
    const client = new Redis(srv.url);
    const router = new PipeRouter(client, { connectTimeoutMs: 2000, maxInFlight: 8, commandTimeoutMs: 5000 });
    const growth = new TableGrowth(router);
    const writer = new RedisWriter(router, growth, 2000, () => intsetLimitOf(client));
    const close = async (): Promise<void> => {
      await growth.close();
      router.close();
      client.disconnect();
    };
    return { router, growth, writer, close };
  };

  it('answers exactly like a set, whatever the call shape, while no sub-bucket passes the intset limit', async () => {
    const pool = Array.from({ length: 6000 }, (_, i) => `用户${i}|${110101199001010000 + i}`);
    let round = 0;
    let most = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ at: fc.nat(5999), len: fc.integer({ min: 1, max: 700 }), retry: fc.boolean(), concurrent: fc.boolean() }), { minLength: 5, maxLength: 25 }),
        async (calls) => {
          const window = `p${round++}`;
          const gate = await open({ buckets: 2, prefix: 'prop', window: () => window });
          const model = new Set<string>();
          try {
            const flying: Array<Promise<void>> = [];
            for (const [c, { at, len, retry, concurrent }] of calls.entries()) {
              const keys = Array.from({ length: len }, (_, j) => pool[(at + j * 7) % pool.length]!);
              const want = keys.map((k) => {
                const fresh = !model.has(k);
                model.add(k);
                return fresh ? 1 : 0;
              });
              // calls made without waiting for the ones before still answer in call order
              const p = gate.firstSeen(keys, retry ? { requestId: `${window}-${c}` } : undefined).then((got) => expect(Array.from(got)).toEqual(want));
              if (concurrent) flying.push(p);
              else {
                await Promise.all(flying.splice(0));
                await p;
              }
            }
            await Promise.all(flying);
            const st = await gate.dedupStats(window);
            expect(st.exact).toBe(model.size);
            expect(st.largestBucket!).toBeLessThanOrEqual(LIMIT);
            // closed: no split of the gate's own still in flight while the sets are read
            await gate.close();
            const all = await compactSets(r, 'prop', window);
            expect(all.every((s) => s.encoding === 'intset' && s.size <= LIMIT)).toBe(true);
            let live = 0;
            for (const t of [0, 1]) live += Number((await r.get(`prop:${window}:c{${t}}n`)) ?? 1);
            expect(all.length).toBeLessThanOrEqual(live);
            expect(await misplaced(r, 'prop', window)).toBe(0);
            most = Math.max(most, st.subBuckets!);
          } finally {
            await gate.close();
          }
        },
      ),
      { numRuns: 12, seed: 20261201 },
    );
    expect(most).toBeGreaterThan(100); // the runs did split the two tables many times
  }, 240_000);

  it("Lua places a member in the sub-bucket growth.ts's rule gives (the Java reader uses it too)", async () => {
    const edges = [0n, 1n, -1n, 2n ** 63n - 1n, -(2n ** 63n), 10n ** 15n, -(10n ** 15n), 2n ** 62n, -(2n ** 62n), 2n ** 53n + 1n];
    const placed = `${PLACE_LUA}\nlocal addrs = ARGV[1]\nlocal out = {}\nfor i = 2, #ARGV do\n  out[#out + 1] = name_of('', tonumber(ARGV[i]), addr_at(addrs, i - 1))\nend\nreturn out`;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.oneof(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.constantFrom(...edges)), fc.integer({ min: 1, max: MAX_SUB_BUCKETS })), { minLength: 1, maxLength: 200 }),
        async (cases) => {
          const addrs = Buffer.alloc(3 * cases.length);
          cases.forEach(([m], i) => putAddress(addrs, 3 * i, addressOf(m)));
          const got = (await r.eval(placed, 0, addrs, ...cases.map(([, c]) => String(c)))) as string[];
          expect(got).toEqual(cases.map(([m, c]) => {
            const s = subBucketOf(addressOf(m), c);
            return `${s}.${c <= 1 ? 0 : depthOf(s, c)}`;
          }));
        },
      ),
      { numRuns: 200, seed: 9 },
    );
  });

  it('the address is the top bits of the member as unsigned, reversed, and a split cuts a sub-bucket at its boundary value', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.integer({ min: 1, max: 4096 }), (m, c) => {
        const u = BigInt.asUintN(64, m) ^ (1n << 63n);
        const r0 = addressOf(m);
        for (let i = 0; i < 20; i++) expect((r0 >> i) & 1).toBe(Number((u >> BigInt(63 - i)) & 1n));
        // splitting the sub-bucket that splits next sends the member to the upper half exactly when it is >= the boundary
        const l2 = 2 ** Math.floor(Math.log2(c));
        const p = c - l2;
        const d = Math.log2(l2);
        if (subBucketOf(r0, c) === p && depthOf(p, c) === d) {
          const after = subBucketOf(r0, c + 1);
          expect(after === p + l2).toBe(m >= splitBoundary(p, d));
          expect(after === p || after === p + l2).toBe(true);
        }
      }),
      { numRuns: 3000, seed: 3 },
    );
  });

  it('at every depth a table can reach, the split boundary is the least member that moves to the new half', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Math.log2(MAX_SUB_BUCKETS) - 1 }), fc.nat(), (d, r) => {
        const l2 = 2 ** d;
        const p = r % l2;
        const n = l2 + p;
        const b = splitBoundary(p, d);
        // the boundary and the member below it are both in sub-bucket p; only the boundary moves
        expect(subBucketOf(addressOf(b), n)).toBe(p);
        expect(subBucketOf(addressOf(b), n + 1)).toBe(p + l2);
        expect(subBucketOf(addressOf(b - 1n), n)).toBe(p);
        expect(subBucketOf(addressOf(b - 1n), n + 1)).toBe(p);
      }),
      { numRuns: 2000, seed: 5 },
    );
  });

  it('the window count decides when each table splits: a few tables at a time, and crossings() names exactly those', () => {
    const T = 1024;
    const alpha = 153;
    let prev = Array.from({ length: T }, (_, t) => targetSubBuckets(t, 0, T, alpha));
    let last = 0;
    for (let K = 9973; K <= 3_000_000; K += 9973 + (K % 7)) {
      const next = prev.map((_, t) => targetSubBuckets(t, K, T, alpha));
      const grew = new Map<number, number>();
      next.forEach((v, t) => v !== prev[t] && grew.set(t, v));
      // about 10k members move the schedule of about 10k / alpha tables, never all at once
      expect(grew.size).toBeLessThanOrEqual(Math.ceil((K - last) / alpha) + 2);
      next.forEach((v, t) => expect(v).toBeGreaterThanOrEqual(prev[t]!));
      const named = new Map<number, number>();
      crossings(last, K, T, alpha, (t, target) => named.set(t, target));
      expect(named).toEqual(grew);
      // every table averages about alpha members a sub-bucket
      const avg = next.reduce((a, v) => a + v, 0) / T;
      if (K > 10 * alpha * T) expect(Math.abs(K / T / avg - alpha) / alpha).toBeLessThan(0.05);
      prev = next;
      last = K;
    }
  });

  it("50 writers' unreported members, on top of a table's fullest sub-bucket before it splits, stay under the intset limit", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1 << 20 }), fc.integer({ min: 64, max: 8192 }), (T, limit) => {
        const alpha = splitLoad(limit);
        const every = flushKeysFor(T, alpha);
        expect(every).toBeGreaterThanOrEqual(256);
        expect(every).toBeLessThanOrEqual(1024);
        // below the floor a report is 256 members, as small windows always had
        if (every === 256) return;
        const fullest = 2 * alpha + 3 * Math.sqrt(2 * alpha);
        expect(fullest + (50 * every) / T).toBeLessThanOrEqual(limit);
      }),
      { numRuns: 2000, seed: 11 },
    );
    // the default window (1,024 tables, Redis's intset limit 512) reports every 1,024 members
    expect(flushKeysFor(1024, splitLoad(512))).toBe(1024);
  });

  it('a writer whose cached table counts went stale (another instance split the tables) still answers exactly', async () => {
    const a = await open({ buckets: 2, prefix: 'stale', window: () => '2030' });
    const b = await open({ buckets: 2, prefix: 'stale', window: () => '2030' });
    try {
      const keys = Array.from({ length: 6000 }, (_, i) => `stale-${i}`);
      // b reads the tables' counts while they have one sub-bucket
      expect(ones(await b.firstSeen(keys.slice(0, 10)))).toBe(10);
      // and has reported them to the window count (a report after a's writes would return the grown
      // count, and b would split, and so re-read, the tables in the background)
      await new Promise((res) => setTimeout(res, 200));
      // a splits them many times over
      for (let o = 10; o < 5000; o += 500) expect(ones(await a.firstSeen(keys.slice(o, Math.min(o + 500, 5000))))).toBe(Math.min(500, 5000 - o));
      const grown = (await a.dedupStats('2030')).subBuckets!;
      expect(grown).toBeGreaterThan(50);
      // b, still holding counts of 1: every old key seen, every new key new, nothing misplaced
      // single keys first: a big batch would pre-split its tables and so learn their counts from
      // the split script before sending anything
      await r.config('RESETSTAT');
      for (const k of [keys[0]!, keys[2500]!, keys[4999]!]) expect(ones(await b.firstSeen([k]))).toBe(0);
      expect(await commandStat(r, 'sadd', 'calls')).toBeGreaterThan(3); // a stale SADD was refused and sent again
      expect(ones(await b.firstSeen(keys.slice(0, 5000)))).toBe(0);
      expect(ones(await b.firstSeen(keys.slice(5000)))).toBe(1000);
      expect(await misplaced(r, 'stale', '2030')).toBe(0);
      expect((await b.dedupStats('2030')).exact).toBe(6000);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a split of a sub-bucket whose members arrive while it splits loses none (two writers, tiny tables)', async () => {
    const a = await open({ buckets: 1, prefix: 'race', window: () => '2030' });
    const b = await open({ buckets: 1, prefix: 'race', window: () => '2030' });
    try {
      const keys = Array.from({ length: 8000 }, (_, i) => `race-${i}`);
      const calls: Array<Promise<Uint8Array>> = [];
      for (let o = 0; o < keys.length; o += 100) calls.push((o / 100) % 2 === 0 ? a.firstSeen(keys.slice(o, o + 100)) : b.firstSeen(keys.slice(o, o + 100)));
      expect(ones((await Promise.all(calls)).flatMap((x) => Array.from(x)))).toBe(keys.length);
      expect(ones(await a.firstSeen(keys))).toBe(0);
      expect(await misplaced(r, 'race', '2030')).toBe(0);
      expect((await a.dedupStats('2030')).exact).toBe(keys.length);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("a writer holds a table's members while it splits that table itself: they go after the split, to the new sub-buckets (SLOWLOG order)", async () => {
    const { growth, writer, close } = ownWriter();
    const source = (count: number, seed: number): MemberSource => memberSource('hold:2030', count, seed);
    try {
      const first = source(20, 1);
      expect((await writer.addEach(first, new Uint8Array(20), new Uint8Array(20))).added).toBe(20);
      const wt = growth.window('hold:2030', 'compact', 1, LIMIT);
      expect(wt.n[0]).toBe(1);
      await r.config('SET', 'slowlog-log-slower-than', '0');
      await r.config('SET', 'slowlog-max-len', '10000');
      await r.slowlog('RESET');
      // the split sends its DUMP now; the batch's SADDs would have gone in the same tick
      const split = wt.splitTo(0, 2);
      // small enough that the writer would not split before it (a big batch waits for its tables' splits anyway)
      const second = source(3, 2);
      const answers = new Uint8Array(3);
      const status = new Uint8Array(3);
      const [res] = await Promise.all([writer.addEach(second, answers, status), split]);
      await r.config('SET', 'slowlog-log-slower-than', '10000');
      expect(res.error).toBeUndefined();
      expect(res.added).toBe(3);
      expect(Array.from(status).every((st) => st === MemberStatus.Answered)).toBe(true);
      expect(wt.n[0]).toBe(2);
      // SLOWLOG ids follow execution order: every SADD of the batch ran after the split script
      const log = (await r.slowlog('GET', 10000)) as Array<[number, number, number, string[]]>;
      const split1 = log.filter((e) => e[3][0]?.toUpperCase() === 'EVALSHA').map((e) => e[0]);
      const sadds = log.filter((e) => e[3][0]?.toUpperCase() === 'SADD');
      expect(split1.length).toBe(1);
      expect(sadds.length).toBe(3);
      expect(sadds.every((e) => e[0] > split1[0]!)).toBe(true);
      expect(sadds.every((e) => /c\{0\}[01]\.1$/.test(e[3][1]!))).toBe(true);
      expect(await misplaced(r, 'hold', '2030')).toBe(0);
      expect((await r.scard('hold:2030:c{0}0.1')) + (await r.scard('hold:2030:c{0}1.1'))).toBe(23);
    } finally {
      await close();
    }
  });

  it('a split whose half is there already (restored by a writer that stopped before its seal) seals exactly, members added since included', async () => {
    const { growth, writer, close } = ownWriter();
    const source = (count: number, seed: number): MemberSource => memberSource('half:2030', count, seed);
    try {
      // fewer members than a sub-bucket averages: nothing splits on its own
      const first = source(12, 3);
      expect((await writer.addEach(first, new Uint8Array(12), new Uint8Array(12))).added).toBe(12);
      const src = 'half:2030:c{0}0.0';
      const d = readIntsetDump((await r.dumpBuffer(src))!)!;
      const b = splitBoundary(0, 0);
      const k = lowerBound(d, Number(BigInt.asIntN(32, b >> 32n)), Number(BigInt.asUintN(32, b)));
      expect(k).toBeGreaterThan(0);
      // another writer restored the lower half of that DUMP and stopped before its seal
      await r.restore('half:2030:c{0}0.1', 0, intsetPayload(d, 0, k));
      const later = source(6, 4);
      expect((await writer.addEach(later, new Uint8Array(6), new Uint8Array(6))).added).toBe(6);
      const wt = growth.window('half:2030', 'compact', 1, LIMIT);
      await r.config('RESETSTAT');
      await wt.splitTo(0, 2);
      expect(wt.n[0]).toBe(2);
      // the half there already refused this split's RESTORE; the seal found what the halves lacked
      expect(await commandStat(r, 'restore', 'failed_calls')).toBe(1);
      expect(await commandStat(r, 'sdiff', 'calls')).toBe(1);
      expect(await r.type(src)).toBe('string');
      expect((await r.scard('half:2030:c{0}0.1')) + (await r.scard('half:2030:c{0}1.1'))).toBe(18);
      expect(await misplaced(r, 'half', '2030')).toBe(0);
      for (const s of [first, later]) expect((await writer.addEach(s, new Uint8Array(s.count), new Uint8Array(s.count))).added).toBe(0);
    } finally {
      await close();
    }
  });

  it('a round seals its tables in SEALS calls, not one script call each; after SCRIPT FLUSH the next round loads it again; exact throughout', async () => {
    // 16-key calls into 64 tables: the splits come from the count reports, a dozen tables a round
    const T = 64;
    const gate = await open({ buckets: T, prefix: 'seals', window: () => '2030' });
    const splits = async (): Promise<number> => {
      let s = 0;
      for (let t = 0; t < T; t++) s += Number((await r.get(`seals:2030:c{${t}}n`)) ?? 1) - 1;
      return s;
    };
    try {
      let added = 0;
      let c = 0;
      for (const phase of [0, 1]) {
        if (phase === 1) {
          await r.script('FLUSH');
          expect(await r.script('EXISTS', SEALS.sha)).toEqual([0]);
        }
        const before = await splits();
        await r.config('RESETSTAT');
        for (const end = c + 400; c < end; c++) added += ones(await gate.firstSeen(Array.from({ length: 16 }, (_, i) => `seal-${c}-${i}`)));
        const st = await gate.dedupStats('2030');
        expect(st.exact).toBe(c * 16);
        const made = (await splits()) - before;
        expect(made).toBeGreaterThan(100);
        // a seal of its own for each table would be one EVALSHA a split
        expect(await commandStat(r, 'evalsha', 'calls')).toBeLessThan(made / 2);
        expect(await r.script('EXISTS', SEALS.sha)).toEqual([1]);
      }
      expect(added).toBe(c * 16);
      await gate.close();
      const all = await compactSets(r, 'seals', '2030');
      expect(all.every((s) => s.encoding === 'intset' && s.size <= LIMIT)).toBe(true);
      expect(await misplaced(r, 'seals', '2030')).toBe(0);
      expect(await scardSum(r, 'seals:2030:c{*')).toBe(c * 16);
    } finally {
      await gate.close();
    }
  });
  it('the split scripts are loaded with a window\'s first use, before any split', async () => {
    await r.script('FLUSH');
    const gate = await open({ buckets: 64, prefix: 'preload', window: () => '2030' });
    try {
      expect(Array.from(await gate.firstSeen(['one key']))).toEqual([1]);
      // sent on the control connection, beside the write: it may land just after the answer
      let loaded: unknown;
      for (let i = 0; i < 100; i++) {
        loaded = await r.script('EXISTS', SPLIT.sha, SEALS.sha);
        if (JSON.stringify(loaded) === '[1,1]') break;
        await new Promise((res) => setTimeout(res, 20));
      }
      expect(loaded).toEqual([1, 1]);
      expect(await r.keys('preload:2030:c{*}n')).toEqual([]); // no table split
    } finally {
      await gate.close();
    }
  });
  it("members refused by a tombstone of the writer's own split go again without reading the count: exact, few count reads", async () => {
    // Splits this writer starts itself while one of its big writes is queued in Redis: their
    // DUMPs and seals go on the control connection and overtake the write's SADDs, which then
    // meet tombstones (WRONGTYPE). The writer knows the counts its own splits left, so it sends
    // those members again at once; it reads a table's count only when a refusal came back before
    // the reply of the seal that caused it (hundreds of refusals, a few reads at most).
    const { router, growth, writer, close } = ownWriter();
    const T = 16;
    try {
      // Whether the splits overtake the write depends on how Redis interleaves two connections;
      // on a busy machine it can take every SADD first. Each try is checked in full, on a window
      // of its own, until one met tombstones (a run with none did not test the resend).
      let refused = 0;
      for (let a = 0; a < 5 && refused === 0; a++) {
        const base = `own${a}:2030`;
        const source = (count: number, seed: number): MemberSource => memberSource(base, count, seed, T);
        expect((await writer.addEach(source(T, 1), new Uint8Array(T), new Uint8Array(T))).added).toBe(T);
        const wt = growth.window(base, 'compact', T, LIMIT);
        const big = source(20_000, 2);
        const answers = new Uint8Array(big.count);
        const status = new Uint8Array(big.count);
        await r.config('RESETSTAT');
        const write = writer.addEach(big, answers, status);
        // the write splits its tables to the schedule first, then sends: split further once it is on the wire
        while (router.main().lane.inFlight === 0) await new Promise((res) => setImmediate(res));
        const splits = Array.from({ length: T }, (_, t) => wt.splitTo(t, wt.n[t]! + 4));
        const [res] = await Promise.all([write, ...splits]);
        expect(res.error).toBeUndefined();
        expect(res.added).toBe(big.count);
        expect(Array.from(status).every((st) => st === MemberStatus.Answered)).toBe(true);
        refused = await commandStat(r, 'sadd', 'failed_calls');
        // reading each refused member's table again would be a read per refusal
        expect(await commandStat(r, 'mget', 'calls')).toBeLessThanOrEqual(Math.min(T, Math.max(2, refused / 4)));
        expect(await misplaced(r, `own${a}`, '2030')).toBe(0);
        expect(await scardSum(r, `${base}:c{*`)).toBe(big.count + T);
      }
      expect(refused).toBeGreaterThan(0); // refused by tombstones, then sent again
    } finally {
      await close();
    }
  });

  it('a key of another type at a sub-bucket name: the writer gives up after its rounds of re-reading the count, and answers nothing', async () => {
    const { writer, close } = ownWriter();
    const bytes = new Uint8Array(32).map((_, i) => i + 1);
    const src: MemberSource = { base: 'foreign:2030', layout: 'compact', buckets: 1, count: 2, bucket: new Uint32Array(2), dv: new DataView(bytes.buffer), offs: Uint32Array.of(0, 16) };
    try {
      // the only sub-bucket of a table that never split; a hash there refuses every SADD
      await r.hset('foreign:2030:c{0}0.0', 'f', 'v');
      await r.config('RESETSTAT');
      const status = new Uint8Array(2);
      const res = await writer.addEach(src, new Uint8Array(2), status);
      expect(String(res.error)).toMatch(/kept answering WRONGTYPE for 2 members after \d+ rounds/);
      expect(res.added).toBe(0);
      expect(res.unknown).toBe(false);
      expect([...status]).toEqual([MemberStatus.NotApplied, MemberStatus.NotApplied]);
      // sent once, then again each round, never accepted
      const sent = await commandStat(r, 'sadd', 'calls');
      expect(sent).toBeGreaterThan(2);
      expect(await commandStat(r, 'sadd', 'failed_calls')).toBe(sent);
      expect(await r.type('foreign:2030:c{0}0.0')).toBe('hash');
    } finally {
      await close();
    }
  });

  it('a retried requestId call gets its original answers after the tables split in between', async () => {
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

  it('refuses a window an older compact layout wrote, naming it, instead of misreading it', async () => {
    await r.hset('legacy:2030:meta', 'compact.buckets', '4');
    await r.sadd('legacy:2030:c:0', '123', '456');
    const gate = await open({ prefix: 'legacy', window: () => '2030', onStoreError: 'fail-closed' });
    try {
      const err = await gate.firstSeen(['x']).then(() => undefined, (e: unknown) => e as { code: string; message: string });
      expect(err?.code).toBe('HG_ERR_STORE');
      const st = await gate.dedupStats('2030').then(() => undefined, (e: unknown) => e as { code: string; message: string });
      expect(st?.code).toBe('HG_ERR_STORE');
      expect(st?.message).toMatch(/window 2030 of prefix legacy was written by an older compact layout/);
    } finally {
      await gate.close();
    }
  });

  // 500-key calls into 4 tables split each table before they write (prepare, one table at a
  // time); 16-key calls into 16 tables leave the splits to the count reports (rounds)
  it.each([
    { buckets: 4, calls: 40, size: 500 },
    { buckets: 16, calls: 1000, size: 16 },
  ])('connections cut again and again while the tables split ($buckets tables, $size-key calls): every key first seen exactly once, nothing misplaced', async ({ buckets, calls, size }) => {
    const proxy = await startProxy(srv.port);
    const prefix = `cut${buckets}`;
    const gate = await open({ buckets, prefix, window: () => '2030', onStoreError: 'fail-closed', commandTimeoutMs: 1000 }, proxy.url);
    let cuts = 0;
    let stop = false;
    // a cut every 15-45 ms, and a quiet spell after every eighth: on a busy machine a call that
    // must reconnect, read its tables and wait for a split can take longer than any gap between
    // cuts, and without a spell to finish in it failed every attempt (a test of cuts, not of speed)
    const cutter = (async () => {
      while (!stop) {
        await new Promise((res) => setTimeout(res, cuts % 8 === 7 ? 300 : 15 + (cuts % 4) * 10));
        await proxy.cut();
        cuts++;
      }
    })();
    // a call that failed (a typed rejection: fail-closed) is retried, with its requestId when it
    // has one: its answers are then the ones Redis gave the first time
    const attempt = async (keys: string[], requestId?: string): Promise<Uint8Array> => {
      for (let a = 0; ; a++) {
        try {
          return await gate.firstSeen(keys, requestId === undefined ? undefined : { requestId });
        } catch (err) {
          expect([ErrorCodes.STORE_OUTCOME_UNKNOWN, ErrorCodes.STORE_UNAVAILABLE]).toContain((err as { code?: string }).code);
          expect(a).toBeLessThan(200);
          await new Promise((res) => setTimeout(res, 20));
        }
      }
    };
    try {
      const keysOf = (c: number): string[] => Array.from({ length: size }, (_, i) => `cut-${c}-${i}`);
      let added = 0;
      for (let c = 0; c < calls; c++) added += ones(await attempt(keysOf(c), `${prefix}-${c}`));
      stop = true;
      await cutter;
      expect(cuts).toBeGreaterThan(5);
      expect(added).toBe(calls * size);
      // the window split many times over: thousands of members a table, 64 a set at most
      expect(Number(await r.get(`${prefix}:2030:c{0}n`))).toBeGreaterThan(calls * size / buckets / 64);
      for (let c = 0; c < calls; c++) expect(ones(await attempt(keysOf(c)))).toBe(0);
      expect(await misplaced(r, prefix, '2030')).toBe(0);
      expect(await scardSum(r, `${prefix}:2030:c{*`)).toBe(calls * size);
    } finally {
      stop = true;
      await cutter;
      await gate.close();
      await proxy.close();
    }
  });

  it('two writers on their own connections, the same keys at once: each key is first seen exactly once', async () => {
    const a = await open({ buckets: 2, prefix: 'two', window: () => '2030' });
    const b = await open({ buckets: 2, prefix: 'two', window: () => '2030' });
    const keys = Array.from({ length: 8000 }, (_, i) => `both-${i}`);
    try {
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
    } finally {
      await a.close();
      await b.close();
    }
    expect(await scardSum(r, 'two:2030:c{*')).toBe(keys.length);
    expect(await misplaced(r, 'two', '2030')).toBe(0);
  });

  it('splits without DUMP or RESTORE where Redis refuses them (renamed away; denied by an ACL): same answers, every set an intset', async () => {
    const noDump = await startRedis({ args: ['--set-max-intset-entries', String(LIMIT), '--rename-command', 'DUMP', '""'] });
    const noRestore = await startRedis({ args: ['--set-max-intset-entries', String(LIMIT)] });
    const admin = [new Redis(noDump.url), new Redis(noRestore.url)] as const;
    try {
      await expect(admin[0].call('DUMP', 'x')).rejects.toThrow(/unknown command/);
      await admin[1].call('ACL', 'SETUSER', 'default', '-restore');
      await expect(admin[1].call('RESTORE', 'x', '0', 'y')).rejects.toThrow(/NOPERM/);
      for (const [i, url] of [noDump.url, noRestore.url].entries()) {
        const gate = await open({ buckets: 2, prefix: 'ref', window: () => '2030' }, url);
        const keys = Array.from({ length: 3000 }, (_, k) => `refused-${k}`);
        try {
          const first = await gate.firstSeen(keys);
          expect(ones(first)).toBe(keys.length);
          for (let o = 0; o < keys.length; o += 100) {
            const got = await gate.firstSeen(keys.slice(o, o + 100).concat([`new-${o}`]));
            expect([i, o, ones(got), got[100]]).toEqual([i, o, 1, 1]);
          }
          expect(ones(await gate.firstSeen(keys))).toBe(0);
        } finally {
          await gate.close();
        }
        const all = await compactSets(admin[i]!, 'ref', '2030');
        // 3030 members in 2 tables at 19 a sub-bucket: the tables did split
        expect(all.length).toBeGreaterThan(40);
        expect(all.every((x) => x.encoding === 'intset')).toBe(true);
        expect(all.reduce((n, x) => n + x.size, 0)).toBe(keys.length + 30);
        expect(await misplaced(admin[i]!, 'ref', '2030')).toBe(0);
      }
    } finally {
      for (const a of admin) a.disconnect();
      await noDump.stop();
      await noRestore.stop();
    }
  });

  it('a table that cannot split (scripts denied) still answers exactly: its sub-buckets outgrow the intset, nothing fails open', async () => {
    const noScripts = await startRedis({ args: ['--set-max-intset-entries', String(LIMIT)] });
    const admin = new Redis(noScripts.url);
    try {
      await admin.call('ACL', 'SETUSER', 'default', '-@scripting');
      const gate = await open({ buckets: 2, prefix: 'nos', window: () => '2030' }, noScripts.url);
      const keys = Array.from({ length: 2000 }, (_, k) => `nosplit-${k}`);
      try {
        expect(ones(await gate.firstSeen(keys))).toBe(keys.length);
        for (let o = 0; o < keys.length; o += 100) {
          const got = await gate.firstSeen(keys.slice(o, o + 100).concat([`new-${o}`]));
          expect([o, ones(got), got[100]]).toEqual([o, 1, 1]);
        }
        expect(gate.dedup.journalBacklogBytes()).toBe(0);
        expect(gate.dedup.counters.storeErrors).toBe(0);
      } finally {
        await gate.close();
      }
      const all = await compactSets(admin, 'nos', '2030');
      expect(all.reduce((n, x) => n + x.size, 0)).toBe(keys.length + 20);
      expect(all.some((x) => x.encoding === 'hashtable')).toBe(true);
    } finally {
      admin.disconnect();
      await noScripts.stop();
    }
  });

  it('hashgate load sizes the window first: exact new members, every key then seen, all intsets, nothing misplaced', () => {
    const file = join(dir, 'export.txt');
    const rows = Array.from({ length: 30_000 }, (_, i) => `张${i % 20_000}|${220101199001010000 + (i % 20_000)}`);
    writeFileSync(file, `${rows.join('\n')}\n`);
    spawnSync('redis-cli', ['-p', String(srv.port), 'CONFIG', 'RESETSTAT']);
    const run = spawnSync(process.execPath, [CLI, 'load', file, '--redis', srv.url, '--prefix', 'ld', '--window', '2030', '--buckets', '8', '--checkpoint', join(dir, 'load.cp'), '--json', '--quiet'], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout.trim())).toMatchObject({ rows: 30_000, failed: 0, newMembers: 20_000 });
    return (async () => {
      const all = await compactSets(r, 'ld', '2030');
      expect(all.length).toBeGreaterThan(8 * 8);
      expect(all.every((s) => s.encoding === 'intset' && s.size <= LIMIT)).toBe(true);
      expect(await misplaced(r, 'ld', '2030')).toBe(0);
      // sized before writing: each table split while empty (one DUMP of its first sub-bucket,
      // answered nil), and no split later had to move a member (each would DUMP it first)
      expect(await commandStat(r, 'dump', 'calls')).toBe(8);
      const gate = await open({ prefix: 'ld', window: () => '2030' });
      try {
        expect(ones(await gate.firstSeen(rows.slice(0, 20_000).map((l) => l.replace('|', ''))))).toBe(0);
        expect((await gate.dedupStats('2030')).approximate).toBe(20_000);
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
      expect(h.tiers.dedup.bucketFill).toMatchObject({ window: '2031', buckets: 4, limit: LIMIT, approximateKeys: 8000 });
      expect(h.tiers.dedup.bucketFill!.ratio).toBeLessThan(0.9);
      const st = await gate.dedupStats('2031');
      // the prediction (window count + sampled table counts) is near the real largest sub-bucket
      expect(Math.abs(h.tiers.dedup.bucketFill!.predictedLargest - st.largestBucket!)).toBeLessThan(20);
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

  it('counts a table of thousands of sub-buckets exactly, slice by slice, even while another writer splits it', async () => {
    // 2 tables at 19 members a sub-bucket: 60k keys make ~1,600 sub-buckets per table, more than one COUNT slice
    const gate = await open({ buckets: 2, prefix: 'slices', window: () => '2033' });
    const writer = await open({ buckets: 2, prefix: 'slices', window: () => '2033' });
    try {
      for (let o = 0; o < 60_000; o += 10_000) await gate.firstSeen(Array.from({ length: 10_000 }, (_, i) => `slice-${o + i}`));
      const st = await gate.dedupStats('2033');
      expect(st.subBuckets!).toBeGreaterThan(2 * 1000);
      expect(st.exact).toBe(60_000);
      // counted while the other gate adds 20k more (its splits land between slices)
      const more = (async () => {
        let added = 0;
        for (let o = 0; o < 20_000; o += 500) added += ones(await writer.firstSeen(Array.from({ length: 500 }, (_, i) => `more-${o + i}`)));
        return added;
      })();
      const during: number[] = [];
      for (let i = 0; i < 3; i++) during.push((await gate.dedupStats('2033')).exact);
      expect(await more).toBe(20_000);
      for (const c of during) expect(c >= 60_000 && c <= 80_000, String(c)).toBe(true);
      expect([...during].sort((a, b) => a - b)).toEqual(during);
      expect((await gate.dedupStats('2033')).exact).toBe(80_000);
    } finally {
      await gate.close();
      await writer.close();
    }
  });

  it('`hashgate stats --purge --json` counts sub-buckets and reports the memory the purge freed', async () => {
    const gate = await open({ buckets: 64, prefix: 'hg:dedup', window: () => '2032' });
    for (let o = 0; o < 100_000; o += 10_000) await gate.firstSeen(Array.from({ length: 10_000 }, (_, i) => `purge-${o + i}`));
    const subs = (await gate.dedupStats('2032')).subBuckets!;
    await gate.close();
    const keys = (await r.keys('hg:dedup:2032:*')).length;
    const st = spawnSync(process.execPath, [CLI, 'stats', '--redis', srv.url, '--window', '2032', '--json'], { encoding: 'utf8' });
    const stats = JSON.parse(st.stdout.trim()) as Record<string, number>;
    expect(stats, st.stdout).toMatchObject({ exact: 100_000, bucketLimit: LIMIT });
    // the closed gate's last splits may have run after its own reading
    expect(stats.subBuckets).toBeGreaterThanOrEqual(subs);
    const res = spawnSync(process.execPath, [CLI, 'stats', '--redis', srv.url, '--window', '2032', '--purge', '--json'], { encoding: 'utf8' });
    expect(res.status, res.stderr).toBe(0);
    const out = JSON.parse(res.stdout.trim()) as Record<string, number>;
    // sub-buckets, the tombstones of the ones that split, the tables' states, the window count and meta
    expect(out.deletedKeys).toBe(keys);
    expect(keys).toBeGreaterThan(2 * subs - 64);
    expect(out.usedMemoryBefore! - out.usedMemoryAfter!).toBeGreaterThan(500_000);
    expect(typeof out.rssAfter).toBe('number');
    expect(await r.keys('hg:dedup:2032:*')).toEqual([]);
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
    const gate = await HashGate.open({ threads: 0, redis: srv.url, dedup: { cacheMaxEntries: 0, journalDir: join(dir, 'j'), window: () => '2030', replayIntervalMs: 0 } });
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
      const enc = await compactSets(r, 'hg:dedup', '2030');
      expect(enc.every((s) => s.encoding === 'intset')).toBe(true);
      expect(await misplaced(r, 'hg:dedup', '2030')).toBe(0);
    } finally {
      await gate.close();
      r.disconnect();
    }
  }, 240_000);
});

describe.skipIf(!has)('a window sized with expectedKeys', () => {
  // Redis's default set-max-intset-entries: the one the sizing assumes
  let srv: RedisServer;
  let r: Redis;
  let dir: string;
  beforeAll(async () => {
    srv = await startRedis();
    r = new Redis(srv.url);
    dir = mkdtempSync(join(tmpdir(), 'hg-sized-'));
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const calls = (cmd: string): Promise<number> => commandStat(r, cmd, 'calls');
  const write = async (gate: HashGate, keys: string[]): Promise<number> => {
    let s = 0;
    for (let i = 0; i < keys.length; i += 2000) s += ones(await gate.firstSeen(keys.slice(i, i + 2000)));
    return s;
  };

  it('fills to its expected keys without one split, exact; past them it splits as an unsized window does', async () => {
    // 24,000 keys: 256 buckets; sized at 256 keys a bucket, it would start at 128 and split 28
    const N = 24_000;
    const keys = Array.from({ length: 4 * N }, (_, i) => `sized-${i}`);
    const gate = await HashGate.open({ threads: 0, redis: srv.url, dedup: { expectedKeys: N, window: () => 'sized', journalDir: join(dir, 'a'), replayIntervalMs: 0, cacheMaxEntries: 0 } });
    try {
      await r.config('RESETSTAT');
      expect(await write(gate, keys.slice(0, N))).toBe(N);
      expect(await write(gate, keys.slice(0, N))).toBe(0);
      // no split: neither the DUMP of a sub-bucket nor the script that restores its halves
      expect(await calls('dump')).toBe(0);
      expect(await calls('evalsha')).toBe(0);
      let st = await gate.dedupStats('sized');
      expect(st.buckets).toBe(256);
      expect(st.exact).toBe(N);
      expect(st.subBuckets).toBeLessThanOrEqual(st.buckets);
      // past the expected keys the tables split, and the answers stay exact
      expect(await write(gate, keys)).toBe(3 * N);
      expect(await calls('dump')).toBeGreaterThan(0);
      st = await gate.dedupStats('sized');
      expect(st.exact).toBe(4 * N);
      expect(st.subBuckets!).toBeGreaterThan(st.buckets);
      expect(st.largestBucket!).toBeLessThanOrEqual(st.bucketLimit!);
      expect((await compactSets(r, 'hg:dedup', 'sized')).every((s) => s.encoding === 'intset')).toBe(true);
      expect(await misplaced(r, 'hg:dedup', 'sized')).toBe(0);
    } finally {
      await gate.close();
    }
    // the same keys into a window of half the buckets split while it fills: what the sizing spares
    const plain = await HashGate.open({ threads: 0, redis: srv.url, dedup: { buckets: 128, window: () => 'plain', journalDir: join(dir, 'b'), replayIntervalMs: 0, cacheMaxEntries: 0 } });
    try {
      await r.config('RESETSTAT');
      expect(await write(plain, keys.slice(0, N))).toBe(N);
      expect(await calls('dump')).toBeGreaterThan(0);
    } finally {
      await plain.close();
    }
  }, 120_000);
});
