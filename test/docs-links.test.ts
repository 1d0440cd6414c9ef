// Every relative link in the shipped markdown resolves inside the published package (the npm page
// renders the README from the tarball, so a link to a file that is not packed is a dead link
// there), every #anchor names a heading (or an <a id> anchor) of its target, and the README's "which class for what"
// table names only things its import path really exports.
import { beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, normalize, relative, resolve } from 'node:path';

const repo = resolve(import.meta.dirname, '..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** GitHub's heading anchor: lower case, punctuation but `_` and `-` dropped, spaces to hyphens. */
export function slugOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(markdown: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    if (fenced) continue;
    for (const a of line.matchAll(/<a (?:id|name)="([^"]+)"/g)) out.add(a[1]!);
    const m = /^#{1,6}\s+(.*)$/.exec(line);
    if (!m) continue;
    const base = slugOf(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** [text](target) links outside code fences and inline code; images included. */
function linksOf(markdown: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    if (fenced) continue;
    const text = line.replace(/`[^`]*`/g, '');
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) out.push(m[1]!);
  }
  return out;
}

let packed: Set<string>;
beforeAll(() => {
  const out = execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: repo, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  packed = new Set((JSON.parse(out) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path));
}, 120_000);

describe('links in the shipped markdown', () => {
  it('the package ships the README, the docs and the report the README links to', () => {
    for (const f of ['README.md', 'docs/GUIDE.md', 'docs/OPERATIONS.md', 'docs/API.md', 'bench/REPORT.md']) expect(packed.has(f), f).toBe(true);
  });

  it('every relative link of every packed markdown file resolves to a packed file and heading', () => {
    const broken: string[] = [];
    const docs = [...packed].filter((f) => f.endsWith('.md'));
    expect(docs.length).toBeGreaterThan(4);
    for (const file of docs) {
      const text = readFileSync(join(repo, file), 'utf8');
      for (const link of linksOf(text)) {
        if (/^[a-z]+:/i.test(link)) continue; // https:, mailto:
        const [path, anchor] = link.split('#') as [string, string | undefined];
        const target = path === '' ? file : normalize(join(dirname(file), decodeURI(path)));
        if (target.startsWith('..') || !packed.has(relative('.', target))) {
          broken.push(`${file}: ${link} (not in the package)`);
          continue;
        }
        if (anchor !== undefined && target.endsWith('.md') && !anchorsOf(readFileSync(join(repo, target), 'utf8')).has(anchor)) {
          broken.push(`${file}: ${link} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});

describe("the README's which-class table", () => {
  it('every class or function it names is exported by the import path it gives', async () => {
    const readme = readFileSync(join(repo, 'README.md'), 'utf8');
    const start = readme.indexOf('| Job | Use | Import from |');
    expect(start).toBeGreaterThan(0);
    const rows = readme.slice(start).split('\n').slice(2).filter((l) => l.startsWith('|'));
    expect(rows.length).toBeGreaterThan(8);
    const missing: string[] = [];
    for (const row of rows) {
      const [, , use, from] = row.split('|').map((c) => c.trim());
      const spec = /`([^`]+)`/.exec(from ?? '')?.[1];
      if (spec === undefined) continue; // the CLI row
      const mod = (await import(spec)) as Record<string, unknown>;
      for (const m of (use ?? '').matchAll(/`([A-Za-z_][\w]*)/g)) {
        const name = m[1]!;
        if (/^[a-z]+$/.test(name)) continue; // `gate.lookup`, `hashgate load`, option names
        if (!(name in mod)) missing.push(`${name} from ${spec}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
