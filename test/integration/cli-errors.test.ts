// The CLI under error, run as a user runs it (the built bin in a child process): with --json every
// failure is one JSON line on stdout; a dead or silent Redis reads the same in every command that
// uses Redis, bounded by --connect-timeout-ms; usage errors name the flag and suggest the nearest.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';

interface Run {
  code: number | null;
  out: string;
  err: string;
}

/** Runs the built CLI without blocking this process (the silent server below must keep accepting). */
function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['dist/src/cli/main.js', ...args], { env: { ...process.env, HASHGATE_REDIS_URL: '', ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? ((error as { code?: unknown }).code as number | null) : 0;
      resolve({ code: typeof code === 'number' ? code : null, out: String(stdout), err: String(stderr) });
    });
  });
}

/** The one JSON line a failed --json run prints on stdout. */
function failureLine(r: Run): { ok: boolean; code: string; message: string; exitCode: number } {
  const lines = r.out.split('\n').filter((l) => l !== '');
  expect(lines, `stdout: ${r.out}\nstderr: ${r.err}`).toHaveLength(1);
  return JSON.parse(lines[0]!) as { ok: boolean; code: string; message: string; exitCode: number };
}

let dir: string;
let dead: string;
let silent: Server;
let silentUrl: string;
const sockets: Socket[] = [];
let file: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hg-cli-errors-'));
  dead = `redis://127.0.0.1:${await freePort()}`; // nothing listens there
  // accepts connections and never answers: a host that is up but whose Redis hangs
  silent = createServer((s) => sockets.push(s));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  silentUrl = `redis://127.0.0.1:${(silent.address() as { port: number }).port}`;
  file = join(dir, 'rows.txt');
  writeFileSync(file, 'a|1\nb|2\nc|3\n');
  mkdirSync(join(dir, 'journal'));
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => silent.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

const loadFiles = (tag: string): string[] => [
  '--checkpoint', join(dir, `${tag}.ck.json`), '--failed-file', join(dir, `${tag}.failed.txt`), '--rejects-file', join(dir, `${tag}.rejects.tsv`), '--quiet',
];

/** Every command that talks to Redis, pointed at `url`. */
const redisCommands = (url: string): Array<[string, string[]]> => [
  ['stats', ['stats', '--redis', url, '--window', '2026']],
  ['recover', ['recover', '--redis', url, '--journal-dir', join(dir, 'journal')]],
  ['load', ['load', file, '--redis', url, '--window', '2026', ...loadFiles(url.slice(-5))]],
  ['migrate', ['migrate', '--redis', url, '--dry-run', '--quiet']],
  ['bloom rebuild', ['bloom', 'rebuild', '--redis', url, '--name', 'bl', '--file', file, '--expected-items', '100', '--fpp', '0.01', '--quiet']],
  ['bloom status', ['bloom', 'status', '--redis', url, '--name', 'bl']],
  ['demo', ['demo', '--redis', url, '--items', '100']],
];

describe('a dead Redis (nothing listening): one behaviour in every command', () => {
  it('exit 1 at once, naming the URL and the refused connection; never a library option or the client internals', async () => {
    for (const [name, args] of redisCommands(dead)) {
      const r = await cli(args);
      expect(r.code, `${name}: ${r.err}`).toBe(1);
      expect(r.err, name).toMatch(new RegExp(`hashgate ${name}: cannot connect to ${dead.replace(/[/.]/g, '\\$&')}: .*ECONNREFUSED`));
      expect(r.err, name).not.toMatch(/connectTimeoutMs|max retries|MaxRetriesPerRequest|at .*\.js:\d+/);
    }
  }, 180_000);

  it('--json: exactly one line {ok:false, code, message, exitCode} on stdout', async () => {
    for (const [name, args] of redisCommands(dead)) {
      const r = await cli([...args, '--json']);
      expect(r.code, name).toBe(1);
      expect(failureLine(r), name).toMatchObject({ ok: false, code: 'HG_ERR_STORE_UNAVAILABLE', exitCode: 1, message: expect.stringMatching(/cannot connect to/) });
    }
  }, 180_000);

  it('export (embedded store -> Redis) fails the same way', async () => {
    // a store to export: load one with the embedded store
    const store = join(dir, 'store');
    const ld = await cli(['load', file, '--store', store, '--window', '2026', ...loadFiles('store')]);
    expect(ld.code, ld.err).toBe(0);
    const r = await cli(['export', '--store', store, '--redis', dead, '--json']);
    expect(r.code, r.err).toBe(1);
    expect(r.err).toMatch(/cannot connect to .*ECONNREFUSED/);
    expect(failureLine(r)).toMatchObject({ ok: false, code: 'HG_ERR_STORE_UNAVAILABLE' });
  });
});

describe('--connect-timeout-ms on every command that uses Redis', () => {
  it('a Redis that accepts and never answers ends each command with exit 1 after the given bound', async () => {
    const cmds: Array<[string, string[]]> = [...redisCommands(silentUrl)];
    const store = join(dir, 'store2');
    expect((await cli(['load', file, '--store', store, '--window', '2026', ...loadFiles('store2')])).code).toBe(0);
    cmds.push(['export', ['export', '--store', store, '--redis', silentUrl]]);
    for (const [name, args] of cmds) {
      const r = await cli([...args, '--connect-timeout-ms', '300']);
      expect(r.code, `${name}: ${r.err}`).toBe(1);
      expect(r.err, name).toMatch(/no answer within 300 ms \(--connect-timeout-ms\)/);
    }
  }, 180_000);

  it('metrics probes with it: redis_up 0 while Redis does not answer, and the sidecar keeps going', async () => {
    const r = await cli(['metrics', '--once', '--no-process', '--redis', silentUrl, '--connect-timeout-ms', '200']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^hashgate_redis_up 0$/m);
  });

  it('a bad value is a usage error naming the flag', async () => {
    const r = await cli(['stats', '--redis', dead, '--connect-timeout-ms', 'soon']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--connect-timeout-ms must be an integer/);
  });
});

describe('usage errors', () => {
  it('an unknown flag exits 2, names the flag and suggests the nearest one; no raw parseArgs text', async () => {
    for (const [args, flag, hint] of [
      [['stats', '--redsi', dead], '--redsi', '--redis'],
      [['load', file, '--dry-rn'], '--dry-rn', '--dry-run'],
      [['bloom', 'rebuild', '--nmae', 'x'], '--nmae', '--name'],
      [['recover', '--journal-dri', dir], '--journal-dri', '--journal-dir'],
      [['migrate', '--treshold', '1h'], '--treshold', '--threshold'],
      [['metrics', '--once', '--journal-dirs', dir], '--journal-dirs', '--journal-dir'],
      [['hash', '--algoritm', 'xxh64', 'k'], '--algoritm', '--algorithm'],
    ] as const) {
      const r = await cli([...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err, args.join(' ')).toContain(`unknown flag ${flag} (did you mean ${hint}?)`);
      expect(r.err, args.join(' ')).not.toMatch(/Unknown option|To specify a positional argument/);
    }
  }, 120_000);

  it('a flag without its value, and a value given to a switch, name the flag', async () => {
    const a = await cli(['stats', '--redis']);
    expect(a.code).toBe(2);
    expect(a.err).toMatch(/hashgate stats: --redis needs a value/);
    const b = await cli(['stats', '--json=yes', '--redis', dead]);
    expect(b.code).toBe(2);
    expect(b.err).toMatch(/--json takes no value/);
  });

  it('--json: a usage error is one JSON line too', async () => {
    for (const args of [['stats', '--redsi', dead, '--json'], ['hash', '--algorithm', 'md5', '--json', 'x'], ['frobnicate', '--json'], ['load', '--json']]) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).toBe(2);
      const j = failureLine(r);
      expect(j, args.join(' ')).toMatchObject({ ok: false, exitCode: 2, code: expect.stringMatching(/^HG_ERR_INVALID_(OPTION|ARG)$/) });
    }
  });

  it('recover --store is refused (the embedded store has no journal), not reported as a success', async () => {
    const r = await cli(['recover', '--store', join(dir, 'store'), '--journal-dir', join(dir, 'journal'), '--json']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--store: the embedded store has no fail-open journal/);
    expect(failureLine(r)).toMatchObject({ ok: false, exitCode: 2 });
    expect((await cli(['recover', '--help'])).out).not.toMatch(/--store/);
  });
});

describe('help', () => {
  it('`hashgate help bloom rebuild` is `hashgate bloom rebuild --help`', async () => {
    const a = await cli(['help', 'bloom', 'rebuild']);
    const b = await cli(['bloom', 'rebuild', '--help']);
    expect(a.code).toBe(0);
    expect(a.out).toMatch(/^usage: hashgate bloom rebuild/);
    expect(a.out).toBe(b.out);
    const c = await cli(['help', 'bloom', 'status']);
    expect(c.out).toBe((await cli(['bloom', 'status', '--help'])).out);
  });
});

describe('metrics --once and a missing journal directory', () => {
  it('exits 1 naming the directory, and exports no backlog sample for it (unknown is not 0)', async () => {
    const missing = join(dir, 'no-such-journal');
    const r = await cli(['metrics', '--once', '--no-process', '--journal-dir', missing]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${missing} does not exist (--journal-dir)`);
    expect(r.out).not.toMatch(/journal_backlog_bytes\{/);
    const ok = await cli(['metrics', '--once', '--no-process', '--journal-dir', join(dir, 'journal')]);
    expect(ok.code).toBe(0);
    expect(ok.out).toContain(`hashgate_journal_backlog_bytes{journal="${join(dir, 'journal')}"} 0`);
  });
});

const has = requireRedisOrSkip('CLI errors with a live Redis');

describe.skipIf(!has)('with a live Redis', () => {
  let srv: RedisServer;
  beforeAll(async () => {
    srv = await startRedis();
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('bloom rebuild of a filter that does not exist yet, without --expected-items: exit 2 naming the flag, not options.expectedItems', async () => {
    const r = await cli(['bloom', 'rebuild', '--redis', srv.url, '--name', 'fresh', '--file', file, '--fpp', '0.01', '--quiet']);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/--expected-items is required: filter fresh does not exist yet/);
    expect(r.err).not.toMatch(/options\./);
    const j = await cli(['bloom', 'rebuild', '--redis', srv.url, '--name', 'fresh', '--file', file, '--quiet', '--json']);
    expect(j.code).toBe(2);
    expect(failureLine(j)).toMatchObject({ ok: false, exitCode: 2, message: expect.stringMatching(/--expected-items and --fpp are required/) });
  });

  it('bloom rebuild --sets-window reads the dedup store\'s default prefix when --sets-prefix is not given', async () => {
    const ld = await cli(['load', file, '--redis', srv.url, '--layout', 'sets', '--window', '2031', '--json', ...loadFiles('sets')]);
    expect(ld.code, ld.err).toBe(0);
    const r = await cli(['bloom', 'rebuild', '--redis', srv.url, '--name', 'from-sets', '--sets-window', '2031', '--expected-items', '1000', '--fpp', '0.01', '--json']);
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ keys: 3 });
    expect((await cli(['bloom', 'rebuild', '--help'])).out).toMatch(/--sets-prefix P, default hg:dedup/);
  });

  it('recover: a journal directory that does not exist is exit 1 and, with --json, one failure line', async () => {
    const r = await cli(['recover', '--redis', srv.url, '--journal-dir', '/does/not/exist', '--json']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/\/does\/not\/exist does not exist/);
    expect(failureLine(r)).toMatchObject({ ok: false, exitCode: 1, code: 'HG_ERR_JOURNAL' });
  });

  it('a Redis killed before the command: the same message as a port nothing ever listened on', async () => {
    const srv2 = await startRedis();
    const url = srv2.url;
    await srv2.kill('SIGKILL');
    try {
      for (const [name, args] of redisCommands(url).slice(0, 2)) {
        const r = await cli(args);
        expect(r.code, name).toBe(1);
        expect(r.err, name).toMatch(/cannot connect to .*ECONNREFUSED/);
      }
    } finally {
      await srv2.stop().catch(() => undefined);
    }
  });
});
