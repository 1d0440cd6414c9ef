import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { FingerprintIndex } from '../../src/fingerprint/index.js';
import { murmur3_128Hex } from '../../src/hash/index.js';

const has = requireRedisOrSkip('index (redis)');

type Model = Map<string, Map<string, string>>;
const modelMatch = (m: Model, q: Record<string, string>): string[] =>
  [...m].filter(([, a]) => Object.entries(q).every(([k, v]) => a.get(k) === v)).map(([d]) => d).sort();
const modelAny = (m: Model, q: Record<string, string>): string[] =>
  [...m].filter(([, a]) => Object.entries(q).some(([k, v]) => a.get(k) === v)).map(([d]) => d).sort();

const LONG = 'L'.repeat(80);
const attrName = fc.constantFrom('canvas', 'ua', 'ip');
const attrValue = fc.constantFrom('v0', 'v1', 'v2', LONG, `${LONG}x`, '#h');
const attrs = fc.dictionary(attrName, attrValue, { minKeys: 1, maxKeys: 3 });
const query = fc.dictionary(attrName, attrValue, { minKeys: 1, maxKeys: 3 });
const op = fc.oneof(
  fc.record({ t: fc.constant('put' as const), d: fc.nat(5), a: attrs }),
  fc.record({ t: fc.constant('update' as const), d: fc.nat(5), a: attrs }),
  fc.record({ t: fc.constant('remove' as const), d: fc.nat(5) }),
  fc.record({ t: fc.constant('match' as const), q: query, limit: fc.integer({ min: 1, max: 8 }) }),
  fc.record({ t: fc.constant('any' as const), q: query, limit: fc.integer({ min: 1, max: 8 }) }),
);

type Op = typeof op extends fc.Arbitrary<infer T> ? T : never;

async function runModel(idx: FingerprintIndex, ops: Op[]): Promise<void> {
  const m: Model = new Map();
  for (const o of ops) {
    if (o.t === 'put' || o.t === 'update') {
      const id = `d${o.d}`;
      await idx[o.t](id, o.a);
      const cur = o.t === 'put' ? new Map<string, string>() : (m.get(id) ?? new Map<string, string>());
      for (const [k, v] of Object.entries(o.a)) cur.set(k, v);
      m.set(id, cur);
    } else if (o.t === 'remove') {
      const id = `d${o.d}`;
      expect(await idx.remove(id)).toBe(m.has(id));
      m.delete(id);
    } else {
      const want = o.t === 'match' ? modelMatch(m, o.q) : modelAny(m, o.q);
      expect((await idx[o.t](o.q)).sort()).toEqual(want);
      const lim = await idx[o.t](o.q, { limit: o.limit });
      expect(lim.length).toBe(Math.min(o.limit, want.length));
      for (const d of lim) expect(want).toContain(d);
    }
  }
  for (const [id, a] of m) expect(await idx.get(id)).toEqual(Object.fromEntries(a));
}

/** Commands the server executed between two calls, minus the INFO that measures it. */
async function commandsProcessed(r: Redis): Promise<number> {
  const info = await r.info('stats');
  return Number(/total_commands_processed:(\d+)/.exec(info)?.[1]);
}

describe.skipIf(!has)('FingerprintIndex on a real redis-server', () => {
  let srv: RedisServer;
  let r: Redis;
  beforeAll(async () => {
    srv = await startRedis();
    r = new Redis(srv.url);
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
  });

  it('keeps the plain key layout: idx:<attr>:<value> sets, long values under a murmur3_128 key with the raw beside it', async () => {
    await r.flushdb();
    const idx = new FingerprintIndex({ redis: r });
    const ua = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36';
    await idx.put('device_001', { canvas: 'abc123def456', ua });
    await idx.put('device_002', { canvas: 'abc123def456', ua });
    expect((await r.smembers('idx:canvas:abc123def456')).sort()).toEqual(['device_001', 'device_002']);
    const hk = `idx:ua:#${murmur3_128Hex(ua)}`;
    expect(await r.scard(hk)).toBe(2);
    expect(await r.get(`${hk}:raw`)).toBe(ua);
    expect((await idx.match({ canvas: 'abc123def456', ua })).sort()).toEqual(['device_001', 'device_002']);
    await idx.remove('device_001');
    await idx.remove('device_002');
    expect(await r.dbsize()).toBe(0);
  });

  it('match/any/remove/update agree with a brute-force model (fast-check)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 30 }), async (ops) => {
        await r.flushdb();
        // thresholds 0/1 force the Lua walk, 4096 its SINTER branch; directQueries skips the script
        const k = ops.length % 4;
        const idx = new FingerprintIndex({ redis: r, sinterThreshold: [0, 1, 4096, 4096][k], directQueries: k === 3 });
        await runModel(idx, ops);
      }),
      { numRuns: 60 },
    );
  });

  it('large sets take the early-exit walk and still intersect correctly', async () => {
    await r.flushdb();
    const idx = new FingerprintIndex({ redis: r, sinterThreshold: 100 });
    // 6000 devices share canvas, every third has ua=x: both sets exceed sinterThreshold
    const ps: Promise<void>[] = [];
    for (let i = 0; i < 6000; i++) ps.push(idx.put(`d${i}`, { canvas: 'c', ...(i % 3 === 0 ? { ua: 'x' } : { ua: 'y' }) }));
    await Promise.all(ps);
    const all = await idx.match({ canvas: 'c', ua: 'x' }, { limit: 100_000 });
    expect(all.length).toBe(2000);
    const lim = await idx.match({ canvas: 'c', ua: 'x' }, { limit: 10 });
    expect(lim.length).toBe(10);
    for (const d of lim) expect(Number(d.slice(1)) % 3).toBe(0);
    const u = await idx.any({ ua: 'x', canvas: 'c' }, { limit: 100_000 });
    expect(new Set(u).size).toBe(6000);
    expect((await idx.any({ ua: 'x', canvas: 'c' }, { limit: 7 })).length).toBe(7);
  });

  it('a hashed value whose key is taken by a different raw value probes the next slot (collision check)', async () => {
    await r.flushdb();
    const idx = new FingerprintIndex({ redis: r });
    const v = 'V'.repeat(100);
    const hk = `idx:ua:#${murmur3_128Hex(v)}`;
    // simulate a murmur3_128 collision: another value already owns the slot
    await r.set(`${hk}:raw`, 'some other long value');
    await r.sadd(hk, 'intruder');
    await idx.put('dev1', { ua: v });
    expect(await r.smembers(`${hk}~1`)).toEqual(['dev1']);
    expect(await idx.match({ ua: v })).toEqual(['dev1']);
    expect(await idx.any({ ua: v })).toEqual(['dev1']);
    const direct = new FingerprintIndex({ redis: r, directQueries: true, bloom: false });
    expect(await direct.match({ ua: v })).toEqual(['dev1']);
    expect(await direct.any({ ua: v, canvas: 'none' })).toEqual(['dev1']);
    await idx.remove('dev1');
    expect(await r.exists(`${hk}~1:raw`)).toBe(0);
    expect(await r.get(`${hk}:raw`)).toBe('some other long value');
  });

  it('a Bloom-gated absent value costs ZERO redis commands (server-side command counter and MONITOR)', async () => {
    await r.flushdb();
    const idx = new FingerprintIndex({ redis: r, bloom: { expectedItems: 10_000, fpp: 0.0001 } });
    for (let i = 0; i < 200; i++) await idx.put(`d${i}`, { canvas: `c${i % 20}`, ua: `u${i % 7}` });
    const probe = new Redis(srv.url);
    const mon = await r.monitor();
    const seen: string[] = [];
    mon.on('monitor', (_t: string, args: string[]) => seen.push(args.join(' ')));
    const before = await commandsProcessed(probe);
    for (let i = 0; i < 500; i++) {
      expect(await idx.match({ canvas: `absent-${i}`, ua: 'u1' })).toEqual([]);
      expect(await idx.any({ canvas: `absent-${i}`, ip: `nope-${i}` })).toEqual([]);
    }
    const after = await commandsProcessed(probe);
    // exactly the one INFO of the first measurement ran in between
    expect(after - before).toBe(1);
    // control: a present value does reach redis, so the counter and MONITOR do see index traffic
    expect((await idx.match({ canvas: 'c1', ua: 'u1' })).length).toBeGreaterThan(0);
    await new Promise((res) => setTimeout(res, 100));
    expect(seen.some((s) => s.includes('idx:canvas:c1'))).toBe(true);
    expect(seen.filter((s) => s.includes('absent-') || s.includes('nope-'))).toEqual([]);
    expect(await commandsProcessed(probe)).toBeGreaterThan(after + 1);
    expect(idx.stats().gateShortCircuits).toBe(1000);
    mon.disconnect();
    probe.disconnect();
  });

  it('rebuildGate() loads values written by another instance', async () => {
    await r.flushdb();
    const a = new FingerprintIndex({ redis: r });
    await a.put('d1', { canvas: 'written-by-a' });
    const b = new FingerprintIndex({ redis: r });
    expect(await b.match({ canvas: 'written-by-a' })).toEqual([]); // b's gate never saw it
    expect(await b.rebuildGate()).toBe(1);
    expect(await b.match({ canvas: 'written-by-a' })).toEqual(['d1']);
  });

  it('concurrent updates of one device from two clients leave no orphaned set membership', async () => {
    await r.flushdb();
    const r2 = new Redis(srv.url);
    const a = new FingerprintIndex({ redis: r, bloom: false });
    const b = new FingerprintIndex({ redis: r2, bloom: false });
    const ps: Promise<void>[] = [];
    for (let i = 0; i < 300; i++) ps.push((i % 2 ? a : b).put('dev', { canvas: `c${i % 11}`, ua: `u${i % 5}` }));
    await Promise.all(ps);
    const rec = await a.get('dev');
    const canvasKeys = await r.keys('idx:canvas:*');
    const uaKeys = await r.keys('idx:ua:*');
    expect(canvasKeys).toEqual([`idx:canvas:${rec!.canvas}`]);
    expect(uaKeys).toEqual([`idx:ua:${rec!.ua}`]);
    r2.disconnect();
  });
});
