// The durable embedded store across real OS processes: kill -9 mid-batch, or amid concurrent
// one-key calls sharing commits, loses no key that was answered 1 (with sync on and off), and
// three processes writing overlapping keys to one path get exact answers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { DedupService, LmdbStore } from '../../src/dedup/index.js';
import { writeFirstFormatStore } from '../helpers/lmdb-first-format.js';

const ROOT = resolve(import.meta.dirname, '../..');
const DIST = join(ROOT, 'dist');
const CHILD = join(ROOT, 'test/integration/lmdb-child.mjs');
const at = new Date('2026-06-01T00:00:00Z');
const tmp = mkdtempSync(join(tmpdir(), 'hg-lmdb-proc-'));

beforeAll(() => {
  const built = join(DIST, 'src/dedup/lmdb-store.js');
  const src = join(ROOT, 'src/dedup/lmdb-store.ts');
  if (!existsSync(built) || statSync(built).mtimeMs < statSync(src).mtimeMs) {
    spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.json')], { stdio: 'inherit' });
  }
  expect(existsSync(built)).toBe(true);
}, 300_000);
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function lines(c: ChildProcessWithoutNullStreams, onLine: (l: string) => void): void {
  createInterface({ input: c.stdout }).on('line', onLine);
}

describe('LMDB store across processes', () => {
  it('kill -9 mid-batch: every key answered 1 is still there after a restart', async () => {
    const path = join(tmp, 'crash');
    const c = spawn(process.execPath, [CHILD, DIST, 'crash', path], { stdio: ['pipe', 'pipe', 'pipe'] }) as ChildProcessWithoutNullStreams;
    let stderr = '';
    c.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const done: Array<[number, number]> = [];
    const bad: string[] = [];
    const exited = new Promise<NodeJS.Signals | null>((res) => c.on('exit', (_code, sig) => res(sig)));
    await new Promise<void>((res, rej) => {
      c.on('exit', () => rej(new Error(`child exited early: ${stderr}`)));
      lines(c, (l) => {
        if (l.startsWith('bad')) bad.push(l);
        const m = /^done (\d+) (\d+)$/.exec(l);
        if (m === null) return;
        done.push([Number(m[1]), Number(m[2])]);
        // the child starts its next batch right after printing: kill it while that one runs
        if (done.length === 6) setTimeout(() => { c.kill('SIGKILL'); res(); }, 15);
      });
    });
    expect(await exited).toBe('SIGKILL');
    expect(bad).toEqual([]);
    const svc = new DedupService({ dedup: { path, buckets: 256, cacheMaxEntries: 0 } });
    try {
      const answered = done.flatMap(([from, to]) => Array.from({ length: to - from }, (_, i) => `王${from + i}|4401${from + i}`));
      // a batch that finished in the 15 ms before the kill landed was answered too
      expect(answered.length).toBeGreaterThanOrEqual(6 * 20_000);
      const again = await svc.firstSeen(answered, { at });
      expect(again.reduce((s, v) => s + v, 0)).toBe(0);
      // the store holds whole batches only: the answered ones, plus at most the one in flight
      const exact = (await svc.stats('2026')).exact;
      expect(exact === answered.length || exact === answered.length + 20_000).toBe(true);
    } finally {
      await svc.close();
    }
  }, 120_000);

  it.each([
    { sync: true, callers: 16 },
    { sync: true, callers: 1 },
    { sync: false, callers: 16 },
  ])('kill -9 during one-key calls of $callers caller(s), sync $sync: every key answered is still there after a restart', async ({ sync, callers }) => {
    const path = join(tmp, `small-${sync}-${callers}`);
    const c = spawn(process.execPath, [CHILD, DIST, 'small', path, String(callers)], {
      stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, HG_CHILD_SYNC: String(sync) },
    }) as ChildProcessWithoutNullStreams;
    let stderr = '';
    c.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const answered: string[] = [];
    const bad: string[] = [];
    const exited = new Promise<NodeJS.Signals | null>((res) => c.on('exit', (_code, sig) => res(sig)));
    await new Promise<void>((res, rej) => {
      c.on('exit', () => rej(new Error(`child exited early: ${stderr}`)));
      lines(c, (l) => {
        if (l.startsWith('bad')) bad.push(l);
        const m = /^a (\d+) (\d+)$/.exec(l);
        if (m === null) return;
        answered.push(`李${m[1]}-${m[2]}|5101${m[2]}`);
        // calls keep going in the child: the kill lands among commits and fsyncs in flight
        if (answered.length === 400) {
          c.kill('SIGKILL');
          res();
        }
      });
    });
    expect(await exited).toBe('SIGKILL');
    expect(bad).toEqual([]);
    const svc = new DedupService({ dedup: { path, buckets: 256, cacheMaxEntries: 0 } });
    try {
      const again = await svc.firstSeen(answered, { at });
      expect(again.reduce((s, v) => s + v, 0)).toBe(0);
      // keys in flight at the kill may or may not be there; never fewer than the answered ones
      expect((await svc.stats('2026')).exact).toBeGreaterThanOrEqual(answered.length);
    } finally {
      await svc.close();
    }
  }, 120_000);

  it.each([
    { name: '4096 blocks', buckets: 256, blockBits: undefined, firstFormat: 0 },
    { name: 'one block holding every key', buckets: 1, blockBits: 0, firstFormat: 0 },
    { name: 'a first-format store all three open at once', buckets: 256, blockBits: undefined, firstFormat: 2000 },
  ])('three processes writing overlapping keys ($name): each key answered 1 exactly once', async ({ buckets, blockBits, firstFormat }) => {
    const path = join(tmp, `race-${buckets}-${firstFormat}`);
    const oldKeys = Array.from({ length: firstFormat }, (_, i) => `旧${i}|${i}`);
    if (firstFormat > 0) {
      // the earlier on-disk format (one duplicate per member), written with lmdb-js directly:
      // whichever child opens it first converts it, the others must wait and read blocks
      await writeFirstFormatStore(path, oldKeys, buckets);
    }
    if (blockBits !== undefined) {
      // record the window first, so the children's writes all merge into one contended block
      const st = new LmdbStore({ path, sync: false, maxWindows: 4, blockBits });
      await st.resolveBuckets('2026', 'compact', buckets);
      await st.close();
    }
    const N = 15_000;
    const kids = [1, 2, 3].map((seed) =>
      spawn(process.execPath, [CHILD, DIST, 'race', path, String(N), String(seed * 7919)], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, HG_CHILD_BUCKETS: String(buckets) } }) as ChildProcessWithoutNullStreams,
    );
    const outs = kids.map((c) => {
      let stderr = '';
      c.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      // a child that dies before 'ready' fails the test at once instead of at its timeout
      const ready = new Promise<void>((res, rej) => {
        lines(c, (l) => l === 'ready' && res());
        c.on('exit', (code) => rej(new Error(`child exited ${code} before ready: ${stderr}`)));
      });
      const won = new Promise<string[]>((res, rej) => {
        lines(c, (l) => l.startsWith('[') && res(JSON.parse(l) as string[]));
        c.on('exit', (code) => code !== 0 && rej(new Error(`child exited ${code}: ${stderr}`)));
      });
      return { ready, won };
    });
    await Promise.all(outs.map((o) => o.ready));
    for (const c of kids) c.stdin.write('go\n');
    const won = await Promise.all(outs.map((o) => o.won));
    const all = won.flat();
    // every key won exactly once over all processes (the warm-up key is not in any list)
    expect(all.length).toBe(N);
    expect(new Set(all).size).toBe(N);
    // the processes really interleaved: more than one of them won keys
    expect(won.filter((w) => w.length > 0).length).toBeGreaterThan(1);
    const svc = new DedupService({ dedup: { path, buckets, cacheMaxEntries: 0 } });
    expect((await svc.stats('2026')).exact).toBe(N + 1 + firstFormat);
    expect((await svc.firstSeen(oldKeys, { at })).every((v) => v === 0)).toBe(true);
    await svc.close();
  }, 180_000);
});
