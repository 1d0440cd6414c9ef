import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { murmur3_128Hex, bucketOf, murmur3_32 } from '../src/hash/index.js';

// The CLI runs from the build, exactly as `npx hashgate` would.
const cli = (args: string[], input?: string) =>
  spawnSync(process.execPath, ['dist/src/cli/main.js', ...args], { encoding: 'utf8', ...(input === undefined ? {} : { input }) });

describe('hashgate CLI', () => {
  it('hash prints Guava-format murmur3_128 hex and Java buckets for argument keys', () => {
    const r = cli(['hash', '--buckets', '1000', 'hello', '张三110101199001011234']);
    expect(r.status).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => l.split('\t'));
    expect(lines[0]).toEqual(['029bbd41b3a7d8cb191dae486a901e5b', String(bucketOf('hello', 1000)), 'hello']);
    expect(lines[1]).toEqual([murmur3_128Hex('张三110101199001011234'), String(bucketOf('张三110101199001011234', 1000)), '张三110101199001011234']);
  });

  it('hash reads stdin lines when no keys are given', () => {
    const r = cli(['hash', '-a', 'murmur3_32', '--seed', '42'], 'a\nb\n');
    expect(r.stdout.trim().split('\n')).toEqual([`${murmur3_32('a', 42)}\ta`, `${murmur3_32('b', 42)}\tb`]);
  });

  it('bad flags and unknown commands exit 2 with the name in the message', () => {
    const bad = cli(['hash', '--algorithm', 'md5', 'x']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--algorithm/);
    const unknown = cli(['frobnicate']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command 'frobnicate'/);
    const help = cli(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/demo/);
  });

  it('demo --concurrency runs the service pattern next to the batch one; answers match the truth', () => {
    const r = cli(['demo', '--items', '6000', '--threads', '0', '--concurrency', '64', '--keys-per-call', '3', '--json']);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { mismatches: number; service: { concurrency: number; keysPerCall: number; calls: number; batches: number; mismatches: number; p99Us: number } };
    expect(out.mismatches).toBe(0);
    expect(out.service).toMatchObject({ concurrency: 64, keysPerCall: 3, calls: 2000, mismatches: 0 });
    expect(out.service.batches).toBeLessThan(out.service.calls / 4); // merged
    expect(out.service.p99Us).toBeGreaterThan(0);
    const bad = cli(['demo', '--keys-per-call', '2']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--keys-per-call/);
  });
});
