// How long hashgate keeps a shared Redis busy: the longest PING another connection waits while a
// fail-closed firstSeen of N new keys runs (N = 1k, 10k, 100k, 200k), with the default
// dedup.maxKeysPerCommand and with the whole batch as one command; and while a Redis-held filter
// sized for 1e8 keys (a 120 MB bitmap) is rebuilt, against allocating that bitmap in one command.
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
import { RedisBloom } from '../src/bloom/redis-bloom.js';
import { rebuildRedisBloom } from '../src/bloom/redis-rebuild.js';

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

/**
 * Starts Redis's account of the commands that follow: only those of 1 ms or more are logged, so
 * the pinger's PINGs and the call's own short commands (tens of thousands) do not push the long
 * one this is read for out of the log.
 */
async function watchCommands(admin: Redis): Promise<void> {
  await admin.config('SET', 'slowlog-log-slower-than', '1000');
  await admin.config('SET', 'slowlog-max-len', '10000');
  await admin.slowlog('RESET');
}

/** The longest command since watchCommands (ms; 0 when none took 1 ms). */
async function longestCommandMs(admin: Redis): Promise<number> {
  const log = (await admin.slowlog('GET', -1)) as Array<[number, number, number, string[]]>;
  return Math.max(0, ...log.filter((e) => !/^(ping|slowlog|config)$/i.test(String(e[3][0]))).map((e) => e[2])) / 1000;
}

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
        await watchCommands(admin);
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
        const longestCmd = await longestCommandMs(admin);
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
    await busyRebuild(s, srv.url, admin, opts.quick ? 10_000_000 : 100_000_000);
    s.notes.push(`load average at the end of the run: ${loadavg()[0]!.toFixed(1)} on ${cpus().length} cores`);
    s.notes.push('longestCommandMs: the longest command of the call or rebuild by SLOWLOG (Redis time only). Only commands of 1 ms or more are logged, so the PINGs do not push the long ones out of the log; 0 means none took 1 ms.');
    s.notes.push('A PING from another process, sent back to back during the call: its longest wait is the longest a command of the call kept Redis busy (plus one round trip and the scheduling of that process). Private redis-server, no AOF; shared 2-core box, numbers are noisy.');
  } finally {
    admin.disconnect();
    await srv.stop();
  }
  return s.finish();
}

/**
 * Longest PING during rebuildRedisBloom of a filter sized for `items` keys at 1% (200k keys in the
 * new generation, so every MiB of the bitmap is uploaded), and, as the baseline, during one
 * SETRANGE that allocates a bitmap of the same size at once.
 */
async function busyRebuild(s: Suite, url: string, admin: Redis, items: number): Promise<void> {
  const keys = Array.from({ length: 200_000 }, (_, i) => dedupKey(i));
  const live = await RedisBloom.open({ redis: admin, name: 'busy-bloom', expectedItems: items, fpp: 0.01 });
  await live.tryInit();
  const bytes = Math.ceil(live.size / 8);
  // a filter in use: its bitmap has its full length before the first rebuild
  for (let have = 0; have < bytes; have = Math.min(bytes, have + 2 ** 21)) await admin.setrange('busy-bloom', Math.min(bytes, have + 2 ** 21) - 1, '\0');
  const name = `rebuild of a filter sized for ${items.toExponential(0)} keys at 1% (${Math.round(bytes / 2 ** 20)} MiB bitmap), 200000 keys`;
  const later = 'rebuildRedisBloom, a later rebuild (writes into the spare the last one kept)';
  const variants = [
    { impl: 'rebuildRedisBloom, the first rebuild (allocates a second bitmap)', role: 'hashgate' as const, go: () => rebuildRedisBloom({ redis: admin, name: 'busy-bloom', keys }) },
    { impl: later, role: 'hashgate' as const, go: () => rebuildRedisBloom({ redis: admin, name: 'busy-bloom', keys }) },
    { impl: 'the bitmap allocated by one SETRANGE', role: 'baseline' as const, go: () => admin.setrange('busy-alloc', bytes - 1, '\0') },
  ];
  for (const v of variants) {
    await watchCommands(admin);
    let ms = 0;
    const { waits } = await pingWhile(url, async () => {
      const t = performance.now();
      await v.go();
      ms = performance.now() - t;
    });
    const longest = waits[waits.length - 1] ?? 0;
    const longestCmd = await longestCommandMs(admin);
    const ok = v.role === 'baseline' ? (await admin.strlen('busy-alloc')) === bytes : Array.from(await live.containsAll(keys.slice(0, 1000))).every((b) => b === 1);
    s.addRow({
      name, impl: v.impl, role: v.role, opsPerSec: 1000 / ms, unit: 'runs/s', ok,
      extra: { longestPingMs: Number(longest.toFixed(1)), medianPingMs: Number((waits[waits.length >> 1] ?? 0).toFixed(2)), pings: waits.length, longestCommandMs: Number(longestCmd.toFixed(1)), callMs: Math.round(ms) },
    });
    if (v.impl === later) s.target(`longest PING wait during a rebuild of a ${Math.round(bytes / 2 ** 20)} MiB filter`, '<=', 50, Number(longest.toFixed(1)), 'ms');
  }
  s.notes.push(
    'The first rebuild of a filter allocates a second bitmap of its size, in one command: Redis zero-fills the new string, which costs what the SETRANGE row costs. ' +
      'Grown a few MiB per command instead, the string is moved (copied and faulted in again) at most allocator size classes, so several commands each cost up to that much. ' +
      'The swap keeps the replaced bitmap as the spare, and every later rebuild writes into it in place.',
  );
  await live.delete();
  await admin.del('busy-alloc');
}
