// One cold-start run of one Redis-path workload (hashgate, the peer a user would write instead, or
// the client-side floor), in a process of its own so nothing is JIT-compiled or connected before
// it: bench/redis-path.ts forks it once per pass and impl, with --expose-gc so the setup's garbage
// is collected before the clock starts. argv[2] is the JSON Spec; the result goes back over IPC.
//
// Measured between the first call and the last answer: wall time, keys answered, per-call latency
// percentiles, this process's CPU (process.cpuUsage, all threads) and redis-server's CPU (INFO cpu
// used_cpu_user + used_cpu_sys delta; the server is private to the bench, so its CPU is ours).
// On Linux also the main thread's own CPU and run-queue wait (/proc/self/task/<tid>/schedstat, ns)
// apart from the other threads' (V8's compiler and GC helpers, libuv), and the Node CPU of the
// run's second half, past most of the JIT warm-up a fresh process pays.
import { readdirSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { createHistogram } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { makeKeys } from './common.js';
import { HashGate } from '../src/gate.js';
import { encodeValue, wrapEnvelope } from '../src/cache/index.js';

export type PathKind = 'single' | 'c256' | 'batch' | 'once' | 'repeat' | 'lookup';

export interface Spec {
  path: PathKind;
  /**
   * floor: the least a client of one SADD per key does in Node. It writes `feed` (the SADDs
   * hashgate sends for the same keys, RESP-encoded before the timed part) one call's commands at a
   * time and counts the replies: no key check, hashing, cache or reply objects.
   */
  impl: 'hashgate' | 'peer' | 'floor';
  url: string;
  keys: number;
  seed: number;
  prefix: string;
  journalDir: string;
  /** Keys per call (batch, once). */
  batch: number;
  /** Rate over the first `mark` keys is reported too (what a short run from a fresh process sees). */
  mark: number;
  /** floor only: the file of RESP SADDs, one per key in key order. */
  feed?: string;
  /** hashgate only: dedup.expectedKeys (a window sized for the run's keys). */
  expectedKeys?: number;
}

export interface ChildResult {
  ok: boolean;
  error?: string;
  keys: number;
  secs: number;
  markSecs: number;
  p50Us: number;
  p99Us: number;
  nodeCpuUs: number;
  redisCpuUs: number;
  /** Main thread on-CPU time over the timed part (NaN where /proc/self/task is missing). */
  mainCpuUs: number;
  /** Main thread time runnable but waiting for a core (the 2-core box's contention). */
  mainWaitUs: number;
  /** process.cpuUsage over the keys past half of the run, and how many keys that was. */
  lateNodeCpuUs: number;
  /** Main thread on-CPU time over those keys. */
  lateMainCpuUs: number;
  lateKeys: number;
  /** hashgate only: where its keys went, for the physical-limit feed. */
  window?: string;
  buckets?: number;
}

/** The cache table the lookup path reads. */
const LOOKUP_TABLE = 'risk';

const redisCpuUs = async (r: Redis): Promise<number> => {
  const info = await r.info('cpu');
  const f = (k: string): number => Number(new RegExp(`^${k}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (f('used_cpu_user') + f('used_cpu_sys')) * 1e6;
};

/** On-CPU and run-queue wait time (us) per thread id of this process; empty where /proc lacks them. */
const threadTimes = (): Map<string, [number, number]> => {
  const m = new Map<string, [number, number]>();
  let tids: string[];
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return m;
  }
  for (const t of tids) {
    try {
      const [run, wait] = readFileSync(`/proc/self/task/${t}/schedstat`, 'utf8').split(' ');
      m.set(t, [Number(run) / 1e3, Number(wait) / 1e3]);
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return m;
};

async function main(spec: Spec): Promise<ChildResult> {
  // Flat strings, as keys parsed from a request or a file arrive: makeKeys builds them by
  // concatenation, and the first native write of such a string flattens it (an allocation per
  // key that hashgate and the peer would both pay, for the bench's way of making keys).
  const keys = JSON.parse(JSON.stringify(makeKeys(spec.keys, 'A', spec.seed))) as string[];
  const admin = new Redis(spec.url);
  // one call = a slice of keys; the workloads differ in slice size and concurrency
  const k = spec.path === 'batch' || spec.path === 'once' || spec.path === 'repeat' ? spec.batch : 1;
  const callers = spec.path === 'c256' || spec.path === 'lookup' ? 256 : 1;
  const calls: string[][] = [];
  for (let i = 0; i < keys.length; i += k) calls.push(keys.slice(i, i + k));

  let call: (b: string[], i: number) => Promise<number>;
  let close: () => Promise<void>;
  let where: Pick<ChildResult, 'window' | 'buckets'> = {};
  // lookups: every key's value sits in Redis only (written untimed, as another instance would),
  // where TieredCache keeps a table's values; the answer counted is "found"
  const valueKey = (k: string): string => `hg:v:${LOOKUP_TABLE}:${k}`;
  if (spec.path === 'lookup') {
    const v = wrapEnvelope(encodeValue({ level: 3, tag: 'blacklist' }), Date.now());
    for (let i = 0; i < keys.length; i += 1000) await admin.mset(...keys.slice(i, i + 1000).flatMap((k) => [valueKey(k), v]));
  }
  if (spec.path === 'lookup' && spec.impl === 'hashgate') {
    // the cache as a service opens it; the peer waits as long as Redis takes, so does this
    const gate = await HashGate.open({ threads: 0, cache: { redis: { url: spec.url, timeoutMs: 60_000 } } });
    call = (b) => gate.lookup(LOOKUP_TABLE, b).then((v) => (v[0] !== undefined ? 1 : 0));
    close = () => gate.close();
  } else if (spec.path === 'lookup') {
    const r = new Redis(spec.url, { enableAutoPipelining: true });
    await r.ping();
    call = (b) => r.getBuffer(valueKey(b[0]!)).then((v) => (v !== null ? 1 : 0));
    close = async () => {
      r.disconnect();
    };
  } else if (spec.impl === 'hashgate') {
    // What a user opens: defaults but for where the journal goes and a prefix of this run's own.
    const options = {
      redis: spec.url,
      dedup: {
        prefix: spec.prefix, journalDir: spec.journalDir, ...(spec.path === 'once' ? { onStoreError: 'fail-closed' as const } : {}),
        ...(spec.expectedKeys !== undefined ? { expectedKeys: spec.expectedKeys } : {}),
      },
    };
    if (spec.path === 'repeat') {
      // repeat traffic: another instance wrote every key first (untimed); this gate's own cache
      // would answer keys it wrote itself without asking Redis
      const writer = await HashGate.open(options);
      for (const b of calls) await writer.firstSeen(b);
      await writer.close();
    }
    const gate = await HashGate.open(options);
    const sum = (a: Uint8Array): number => {
      let s = 0;
      for (let i = 0; i < a.length; i++) s += a[i]!;
      return s;
    };
    call = spec.path === 'once' ? (b, i) => gate.firstSeen(b, { requestId: `${spec.prefix}-${i}` }).then(sum) : (b) => gate.firstSeen(b).then(sum);
    close = () => gate.close();
    where = { window: gate.dedup.windowOf(), buckets: gate.dedup.options.buckets };
  } else if (spec.impl === 'floor') {
    const feed = readFileSync(spec.feed!);
    // where each call's commands start: every command opens a line with '*'
    const starts: number[] = [];
    let cmd = 0;
    for (let p = 0; p < feed.length; ) {
      if (feed[p] === 42) {
        if (cmd % k === 0) starts.push(p);
        cmd++;
      }
      const nl = feed.indexOf(10, p);
      if (nl < 0) break;
      p = nl + 1;
    }
    starts.push(feed.length);
    const url = new URL(spec.url);
    const sock = connect(Number(url.port), url.hostname);
    sock.setNoDelay(true);
    await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
    // every SADD reply is one line, ":1" or ":0"; `col` is the byte's place in its line
    let owed = 0;
    let got = 0;
    let col = 0;
    let done: ((ones: number) => void) | undefined;
    sock.on('data', (d: Buffer) => {
      for (let i = 0; i < d.length; i++) {
        const c = d[i]!;
        if (col === 1 && c === 49) got++;
        if (c === 10) {
          col = 0;
          if (--owed === 0) done!(got);
        } else col++;
      }
    });
    call = (b, i) =>
      new Promise<number>((resolve) => {
        owed = b.length;
        got = 0;
        done = resolve;
        sock.write(feed.subarray(starts[i]!, starts[i + 1]!));
      });
    close = async () => {
      sock.destroy();
    };
  } else {
    // The peer: raw keys SADDed into one set, the reply of SADD being the first-seen answer.
    const r = new Redis(spec.url, spec.path === 'c256' ? { enableAutoPipelining: true } : {});
    await r.ping();
    const set = `${spec.prefix}:peer`;
    call =
      k === 1
        ? (b) => r.sadd(set, b[0]!)
        : async (b) => {
            const pl = r.pipeline();
            for (let i = 0; i < b.length; i++) pl.sadd(set, b[i]!);
            let s = 0;
            for (const [err, v] of (await pl.exec()) ?? []) {
              if (err) throw err;
              s += v as number;
            }
            return s;
          };
    close = async () => {
      r.disconnect();
    };
  }

  const h = createHistogram();
  let next = 0;
  let done = 0;
  let ones = 0;
  let markAt = 0n;
  const half = Math.floor(keys.length / 2);
  let lateCpu0: NodeJS.CpuUsage | undefined;
  let lateDone0 = 0;
  let lateMain0: number | undefined;
  const worker = async (): Promise<void> => {
    while (next < calls.length) {
      const i = next++;
      const b = calls[i]!;
      const t = process.hrtime.bigint();
      // read after the await: `ones += await x` would add to the value read before it
      const got = await call(b, i);
      ones += got;
      const e = process.hrtime.bigint();
      h.record(Number(e - t) || 1);
      done += b.length;
      if (markAt === 0n && done >= spec.mark) markAt = e;
      if (lateCpu0 === undefined && done >= half) {
        lateCpu0 = process.cpuUsage();
        lateMain0 = threadTimes().get(String(process.pid))?.[0];
        lateDone0 = done;
      }
    }
  };
  // repeat traffic: the peer writes every key once, untimed, and the timed pass asks again
  if (spec.path === 'repeat' && spec.impl === 'peer') for (let i = 0; i < calls.length; i++) await call(calls[i]!, i);
  // The setup above (the generated keys and their JSON round trip: a few hundred MB of garbage
  // for a million keys) is collected here, not in whichever impl's timed part the collector reaches.
  globalThis.gc?.();
  const r0 = await redisCpuUs(admin);
  const th0 = threadTimes();
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const ws: Promise<void>[] = [];
  for (let i = 0; i < callers; i++) ws.push(worker());
  await Promise.all(ws);
  const t1 = process.hrtime.bigint();
  const c1 = process.cpuUsage(c0);
  const late = lateCpu0 === undefined ? undefined : process.cpuUsage(lateCpu0);
  const main1 = threadTimes().get(String(process.pid));
  const main0 = th0.get(String(process.pid));
  const r1 = await redisCpuUs(admin);
  await close();
  admin.disconnect();
  const expected = spec.path === 'repeat' ? 0 : keys.length;
  const res: ChildResult = {
    ok: ones === expected,
    keys: done,
    secs: Number(t1 - t0) / 1e9,
    markSecs: markAt === 0n ? NaN : Number(markAt - t0) / 1e9,
    p50Us: h.percentile(50) / 1000,
    p99Us: h.percentile(99) / 1000,
    nodeCpuUs: c1.user + c1.system,
    redisCpuUs: r1 - r0,
    mainCpuUs: main0 !== undefined && main1 !== undefined ? main1[0] - main0[0] : NaN,
    mainWaitUs: main0 !== undefined && main1 !== undefined ? main1[1] - main0[1] : NaN,
    lateNodeCpuUs: late === undefined ? NaN : late.user + late.system,
    lateMainCpuUs: lateMain0 !== undefined && main1 !== undefined ? main1[0] - lateMain0 : NaN,
    lateKeys: done - lateDone0,
    ...where,
  };
  if (!res.ok) res.error = `${ones} first-seen answers for ${keys.length} keys (${expected} expected)`;
  return res;
}

const spec = JSON.parse(process.argv[2]!) as Spec;
main(spec).then(
  (r) => {
    if (process.send) process.send(r, () => process.exit(0));
    else {
      console.log(JSON.stringify(r));
      process.exit(0);
    }
  },
  (err: unknown) => {
    const r: ChildResult = { ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err), keys: 0, secs: 0, markSecs: NaN, p50Us: NaN, p99Us: NaN, nodeCpuUs: 0, redisCpuUs: 0, mainCpuUs: NaN, mainWaitUs: NaN, lateNodeCpuUs: NaN, lateMainCpuUs: NaN, lateKeys: 0 };
    if (process.send) process.send(r, () => process.exit(1));
    else {
      console.error(r.error);
      process.exit(1);
    }
  },
);
