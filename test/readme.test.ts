// The TypeScript code blocks of the README and the user guide, as a reader copies them: each block is type-checked with
// tsc (strict, NodeNext, importing 'hashgate' by name) and run with node against a private
// redis-server. A block that no longer compiles, throws or prints something else fails here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';

const repo = resolve(import.meta.dirname, '..');
// inside the package, so `import 'hashgate'` resolves to this package's own exports (dist)
const work = join(repo, '.readme-check');

export function codeBlocks(markdown: string, lang: string): string[] {
  const out: string[] = [];
  const re = new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```', 'gm');
  for (let m = re.exec(markdown); m !== null; m = re.exec(markdown)) out.push(m[1]!);
  return out;
}

const readmeBlocks = codeBlocks(readFileSync(join(repo, 'README.md'), 'utf8'), 'ts');
const guideBlocks = codeBlocks(readFileSync(join(repo, 'docs/GUIDE.md'), 'utf8'), 'ts');
/** Every block, README first; a block's number is its index here. */
const blocks = [...readmeBlocks, ...guideBlocks];
const has = requireRedisOrSkip('README code blocks');

/** What each README block prints, in order (the values its comments promise). */
const EXPECTED_STDOUT: Record<number, string[]> = {
  0: ['[ 1, 1, 0 ]', '[ 1, 0 ]', '029bbd41b3a7d8cb191dae486a901e5b'],
  1: ['029bbd41b3a7d8cb191dae486a901e5b', expect.stringMatching(/^\d{1,3}$/) as unknown as string, '32'],
  2: ['up'],
};

describe.skipIf(!has)('README code blocks', () => {
  let srv: RedisServer;
  let journal: string;
  let compiled: { code: number | null; out: string };
  beforeAll(async () => {
    srv = await startRedis();
    journal = mkdtempSync(join(tmpdir(), 'hg-readme-'));
    rmSync(work, { recursive: true, force: true });
    mkdirSync(work, { recursive: true });
    blocks.forEach((b, i) => {
      const code = b.replaceAll('redis://127.0.0.1:6380', srv.url).replaceAll('/var/lib/app/hg-journal', journal);
      writeFileSync(join(work, `block-${i}.ts`), `${code}\nexport {};\n`);
    });
    writeFileSync(join(work, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', lib: ['ES2022'], strict: true,
        noUncheckedIndexedAccess: true, outDir: 'out', rootDir: '.', types: ['node'], typeRoots: [join(repo, 'node_modules/@types')],
      },
      include: ['block-*.ts'],
    }));
    const r = spawnSync(process.execPath, [join(repo, 'node_modules/typescript/bin/tsc'), '-p', work], { encoding: 'utf8' });
    compiled = { code: r.status, out: r.stdout + r.stderr };
  }, 180_000);
  afterAll(async () => {
    await srv?.stop();
    rmSync(work, { recursive: true, force: true });
    rmSync(journal, { recursive: true, force: true });
  });

  it('the README has the blocks this test knows about', () => {
    expect(readmeBlocks.length).toBeGreaterThanOrEqual(3);
    expect(guideBlocks.length).toBeGreaterThanOrEqual(1);
    expect(blocks[0]).toMatch(/HashGate\.open/);
  });

  it('every block type-checks (strict, NodeNext, importing hashgate by name)', () => {
    expect(compiled.out).toBe('');
    expect(compiled.code).toBe(0);
  });

  for (let i = 0; i < blocks.length; i++) {
    it(`${i < readmeBlocks.length ? `README block ${i}` : `guide block ${i - readmeBlocks.length}`} runs and prints what its comments say`, () => {
      const r = spawnSync(process.execPath, [join(work, 'out', `block-${i}.js`)], { cwd: work, encoding: 'utf8', timeout: 60_000 });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      const expected = EXPECTED_STDOUT[i];
      if (expected !== undefined) expect(r.stdout.trim().split('\n')).toEqual(expected);
    });
  }
});
