// Every CLI command, run as a user runs it (the built bin in a child process): help reachable two
// ways and listing only flags the command accepts, --json as one line (NDJSON for streams), one
// --redis default rule, read commands that never write, and deprecated aliases that still work.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';

const COMMANDS = ['demo', 'hash', 'load', 'buckets', 'gen-export', 'stats', 'recover', 'migrate', 'metrics', 'export', 'bloom rebuild', 'bloom status'];

function cli(args: string[], env: Record<string, string> = {}, input?: string) {
  const r = spawnSync(process.execPath, ['dist/src/cli/main.js', ...args], {
    encoding: 'utf8',
    env: { ...process.env, HASHGATE_REDIS_URL: '', ...env },
    timeout: 60_000,
    ...(input === undefined ? {} : { input }),
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** Output of a --json run: exactly one line of JSON (or one JSON value per line for streams). */
function jsonLines(out: string): unknown[] {
  const lines = out.split('\n').filter((l) => l !== '');
  return lines.map((l) => JSON.parse(l) as unknown);
}

describe('hashgate help', () => {
  for (const cmd of COMMANDS) {
    it(`\`hashgate help ${cmd}\` prints the same text as \`hashgate ${cmd} --help\`, listing only flags it accepts`, () => {
      const a = cli(['help', ...cmd.split(' ')]);
      const b = cli([...cmd.split(' '), '--help']);
      expect(a.code).toBe(0);
      expect(b.code).toBe(0);
      expect(a.out).toBe(b.out);
      expect(a.out).toMatch(new RegExp(`usage: hashgate ${cmd}`));
      const flags = [...new Set(a.out.match(/--[a-z][a-z0-9-]*/g) ?? [])];
      expect(flags.length).toBeGreaterThan(0);
      for (const flag of flags) {
        const r = cli([...cmd.split(' '), `${flag}=1`, '--help']);
        expect(`${r.out}${r.err}`, `${cmd} ${flag}`).not.toMatch(/Unknown option|unknown flag/i);
      }
    }, 180_000); // one child process per flag: load has ~40 flags, ~1 s each on a busy 2-core box
  }

  it('no help text cites design documents instead of explaining', () => {
    for (const cmd of COMMANDS) expect(cli([...cmd.split(' '), '--help']).out).not.toMatch(/seed 0\d|seed's|the seed|\u00a7/i);
  });
});

const has = requireRedisOrSkip('CLI consistency');

describe.skipIf(!has)('hashgate --json and --redis', () => {
  let srv: RedisServer;
  let redis: Redis;
  let dir: string;
  beforeAll(async () => {
    srv = await startRedis();
    redis = new Redis(srv.url);
    dir = mkdtempSync(join(tmpdir(), 'hg-cli-consistency-'));
  });
  afterAll(async () => {
    redis?.disconnect();
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('every --json output is one line of JSON; hash --json is NDJSON', () => {
    const exp = join(dir, 'export');
    const outputs: Array<[string, string[]]> = [
      ['demo', ['demo', '--items', '2000', '--json']],
      ['gen-export', ['gen-export', '--dir', exp, '--files', '1', '--rows', '500', '--json']],
      ['buckets', ['buckets', '--synthetic', '1000', '--buckets', '8', '--json']],
      ['load', ['load', exp, '--dry-run', '--json', '--quiet', '--checkpoint', join(dir, 'ck.json'),
        '--failed-file', join(dir, 'failed.txt'), '--rejects-file', join(dir, 'rejects.tsv')]],
      ['stats', ['stats', '--redis', srv.url, '--window', '2030', '--json']],
    ];
    for (const [name, args] of outputs) {
      const r = cli(args);
      expect(r.code, `${name}: ${r.err}`).toBe(0);
      const values = jsonLines(r.out);
      expect(values, name).toHaveLength(1);
      expect(typeof values[0], name).toBe('object');
    }
    const h = cli(['hash', '--json', '--buckets', '1000', 'hello', 'world']);
    expect(jsonLines(h.out)).toEqual([
      { key: 'hello', digest: '029bbd41b3a7d8cb191dae486a901e5b', bucket: expect.any(Number) },
      { key: 'world', digest: expect.stringMatching(/^[0-9a-f]{32}$/), bucket: expect.any(Number) },
    ]);
  });

  it('stats never writes to Redis: a stats run does not fix a window\'s bucket count for a later load', async () => {
    await redis.flushall();
    const st = cli(['stats', '--redis', srv.url, '--window', '2027', '--buckets', '16', '--json']);
    expect(st.code, st.err).toBe(0);
    expect(await redis.dbsize()).toBe(0);
    const file = join(dir, 'rows.txt');
    writeFileSync(file, 'a|1\nb|2\nc|3\n');
    const ld = cli(['load', file, '--redis', srv.url, '--window', '2027', '--buckets', '4096', '--json', '--quiet',
      '--checkpoint', join(dir, 'ck2.json'), '--failed-file', join(dir, 'f2.txt'), '--rejects-file', join(dir, 'r2.tsv')]);
    expect(ld.code, ld.err).toBe(0);
    const after = jsonLines(cli(['stats', '--redis', srv.url, '--window', '2027', '--json']).out)[0] as { buckets: number; exact: number };
    expect(after).toMatchObject({ buckets: 4096, exact: 3 });
  });

  it('commands that need Redis refuse to guess one: exit 2 without --redis or $HASHGATE_REDIS_URL', () => {
    for (const args of [['stats', '--window', '2027'], ['recover', '--journal-dir', dir], ['migrate', '--dry-run'], ['load', join(dir, 'rows.txt')]]) {
      const r = cli(args);
      expect(r.code, args[0]).toBe(2);
      expect(r.err, args[0]).toMatch(/--redis URL \(or \$HASHGATE_REDIS_URL\) is required/);
    }
  });

  it('commands that need Redis take $HASHGATE_REDIS_URL when --redis is not given', async () => {
    const r = cli(['stats', '--window', '2027', '--json'], { HASHGATE_REDIS_URL: srv.url });
    expect(r.code, r.err).toBe(0);
    expect(jsonLines(r.out)[0]).toMatchObject({ exact: 3 });
    const m = cli(['migrate', '--dry-run', '--json', '--quiet'], { HASHGATE_REDIS_URL: srv.url });
    expect(m.code, m.err).toBe(0);
    // one name across commands for "another instance holds the lock": lockHeld (recover and migrate)
    expect(jsonLines(m.out)[0]).toMatchObject({ lockHeld: false });
    expect(jsonLines(m.out)[0]).not.toHaveProperty('acquired');
  });

  it('recover: a journal directory that does not exist is an error (exit 1), not "replayed 0 segments"', () => {
    const r = cli(['recover', '--redis', srv.url, '--journal-dir', '/does/not/exist', '--json']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/\/does\/not\/exist does not exist/);
    // the one JSON line of a failure, never a report of 0 segments
    expect(jsonLines(r.out)).toEqual([{ ok: false, code: 'HG_ERR_JOURNAL', message: expect.stringMatching(/does not exist/), exitCode: 1 }]);
  });

  it('gen-export --duplicate-rate is the flag; the old --dup-ratio is a usage error that names it', () => {
    const a = cli(['gen-export', '--dir', join(dir, 'ga'), '--files', '1', '--rows', '1000', '--duplicate-rate', '0.5', '--json']);
    const b = cli(['gen-export', '--dir', join(dir, 'gb'), '--files', '1', '--rows', '1000', '--dup-ratio', '0.5', '--json']);
    expect(a.code).toBe(0);
    expect(b.code).toBe(2);
    expect(b.err).toMatch(/--dup-ratio/);
    const ja = jsonLines(a.out)[0] as { distinct: number; rows: number };
    expect(ja.distinct).toBeLessThan(700);
  });
});
