// docs/API.md is generated from the shipped declarations; it must open with the hand-written
// "which class for what" table, list every export of every entry point and be current
// (regenerate with `npm run build && npm run docs:api`).
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as root from '../src/index.js';
import { entryPoints } from '../scripts/api-doc.mjs';

describe('docs/API.md', () => {
  it('is what scripts/api-doc.mjs renders from the current declarations', () => {
    const r = spawnSync(process.execPath, ['scripts/api-doc.mjs', '--check'], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('opens with the "which class for what" table, naming an entry point for every job', () => {
    const md = readFileSync('docs/API.md', 'utf8');
    const table = md.slice(md.indexOf('## Which class for what'), md.indexOf('## Entry points'));
    expect(table.length).toBeGreaterThan(0);
    const rows = table.split('\n').filter((l) => l.startsWith('| ') && !l.startsWith('| job'));
    expect(rows.length).toBeGreaterThanOrEqual(10);
    for (const row of rows) expect(row, row).toMatch(/`hashgate(\/[a-z]+)?`/);
  });

  it('has a section for every value the root and each subpath export', async () => {
    const md = readFileSync('docs/API.md', 'utf8');
    const missing = Object.keys(root).filter((name) => !md.includes(`\n### ${name}\n`));
    for (const [spec] of entryPoints() as Array<[string, string]>) {
      if (spec === 'hashgate') continue;
      const mod = (await import(spec)) as Record<string, unknown>;
      const section = md.slice(md.indexOf(`\n## \`${spec}\`\n`));
      for (const name of Object.keys(mod)) if (!(name in root) && !section.includes(`\n### ${name}\n`)) missing.push(`${spec}: ${name}`);
    }
    expect(missing).toEqual([]);
  });
});
