// Durable embedded dedup store (dedup.path, LMDB): firstSeen throughput on 1M shape-A keys with
// 50% duplicates (each distinct key twice, shuffled, batches of 10k) against the peer a user would
// write instead (lmdb-js with one ifNoExists + put per raw key, which lmdb-js batches into one
// transaction per event turn), checks of seen keys, bytes on disk per key, restart time
// (open + first answer), many concurrent one-key calls (1, 16, 256 callers: throughput and
// p50/p99 latency), one-key calls of new keys with sync (latency and commits per call next to
// what the disk's flushes allow), and throughput / disk bytes per key vs key count (1M, 10M
// distinct).
// HG_BENCH_STORE_PART=latency runs only the new-key latency rows and keeps the other rows of the
// last stored result (a short run on a shared machine; run with --keep-old).
import { closeSync, constants, fdatasyncSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { open as lmdbOpen } from 'lmdb';
import { Suite, dedupKey, drive, machineInfo, readResult, size, writeResult, spread, twiceShuffled, type Drive, type SuiteOptions, type SuiteResult, type SweepSeries } from './common.js';
import { HashGate } from '../src/gate.js';
import { DedupService } from '../src/dedup/index.js';
import { LmdbStore } from '../src/dedup/lmdb-store.js';

const BATCH = 10_000;
const at = new Date('2026-06-01T00:00:00Z');


/** The compact sizing rule (~256 keys per bucket), as dedup.expectedKeys would pick. */
const bucketsFor = (n: number): number => 2 ** Math.max(6, Math.ceil(Math.log2(n / 256)));

/** Bytes the data file occupies on disk (allocated blocks, not its apparent length). */
const diskBytes = (dir: string): number => statSync(join(dir, 'data.mdb')).blocks * 512;

/** Pages the window's B-tree uses (without LMDB's free pages awaiting reuse). */
function livePageBytes(path: string): number {
  const st = new LmdbStore({ path, sync: false, maxWindows: 8 });
  const env = st.env;
  const db = env.openDB({ name: 'b:2026', keyEncoding: 'uint32', encoding: 'binary' });
  const s = db.getStats() as { treeBranchPageCount: number; treeLeafPageCount: number; overflowPages: number; pageSize: number };
  const bytes = (s.treeBranchPageCount + s.treeLeafPageCount + s.overflowPages) * s.pageSize;
  void st.close();
  return bytes;
}

/** Microseconds with one decimal, as the other latency rows carry them. */
const r1 = (x: number): number => Number(x.toFixed(1));

const SYNC_NOTE = "sync = answers wait for the fsync of their commit (the default); nosync = dedup.sync false. On Linux lmdb-js commits with overlappingSync, whose commit promise resolves only after that commit's own fsync, so nosync skips only the file sync before answering a batch of stored keys: both rows, and the lmdb-js peer, wait for an fsync per write transaction.";

/** Passes per implementation of the new-key latency rows (interleaved; each percentile is the median). */
const LATENCY_PASSES = 3;

/**
 * One-key firstSeen calls of keys never seen before, sync on (every call writes and waits for
 * its commit's fsync), at 1 and 16 callers: latency percentiles and commits per call next to the
 * floors this disk sets: lmdb-js alone (one put per transaction, awaited until flushed; concurrent
 * ones share a transaction), one fdatasync of a 4 KiB rewrite in the same directory, and the two
 * flushes an LMDB commit waits for without LMDB around them (that fdatasync, then a 128-byte
 * meta-page write through an O_DSYNC descriptor, as LMDB writes its synced meta page). So a
 * sequential durable answer cannot beat two of the disk's flushes, and its tail is theirs.
 */
async function newKeyLatency(s: Suite, opts: SuiteOptions, fresh: () => string, alone = false): Promise<void> {
  const load0 = loadavg()[0]!;
  const warm = Array.from({ length: 200 }, (_, i) => [`warm${dedupKey(i)}`]);
  const value = Buffer.alloc(64, 7);
  const passes = opts.quick ? 1 : LATENCY_PASSES;
  const callCount = (c: number): number => (opts.quick ? 200 : c === 1 ? 600 : 3000);
  let pass = 0;
  interface LatencyImpl {
    impl: string;
    role: 'hashgate' | 'peer' | 'baseline';
    callers: number[];
    /** Runs the calls on a fresh instance; throws when an answer is wrong. */
    run: (callers: number, calls: string[][]) => Promise<Drive & { commitsPerCall?: number }>;
  }
  /** LMDB write transactions committed in `path` so far (any process). */
  const lastTxn = (env: ReturnType<typeof lmdbOpen>): number => (env.getStats() as { lastTxnId: number }).lastTxnId;
  /** The flush baselines: rewrites of pages already on disk, the cheapest fsync (no block allocation). */
  const flushes = (meta: boolean) => async (_c: number, calls: string[][]): Promise<Drive> => {
    const dir = fresh();
    mkdirSync(dir, { recursive: true });
    const f = join(dir, 'f');
    const fd = openSync(f, 'w');
    const page = Buffer.alloc(4096, 1);
    let i = 0;
    try {
      for (let p = 0; p < 64; p++) writeSync(fd, page, 0, page.length, p * page.length);
      fdatasyncSync(fd);
      // the meta page's own descriptor: each write returns once it is on the device
      const mfd = meta ? openSync(f, constants.O_WRONLY | constants.O_DSYNC) : -1;
      try {
        return await drive(1, calls, async () => {
          writeSync(fd, page, 0, page.length, (1 + (i++ % 63)) * page.length);
          fdatasyncSync(fd);
          if (meta) writeSync(mfd, page, 0, 128, (i & 1) * 2048);
        });
      } finally {
        if (meta) closeSync(mfd);
      }
    } finally {
      closeSync(fd);
    }
  };
  const impls: LatencyImpl[] = [
    {
      impl: 'hashgate LMDB store (sync)',
      role: 'hashgate',
      callers: [1, 16],
      run: async (c, calls) => {
        const path = fresh();
        const g = await HashGate.open({ dedup: { path, sync: true } });
        let env: ReturnType<typeof lmdbOpen> | undefined;
        try {
          await drive(c, warm, async (k) => void (await g.firstSeen(k)));
          // a second handle on the same environment, only to read its transaction counter
          env = lmdbOpen({ path, maxDbs: 8 });
          const t0 = lastTxn(env);
          let first = 0;
          const d = await drive(c, calls, async (k) => {
            const a = await g.firstSeen(k);
            first += a[0]!;
          });
          if (first !== calls.length) throw new Error(`answered ${first} new of ${calls.length} new keys`);
          return { ...d, commitsPerCall: (lastTxn(env) - t0) / calls.length };
        } finally {
          await g.close();
          await env?.close();
        }
      },
    },
    {
      impl: 'lmdb-js one put per transaction, awaited until flushed',
      role: 'peer',
      callers: [1, 16],
      run: async (c, calls) => {
        const env = lmdbOpen({ path: fresh(), maxDbs: 4 });
        const db = env.openDB<Buffer, number>({ name: 'x', keyEncoding: 'uint32', encoding: 'binary' });
        let n = 0;
        const put = async (): Promise<void> => {
          const k = n++;
          await db.transaction(() => db.putSync(k, value));
          await db.flushed;
        };
        try {
          await drive(c, warm, put);
          const t0 = lastTxn(env);
          const d = await drive(c, calls, put);
          return { ...d, commitsPerCall: (lastTxn(env) - t0) / calls.length };
        } finally {
          await env.close();
        }
      },
    },
    {
      impl: 'fdatasync of one 4 KiB rewrite (the disk alone, no LMDB)',
      role: 'baseline',
      callers: [1],
      run: flushes(false),
    },
    {
      impl: "an LMDB commit's two flushes, no LMDB (that fdatasync, then a 128 B O_DSYNC write)",
      role: 'baseline',
      callers: [1],
      run: flushes(true),
    },
  ];
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  for (const c of [1, 16]) {
    const name = `firstSeen of new keys, ${c} callers x 1 key, sync (latency)`;
    const runs = impls.map((): Array<Drive & { commitsPerCall?: number }> => []);
    for (let p = 0; p < passes; p++) {
      for (let i = 0; i < impls.length; i++) {
        if (!impls[i]!.callers.includes(c)) continue;
        const calls = Array.from({ length: callCount(c) }, (_, j) => [`n${pass}-${dedupKey(j)}`]);
        pass++;
        runs[i]!.push(await impls[i]!.run(c, calls));
      }
    }
    impls.forEach((im, i) => {
      const ds = runs[i]!;
      if (ds.length === 0) return;
      const rates = ds.map((d) => d.keys / d.secs);
      const extra: Record<string, number> = { callers: c, p50Us: r1(median(ds.map((d) => d.p50))), p99Us: r1(median(ds.map((d) => d.p99))), p999Us: r1(median(ds.map((d) => d.p999))), passes: ds.length };
      const cpc = ds.map((d) => d.commitsPerCall).filter((x): x is number => x !== undefined);
      if (cpc.length > 0) extra.commitsPerCall = Number(median(cpc).toFixed(3));
      s.addRow({ name, impl: im.impl, role: im.role, opsPerSec: median(rates), ...spread(rates), ok: true, unit: 'calls/s', extra });
      console.log(`[store] ${name} | ${im.impl}: p50 ${extra.p50Us} us, p99 ${extra.p99Us} us, p999 ${extra.p999Us} us${cpc.length > 0 ? `, ${extra.commitsPerCall} commits/call` : ''}`);
      if (c === 1 && im.role === 'hashgate') {
        s.target('p99 of sequential one-key firstSeen of new keys, sync', '<=', 10_000, extra.p99Us, ' us',
          "bounded below by the disk: compare the rows of an LMDB commit's two flushes and of lmdb-js alone");
      }
    });
  }
  s.note(`New-key latency rows: every call writes a new key; ${callCount(1)} calls at 1 caller, ${callCount(16)} at 16, after ${warm.length} warm-up calls, on a fresh directory; ${passes} passes interleaved across the implementations, each percentile the median of the passes. 1-min load average ${load0.toFixed(1)} at start, ${loadavg()[0]!.toFixed(1)} at end: the 2-core machine and its disk were shared with other jobs, so the tails are mostly the disk's.${alone ? ` Measured in a latency-only run (HG_BENCH_STORE_PART=latency) on ${machineInfo().cpuModel}, ${new Date().toISOString().slice(0, 10)}; the other rows and the header of this section are from the last full run.` : ''}`);
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('store', opts);
  const root = mkdtempSync(join(tmpdir(), 'hashgate-bench-store-'));
  let seq = 0;
  const fresh = (): string => {
    const d = join(root, `d${seq++}`);
    rmSync(d, { recursive: true, force: true });
    return d;
  };
  if (process.env.HG_BENCH_STORE_PART === 'latency') {
    try {
      await newKeyLatency(s, opts, fresh, true);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
    // keep what the last full run measured, replacing only the rows and targets measured now
    const old = readResult('store');
    const res = s.finish();
    if (old === undefined) return res;
    const names = new Set(res.rows.map((r) => r.name));
    const targets = new Set(res.targets.map((t) => t.name));
    const merged: SuiteResult = {
      ...old,
      rows: [...old.rows.filter((r) => !names.has(r.name)), ...res.rows],
      targets: [...old.targets.filter((t) => !targets.has(t.name)), ...res.targets],
      notes: [...(old.notes ?? []).filter((n) => !n.startsWith('New-key latency rows:')).map((n) => (n.startsWith('sync = ') ? SYNC_NOTE : n)), ...(res.notes ?? [])],
    };
    writeResult(merged);
    return merged;
  }
  try {
    const distinct = size(opts, 500_000, 10_000);
    const order = twiceShuffled(distinct);
    const names = Array.from({ length: distinct }, (_, i) => dedupKey(i));
    const batches: string[][] = [];
    for (let o = 0; o < order.length; o += BATCH) batches.push(Array.from(order.subarray(o, o + BATCH), (k) => names[k]!));
    const name = `${order.length} keys, 50% duplicates, batches of ${BATCH}`;
    s.note(`Workload: ${distinct} distinct shape-A keys (Chinese name + 18-digit ID), each twice, shuffled; every run starts from an empty directory under ${tmpdir()}.`);
    s.note('Checks of seen keys use fresh key strings in key order, as a service receives them; hashgate and the lmdb-js peer read the same arrays.');
    s.note(SYNC_NOTE);

    // --- firstSeen into an empty store ---------------------------------------------------------
    let lastDir = '';
    const hashgateRun = (sync: boolean) => async (): Promise<number> => {
      lastDir = fresh();
      const svc = new DedupService({ dedup: { path: lastDir, sync, buckets: bucketsFor(distinct) } });
      let first = 0;
      try {
        for (const b of batches) {
          const a = await svc.firstSeen(b, { at });
          for (let i = 0; i < a.length; i++) first += a[i]!;
        }
      } finally {
        await svc.close();
      }
      if (first !== distinct) throw new Error(`answered ${first} new of ${distinct} distinct keys`);
      return order.length;
    };
    const rowSync = await s.sample({ name, impl: 'hashgate LMDB store (sync)', role: 'hashgate', unit: 'keys/s', runs: 3, fn: hashgateRun(true) });
    const syncDir = lastDir;
    if (rowSync.ok === false) throw new Error(`the hashgate LMDB run failed: ${rowSync.error}`);
    const fileBytes = diskBytes(syncDir);
    const liveBytes = livePageBytes(syncDir);
    rowSync.extra = { diskBytesPerKey: Number((fileBytes / distinct).toFixed(1)), liveBytesPerKey: Number((liveBytes / distinct).toFixed(1)) };
    await s.sample({ name, impl: 'hashgate LMDB store (nosync)', role: 'hashgate', unit: 'keys/s', runs: 3, fn: hashgateRun(false) });
    await s.sample({
      name,
      impl: 'hashgate in-memory table (not durable)',
      role: 'baseline',
      unit: 'keys/s',
      runs: 3,
      fn: async () => {
        const svc = new DedupService({ dedup: { buckets: bucketsFor(distinct) } });
        let first = 0;
        for (const b of batches) {
          const a = await svc.firstSeen(b, { at });
          for (let i = 0; i < a.length; i++) first += a[i]!;
        }
        await svc.close();
        if (first !== distinct) throw new Error(`answered ${first} new of ${distinct} distinct keys`);
        return order.length;
      },
    });
    let peerDir = '';
    const rowPeer = await s.sample({
      name,
      impl: 'lmdb-js ifNoExists+put per raw key',
      role: 'peer',
      unit: 'keys/s',
      runs: 3,
      fn: async () => {
        peerDir = fresh();
        const env = lmdbOpen({ path: peerDir, maxDbs: 4 });
        const db = env.openDB<number, string>({ name: '2026' });
        let first = 0;
        for (const b of batches) {
          const res = await Promise.all(b.map((k) => db.ifNoExists(k, () => void db.put(k, 1))));
          for (const r of res) if (r) first++;
        }
        await env.close();
        if (first !== distinct) throw new Error(`answered ${first} new of ${distinct} distinct keys`);
        return order.length;
      },
    });
    rowPeer.extra = { diskBytesPerKey: Number((diskBytes(peerDir) / distinct).toFixed(1)) };
    s.target(`batch firstSeen into LMDB, ${order.length} keys (sync)`, '>=', 300_000, rowSync.opsPerSec, ' keys/s');
    s.target(`bytes on disk per key, compact, ${distinct} keys (data.mdb blocks)`, '<=', 40, fileBytes / distinct, ' B',
      `B-tree pages in use: ${(liveBytes / distinct).toFixed(1)} B/key; the rest are pages freed by copy-on-write, reused by later commits`);

    // --- checks of seen keys --------------------------------------------------------------------
    const checkName = `check ${distinct} seen keys, batches of ${BATCH}`;
    // Fresh key strings, as a service receives them from requests: the load's strings were first
    // flattened in shuffled order, so reading them in key order measured the heap's scattering
    // (0.48 against 0.08 us per key to encode on the bench host), not the store.
    const checkBatches: string[][] = [];
    for (let o = 0; o < distinct; o += BATCH) checkBatches.push(Array.from({ length: Math.min(BATCH, distinct - o) }, (_, i) => dedupKey(o + i)));
    const checkRun = (cacheMaxEntries: number | undefined, warm: boolean) => {
      let svc: DedupService | undefined;
      return {
        beforeEach: async () => {
          await svc?.close();
          svc = new DedupService({ dedup: { path: syncDir, ...(cacheMaxEntries === undefined ? {} : { cacheMaxEntries }) } });
          if (warm) for (const b of checkBatches) await svc.firstSeen(b, { at });
        },
        fn: async () => {
          let first = 0;
          for (const b of checkBatches) {
            const a = await svc!.firstSeen(b, { at });
            for (let i = 0; i < a.length; i++) first += a[i]!;
          }
          if (first !== 0) throw new Error(`${first} seen keys answered as new`);
          return distinct;
        },
        teardown: async () => {
          await svc?.close();
        },
      };
    };
    const cold = await s.sample({ name: checkName, impl: 'hashgate LMDB store (fresh process state, seen-cache off)', role: 'hashgate', unit: 'keys/s', runs: 3, ...checkRun(0, false) });
    const warm = await s.sample({ name: checkName, impl: 'hashgate LMDB store (warm seen-cache)', role: 'hashgate', unit: 'keys/s', runs: 3, ...checkRun(undefined, true) });
    let penv: ReturnType<typeof lmdbOpen> | undefined;
    await s.sample({
      name: checkName,
      impl: 'lmdb-js doesExist per raw key (read only, no add)',
      role: 'peer',
      unit: 'keys/s',
      runs: 3,
      beforeEach: () => {
        penv ??= lmdbOpen({ path: peerDir, maxDbs: 4 });
      },
      fn: () => {
        const db = penv!.openDB<number, string>({ name: '2026' });
        let seen = 0;
        for (const b of checkBatches) for (const k of b) if (db.doesExist(k)) seen++;
        if (seen !== distinct) throw new Error(`${distinct - seen} stored keys not found`);
        return distinct;
      },
      teardown: async () => {
        await penv?.close();
      },
    });
    s.target(`checks of seen keys, store only (seen-cache off)`, '>=', 1_000_000, cold.ok === false ? null : cold.opsPerSec, ' keys/s',
      `with the in-process seen-cache warm: ${Math.round(warm.opsPerSec)} keys/s`);

    // --- many concurrent small calls (the service pattern) --------------------------------------
    // Each caller awaits a one-key call before its next, like a request handler; half the calls
    // repeat a key. Passes interleave hashgate and the peer at each point; rows are the median pass.
    const smallDistinct = opts.quick ? 2_000 : 10_000;
    const smallOrder = twiceShuffled(smallDistinct);
    const smallCalls = Array.from(smallOrder, (k) => [`s${dedupKey(k)}`]);
    const smallWarm = Array.from({ length: 2_000 }, (_, i) => [`w${dedupKey(i)}`]);
    interface SmallImpl {
      impl: string;
      role: 'hashgate' | 'peer';
      open: (dir: string) => Promise<{ call: (keys: string[]) => Promise<number>; close: () => Promise<void> }>;
    }
    const ones = (a: Uint8Array): number => {
      let n = 0;
      for (let i = 0; i < a.length; i++) n += a[i]!;
      return n;
    };
    const gateImpl = (sync: boolean): SmallImpl => ({
      impl: `hashgate LMDB store (${sync ? 'sync' : 'nosync'})`,
      role: 'hashgate',
      open: async (dir) => {
        const g = await HashGate.open({ dedup: { path: dir, sync } });
        return { call: async (k) => ones(await g.firstSeen(k)), close: () => g.close() };
      },
    });
    const smallImpls: SmallImpl[] = [
      gateImpl(true),
      gateImpl(false),
      {
        impl: 'lmdb-js ifNoExists+put per raw key',
        role: 'peer',
        open: async (dir) => {
          const env = lmdbOpen({ path: dir, maxDbs: 4 });
          const db = env.openDB<number, string>({ name: '2026' });
          return {
            call: async (k) => {
              let n = 0;
              for (const key of k) if (await db.ifNoExists(key, () => void db.put(key, 1))) n++;
              return n;
            },
            close: () => env.close(),
          };
        },
      },
    ];
    const smallCallers = opts.quick ? [1, 256] : [1, 16, 256];
    for (const c of smallCallers) {
      const runs = smallImpls.map((): Drive[] => []);
      const wrong: Array<string | undefined> = smallImpls.map(() => undefined);
      for (let pass = 0; pass < (opts.quick ? 1 : 3); pass++) {
        for (let i = 0; i < smallImpls.length; i++) {
          const inst = await smallImpls[i]!.open(fresh());
          try {
            // warm-up on other keys, as the concurrency suite does: the window's first write (its
            // bucket record) and the JIT are not what a steady service pays per call
            await drive(Math.min(c, 64), smallWarm, async (k) => void (await inst.call(k)));
            let first = 0;
            const d = await drive(c, smallCalls, async (k) => {
              const n = await inst.call(k); // not `first += await`: that reads `first` before awaiting
              first += n;
            });
            if (first !== smallDistinct) wrong[i] = `answered ${first} new of ${smallDistinct} distinct keys`;
            runs[i]!.push(d);
          } finally {
            await inst.close();
          }
        }
      }
      const name = `firstSeen ${c} callers x 1 key, ${smallCalls.length} calls (50% repeats)`;
      smallImpls.forEach((im, i) => {
        if (wrong[i] !== undefined) {
          s.addRow({ name, impl: im.impl, role: im.role, opsPerSec: 0, ok: false, error: wrong[i], unit: 'keys/s', extra: { callers: c } });
          return;
        }
        const rate = (d: Drive): number => d.keys / d.secs;
        const sorted = [...runs[i]!].sort((a, b) => rate(a) - rate(b));
        const d = sorted[Math.floor(sorted.length / 2)]!;
        const r2 = (x: number): number => Number(x.toFixed(1));
        const extra = { callers: c, p50Us: r2(d.p50), p99Us: r2(d.p99), p999Us: r2(d.p999), passes: runs[i]!.length };
        s.addRow({ name, impl: im.impl, role: im.role, opsPerSec: rate(d), ...spread(runs[i]!.map(rate)), ok: true, unit: 'keys/s', extra });
        console.log(`[store] ${name} | ${im.impl}: ${Math.round(rate(d) / 1000)}k keys/s, p50 ${extra.p50Us} us, p99 ${extra.p99Us} us`);
      });
    }

    await newKeyLatency(s, opts, fresh);

    // --- throughput and disk bytes/key vs key count, restart at the largest ---------------------
    const sizes = opts.quick ? [20_000, 100_000] : [1_000_000, 10_000_000];
    const tput: SweepSeries = { name: 'hashgate LMDB sync, keys/s (thousands)', points: [] };
    const disk: SweepSeries = { name: 'data.mdb bytes/key', points: [] };
    const live: SweepSeries = { name: 'B-tree pages in use, bytes/key', points: [] };
    let restartMs: number | null = null;
    let restartN = 0;
    for (const n of sizes) {
      const dir = fresh();
      const buckets = bucketsFor(n);
      let sec = 0;
      await s.sample({
        name: `load ${n} distinct keys, batches of ${BATCH}`,
        impl: 'hashgate LMDB store (sync)',
        role: 'hashgate',
        unit: 'keys/s',
        runs: 1,
        warmup: 0,
        fn: async () => {
          const svc = new DedupService({ dedup: { path: dir, buckets, cacheMaxEntries: 0 } });
          let first = 0;
          const t0 = performance.now();
          try {
            for (let o = 0; o < n; o += BATCH) {
              const b = new Array<string>(Math.min(BATCH, n - o));
              for (let i = 0; i < b.length; i++) b[i] = dedupKey(o + i);
              const a = await svc.firstSeen(b, { at });
              for (let i = 0; i < a.length; i++) first += a[i]!;
            }
          } finally {
            await svc.close();
          }
          sec = (performance.now() - t0) / 1000;
          if (first !== n) throw new Error(`answered ${first} new of ${n} distinct keys`);
          return n;
        },
      });
      const row = s.rows[s.rows.length - 1]!;
      const fb = diskBytes(dir);
      const lb = livePageBytes(dir);
      row.extra = { diskBytesPerKey: Number((fb / n).toFixed(1)), liveBytesPerKey: Number((lb / n).toFixed(1)), buckets };
      tput.points.push({ x: n, y: n / sec / 1000 });
      disk.points.push({ x: n, y: fb / n });
      live.points.push({ x: n, y: lb / n });
      console.log(`[store] ${n} keys: ${(n / sec / 1000).toFixed(0)} k keys/s, ${(fb / n).toFixed(1)} B/key on disk, ${(lb / n).toFixed(1)} B/key in use`);

      // restart: open the store and answer one seen key (median of 5 opens)
      const times: number[] = [];
      for (let r = 0; r < 5; r++) {
        const t0 = performance.now();
        const svc = new DedupService({ dedup: { path: dir, buckets } });
        const a = await svc.firstSeen([dedupKey(n >>> 1)], { at });
        times.push(performance.now() - t0);
        await svc.close();
        if (a[0] !== 0) throw new Error('a stored key was answered as new after reopening');
      }
      times.sort((x, y) => x - y);
      restartMs = times[2]!;
      restartN = n;
      row.extra.restartOpenFirstAnswerMs = Number(restartMs.toFixed(2));
      rmSync(dir, { recursive: true, force: true });
    }
    s.sweep({ name: 'LMDB store vs key count', xLabel: 'distinct keys', yLabel: 'keys/s (thousands) | bytes per key', logX: true, series: [tput, disk, live] });
    s.target(`restart: open + first answer with ${restartN} keys stored`, '<', 100, restartMs, ' ms');
    const big = disk.points.at(-1);
    if (big) s.target(`bytes on disk per key at ${big.x} keys`, '<=', 40, big.y, ' B');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  return s.finish();
}
