// Inputs a user stages by hand: a directory of symbolic links to export files loads those files
// (as cat, Hive and Spark read them); a directory with nothing to load, and a link whose target
// is gone, are errors that name them. Run through the built CLI, as a user runs `hashgate load`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let dir: string;

function load(inputs: string[], extra: string[] = []) {
  const r = spawnSync(
    process.execPath,
    ['dist/src/cli/main.js', 'load', ...inputs, '--dry-run', '--json', '--quiet', '--window', '2026',
      '--checkpoint', join(dir, 'ck.json'), '--failed-file', join(dir, 'failed.txt'), '--rejects-file', join(dir, 'rejects.tsv'), ...extra],
    { encoding: 'utf8', env: { ...process.env, HASHGATE_REDIS_URL: '' } },
  );
  return { code: r.status, out: r.stdout, err: r.stderr };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hg-load-links-'));
  const exp = join(dir, 'export');
  mkdirSync(exp);
  writeFileSync(join(exp, '000000_0'), 'a|1\nb|2\n');
  writeFileSync(join(exp, '000001_0'), 'c|3\nd|4\ne|5\n');
  // the staging directory: links only
  const stage = join(dir, 'stage');
  mkdirSync(stage);
  symlinkSync(join(exp, '000000_0'), join(stage, 'part-0'));
  symlinkSync('../export/000001_0', join(stage, 'part-1')); // relative, as ln -s often makes them
  symlinkSync(exp, join(stage, 'a-directory')); // a link to a directory is not walked
  mkdirSync(join(dir, 'empty'));
  mkdirSync(join(dir, 'only-hidden'));
  writeFileSync(join(dir, 'only-hidden', '.staging'), 'x|1\n');
  mkdirSync(join(dir, 'broken'));
  symlinkSync(join(exp, 'gone'), join(dir, 'broken', 'part-0'));
  writeFileSync(join(dir, 'broken', 'part-1'), 'f|6\n');
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('hashgate load and symbolic links', () => {
  it('a directory of links to export files loads every linked file', () => {
    const r = load([join(dir, 'stage')]);
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ files: 2, rows: 5, ok: true });
  });

  it('a linked file named twice (by its link and by itself) loads once', () => {
    const r = load([join(dir, 'stage'), join(dir, 'export', '000000_0')]);
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ files: 2, rows: 5 });
  });

  it('a link given as an argument, and a glob over links, load their targets', () => {
    const a = load([join(dir, 'stage', 'part-1')]);
    expect(a.code, a.err).toBe(0);
    expect(JSON.parse(a.out)).toMatchObject({ files: 1, rows: 3 });
    const g = load([join(dir, 'stage', 'part-*')]);
    expect(g.code, g.err).toBe(0);
    expect(JSON.parse(g.out)).toMatchObject({ files: 2, rows: 5 });
  });

  it('a directory with no loadable file is a usage error (exit 2) that names it', () => {
    for (const d of ['empty', 'only-hidden']) {
      const r = load([join(dir, d)]);
      expect(r.code, d).toBe(2);
      expect(r.err, d).toContain(`directory ${join(dir, d)} has no file to load`);
      expect(JSON.parse(r.out), d).toMatchObject({ ok: false, exitCode: 2, code: 'HG_ERR_INVALID_ARG' });
    }
  });

  it('a link whose target is gone is an error naming the link, not a smaller load', () => {
    const r = load([join(dir, 'broken')]);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`${join(dir, 'broken', 'part-0')} is a symbolic link whose target does not exist`);
    const arg = load([join(dir, 'broken', 'part-0')]);
    expect(arg.code).toBe(2);
    expect(arg.err).toMatch(/is a symbolic link whose target does not exist/);
  });
});
