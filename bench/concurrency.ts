// The service call pattern: many concurrent callers, each sending a few keys per call, against
// what a user would write instead (ioredis auto-pipelining, a JS Set, lru-cache), same run.
//
// For 1, 16, 256 and 1024 concurrent callers x 1, 10 and 100 keys per call: throughput (keys/s)
// and per-call latency percentiles (p50/p99/p999 from a node:perf_hooks histogram, ns
// resolution). Every caller awaits its call before sending the next, like a request handler.
//   firstSeen embedded  hashgate (HashGate, no Redis) vs a JS Set in an async function
//   firstSeen Redis     hashgate compact and sets layouts vs ioredis enableAutoPipelining: one
//                       SADD per key, and one Lua check-and-add (SADD per key) per call
//   lookup Redis hits   TieredCache with a cold local tier vs autopipelined GET per key / MGET
//   lookup LRU hits     TieredCache vs lru-cache get in an async function
//   bloomCheck          gate.bloomCheck merged (default coalesce) and with coalesce:false vs the
//                       `bloomfilter` package's test() per key in an async function
// Every timed run writes fresh keys into a fresh namespace, and its answers are counted: a run
// whose answers are wrong is recorded as failed and not ranked.
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import { Suite, drive, makeKeys, runWhenMain, spread, type BenchRow, type Drive, type SuiteOptions, type SuiteResult, type SweepSeries } from './common.js';
import { startBenchRedis } from './redis-server.js';
import { HashGate } from '../src/gate.js';
import { bloomShape } from '../src/bloom/index.js';
import { HotColdStore } from '../src/tiering/index.js';
import { FingerprintIndex } from '../src/fingerprint/index.js';

const slices = (keys: string[], k: number): string[][] => {
  const out: string[][] = [];
  for (let i = 0; i + k <= keys.length; i += k) out.push(keys.slice(i, i + k));
  return out;
};

/** `bloomfilter` ships no types; the two methods used here. */
interface Bf {
  add(v: string): void;
  test(v: string): boolean;
}
const BF_MODULE = 'bloomfilter';

interface Impl {
  impl: string;
  role: 'hashgate' | 'peer';
  /** Builds a fresh instance for one timed run; returns the call and an answer check. */
  setup: (tag: string) => Promise<{ call: (keys: string[]) => Promise<unknown>; verify: (keys: number) => string | true | Promise<string | true>; close: () => Promise<void> }>;
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('concurrency', opts);
  const load0 = loadavg()[0]!;
  const CALLERS = opts.quick ? [1, 256] : [1, 16, 256, 1024];
  const KPC = opts.quick ? [1, 10] : [1, 10, 100];
  const perRun = (c: number): number => (opts.quick ? 10_000 : c === 1 ? 10_000 : 40_000);
  const keys = makeKeys(perRun(256), 'A', 7);
  const warmKeys = makeKeys(2_000, 'A', 8).map((k) => `w${k}`);
  const jdir = mkdtempSync(join(tmpdir(), 'hg-bench-conc-'));
  const byGroup = new Map<string, Map<string, { c: number; k: number; d: Drive }>>();

  /**
   * Times every impl at one (callers, keys per call) point: `passes` rounds, each giving every impl
   * a fresh instance, a warm-up and one timed pass, impl after impl, so a change in the shared
   * box's load hits hashgate and its peers alike. A row reports the impl's median pass
   * (throughput and its latency percentiles) and keeps every pass as a sample.
   */
  const passes = opts.quick ? 1 : 3;
  // The 256-caller one-key points carry the suite's targets, and their 40k-key passes take a few
  // hundred ms: one slow stretch of this shared box moved a ratio there by a third between two
  // runs of the same code (1.26x against 1.73x), so they take more passes for a steadier median.
  const passesAt = (c: number, k: number): number => (passes > 1 && c === 256 && k === 1 ? 5 : passes);
  const timePoint = async (group: string, impls: Impl[], c: number, k: number, tag: string, repeat = 1): Promise<void> => {
    const n = perRun(c);
    const once = slices(keys.slice(0, n), k);
    // In-process groups finish 40k keys in tens of ms, too short to leave JIT and GC noise
    // behind: they go over the same calls `repeat` times (hits stay hits).
    const calls = repeat === 1 ? once : Array.from({ length: repeat }, () => once).flat();
    const name = `${group} ${c} callers x ${k} keys`;
    const runs: Drive[][] = impls.map(() => []);
    const wrong: (string | undefined)[] = impls.map(() => undefined);
    for (let pass = 0; pass < passesAt(c, k); pass++) {
      for (let i = 0; i < impls.length; i++) {
        if (wrong[i] !== undefined) continue;
        const inst = await impls[i]!.setup(`${tag}-${pass}`);
        try {
          await drive(Math.min(c, 64), slices(warmKeys, k), inst.call);
          const d = await drive(c, calls, inst.call);
          const bad = await inst.verify(d.keys + warmKeys.length - (warmKeys.length % k));
          if (bad === true) runs[i]!.push(d);
          else wrong[i] = bad;
        } finally {
          await inst.close();
        }
      }
    }
    for (let i = 0; i < impls.length; i++) addPointRow(group, name, impls[i]!, c, k, runs[i]!, wrong[i]);
  };
  const addPointRow = (group: string, name: string, impl: Impl, c: number, k: number, runs: Drive[], bad: string | undefined): BenchRow => {
    if (bad !== undefined) {
      const row: BenchRow = { name, impl: impl.impl, role: impl.role, opsPerSec: 0, ok: false, error: bad, unit: 'keys/s', extra: { callers: c, keysPerCall: k } };
      console.warn(`[concurrency] ${impl.impl} @ ${name}: WRONG (${bad})`);
      return s.addRow(row);
    }
    const rate = (d: Drive): number => d.keys / d.secs;
    const sorted = [...runs].sort((a, b) => rate(a) - rate(b));
    const d = sorted[Math.floor(sorted.length / 2)]!;
    const extra = { callers: c, keysPerCall: k, p50Us: round(d.p50), p99Us: round(d.p99), p999Us: round(d.p999), passes: runs.length };
    let g = byGroup.get(group);
    if (g === undefined) byGroup.set(group, (g = new Map()));
    g.set(`${impl.impl}|${c}|${k}`, { c, k, d });
    const row: BenchRow = { name, impl: impl.impl, role: impl.role, opsPerSec: rate(d), ...spread(runs.map(rate)), ok: true, unit: 'keys/s', extra };
    console.log(`[concurrency] ${name} | ${impl.impl}: ${Math.round(row.opsPerSec / 1000)}k keys/s, p50 ${extra.p50Us} us, p99 ${extra.p99Us} us, p999 ${extra.p999Us} us`);
    return s.addRow(row);
  };
  const sweepPoints = (group: string, impls: Impl[], title: string): void => {
    for (const k of KPC) {
      if (k !== 1 && k !== 10) continue;
      const thr: SweepSeries[] = [];
      const p99: SweepSeries[] = [];
      for (const im of impls) {
        const t: SweepSeries = { name: im.impl, points: [] };
        const l: SweepSeries = { name: im.impl, points: [] };
        for (const c of CALLERS) {
          const e = byGroup.get(group)?.get(`${im.impl}|${c}|${k}`);
          if (e === undefined) continue;
          t.points.push({ x: c, y: Math.round(e.d.keys / e.d.secs) });
          l.points.push({ x: c, y: round(e.d.p99) });
        }
        if (t.points.length > 0) {
          thr.push(t);
          p99.push(l);
        }
      }
      if (thr.length === 0) continue;
      s.sweep({ name: `${title} throughput vs concurrency (${k} key${k > 1 ? 's' : ''} per call)`, xLabel: 'concurrent callers', yLabel: 'keys/s', logX: true, series: thr });
      s.sweep({ name: `${title} p99 latency vs concurrency (${k} key${k > 1 ? 's' : ''} per call)`, xLabel: 'concurrent callers', yLabel: 'p99 us per call', logX: true, logY: true, series: p99 });
    }
  };
  // Development aid: HASHGATE_BENCH_GROUPS=embedded,lru runs only the groups whose name matches.
  const only = process.env.HASHGATE_BENCH_GROUPS?.split(',');
  const wanted = (group: string): boolean => only === undefined || only.some((w) => group.toLowerCase().includes(w.toLowerCase()));
  // Development aid: HASHGATE_BENCH_POINTS=256x1,1x1 times only these callers x keys-per-call points.
  const points = process.env.HASHGATE_BENCH_POINTS?.split(',');
  const wantedPoint = (c: number, k: number): boolean => points === undefined || points.includes(`${c}x${k}`);
  const grid = async (group: string, impls: Impl[], repeat = 1): Promise<void> => {
    if (!wanted(group)) return;
    for (const c of CALLERS) for (const k of KPC) if (wantedPoint(c, k)) await timePoint(group, impls, c, k, `${c}x${k}`, repeat);
  };

  try {
    // ---- firstSeen, embedded store vs a JS Set
    const embedded: Impl[] = [
      {
        impl: 'hashgate embedded',
        role: 'hashgate',
        setup: async () => {
          const gate = await HashGate.open({ threads: 0 });
          let ones = 0;
          return {
            call: (b) =>
              gate.firstSeen(b).then((a) => {
                for (let i = 0; i < a.length; i++) ones += a[i]!;
              }),
            verify: (n) => (ones === n ? true : `${ones} first-seen answers for ${n} new keys`),
            close: () => gate.close(),
          };
        },
      },
      {
        impl: 'JS Set',
        role: 'peer',
        setup: async () => {
          const set = new Set<string>();
          let ones = 0;
          return {
            call: async (b) => {
              const a = new Uint8Array(b.length);
              for (let i = 0; i < b.length; i++) {
                if (!set.has(b[i]!)) {
                  set.add(b[i]!);
                  a[i] = 1;
                }
              }
              for (let i = 0; i < a.length; i++) ones += a[i]!;
            },
            verify: (n) => (ones === n ? true : `${ones} first-seen answers for ${n} new keys`),
            close: async () => set.clear(),
          };
        },
      },
    ];
    await grid('firstSeen embedded', embedded);
    sweepPoints('firstSeen embedded', embedded, 'firstSeen embedded');

    // ---- bloomCheck on the gate's filter (every checked key was added: each answer must be 1)
    const bloomOpts = { expectedItems: perRun(256) + warmKeys.length, fpp: 0.001 };
    const bloomGate = (impl: string, coalesce: false | undefined): Impl => ({
      impl,
      role: 'hashgate',
      setup: async () => {
        const gate = await HashGate.open({ threads: 0, bloom: bloomOpts, ...(coalesce === false ? { coalesce } : {}) });
        await gate.bloomAdd(keys);
        await gate.bloomAdd(warmKeys);
        let ones = 0;
        return {
          call: (b) =>
            gate.bloomCheck(b).then((a) => {
              for (let i = 0; i < a.length; i++) ones += a[i]!;
            }),
          verify: (n) => (ones === n ? true : `${ones} "maybe present" answers for ${n} added keys`),
          close: () => gate.close(),
        };
      },
    });
    const Bf = ((await import(BF_MODULE)) as { BloomFilter: new (m: number, k: number) => Bf }).BloomFilter;
    const bloomChecks: Impl[] = [
      bloomGate('hashgate merged', undefined),
      bloomGate('hashgate coalesce:false', false),
      {
        impl: 'bloomfilter test() per key',
        role: 'peer',
        setup: async () => {
          const shape = bloomShape(bloomOpts);
          const f = new Bf(shape.bitSize, shape.hashFunctions);
          for (const k of keys) f.add(k);
          for (const k of warmKeys) f.add(k);
          let ones = 0;
          return {
            call: async (b) => {
              const a = new Uint8Array(b.length);
              for (let i = 0; i < b.length; i++) a[i] = f.test(b[i]!) ? 1 : 0;
              for (let i = 0; i < a.length; i++) ones += a[i]!;
            },
            verify: (n) => (ones === n ? true : `${ones} "maybe present" answers for ${n} added keys`),
            close: async () => undefined,
          };
        },
      },
    ];
    await grid('bloomCheck', bloomChecks, opts.quick ? 1 : 5);

    const srv = await startBenchRedis('concurrency');
    if (srv === undefined) {
      s.note('redis-server not available: Redis rows not measured');
    } else {
      const admin = new Redis(srv.url);
      try {
        // ---- firstSeen on Redis
        const peer = (): Redis => new Redis(srv.url, { enableAutoPipelining: true });
        let run = 0;
        const hashgateRedis = (layout: 'compact' | 'sets'): Impl => ({
          impl: `hashgate ${layout}`,
          role: 'hashgate',
          setup: async () => {
            const gate = await HashGate.open({
              threads: 0,
              redis: srv.url,
              // compact sized for the run (expectedKeys: buckets = keys / 153, the documented rule; a
              // 65_536-bucket default on a 40k-key run would create a new Redis key per key, which a
              // long-running window never does); sets: the seed's 1000 buckets
              dedup: { layout, prefix: `hg${++run}`, journalDir: jdir, replayIntervalMs: 0, ...(layout === 'compact' ? { expectedKeys: perRun(256) } : {}) },
            });
            let ones = 0;
            return {
              call: (b) =>
                gate.firstSeen(b).then((a) => {
                  for (let i = 0; i < a.length; i++) ones += a[i]!;
                }),
              verify: (n) => {
                const c = gate.dedup.counters;
                if (c.journaledKeys > 0) return `${c.journaledKeys} keys journaled (Redis failed)`;
                return ones === n ? true : `${ones} first-seen answers for ${n} new keys`;
              },
              close: () => gate.close(),
            };
          },
        });
        const saddPeer: Impl = {
          impl: 'ioredis autopipelined SADD',
          role: 'peer',
          setup: async () => {
            const r = peer();
            const key = `sadd${++run}`;
            let ones = 0;
            return {
              call: (b) =>
                b.length === 1
                  ? r.sadd(key, b[0]!).then((x) => {
                      ones += x;
                    })
                  : Promise.all(b.map((m) => r.sadd(key, m))).then((xs) => {
                      for (const x of xs) ones += x;
                    }),
              verify: (n) => (ones === n ? true : `${ones} SADD replies of 1 for ${n} new keys`),
              close: async () => r.disconnect(),
            };
          },
        };
        const luaPeer: Impl = {
          impl: 'ioredis autopipelined Lua check-and-add',
          role: 'peer',
          setup: async () => {
            const r = peer();
            r.defineCommand('checkAndAdd', {
              numberOfKeys: 1,
              lua: "local r = {} for i = 1, #ARGV do r[i] = redis.call('SADD', KEYS[1], ARGV[i]) end return r",
            });
            const key = `lua${++run}`;
            let ones = 0;
            const cmd = (r as unknown as { checkAndAdd: (k: string, ...m: string[]) => Promise<number[]> }).checkAndAdd.bind(r);
            return {
              call: (b) =>
                cmd(key, ...b).then((xs) => {
                  for (const x of xs) ones += x;
                }),
              verify: (n) => (ones === n ? true : `${ones} replies of 1 for ${n} new keys`),
              close: async () => r.disconnect(),
            };
          },
        };
        const fsImpls = [hashgateRedis('compact'), hashgateRedis('sets'), saddPeer, luaPeer];
        for (const c of wanted('firstSeen Redis') ? CALLERS : []) {
          for (const k of KPC) {
            if (!wantedPoint(c, k)) continue;
            await timePoint('firstSeen Redis', fsImpls, c, k, `${c}x${k}`);
            await admin.flushall();
          }
        }
        sweepPoints('firstSeen Redis', fsImpls, 'firstSeen Redis');

        // ---- lookups: Redis hits and LRU hits
        const TABLE = 'risk';
        const hot = new HotColdStore({ redis: admin });
        const all = [...keys, ...warmKeys];
        for (let i = 0; i < all.length; i += 5_000) {
          await hot.write(TABLE, all.slice(i, i + 5_000).map((key) => ({ key, value: { level: 3, tag: 'blacklist' } })));
        }
        const lookupHashgate = (lru: boolean): Impl => ({
          impl: 'hashgate TieredCache',
          role: 'hashgate',
          setup: async () => {
            // the peers wait as long as Redis takes; so does this row (the 250 ms default would
            // answer 'degraded' for the keys of a load stuck behind 1024 callers on a loaded box)
            const gate = await HashGate.open({ threads: 0, cache: { redis: { url: srv.url, timeoutMs: 60_000 } } });
            if (lru) for (let i = 0; i < all.length; i += 1000) await gate.lookup(TABLE, all.slice(i, i + 1000));
            const before = gate.cache!.stats();
            let found = 0;
            return {
              call: (b) =>
                gate.lookup(TABLE, b).then((v) => {
                  for (let i = 0; i < v.length; i++) if (v[i] !== undefined) found++;
                }),
              verify: (n) => {
                const st = gate.cache!.stats();
                const via = lru ? st.local.hits - before.local.hits : (st.redis?.hits ?? 0) - (before.redis?.hits ?? 0);
                if (found !== n) return `${found} values for ${n} present keys`;
                return via === n ? true : `${via} of ${n} keys served by the ${lru ? 'LRU' : 'Redis'} tier`;
              },
              close: () => gate.close(),
            };
          },
        });
        const getPeer: Impl = {
          impl: 'ioredis autopipelined GET',
          role: 'peer',
          setup: async () => {
            const r = peer();
            let found = 0;
            const pre = `hg:v:${TABLE}:`;
            return {
              call: (b) =>
                b.length === 1
                  ? r.getBuffer(pre + b[0]!).then((v) => {
                      if (v !== null) found++;
                    })
                  : Promise.all(b.map((k) => r.getBuffer(pre + k))).then((vs) => {
                      for (const v of vs) if (v !== null) found++;
                    }),
              verify: (n) => (found === n ? true : `${found} values for ${n} present keys`),
              close: async () => r.disconnect(),
            };
          },
        };
        const mgetPeer: Impl = {
          impl: 'ioredis autopipelined MGET',
          role: 'peer',
          setup: async () => {
            const r = peer();
            let found = 0;
            const pre = `hg:v:${TABLE}:`;
            return {
              call: (b) =>
                r.mgetBuffer(...b.map((k) => pre + k)).then((vs) => {
                  for (const v of vs) if (v !== null) found++;
                }),
              verify: (n) => (found === n ? true : `${found} values for ${n} present keys`),
              close: async () => r.disconnect(),
            };
          },
        };
        const redisLookups = [lookupHashgate(false), getPeer, mgetPeer];
        await grid('lookup Redis hits', redisLookups);
        sweepPoints('lookup Redis hits', redisLookups, 'lookup Redis hits');
        const lruPeer: Impl = {
          impl: 'lru-cache get',
          role: 'peer',
          setup: async () => {
            const lru = new LRUCache<string, object>({ max: 100_000, ttl: 60_000 });
            for (const k of all) lru.set(k, { level: 3, tag: 'blacklist' });
            let found = 0;
            return {
              call: async (b) => {
                for (let i = 0; i < b.length; i++) if (lru.get(b[i]!) !== undefined) found++;
              },
              verify: (n) => (found === n ? true : `${found} values for ${n} present keys`),
              close: async () => lru.clear(),
            };
          },
        };
        const lruLookups = [lookupHashgate(true), lruPeer];
        await grid('lookup LRU hits', lruLookups, opts.quick ? 1 : 5);

        // ---- index.match on Redis: one device query per call (canvas = the key, plus a ua term)
        if (wanted('index match Redis')) {
          await admin.flushall();
          const ua = (k: string): string => `u${k.charCodeAt(k.length - 1) % 4}`;
          const writer = new FingerprintIndex({ redis: admin, bloom: false });
          for (let i = 0; i < all.length; i += 1000) await Promise.all(all.slice(i, i + 1000).map((k) => writer.put(k, { canvas: k, ua: ua(k) })));
          await writer.close();
          const matchHashgate: Impl = {
            impl: 'hashgate FingerprintIndex',
            role: 'hashgate',
            setup: async () => {
              const r = peer();
              // bloom false: this instance wrote nothing, so its local gate would know no value
              const idx = new FingerprintIndex({ redis: r, bloom: false });
              let found = 0;
              return {
                call: (b) =>
                  idx.match({ canvas: b[0]!, ua: ua(b[0]!) }).then((ids) => {
                    if (ids.length === 1 && ids[0] === b[0]) found++;
                  }),
                verify: (n) => (found === n ? true : `${found} queries found their device of ${n}`),
                close: async () => {
                  await idx.close();
                  r.disconnect();
                },
              };
            },
          };
          const sinterPeer: Impl = {
            impl: 'ioredis autopipelined SINTER',
            role: 'peer',
            setup: async () => {
              const r = peer();
              let found = 0;
              return {
                call: (b) =>
                  r.sinter(`idx:canvas:${b[0]!}`, `idx:ua:${ua(b[0]!)}`).then((ids) => {
                    if (ids.length === 1 && ids[0] === b[0]) found++;
                  }),
                verify: (n) => (found === n ? true : `${found} queries found their device of ${n}`),
                close: async () => r.disconnect(),
              };
            },
          };
          const matchImpls = [matchHashgate, sinterPeer];
          for (const c of CALLERS) await timePoint('index match Redis', matchImpls, c, 1, `${c}x1`);
          sweepPoints('index match Redis', matchImpls, 'index match Redis');
        }
      } finally {
        admin.disconnect();
        await srv.stop();
      }
    }
  } finally {
    rmSync(jdir, { recursive: true, force: true });
  }

  // ---- targets
  const row = (group: string, c: number, k: number, impl: string) => s.find(`${group} ${c} callers x ${k} keys`, impl);
  const ratio = (group: string, c: number, k: number, a: string, b: string) => s.ratio(`${group} ${c} callers x ${k} keys`, a, b);
  const p = (r: BenchRow | undefined, q: 'p50Us' | 'p99Us') => (r?.ok === false ? undefined : (r?.extra?.[q] as number | undefined));
  const div = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined || !(b > 0) ? undefined : a / b);
  const SADD = 'ioredis autopipelined SADD';
  const GET = 'ioredis autopipelined GET';
  s.target('256 callers x 1 key firstSeen Redis compact vs autopipelined SADD', '>=', 2, ratio('firstSeen Redis', 256, 1, 'hashgate compact', SADD), 'x');
  s.target('256 callers x 1 key firstSeen Redis sets vs autopipelined SADD', '>=', 2, ratio('firstSeen Redis', 256, 1, 'hashgate sets', SADD), 'x');
  s.target('256 callers x 1 key firstSeen embedded', '>=', 500_000, row('firstSeen embedded', 256, 1, 'hashgate embedded')?.opsPerSec, ' keys/s');
  s.target('256 callers x 1 key lookup Redis hits vs autopipelined GET', '>=', 1.5, ratio('lookup Redis hits', 256, 1, 'hashgate TieredCache', GET), 'x');
  s.target('256 callers x 1 key lookup LRU hits', '>=', 1_000_000, row('lookup LRU hits', 256, 1, 'hashgate TieredCache')?.opsPerSec, ' keys/s');
  s.target('p99 at 256 callers x 1 key, firstSeen Redis compact / SADD p99', '<=', 1, div(p(row('firstSeen Redis', 256, 1, 'hashgate compact'), 'p99Us'), p(row('firstSeen Redis', 256, 1, SADD), 'p99Us')), 'x');
  s.target('p99 at 256 callers x 1 key, lookup Redis hits / GET p99', '<=', 1, div(p(row('lookup Redis hits', 256, 1, 'hashgate TieredCache'), 'p99Us'), p(row('lookup Redis hits', 256, 1, GET), 'p99Us')), 'x');
  s.target('p99 at 256 callers x 1 key, firstSeen embedded / JS Set p99', '<=', 1, div(p(row('firstSeen embedded', 256, 1, 'hashgate embedded'), 'p99Us'), p(row('firstSeen embedded', 256, 1, 'JS Set'), 'p99Us')), 'x',
    'a synchronous Set answers every caller in the same turn; listed for scale');
  s.target('sequential single-key firstSeen embedded p50', '<=', 10, p(row('firstSeen embedded', 1, 1, 'hashgate embedded'), 'p50Us'), ' us');
  s.target('sequential single-key firstSeen Redis compact p50 / one SADD round trip p50', '<=', 1.2, div(p(row('firstSeen Redis', 1, 1, 'hashgate compact'), 'p50Us'), p(row('firstSeen Redis', 1, 1, SADD), 'p50Us')), 'x');
  s.target('256 callers x 1 query index.match Redis vs autopipelined SINTER', '>=', 1, ratio('index match Redis', 256, 1, 'hashgate FingerprintIndex', 'ioredis autopipelined SINTER'), 'x');
  s.note(`Every caller awaits its call before the next (a request handler); keys are Chinese name + 18-digit ID, all new for firstSeen and all present for lookups. ${perRun(256)} keys per timed pass (${perRun(1)} for 1 caller), after an untimed warm-up of ${warmKeys.length}; each row is the median of ${passes} passes (${passesAt(256, 1)} at 256 callers x 1 key) on fresh instances (min..max shown), latency percentiles from that pass.`);
  s.note(
    'firstSeen Redis rows are warm steady state: the process already ran the embedded and Bloom groups, each pass starts after a warm-up, compact buckets are sized to the 40k-key pass (expectedKeys), and the pass takes tens of ms. ' +
      'What a user sees from a fresh process with default options, with the Node/Redis CPU split, is in the redis-path suite.',
  );
  s.note('hashgate merges the calls that reach a store in one event-loop turn into one batch (coalesce: { maxKeys: 128, maxDelayMs: 0 }): one Redis script or MGET per turn instead of one command per key.');
  s.note(`1-min load average ${load0.toFixed(1)} at start, ${loadavg()[0]!.toFixed(1)} at end (2-core box shared with other jobs: absolute numbers are noisy, ratios within one run less so).`);
  return s.finish();
}

const round = (v: number): number => Math.round(v * 10) / 10;

runWhenMain(import.meta.url, run);
