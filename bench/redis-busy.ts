// How long one firstSeen call keeps a shared Redis busy: the longest PING another connection waits
// while a fail-closed firstSeen of N new keys runs (N = 1k, 10k, 100k, 200k), with the default
// dedup.maxKeysPerCommand and with the whole batch as one command (the old behaviour).
import { Redis } from 'ioredis';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Suite, dedupKey, type SuiteOptions, type SuiteResult } from './common.js';
import { startBenchRedis } from './redis-server.js';
import { DedupService } from '../src/dedup/index.js';
import { DEFAULTS } from '../src/dedup/options.js';

const SIZES = [1_000, 10_000, 100_000, 200_000];

/** PINGs back to back on `r` until `stop` resolves; the wait of each, in ms, sorted. */
async function pingWhile(r: Redis, stop: Promise<unknown>): Promise<number[]> {
  let done = false;
  void stop.finally(() => (done = true));
  const waits: number[] = [];
  while (!done) {
    const t = performance.now();
    // a script past lua-time-limit makes Redis answer BUSY: the PING still waits for it
    while (await r.ping().then(() => false, (e: Error) => /^BUSY/.test(e.message))) await new Promise((res) => setTimeout(res, 1));
    waits.push(performance.now() - t);
  }
  return waits.sort((a, b) => a - b);
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('redis-busy', opts);
  const srv = await startBenchRedis('busy');
  if (!srv) {
    s.notes.push('redis-server not available: nothing measured');
    s.target('longest PING wait during a 200000-key firstSeen', '<=', 50, null, 'ms');
    return s.finish();
  }
  const admin = new Redis(srv.url);
  const pinger = new Redis(srv.url);
  let round = 0;
  try {
    const variants = [
      { impl: `maxKeysPerCommand ${DEFAULTS.maxKeysPerCommand} (default)`, maxKeysPerCommand: DEFAULTS.maxKeysPerCommand, role: 'hashgate' as const },
      { impl: 'one command per call', maxKeysPerCommand: 1_000_000, role: 'baseline' as const },
    ];
    for (const n of opts.quick ? SIZES.slice(0, 2) : SIZES) {
      const keys = Array.from({ length: n }, (_, i) => dedupKey(i));
      for (const v of variants) {
        const svc = new DedupService({
          redis: srv.url,
          dedup: { prefix: `busy${round++}`, onStoreError: 'fail-closed', maxKeysPerCommand: v.maxKeysPerCommand, commandTimeoutMs: 10_000, replayIntervalMs: 0, journalDir: join(tmpdir(), 'hashgate-bench-journal') },
        });
        await svc.firstSeen(['warm-up']);
        await admin.config('SET', 'slowlog-log-slower-than', '0');
        await admin.config('SET', 'slowlog-max-len', '10000');
        await admin.slowlog('RESET');
        await pinger.ping();
        const t = performance.now();
        const call = svc.firstSeen(keys);
        const waits = await pingWhile(pinger, call);
        const answers = await call;
        const ms = performance.now() - t;
        let first = 0;
        for (const a of answers) first += a;
        const longest = waits[waits.length - 1] ?? 0;
        // Redis' own account of its longest command of the call (the PING wait adds scheduling noise)
        const log = (await admin.slowlog('GET', -1)) as Array<[number, number, number, string[]]>;
        const longestCmd = Math.max(0, ...log.filter((e) => /^eval/i.test(String(e[3][0]))).map((e) => e[2])) / 1000;
        s.addRow({
          name: `firstSeen of ${n} new keys (fail-closed)`,
          impl: v.impl,
          role: v.role,
          opsPerSec: n / (ms / 1000),
          unit: 'keys/s',
          ok: first === n,
          extra: { longestPingMs: Number(longest.toFixed(1)), medianPingMs: Number((waits[waits.length >> 1] ?? 0).toFixed(2)), pings: waits.length, longestCommandMs: Number(longestCmd.toFixed(1)), callMs: Math.round(ms) },
        });
        if (v.role === 'hashgate' && n === SIZES[SIZES.length - 1]) s.target(`longest PING wait during a ${n}-key firstSeen`, '<=', 50, Number(longest.toFixed(1)), 'ms');
        await svc.close();
        await admin.flushall();
      }
    }
    s.notes.push(`load average at the end of the run: ${loadavg()[0]!.toFixed(1)} on ${cpus().length} cores`);
    s.notes.push('longestCommandMs: the longest EVALSHA of the call by SLOWLOG (Redis time only).');
    s.notes.push('A PING on a second connection, sent back to back during the call: its longest wait is the longest a command of the call kept Redis busy (plus one round trip). Private redis-server, no AOF; shared 2-core box, numbers are noisy.');
  } finally {
    pinger.disconnect();
    admin.disconnect();
    await srv.stop();
  }
  return s.finish();
}
