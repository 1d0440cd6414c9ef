// The worker threads load only the code they run: no Redis, LMDB or metrics client.
//
// Every gate starts its pool's threads at open, and on a 2-core machine a worker that imported the
// whole package (ioredis, lmdb, msgpackr, prom-client: about 80 modules, 0.25 s of CPU and as much
// again of background compilation) spent that CPU next to the caller's first requests and Redis.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Modules reachable from `entry` by value imports (type-only imports are erased), and the packages they name. */
function importGraph(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string): void => {
    if (files.has(file)) return;
    files.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s+(?!type\b)[^'";]*?from\s+'([^']+)'|import\(\s*'([^']+)'\s*\)|(?:^|\n)\s*import\s+'([^']+)'/g)) {
      const spec = (m[1] ?? m[2] ?? m[3])!;
      if (spec.startsWith('.')) visit(path.resolve(path.dirname(file), spec.replace(/\.js$/, '.ts')));
      else packages.add(spec);
    }
  };
  visit(path.join(root, entry));
  return { files, packages };
}

describe('worker thread imports', () => {
  it('reaches no npm package and none of the store, cache or metrics code', () => {
    const { files, packages } = importGraph('workers/kernel-worker.ts');
    expect([...packages].filter((p) => !p.startsWith('node:'))).toEqual([]);
    const rel = [...files].map((f) => path.relative(root, f));
    expect(rel.filter((f) => /^src\/(dedup|redis|cache|hbase|metrics|loader|cli)\//.test(f))).toEqual([]);
    // the walk itself works: it found the kernel and the Bloom filter
    expect(rel).toContain('src/hash/kernel.ts');
    expect(rel).toContain('src/bloom/bloom-filter.ts');
  });

  it("the dry run's region worker reaches no npm package either", () => {
    const { files, packages } = importGraph('src/loader/region-worker.ts');
    expect([...packages].filter((p) => !p.startsWith('node:'))).toEqual([]);
    expect([...files].map((f) => path.relative(root, f))).toContain('src/loader/parse.ts');
  });
});
