// docs/API.md is generated from the shipped declarations; it must list every root export and be
// current (regenerate with `npm run build && npm run docs:api`).
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as root from '../src/index.js';

describe('docs/API.md', () => {
  it('is what scripts/api-doc.mjs renders from the current declarations', () => {
    const r = spawnSync(process.execPath, ['scripts/api-doc.mjs', '--check'], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('has a section for every value the package root exports', () => {
    const md = readFileSync('docs/API.md', 'utf8');
    const missing = Object.keys(root).filter((name) => !md.includes(`\n### ${name}\n`));
    expect(missing).toEqual([]);
  });
});
