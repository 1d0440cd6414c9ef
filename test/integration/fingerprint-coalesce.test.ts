// Merged index queries against a real redis-server: concurrent match/any calls interleaved with
// puts, updates and removes answer exactly like the same calls run one after another, and many
// concurrent queries cost one script call per shard.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { FingerprintIndex } from '../../src/fingerprint/index.js';
import { ErrorCodes, HashGate } from '../../src/index.js';

const has = requireRedisOrSkip('index coalescing');

type Model = Map<string, Map<string, string>>;
const LONG = 'L'.repeat(80);
const attrName = fc.constantFrom('canvas', 'ua', 'ip');
// CJK values short and long (hashed into the key) and CJK device ids go through the merged call's wire as UTF-8
const LONG_CJK = '设'.repeat(40);
const attrValue = fc.constantFrom('v0', 'v1', 'v2', '张三', LONG, `${LONG}x`, LONG_CJK);
const devId = (d: number): string => (d % 2 === 0 ? `d${d}` : `设备${d}`);
const attrs = fc.dictionary(attrName, attrValue, { minKeys: 1, maxKeys: 3 });
const gap = fc.constantFrom('sync' as const, 'sync' as const, 'sync' as const, 'tick' as const, 'turn' as const);
const op = fc.oneof(
  fc.record({ t: fc.constant('put' as const), d: fc.nat(4), a: attrs, gap }),
  fc.record({ t: fc.constant('update' as const), d: fc.nat(4), a: attrs, gap }),
  fc.record({ t: fc.constant('remove' as const), d: fc.nat(4), gap }),
  fc.record({ t: fc.constant('match' as const), q: attrs, limit: fc.integer({ min: 1, max: 6 }), gap }),
  fc.record({ t: fc.constant('any' as const), q: attrs, limit: fc.integer({ min: 1, max: 6 }), gap }),
);
type Op = typeof op extends fc.Arbitrary<infer T> ? T : never;

/** What each call answers when the calls run one after another: the full sorted answer for queries. */
function model(ops: Op[]): Array<string[] | boolean | undefined> {
  const m: Model = new Map();
  return ops.map((o) => {
    if (o.t === 'put' || o.t === 'update') {
      const id = devId(o.d);
      const cur = o.t === 'put' ? new Map<string, string>() : (m.get(id) ?? new Map<string, string>());
      for (const [k, v] of Object.entries(o.a)) cur.set(k, v);
      m.set(id, cur);
      return undefined;
    }
    if (o.t === 'remove') {
      const had = m.has(devId(o.d));
      m.delete(devId(o.d));
      return had;
    }
    const hit = (a: Map<string, string>): boolean =>
      o.t === 'match' ? Object.entries(o.q).every(([k, v]) => a.get(k) === v) : Object.entries(o.q).some(([k, v]) => a.get(k) === v);
    return [...m].filter(([, a]) => hit(a)).map(([d]) => d).sort();
  });
}

/** Issues every call without waiting (except the op's gap), then collects the answers. */
async function drive(idx: FingerprintIndex, ops: Op[]): Promise<Array<string[] | boolean | undefined>> {
  const ps: Array<Promise<string[] | boolean | undefined>> = [];
  for (const o of ops) {
    if (o.gap === 'tick') await Promise.resolve();
    else if (o.gap === 'turn') await new Promise((r) => setImmediate(r));
    if (o.t === 'put' || o.t === 'update') ps.push(idx[o.t](devId(o.d), o.a).then(() => undefined));
    else if (o.t === 'remove') ps.push(idx.remove(devId(o.d)));
    else ps.push(idx[o.t](o.q, { limit: o.limit }));
  }
  return Promise.all(ps);
}

async function cmdCalls(r: Redis, cmd: string): Promise<number> {
  const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(await r.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

describe.skipIf(!has)('merged index queries on Redis', () => {
  let srv: RedisServer;
  let r: Redis;
  let run = 0;
  beforeAll(async () => {
    srv = await startRedis();
    r = new Redis(srv.url);
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
  });

  for (const shards of [1, 3]) {
    it(`concurrent calls answer like the sequential model (${shards} shard${shards > 1 ? 's' : ''}, fast-check)`, async () => {
      let merged = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(op, { minLength: 1, maxLength: 30 }),
          fc.constantFrom<false | { maxKeys: number; maxDelayMs?: number }>(false, { maxKeys: 4 }, { maxKeys: 128 }, { maxKeys: 16, maxDelayMs: 1 }),
          fc.boolean(),
          async (ops, coalesce, walk) => {
            // no Bloom gate: every query reaches Redis; sinterThreshold 0 takes the scripts' early-exit walk
            const idx = new FingerprintIndex({ redis: r, keyPrefix: `ic${++run}`, shards, coalesce, bloom: false, sinterThreshold: walk ? 0 : 4096 });
            const before = await cmdCalls(r, 'evalsha');
            try {
              const got = await drive(idx, ops);
              const want = model(ops);
              for (let i = 0; i < ops.length; i++) {
                const o = ops[i]!;
                const g = got[i];
                const w = want[i];
                if (o.t === 'match' || o.t === 'any') {
                  // a limited answer is any `limit` of the devices the sequential run would find
                  const all = w as string[];
                  expect((g as string[]).length).toBe(Math.min(o.limit, all.length));
                  for (const d of g as string[]) expect(all).toContain(d);
                } else {
                  expect(g).toEqual(w);
                }
              }
              const queries = ops.filter((o) => o.t === 'match' || o.t === 'any').length;
              const scripts = (await cmdCalls(r, 'evalsha')) - before;
              if (coalesce !== false && scripts < ops.length - queries + queries * shards) merged++;
            } finally {
              await idx.close();
            }
          },
        ),
        { numRuns: 60 },
      );
      expect(merged).toBeGreaterThan(5); // the property really exercised merged queries
    });
  }

  it('256 concurrent queries inside a HashGate cost a few script calls, each caller gets its own devices', async () => {
    const gate = await HashGate.open({ threads: 0, index: { redis: r, keyPrefix: `ic${++run}` } });
    const idx = gate.index!;
    for (let d = 0; d < 256; d++) await idx.put(`dev${d}`, { canvas: `c${d}`, ua: d % 2 === 0 ? 'even' : 'odd' });
    const before = await cmdCalls(r, 'evalsha');
    const answers = await Promise.all(Array.from({ length: 256 }, (_, d) => idx.match({ canvas: `c${d}`, ua: d % 2 === 0 ? 'even' : 'odd' })));
    const scripts = (await cmdCalls(r, 'evalsha')) - before;
    for (let d = 0; d < 256; d++) expect(answers[d]).toEqual([`dev${d}`]);
    // batches of at most 128 query terms (2 per query)
    expect(scripts).toBeLessThanOrEqual(6);
    // a query issued right after a write sees it; one issued before does not
    const early = idx.match({ canvas: 'c0' });
    const put = idx.put('dev0', { canvas: 'moved' });
    const after = idx.match({ canvas: 'c0' });
    expect(await early).toEqual(['dev0']);
    await put;
    expect(await after).toEqual([]);
    await gate.close();
  });

  it('merged queries whose Redis was killed reject with HG_ERR_STORE, never answer "no device"', async () => {
    const own = await startRedis();
    const c = new Redis(own.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    await new Promise((r) => c.once('ready', r));
    const idx = new FingerprintIndex({ redis: c, bloom: false });
    for (let d = 0; d < 8; d++) await idx.put(devId(d), { canvas: `c${d}` });
    const ask = (): Array<Promise<string[]>> => Array.from({ length: 8 }, (_, d) => idx.match({ canvas: `c${d}` }));
    expect(await Promise.all(ask())).toEqual(Array.from({ length: 8 }, (_, d) => [devId(d)]));
    await own.kill('SIGKILL');
    const after = await Promise.allSettled(ask());
    for (const a of after) {
      expect(a.status).toBe('rejected');
      expect((a as PromiseRejectedResult).reason).toMatchObject({ code: ErrorCodes.STORE });
    }
    await idx.close().catch(() => undefined);
    c.disconnect();
    await own.stop().catch(() => undefined);
  });

  // Last: after a SCRIPT FLUSH a script call meets NOSCRIPT and goes again a round trip later,
  // behind any command sent meanwhile (ioredis' own scripts do the same).
  it('merged queries after SCRIPT FLUSH load the script again and answer', async () => {
    const idx = new FingerprintIndex({ redis: r, keyPrefix: `ic${++run}`, bloom: false });
    for (let d = 0; d < 8; d++) await idx.put(devId(d), { canvas: `c${d}`, ua: '浏览器' });
    const ask = (): Promise<string[][]> => Promise.all(Array.from({ length: 8 }, (_, d) => idx.match({ canvas: `c${d}`, ua: '浏览器' })));
    const want = Array.from({ length: 8 }, (_, d) => [devId(d)]);
    expect(await ask()).toEqual(want);
    await r.script('FLUSH');
    expect(await ask()).toEqual(want);
    await idx.close();
  });
});
