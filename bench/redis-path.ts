// The Redis paths (dedup, and the lookup cache's reads) as a user meets them, and where their time goes.
//
// Every timed run is a fresh process (bench/_redis-path-child.ts) with a fresh gate on all-new
// keys against a just-flushed private redis-server, long enough that JIT warm-up is a small part
// of it; hashgate and the peer a user would write instead alternate pass by pass in the same run.
// Paths: sequential single-key calls; 256 concurrent callers x 1 key; 10k-key batches (AOF
// everysec, and again without AOF); fail-closed 10k-key batches with a requestId (AOF everysec);
// and the lookup cache's Redis reads, 256 callers x 1 key. Each row carries the
// Node CPU per key (process.cpuUsage of the child) and the Redis CPU per key (INFO cpu
// used_cpu_user + used_cpu_sys delta), and for the SADD paths where that Redis CPU went (INFO
// commandstats: inside SADDs, inside the splits' DUMPs, RESTOREs and scripts, the rest). The physical-limit row
// is redis-server alone fed the same SADD bucket member commands hashgate writes (its bucket keys
// and compact members for the same keys, src/dedup/layout.ts) as pre-generated RESP through
// `redis-cli --pipe`; the round-trip row feeds the same file a chunk per round trip, as a client
// that waits for its replies does.
import { fork, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Suite, makeKeys, repoRoot, runWhenMain, spread, type BenchRow, type SuiteOptions, type SuiteResult } from './common.js';
import { startBenchRedis, type BenchRedis } from './redis-server.js';
import type { ChildResult, PathKind, Spec } from './_redis-path-child.js';
import { bucketsOfDigests, compactMember, digestKeys } from '../src/dedup/layout.js';
import { DEFAULT_INTSET_LIMIT, addressOf, depthOf, splitLoad, subBucketName, subBucketOf, tablePrefix, targetSubBuckets } from '../src/dedup/growth.js';

const BATCH = 10_000;
/** Keys per call of the big-batch row: the top of what the batch API and bulk callers send. */
const BIG_BATCH = 200_000;
const MARK = 200_000;
const LIMIT_LABEL = 'redis-server alone: SADD bucket member via redis-cli --pipe (physical limit)';
const PREFIX = 'hg:dedup';
const FLOOR_LABEL = 'Node alone: the same SADDs, RESP-encoded before the run, written a 10000-key call at a time from a fresh process, replies counted (client-side physical limit)';
/** The same feed sent the way a client that waits for replies sends it: this many commands per round trip. */
const roundTripChunk = (path: PathKind): number => (path === 'single' ? 1 : path === 'c256' ? 64 : BATCH / 4);
const roundTripLabel = (c: number): string => `redis-server alone, the same SADDs fed ${c} per round trip (each chunk sent once the last one is answered)`;

interface PathDef {
  path: PathKind;
  name: (n: number) => string;
  peer: string;
  keys: number;
  aof: boolean;
  /** Keys per call when not BATCH. */
  batch?: number;
  /** No physical-limit row: the same commands as another row's. */
  noLimit?: boolean;
  /** hashgate's window sized for the run's keys with dedup.expectedKeys (the others use defaults). */
  sized?: boolean;
}

const runChild = (file: string, spec: Spec): Promise<ChildResult> =>
  new Promise((resolve) => {
    const child = fork(file, [JSON.stringify(spec)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: ['--expose-gc'] });
    let got: ChildResult | undefined;
    child.on('message', (m) => (got = m as ChildResult));
    child.on('exit', (code) => {
      resolve(got ?? { ok: false, error: `child exited with ${code} and no result`, keys: 0, secs: 0, markSecs: NaN, p50Us: NaN, p99Us: NaN, nodeCpuUs: 0, redisCpuUs: 0, mainCpuUs: NaN, mainWaitUs: NaN, lateNodeCpuUs: NaN, lateMainCpuUs: NaN, lateKeys: 0 });
    });
  });

const redisCpuUs = async (r: Redis): Promise<number> => {
  const info = await r.info('cpu');
  const f = (k: string): number => Number(new RegExp(`^${k}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (f('used_cpu_user') + f('used_cpu_sys')) * 1e6;
};

const persistence = async (r: Redis, k: string): Promise<number> => Number(new RegExp(`^${k}:(\\d+)`, 'm').exec(await r.info('persistence'))?.[1] ?? NaN);

/** Resolves once no AOF rewrite is running or scheduled; rejects after two minutes of waiting. */
async function rewriteDone(r: Redis): Promise<void> {
  const until = Date.now() + 120_000;
  while ((await persistence(r, 'aof_rewrite_in_progress')) === 1 || (await persistence(r, 'aof_rewrite_scheduled')) === 1) {
    if (Date.now() > until) throw new Error('the private redis-server did not finish its AOF rewrite within 2 minutes');
    await new Promise((f) => setTimeout(f, 50));
  }
}

/**
 * The state every pass starts from: an empty dataset and, with AOF on, a just-rewritten (so
 * nearly empty) AOF. Without it the AOF grew across passes (a million keys append 66-82 MB)
 * and a rewrite made due by the passes before forked at a random point of a later pass,
 * whichever implementation ran it.
 */
async function freshPass(r: Redis, aof: boolean): Promise<void> {
  await r.flushall();
  if (aof) {
    await rewriteDone(r);
    await r.bgrewriteaof();
    await rewriteDone(r);
  }
  await r.config('RESETSTAT');
}

/** Microseconds redis-server spent inside each command since the last CONFIG RESETSTAT (INFO commandstats). */
const commandUs = async (r: Redis): Promise<Map<string, number>> => {
  const m = new Map<string, number>();
  for (const x of (await r.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=\d+,usec=(\d+)/gm)) m.set(x[1]!.toLowerCase(), Number(x[2]));
  return m;
};

/**
 * Where a SADD path's Redis CPU went, per key: inside SADDs, inside the DUMPs, RESTOREs and scripts
 * of the splits of compact tables (a script's own commands count in its time), and the rest of `cpuUs`: reading
 * and writing the sockets, the event loop, AOF writes, and the few other commands (window count,
 * count reads). Undefined for paths whose SADDs run inside scripts (they would count twice), and
 * for repeat traffic, whose untimed first writes land in the same counters.
 */
function redisCpuParts(path: PathKind, cmd: Map<string, number>, cpuUs: number, keys: number): Record<string, number> | undefined {
  if (path === 'once' || path === 'lookup' || path === 'repeat') return undefined;
  const us = (...names: string[]): number => names.reduce((a, n) => a + (cmd.get(n) ?? 0), 0);
  const sadd = us('sadd');
  const splits = us('evalsha', 'eval', 'dump', 'restore');
  return { sadd: sadd / keys, splits: splits / keys, other: (cpuUs - sadd - splits) / keys };
}

/**
 * RESP of SADD sub-bucket member for every key, as hashgate's compact layout places them once the
 * window holds them all (each table at the sub-bucket count its schedule gives; src/dedup/growth.ts).
 * Returns the byte offset of every command, and the file's length last.
 */
function saddFeed(file: string, keys: string[], window: string, buckets: number): number[] {
  const d = digestKeys(keys);
  const b = bucketsOfDigests(d, 'compact', buckets);
  const dv = new DataView(d.buffer, d.byteOffset, d.byteLength);
  const alpha = splitLoad(DEFAULT_INTSET_LIMIT);
  const parts: string[] = [];
  for (let i = 0; i < keys.length; i++) {
    const n = targetSubBuckets(b[i]!, keys.length, buckets, alpha);
    const m = compactMember(d, i, dv);
    const s = subBucketOf(addressOf(BigInt(m)), n);
    const k = subBucketName(tablePrefix(`${PREFIX}:${window}`, b[i]!), s, n <= 1 ? 0 : depthOf(s, n));
    parts.push(`*3\r\n$4\r\nSADD\r\n$${k.length}\r\n${k}\r\n$${m.length}\r\n${m}\r\n`);
  }
  writeFileSync(file, parts.join(''));
  // byte offset of every command and the end (keys and members are ASCII: a character is a byte)
  const starts = [0];
  for (const c of parts) starts.push(starts[starts.length - 1]! + c.length);
  return starts;
}

/** redis-cli --pipe of `file`: wall seconds and whether every command was answered without error. */
function pipe(port: number, file: string, n: number): Promise<{ secs: number; error?: string }> {
  return new Promise((resolve) => {
    const fd = openSync(file, 'r');
    const t0 = process.hrtime.bigint();
    const c = spawn('redis-cli', ['-p', String(port), '--pipe'], { stdio: [fd, 'pipe', 'pipe'] });
    let out = '';
    c.stdout!.on('data', (x: Buffer) => (out += x.toString()));
    c.stderr!.on('data', (x: Buffer) => (out += x.toString()));
    c.on('error', (e) => {
      closeSync(fd);
      resolve({ secs: 0, error: e.message });
    });
    c.on('exit', () => {
      const secs = Number(process.hrtime.bigint() - t0) / 1e9;
      closeSync(fd);
      const m = /errors: (\d+), replies: (\d+)/.exec(out);
      if (m === null || m[1] !== '0' || Number(m[2]) !== n) resolve({ secs, error: `redis-cli --pipe: ${out.trim().split('\n').pop()}` });
      else resolve({ secs });
    });
  });
}

/**
 * Sends the commands of `buf` (command k at starts[k]..starts[k + 1]) to 127.0.0.1:`port` in chunks of `chunk`, each once the replies
 * of the one before arrived: the server sleeps between chunks as it does between a waiting
 * client's writes. Wall seconds; an error when a reply was an error.
 */
async function roundTrips(port: number, buf: Buffer, starts: readonly number[], chunk: number): Promise<{ secs: number; error?: string }> {
  const n = starts.length - 1;
  const s = connect(port, '127.0.0.1');
  s.setNoDelay(true);
  await new Promise<void>((resolve, reject) => s.once('connect', resolve).once('error', reject));
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    let at = 0;
    let owed = 0;
    let error: string | undefined;
    const next = (): void => {
      if (at >= n) {
        s.end();
        return;
      }
      const e = Math.min(n, at + chunk);
      owed = e - at;
      s.write(buf.subarray(starts[at]!, starts[e]!));
      at = e;
    };
    // every reply of a SADD is one line (":1", ":0" or "-ERR ..."), so lines count replies
    s.on('data', (d: Buffer) => {
      for (let i = 0; i < d.length; i++) {
        if (d[i] === 45 && (i === 0 || d[i - 1] === 10)) error ??= 'an error reply';
        if (d[i] === 10 && --owed === 0) next();
      }
    });
    s.on('error', (e) => (error ??= e.message));
    s.on('close', () => resolve({ secs: Number(process.hrtime.bigint() - t0) / 1e9, ...(error !== undefined || at < n ? { error: error ?? 'connection closed early' } : {}) }));
    next();
  });
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('redis-path', opts);
  const load0 = loadavg()[0]!;
  const q = opts.quick;
  const passes = q ? 1 : 3;
  const child = join(repoRoot(), 'dist/bench/_redis-path-child.js');
  const jdir = mkdtempSync(join(tmpdir(), 'hg-bench-rpath-'));
  const only = process.env.HASHGATE_BENCH_PATHS?.split(',');
  const defs: PathDef[] = [
    { path: 'single', name: (n) => `sequential single-key firstSeen, ${n} new keys, fresh process`, peer: 'ioredis awaited SADD', keys: q ? 3_000 : 20_000, aof: false },
    { path: 'c256', name: (n) => `256 callers x 1 new key, ${n} keys, fresh process`, peer: 'ioredis autopipelined SADD', keys: q ? 200_000 : 1_000_000, aof: false },
    { path: 'batch', name: (n) => `batch firstSeen, ${n} new keys in ${BATCH}-key calls, AOF everysec, fresh process`, peer: 'ioredis pipelined SADD per key', keys: q ? 200_000 : 1_000_000, aof: true },
    // the same without AOF: Redis then pays only for the commands and the sockets
    { path: 'batch', name: (n) => `batch firstSeen, ${n} new keys in ${BATCH}-key calls, no AOF, fresh process`, peer: 'ioredis pipelined SADD per key', keys: q ? 200_000 : 1_000_000, aof: false },
    // the same into a window sized for its keys, as a service that knows its year's volume opens it
    {
      path: 'batch', name: (n) => `batch firstSeen, ${n} new keys in ${BATCH}-key calls, no AOF, window sized with dedup.expectedKeys, fresh process`, peer: 'ioredis pipelined SADD per key',
      keys: q ? 200_000 : 1_000_000, aof: false, sized: true,
    },
    {
      path: 'batch', name: (n) => `batch firstSeen, ${n} new keys in ${BIG_BATCH}-key calls, AOF everysec, fresh process`, peer: 'ioredis pipelined SADD per key',
      keys: q ? 400_000 : 1_000_000, aof: true, batch: BIG_BATCH, noLimit: true,
    },
    { path: 'once', name: (n) => `fail-closed batch firstSeen with requestId, ${n} new keys in ${BATCH}-key calls, AOF everysec, fresh process`, peer: 'ioredis pipelined SADD per key', keys: q ? 200_000 : 1_000_000, aof: true },
    { path: 'repeat', name: (n) => `batch firstSeen, ${n} keys already in the window (repeat traffic) in ${BATCH}-key calls, AOF everysec`, peer: 'ioredis pipelined SADD per key', keys: q ? 200_000 : 1_000_000, aof: true },
    { path: 'lookup', name: (n) => `lookup, 256 callers x 1 key, ${n} keys whose values only Redis holds, fresh process`, peer: 'ioredis autopipelined GET', keys: q ? 100_000 : 500_000, aof: false, noLimit: true },
  ];
  const round = (v: number, d = 2): number => Number(v.toFixed(d));
  try {
    for (const def of defs) {
      if (only !== undefined && !only.includes(def.path)) continue;
      // No automatic AOF rewrite (freshPass rewrites between passes): Redis starts one once the
      // file passed 64 MiB (67 MB), and a million keys of hashgate append about 82 MB (its SADDs
      // and the split scripts' RESTOREs) against the peer's 66 MB, so each hashgate pass held a
      // rewrite (a fork, copy-on-write faults, its child on one of the two cores) and no peer
      // pass did: 4 pairs of hashgate passes, 10k batches, were 2-19% slower with it (median
      // 3.5%) and 0.08-0.3 us/key dearer in Redis CPU. A service shares its rewrites over all
      // its keys by AOF bytes and dataset size, which one bounded pass cannot reproduce:
      // aofBytesPerKey reports the bytes instead.
      const aofArgs = ['--appendonly', 'yes', '--appendfsync', 'everysec', '--auto-aof-rewrite-percentage', '0'];
      const srv: BenchRedis | undefined = await startBenchRedis(`rpath-${def.path}`, def.aof ? aofArgs : []);
      if (srv === undefined) {
        s.note('redis-server not available: nothing measured');
        break;
      }
      const admin = new Redis(srv.url);
      const name = def.name(def.keys);
      try {
        const impls = [
          { impl: 'hashgate', label: 'hashgate', role: 'hashgate' as const },
          { impl: 'peer', label: def.peer, role: 'peer' as const },
          // the 10k-key batches' client-side floor, in the same alternation
          ...(def.path === 'batch' && def.noLimit !== true ? [{ impl: 'floor', label: FLOOR_LABEL, role: 'baseline' as const }] : []),
        ];
        const got: ChildResult[][] = impls.map(() => []);
        // per pass, where its Redis CPU went
        const partsOf: Array<Array<Record<string, number> | undefined>> = impls.map(() => []);
        // per pass, the bytes it appended to the AOF per key (AOF rows, but for repeat traffic, whose
        // passes also hold their untimed first writes)
        const aofBytesOf: number[][] = impls.map(() => []);
        const wrong: (string | undefined)[] = impls.map(() => undefined);
        let where: { window: string; buckets: number } | undefined;
        // the SADDs hashgate sends for these keys, once its first pass said where they go
        const feed = join(jdir, `feed-${def.path}.resp`);
        let starts: number[] | undefined;
        // single-key calls are short runs whose p50 is a few round trips of a noisy loopback, and
        // a one-key-caller pass is main-thread bound, so a pass in a slow stretch of a shared box
        // moves it most: more passes for a steadier median
        const np = (def.path === 'single' || def.path === 'c256' || def.path === 'lookup') && !q ? 5 : passes;
        for (let pass = 0; pass < np; pass++) {
          for (let i = 0; i < impls.length; i++) {
            if (wrong[i] !== undefined) continue;
            const floor = impls[i]!.impl === 'floor';
            if (floor) {
              if (where === undefined) continue;
              starts ??= saddFeed(feed, makeKeys(def.keys, 'A', 11), where.window, where.buckets);
            }
            await freshPass(admin, def.aof);
            const r = await runChild(child, {
              path: def.path, impl: impls[i]!.impl as Spec['impl'], url: srv.url, keys: def.keys, seed: 11, prefix: PREFIX,
              journalDir: jdir, batch: def.batch ?? BATCH, mark: MARK, ...(floor ? { feed } : {}), ...(def.sized === true ? { expectedKeys: def.keys } : {}),
            });
            if (!r.ok) {
              wrong[i] = r.error ?? 'failed';
              console.warn(`[redis-path] ${impls[i]!.label} @ ${name}: WRONG (${r.error})`);
              continue;
            }
            if (r.window !== undefined && r.buckets !== undefined) where = { window: r.window, buckets: r.buckets };
            got[i]!.push(r);
            partsOf[i]!.push(redisCpuParts(def.path, await commandUs(admin), r.redisCpuUs, r.keys));
            if (def.aof && def.path !== 'repeat') {
              if ((await persistence(admin, 'aof_rewrites')) !== 0) throw new Error('the private redis-server rewrote its AOF during a pass');
              aofBytesOf[i]!.push(((await persistence(admin, 'aof_current_size')) - (await persistence(admin, 'aof_base_size'))) / r.keys);
            }
            console.log(
              `[redis-path] ${name} | ${impls[i]!.label}: ${Math.round(r.keys / r.secs / 1000)}k keys/s, node ${(r.nodeCpuUs / r.keys).toFixed(2)} us/key ` +
                `(main thread ${(r.mainCpuUs / r.keys).toFixed(2)}; second half ${(r.lateNodeCpuUs / r.lateKeys).toFixed(2)}, its main thread ${(r.lateMainCpuUs / r.lateKeys).toFixed(2)}), ` +
                `redis ${(r.redisCpuUs / r.keys).toFixed(2)} us/key, p50 ${r.p50Us.toFixed(1)} us (load ${loadavg()[0]!.toFixed(2)})`,
            );
          }
        }
        for (let i = 0; i < impls.length; i++) {
          const im = impls[i]!;
          if (wrong[i] !== undefined) {
            s.addRow({ name, impl: im.label, role: im.role, opsPerSec: 0, ok: false, error: wrong[i], unit: 'keys/s' });
            continue;
          }
          const runs = got[i]!;
          const rate = (r: ChildResult): number => r.keys / r.secs;
          const med = [...runs].sort((a, b) => rate(a) - rate(b))[Math.floor(runs.length / 2)]!;
          // the CPU split of the median pass, and the per-pass medians of the latency
          const mid = (f: (r: ChildResult) => number): number => {
            const v = runs.map(f).sort((a, b) => a - b);
            return v[Math.floor(v.length / 2)]!;
          };
          const extra: Record<string, number | string> = {
            nodeCpuUsPerKey: round(mid((r) => r.nodeCpuUs / r.keys)),
            redisCpuUsPerKey: round(mid((r) => r.redisCpuUs / r.keys)),
            // as for the physical limit's rows: a pass in one of the host's slow stretches overstates it
            redisCpuUsPerKeyLeast: round(Math.min(...runs.map((r) => r.redisCpuUs / r.keys))),
          };
          // where Node's CPU went: its main thread against the others (JIT compiler, GC helpers),
          // the second half of the run (most of the JIT warm-up behind it), and how long the main
          // thread waited for a core while Redis and the helpers held both
          if (runs.every((r) => Number.isFinite(r.mainCpuUs))) {
            extra['nodeMainThreadUsPerKey'] = round(mid((r) => r.mainCpuUs / r.keys));
            extra['nodeOtherThreadsUsPerKey'] = round(mid((r) => (r.nodeCpuUs - r.mainCpuUs) / r.keys));
            extra['mainWaitingForCorePct'] = round(mid((r) => (100 * r.mainWaitUs) / 1e6 / r.secs), 1);
          }
          if (runs.every((r) => Number.isFinite(r.lateNodeCpuUs) && r.lateKeys > 0)) extra['nodeCpuSecondHalfUsPerKey'] = round(mid((r) => r.lateNodeCpuUs / r.lateKeys));
          const passParts = partsOf[i]!;
          if (passParts.every((x) => x !== undefined)) {
            const at = (k: string): number => {
              const v = passParts.map((x) => x![k]!).sort((a, b) => a - b);
              return round(v[Math.floor(v.length / 2)]!);
            };
            extra['redisInSaddUsPerKey'] = at('sadd');
            extra['redisInSplitsUsPerKey'] = at('splits');
            extra['redisOtherUsPerKey'] = at('other');
          }
          if (aofBytesOf[i]!.length > 0) {
            const v = [...aofBytesOf[i]!].sort((a, b) => a - b);
            extra['aofBytesPerKey'] = round(v[Math.floor(v.length / 2)]!, 1);
          }
          Object.assign(extra, {
            p50Us: round(mid((r) => r.p50Us), 1),
            p99Us: round(mid((r) => r.p99Us), 1),
          });
          // the rates the CPU split allows: Node and Redis on a core each (the busier one limits),
          // or sharing one (their sum limits), which is nearer what a loaded 2-core box gives
          const n = extra['nodeCpuUsPerKey'] as number;
          const rc = extra['redisCpuUsPerKey'] as number;
          extra['cpuBoundOwnCoresKeysPerSec'] = Math.round(1e6 / Math.max(n, rc));
          extra['cpuBoundSharedCoreKeysPerSec'] = Math.round(1e6 / (n + rc));
          if (def.keys > MARK) extra['first200kKeysPerSec'] = Math.round(mid((r) => MARK / r.markSecs));
          extra['load1'] = round(loadavg()[0]!);
          s.addRow({ name, impl: im.label, role: im.role, opsPerSec: rate(med), ...spread(runs.map(rate)), ok: true, unit: 'keys/s', extra });
        }

        // ---- the physical limit: redis-server alone, fed the same SADDs from a pipe (never idle),
        // and the same file fed in round trips, as a client that waits for its replies feeds it
        if (where !== undefined && def.path !== 'repeat' && def.noLimit !== true) {
          starts ??= saddFeed(feed, makeKeys(def.keys, 'A', 11), where.window, where.buckets);
          const feedBytes = readFileSync(feed);
          const rt = roundTripChunk(def.path);
          for (const [label, feedOnce] of [
            [LIMIT_LABEL, () => pipe(srv.port, feed, def.keys)],
            [roundTripLabel(rt), () => roundTrips(srv.port, feedBytes, starts!, rt)],
          ] as const) {
            const runs: { secs: number; cpu: number; parts: Record<string, number> | undefined }[] = [];
            let bad: string | undefined;
            for (let pass = 0; pass < passes && bad === undefined; pass++) {
              await freshPass(admin, def.aof);
              const c0 = await redisCpuUs(admin);
              const p = await feedOnce();
              const c1 = await redisCpuUs(admin);
              if (p.error !== undefined) bad = p.error;
              else runs.push({ secs: p.secs, cpu: c1 - c0, parts: redisCpuParts(def.path, await commandUs(admin), c1 - c0, def.keys) });
            }
            if (bad !== undefined) s.addRow({ name, impl: label, role: 'baseline', opsPerSec: 0, ok: false, error: bad, unit: 'keys/s' });
            else {
              const rate = (r: { secs: number }): number => def.keys / r.secs;
              const med = [...runs].sort((a, b) => rate(a) - rate(b))[Math.floor(runs.length / 2)]!;
              s.addRow({
                name, impl: label, role: 'baseline', opsPerSec: rate(med), ...spread(runs.map(rate)), ok: true, unit: 'keys/s',
                // the least Redis CPU of the passes too: the floor, which a busy pass overstates
                extra: {
                  nodeCpuUsPerKey: 0, redisCpuUsPerKey: round(med.cpu / def.keys), redisCpuUsPerKeyLeast: round(Math.min(...runs.map((r) => r.cpu)) / def.keys),
                  ...(med.parts === undefined ? {} : { redisInSaddUsPerKey: round(med.parts['sadd']!), redisInSplitsUsPerKey: round(med.parts['splits']!), redisOtherUsPerKey: round(med.parts['other']!) }),
                  load1: round(loadavg()[0]!),
                },
              });
              console.log(`[redis-path] ${name} | ${label}: ${Math.round(rate(med) / 1000)}k keys/s, redis ${(med.cpu / def.keys).toFixed(2)} us/key`);
            }
          }
          rmSync(feed, { force: true });
        }
      } finally {
        admin.disconnect();
        await srv.stop();
      }
    }
  } finally {
    rmSync(jdir, { recursive: true, force: true });
  }

  const rowOf = (def: PathDef, impl: string): BenchRow | undefined => {
    const r = s.find(def.name(def.keys), impl);
    return r?.ok === false ? undefined : r;
  };
  // the first row of a path (the 10k-key batches with AOF for 'batch')
  const find = (path: PathKind, impl: string): BenchRow | undefined => rowOf(defs.find((d) => d.path === path)!, impl);
  const ratio = (path: PathKind): number | undefined => {
    const def = defs.find((d) => d.path === path)!;
    return s.ratio(def.name(def.keys), 'hashgate', def.peer);
  };
  const p50 = (path: PathKind, impl: string): number | undefined => find(path, impl)?.extra?.['p50Us'] as number | undefined;
  const hp = p50('single', 'hashgate');
  const pp = p50('single', 'ioredis awaited SADD');
  s.target('256 callers x 1 new key, fresh process: hashgate vs autopipelined SADD', '>=', 2.5, ratio('c256'), 'x');
  s.target('10k-key batches, AOF everysec, fresh process: hashgate vs pipelined SADD per key', '>=', 3, ratio('batch'), 'x');
  s.target('lookup of values only Redis holds, 256 callers x 1 key, fresh process: hashgate TieredCache vs autopipelined GET', '>=', 1.5, ratio('lookup'), 'x');
  s.target('sequential single-key p50, fresh process: hashgate / one SADD round trip', '<=', 1.1, hp !== undefined && pp !== undefined ? hp / pp : undefined, 'x');
  // The CPU targets read the 10k-key rows without AOF, the conditions the targets were set in:
  // with AOF, the server's fsync thread takes one of the box's two cores from both processes.
  const plainDef = defs.find((d) => d.path === 'batch' && !d.aof && d.sized !== true && d.batch === undefined)!;
  const plain = (impl: string, k: string): number | undefined => rowOf(plainDef, impl)?.extra?.[k] as number | undefined;
  s.target('10k-key batches, no AOF: hashgate Node CPU per key', '<=', 0.8, plain('hashgate', 'nodeCpuUsPerKey'), ' us');
  const nodeCpu = plain;
  const nh = nodeCpu('hashgate', 'nodeCpuUsPerKey');
  const nf = nodeCpu(FLOOR_LABEL, 'nodeCpuUsPerKey');
  if (nh !== undefined && nf !== undefined && nf > 0) {
    s.note(
      `The client-side floor (${FLOOR_LABEL.split(':')[0]}) does what any client of one SADD per key must do in Node, and nothing else: the writes and reads of the same bytes hashgate sends and receives, and its own compiles. ` +
        `10k-key batches, no AOF: its Node CPU is ${nf.toFixed(2)} us/key (main thread ${nodeCpu(FLOOR_LABEL, 'nodeMainThreadUsPerKey')?.toFixed(2) ?? '?'}), hashgate's ${nh.toFixed(2)} (main thread ${nodeCpu('hashgate', 'nodeMainThreadUsPerKey')?.toFixed(2) ?? '?'}, other threads ${nodeCpu('hashgate', 'nodeOtherThreadsUsPerKey')?.toFixed(2) ?? '?'}): ` +
        `${(nh - nf).toFixed(2)} us/key for checking, hashing and placing the keys, the seen-cache and in-batch sets, the replies as answers, the splits, and compiling all of it in a fresh process.`,
    );
  }
  // Redis CPU against what redis-server itself needs for the same SADDs from a pipe (the floor a
  // client of one SADD per key can reach); an absolute figure would move with the host and AOF
  const redisCpu = plain;
  // Least pass against least pass: the same statistic on both sides. This host's Redis CPU for one
  // and the same feed moves by up to ~1.7x between passes (fast and slow stretches), so a median
  // against a least would compare the two stretches rather than the two workloads.
  const rh = redisCpu('hashgate', 'redisCpuUsPerKeyLeast');
  const rhMedian = redisCpu('hashgate', 'redisCpuUsPerKey');
  const rl = redisCpu(LIMIT_LABEL, 'redisCpuUsPerKeyLeast');
  s.target('10k-key batches, no AOF: hashgate Redis CPU per key / redis-server alone on the same SADDs (least pass of each)', '<=', 1, rh !== undefined && rl !== undefined && rl > 0 ? rh / rl : undefined, 'x');
  // the same two for a window sized with dedup.expectedKeys, which fills without a split
  const sizedDef = defs.find((d) => d.sized === true)!;
  const sized = (impl: string, k: string): number | undefined => rowOf(sizedDef, impl)?.extra?.[k] as number | undefined;
  s.target('10k-key batches, window sized with dedup.expectedKeys: hashgate Node CPU per key', '<=', 0.8, sized('hashgate', 'nodeCpuUsPerKey'), ' us');
  const sh = sized('hashgate', 'redisCpuUsPerKeyLeast');
  const sl = sized(LIMIT_LABEL, 'redisCpuUsPerKeyLeast');
  s.target(
    '10k-key batches, window sized with dedup.expectedKeys: hashgate Redis CPU per key / redis-server alone on the same SADDs (least pass of each)', '<=', 1,
    sh !== undefined && sl !== undefined && sl > 0 ? sh / sl : undefined, 'x',
  );
  const rr = redisCpu(roundTripLabel(roundTripChunk('batch')), 'redisCpuUsPerKeyLeast');
  s.note(
    `The round-trip rows feed redis-server the same file, a chunk at a time, each chunk sent once the one before is answered (${roundTripChunk('c256')} commands for the 256-caller row, about a coalesced batch; ${roundTripChunk('batch')} for the batch rows, one pipelined piece of a 10k-key call): ` +
      'the server then sleeps between chunks, as it does between the writes of any client that waits for replies, and each wake-up costs it CPU of its own: compare its CPU per key with the never-idle pipe row above it. ' +
      (rh !== undefined && rl !== undefined && rr !== undefined && rl > 0 && rr > 0
        ? `10k-key batches, no AOF, least pass of each: hashgate's Redis CPU per key is ${(rh / rl).toFixed(2)}x the pipe floor and ${(rh / rr).toFixed(2)}x the round-trip one (its median pass ${rhMedian !== undefined ? (rhMedian / rl).toFixed(2) : '?'}x the pipe floor's least); on top of the SADDs it pays the splits and the window count.`
        : ''),
  );
  // where the 10k-key batches' Redis CPU went, with AOF and without
  const parts = (def: PathDef, impl: string): string | undefined => {
    const v = ['redisCpuUsPerKey', 'redisInSaddUsPerKey', 'redisInSplitsUsPerKey', 'redisOtherUsPerKey'].map((k) => rowOf(def, impl)?.extra?.[k] as number | undefined);
    if (v.some((x) => x === undefined)) return undefined;
    const [all, sadd, splits, other] = v as number[];
    return `${all!.toFixed(2)} us (SADDs ${sadd!.toFixed(2)}, splits: DUMPs, RESTOREs and scripts ${splits!.toFixed(2)}, the rest ${other!.toFixed(2)})`;
  };
  const lines: string[] = [];
  for (const def of defs.filter((d) => d.path === 'batch' && d.noLimit !== true)) {
    const h = parts(def, 'hashgate');
    const l = parts(def, LIMIT_LABEL);
    const pe = parts(def, def.peer);
    if (h !== undefined && l !== undefined) lines.push(`${def.aof ? 'AOF everysec' : 'no AOF'}${def.sized === true ? ', window sized with expectedKeys' : ''}: hashgate ${h}; the pipe floor ${l}${pe !== undefined ? `; the peer ${pe}` : ''}`);
  }
  if (lines.length > 0) {
    s.note(
      `Where Redis CPU per key went, 10k-key batches, median of the passes (INFO commandstats: time inside the commands; a script's own commands count in the script's time; the rest is reading and writing the sockets, the event loop, AOF writes and the few other commands): ${lines.join('. ')}. ` +
        'The splits are what hashgate pays Redis on top of the SADDs for growing a window from empty: each moves a sub-bucket\'s members with one DUMP (Redis tries to compress its payload), a RESTORE of each half and a seal (a round\'s seals go up to 32 in one script call), and a seal that finds members added since the DUMP also runs an SDIFF to place them.',
    );
  }
  s.note(
    `Each run is a fresh Node process (a fresh gate with default options but its journal directory, and in the sized row dedup.expectedKeys set to the run's keys; HashGate.open as a user calls it) on all-new keys ` +
      `(Chinese name + 18-digit ID) against a flushed private redis-server (AOF rows: its AOF just rewritten, so every pass starts from the same nearly empty file, and no automatic rewrite: one that the 64 MiB threshold started in hashgate's passes and never in the peer's cost hashgate's passes 2-19%, while in a service rewrites are shared over all keys by AOF bytes and dataset size; aofBytesPerKey is what a pass appended to the AOF per key); ${passes} passes (5 for one-key calls, sequential and 256 callers), hashgate, the peer and (10k-key batches) the client-side floor alternating; a row is the median pass (min..max shown). ` +
      `first200kKeysPerSec: the rate over the run's first ${MARK} keys (JIT warm-up and the first connection included).`,
  );
  s.note(
    'CPU per key: nodeCpuUsPerKey = process.cpuUsage (user + system, every thread of the child) over the timed part / keys; redisCpuUsPerKey = INFO cpu used_cpu_user + used_cpu_sys delta of the private redis-server / keys (AOF rows include its fsync thread). ' +
      "nodeMainThreadUsPerKey is the main thread's own on-CPU time (/proc/self/task/<tid>/schedstat) and nodeOtherThreadsUsPerKey the rest of nodeCpuUsPerKey: V8's compiler and GC threads and libuv's, mostly optimizing compiles in a fresh process; " +
      'nodeCpuSecondHalfUsPerKey is process.cpuUsage per key over the keys past half of the run, with most of that warm-up behind it; mainWaitingForCorePct is the share of the timed wall time the main thread was runnable and waited for a core (both cores held by redis-server and the other threads).',
  );
  s.note(
    'Peers write the raw key into one set (SADD set key; its reply is the answer). The physical limit is redis-server fed, from a file through redis-cli --pipe, one SADD per key with the sub-bucket key and compact member hashgate writes for the same keys, each table already at the sub-bucket count the run ends with (no splits, no window count: hashgate does both as the window fills).',
  );
  s.note(
    'cpuBoundOwnCoresKeysPerSec = 1e6 / max(node, redis CPU us per key), the rate with Node and Redis on a core each; cpuBoundSharedCoreKeysPerSec = 1e6 / (node + redis), the rate when they share one. ' +
      'hashgate sends one plain SADD per key, as the peer does, into a small intset sub-bucket instead of one big hashtable set; on top it pays the splits (a DUMP, two RESTOREs and a script per split, about one split per 150 new keys) and a batched INCRBY of the window count. ' +
      'On this box most of both processes\' CPU is the loopback syscalls and wake-ups (perf: about a third of redis-server\'s samples are in the kernel), which is why the physical limit, fed from one file in big reads, needs well under half the Redis CPU per key of any client.',
  );
  s.note(
    "Why the concurrency suite's 256x1 ratio is higher: it times a warm process (the embedded and Bloom groups ran first, each pass after a warm-up) for 40k keys, where this suite starts a fresh process on default options and runs 1M keys into buckets that split as they fill; and its ratio depends on how busy the box is, as above.",
  );
  s.note(
    `The ${BIG_BATCH}-key-call row sends the same commands as the ${BATCH}-key one (no physical-limit row of its own); it shows what a call's size costs: the sends such a call queues behind dedup.maxInFlight.`,
  );
  s.note(
    'Lookup: every key\'s value is written to Redis first, untimed (MSET of the envelope TieredCache stores), so each lookup misses the fresh process\'s local tier and is answered by Redis; hashgate is HashGate.open with a cache on that Redis (threads 0, redis.timeoutMs 60 s as the peer waits as long as Redis takes) and lookup(table, [key]) per caller; the peer is ioredis auto-pipelining one GET per key, its value undecoded. No physical-limit row for it.',
  );
  s.note(
    'Repeat traffic: every key is first written once, untimed (for hashgate by another gate, whose seen-cache the timed gate does not share), then the timed pass asks for all of them again; every answer must be 0. No physical-limit row for it.',
  );
  s.note(`1-min load average ${load0.toFixed(2)} at start, ${loadavg()[0]!.toFixed(2)} at end (2-core box shared with other jobs).`);
  return s.finish();
}

runWhenMain(import.meta.url, run);
