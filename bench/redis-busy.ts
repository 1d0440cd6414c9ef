// How long one firstSeen call keeps a shared Redis busy: the longest PING another connection waits
// while a fail-closed firstSeen of N new keys runs (N = 1k, 10k, 100k, 200k), with the default
// dedup.maxKeysPerCommand and with the whole batch as one command (the old behaviour).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { Redis } from 'ioredis';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Suite, dedupKey, type SuiteOptions, type SuiteResult } from './common.js';
import { startBenchRedis } from './redis-server.js';
import { DedupService } from '../src/dedup/index.js';
import { DEFAULTS } from '../src/dedup/options.js';

const SIZES = [1_000, 10_000, 100_000, 200_000];

/**
 * Another client of the same Redis, in a process of its own: it PINGs back to back from "ready"
 * until told to stop, then reports every wait (ms, sorted). A pinger inside this process would
 * also measure this process's own event loop (hashing and encoding the call's keys), not Redis.
 */
const PINGER = `
const m = await import(process.argv[1]);
const Redis = m.Redis ?? m.default?.Redis ?? m.default;
const r = new Redis(process.argv[2]);
await r.ping();
let run = true;
process.stdin.on('data', () => { run = false; });
process.stdout.write('ready\\n');
const waits = [];
while (run) {
  const t = performance.now();
  // a script past lua-time-limit makes Redis answer BUSY: the PING still waits for it
  while (await r.ping().then(() => false, (e) => /^BUSY/.test(e.message))) await new Promise((res) => setTimeout(res, 1));
  waits.push(performance.now() - t);
}
process.stdout.write(JSON.stringify(waits.sort((a, b) => a - b)) + '\\n');
r.disconnect();
process.stdin.destroy();
`;

async function pingWhile(url: string, start: () => Promise<unknown>): Promise<{ waits: number[]; result: unknown }> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', PINGER, createRequire(import.meta.url).resolve('ioredis'), url], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  const ready = new Promise<void>((res, rej) => {
    child.stdout.on('data', (d: string) => {
      out += d;
      if (out.startsWith('ready\n')) res();
    });
    child.once('exit', (code) => rej(new Error(`pinger exited ${code}`)));
  });
  await ready;
  const result = await start().finally(() => child.stdin.write('stop\n'));
  await once(child, 'exit');
  const waits = JSON.parse(out.slice('ready\n'.length).trim()) as number[];
  return { waits, result };
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
        let ms = 0;
        const { waits, result } = await pingWhile(srv.url, async () => {
          const t = performance.now();
          const a = await svc.firstSeen(keys);
          ms = performance.now() - t;
          return a;
        });
        const answers = result as Uint8Array;
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
    s.notes.push('A PING from another process, sent back to back during the call: its longest wait is the longest a command of the call kept Redis busy (plus one round trip and the scheduling of that process). Private redis-server, no AOF; shared 2-core box, numbers are noisy.');
  } finally {
    admin.disconnect();
    await srv.stop();
  }
  return s.finish();
}
