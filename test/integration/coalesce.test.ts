// Coalescing against a real redis-server: merged firstSeen answers equal the sequential model
// (both layouts), many callers share few scripts, store failures reach every merged caller, and
// concurrent lookups share one MGET.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { DedupService, type DedupOptions } from '../../src/dedup/index.js';
import { ErrorCodes } from '../../src/index.js';
import { TieredCache } from '../../src/entries/cache.js';
import { HotColdStore } from '../../src/tiering/index.js';

const has = requireRedisOrSkip('coalesce integration');

async function cmdCalls(r: Redis, cmd: string): Promise<number> {
  const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(await r.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

interface Op {
  keys: string[];
  year: 2025 | 2026;
  gap: 'sync' | 'tick' | 'turn' | 'settle';
}
const opArb: fc.Arbitrary<Op> = fc.record({
  keys: fc.array(fc.oneof({ weight: 12, arbitrary: fc.constantFrom('a', 'b', 'c', '张三110101199003071234', 'e') }, { weight: 1, arbitrary: fc.constant('') }), { maxLength: 5 }),
  year: fc.constantFrom(2025 as const, 2026 as const),
  gap: fc.constantFrom('sync' as const, 'sync' as const, 'tick' as const, 'turn' as const, 'settle' as const),
});
type Outcome = number[] | string;

function model(ops: Op[]): Outcome[] {
  const seen = new Map<number, Set<string>>();
  return ops.map((op) => {
    if (op.keys.includes('')) return ErrorCodes.EMPTY_KEY;
    let s = seen.get(op.year);
    if (s === undefined) seen.set(op.year, (s = new Set()));
    return op.keys.map((k) => (s!.has(k) ? 0 : (s!.add(k), 1)));
  });
}

async function drive(svc: DedupService, ops: Op[]): Promise<Outcome[]> {
  const pending: Promise<Outcome>[] = [];
  for (const op of ops) {
    if (op.gap === 'tick') await Promise.resolve();
    else if (op.gap === 'turn') await new Promise((r) => setImmediate(r));
    else if (op.gap === 'settle') await Promise.allSettled(pending);
    const at = new Date(op.year === 2025 ? '2025-06-01T00:00:00Z' : '2026-06-01T00:00:00Z');
    pending.push(svc.firstSeen(op.keys, { at }).then((a) => [...a], (e: { code?: string }) => e.code ?? String(e)));
  }
  return Promise.all(pending);
}

describe.skipIf(!has)('coalescing on Redis', () => {
  let srv: RedisServer;
  let r: Redis;
  let dir: string;
  let n = 0;
  const open = (dedup: DedupOptions = {}, coalesce?: false | { maxKeys: number; maxDelayMs: number }) =>
    new DedupService({ redis: srv.url, dedup: { journalDir: dir, prefix: `c${++n}`, replayIntervalMs: 0, commandTimeoutMs: 2000, buckets: 4, ...dedup }, coalesce });

  beforeAll(async () => {
    srv = await startRedis();
    r = new Redis(srv.url);
    r.on('error', () => undefined); // the failure cases kill the server
    dir = mkdtempSync(join(tmpdir(), 'hg-coalesce-it-'));
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const layout of ['compact', 'sets'] as const) {
    for (const onStoreError of ['fail-open', 'fail-closed'] as const) {
      it(`${layout}, ${onStoreError}: random interleavings answer like the sequential model`, async () => {
        let merged = 0;
        await fc.assert(
          fc.asyncProperty(
            fc.array(opArb, { minLength: 1, maxLength: 30 }),
            fc.constantFrom<false | { maxKeys: number; maxDelayMs: number }>(false, { maxKeys: 2, maxDelayMs: 0 }, { maxKeys: 4096, maxDelayMs: 0 }, { maxKeys: 16, maxDelayMs: 2 }),
            fc.boolean(),
            async (ops, coalesce, cache) => {
              const svc = open({ layout, onStoreError, cacheMaxEntries: cache ? 1000 : 0 }, coalesce);
              try {
                expect(await drive(svc, ops)).toEqual(model(ops));
                if (svc.counters.batches < svc.counters.calls) merged++;
              } finally {
                await svc.close();
              }
            },
          ),
          { numRuns: 40 },
        );
        expect(merged).toBeGreaterThan(3);
      });
    }
  }

  for (const layout of ['compact', 'sets'] as const) {
    it(`${layout}: a closed loop of callers keeps several batches in flight and still answers in call order`, async () => {
      const svc = open({ layout, cacheMaxEntries: 0 }, { maxKeys: 8, maxDelayMs: 0 });
      const co = (svc as unknown as { coalescer: { inFlight: number } }).coalescer;
      const order: string[][] = [];
      const got: number[][] = [];
      let maxInFlight = 0;
      let seed = 7;
      const pick = (): string => `k${(seed = (seed * 1103515245 + 12345) % 2 ** 31) % 40}`;
      const loop = async (): Promise<void> => {
        for (let i = 0; i < 15; i++) {
          const keys = i % 3 === 0 ? [pick(), pick()] : [pick()];
          const at = order.length;
          order.push(keys);
          const a = await svc.firstSeen(keys);
          got[at] = [...a];
          if (co.inFlight > maxInFlight) maxInFlight = co.inFlight;
        }
      };
      await Promise.all(Array.from({ length: 48 }, loop));
      // the sequential model over the calls in the order they were made
      const seen = new Set<string>();
      const want = order.map((keys) => keys.map((k) => (seen.has(k) ? 0 : (seen.add(k), 1))));
      expect(got).toEqual(want);
      expect(maxInFlight).toBeGreaterThan(1); // the property really had batches overlapping
      expect(svc.counters.batches).toBeLessThan(svc.counters.calls / 4);
      await svc.close();
    });
  }

  for (const coalesce of [false, { maxKeys: 4096, maxDelayMs: 0 }] as const) {
    it(`a batch sent after a newer window took the seen-cache leaves no keys in it (coalesce ${coalesce ? 'on' : 'off'})`, async () => {
      for (const layout of ['compact', 'sets'] as const) {
        const svc = open({ layout, cacheMaxEntries: 1000 }, coalesce);
        const at = (y: number) => ({ at: new Date(`${y}-06-01T00:00:00Z`) });
        try {
          const calls: Promise<number[]>[] = [];
          const call = (keys: string[], y: number) => calls.push(svc.firstSeen(keys, at(y)).then((a) => [...a]));
          call(['c'], 2025);
          await new Promise((r) => setImmediate(r));
          // 'c' is still in flight: this 2025 batch waits for it, and is sent after 2026 took the cache
          if (coalesce) {
            call(['c'], 2025);
            call(['a'], 2026);
            call(['e'], 2025);
          } else {
            call(['c', 'e'], 2025);
            call(['a'], 2026);
          }
          const first = await Promise.all(calls);
          expect(first).toEqual(coalesce ? [[1], [0], [1], [1]] : [[1], [0, 1], [1]]);
          // 'e' was seen in 2025 only
          expect([...(await svc.firstSeen(['e'], at(2026)))], layout).toEqual([1]);
          expect([...(await svc.firstSeen(['e'], at(2026)))], layout).toEqual([0]);
        } finally {
          await svc.close();
        }
      }
    });
  }

  it('a batch that meets an empty script cache is not overtaken by a later batch', async () => {
    const svc = open({}, false);
    await r.script('FLUSH');
    await svc.firstSeen(['warm']); // a one-key batch: plain SADD, the script is still not loaded
    await r.script('FLUSH');
    // the script batch goes first; the one-key SADD right behind it must not run before it
    const [a, b] = await Promise.all([svc.firstSeen(['a', 'b']), svc.firstSeen(['a'])]);
    expect([...a, ...b]).toEqual([1, 1, 0]);
    await svc.close();
  });

  it('one-key calls report the window count in groups; stats() sees every member', async () => {
    const svc = open({ buckets: 64 });
    await r.config('RESETSTAT');
    for (let i = 0; i < 300; i++) await svc.firstSeen([`solo${i}`]); // one-key batches: one SADD each, the count reported later
    expect(await cmdCalls(r, 'sadd')).toBe(300);
    expect(await cmdCalls(r, 'incrby')).toBeLessThan(30);
    const st = await svc.stats();
    expect(st.exact).toBe(300);
    expect(st.approximate).toBe(300);
    await svc.close();
  });

  it('256 concurrent one-key callers share a few commands; answers exact', async () => {
    const svc = open({ buckets: 1024 });
    await svc.firstSeen(['warm', 'warm2']); // loads the script
    await r.config('RESETSTAT');
    const before = svc.counters.batches;
    const keys = Array.from({ length: 256 }, (_, i) => `姓名${i % 200}|1101${i % 200}`);
    const got = await Promise.all(keys.map((k) => svc.firstSeen([k])));
    expect(got.map((a) => a[0])).toEqual(keys.map((_, i) => (i < 200 ? 1 : 0)));
    // one synchronous run of 256 calls: two full batches (maxKeys 128), no one-key batch split
    // off for the first caller; a key the first batch still had in flight is answered by it, so
    // only the 200 distinct keys reach Redis: one plain SADD each, no script
    expect(svc.counters.batches - before).toBe(2);
    expect(await cmdCalls(r, 'sadd')).toBe(200);
    expect(await cmdCalls(r, 'evalsha')).toBe(0);
    await svc.close();
    // without coalescing every call is its own batch, still one SADD per key
    const alone = open({ buckets: 1024 }, false);
    await alone.firstSeen(['warm']);
    await r.config('RESETSTAT');
    const single = await Promise.all(keys.map((k) => alone.firstSeen([k])));
    expect(single.map((a) => a[0])).toEqual(keys.map((_, i) => (i < 200 ? 1 : 0)));
    expect(await cmdCalls(r, 'sadd')).toBe(200);
    expect(await cmdCalls(r, 'evalsha')).toBe(0);
    await alone.close();
  });

  it('fail-closed: every caller of the merged batch rejects with its own answers; a bad key only its call', async () => {
    const svc = open({ onStoreError: 'fail-closed' });
    await svc.firstSeen(['warm']);
    // a repeat, answered "seen before": the seen-cache takes it
    await svc.firstSeen(['warm']);
    await srv.kill('SIGKILL');
    const r1 = await Promise.allSettled([svc.firstSeen(['a']), svc.firstSeen(['b', 'c']), svc.firstSeen(['', 'x']), svc.firstSeen(['warm', 'd', 'e'])]);
    await srv.restart();
    expect(r1.map((x) => x.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected']);
    const reasons = r1.map((x) => (x as PromiseRejectedResult).reason as { code: string; details?: { answers?: Uint8Array } });
    // Commands written to the socket of the killed server before its close was noticed count as
    // sent with their reply lost: outcome unknown. Either way each caller gets the same code.
    const storeCode = reasons[0]!.code;
    expect([ErrorCodes.STORE_UNAVAILABLE, ErrorCodes.STORE_OUTCOME_UNKNOWN]).toContain(storeCode);
    expect(reasons.map((e) => e.code)).toEqual([storeCode, storeCode, ErrorCodes.EMPTY_KEY, storeCode]);
    expect([...reasons[0]!.details!.answers!]).toEqual([255]);
    expect([...reasons[1]!.details!.answers!]).toEqual([255, 255]);
    // 'warm' is known from the seen-cache: answered 0 even though the store failed
    expect([...reasons[3]!.details!.answers!]).toEqual([0, 255, 255]);
    // nothing of the failed batch reached Redis; only the window count of 'warm', which a writer
    // reports a moment later, may land after the restart
    expect((await r.keys('*')).filter((k) => !k.endsWith(':count'))).toEqual([]);
    await svc.close();
  });

  it('fail-open: every merged caller is answered 1 and every key journaled; recover() replays them', async () => {
    const svc = open({ cacheMaxEntries: 0 });
    await svc.firstSeen(['warm']);
    await srv.kill('SIGKILL');
    const got = await Promise.all([svc.firstSeen(['a']), svc.firstSeen(['b', 'c']), svc.firstSeen(['d', 'b']), svc.firstSeen(['e'])]);
    // unknown is answered 1 under fail-open; the merged batch still answers the repeat of 'b' 0
    expect(got.map((x) => [...x])).toEqual([[1], [1, 1], [1, 0], [1]]);
    expect(svc.counters.journaledKeys).toBe(5);
    expect(svc.counters.batches).toBe(2); // warm, then the four calls of one synchronous run merged
    await srv.restart();
    const rep = await svc.recover();
    expect(rep.keys).toBe(5);
    expect([...(await svc.firstSeen(['a', 'b', 'c', 'd', 'e', 'new']))]).toEqual([0, 0, 0, 0, 0, 1]);
    await svc.close();
  });

  it('lookups: concurrent Redis hits share one MGET; values per caller', async () => {
    await r.flushall();
    const hot = new HotColdStore({ redis: r });
    const keys = Array.from({ length: 300 }, (_, i) => `u${i}`);
    await hot.write('risk', keys.map((key, i) => ({ key, value: { i } })));
    const cache = new TieredCache({ redis: { url: srv.url, timeoutMs: 5000 }, local: { maxEntries: 1 } });
    await cache.ready();
    await r.config('RESETSTAT');
    const got = await Promise.all(keys.map((k) => cache.lookup('risk', [k, 'absent'])));
    expect(got).toEqual(keys.map((_, i) => [{ i }, undefined]));
    expect(await cmdCalls(r, 'mget')).toBeLessThanOrEqual(1 + Math.ceil(299 / 128)); // maxKeys 128
    await cache.close();
    const plain = new TieredCache({ redis: { url: srv.url, timeoutMs: 5000 }, local: { maxEntries: 1 }, coalesce: false });
    await plain.ready();
    await r.config('RESETSTAT');
    await Promise.all(keys.map((k) => plain.lookup('risk', [k])));
    expect(await cmdCalls(r, 'mget')).toBe(300);
    await plain.close();
  });

  it('lookupDetailed: a Redis failure in a merged load is reported to every merged caller', async () => {
    const cache = new TieredCache({ redis: { url: srv.url, timeoutMs: 300 }, local: { maxEntries: 10 } });
    await cache.ready();
    await srv.kill('SIGKILL');
    const res = await Promise.all([cache.lookupDetailed('t', ['a']), cache.lookupDetailed('t', ['b']), cache.lookupDetailed('t', ['c', 'd'])]);
    for (const x of res) {
      expect(x.degraded).toBe(true);
      expect(x.errors.length).toBeGreaterThan(0);
      expect(x.values.every((v) => v === undefined)).toBe(true);
    }
    await srv.restart();
    await cache.close();
  });
});
