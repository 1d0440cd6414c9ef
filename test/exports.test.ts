// The package as a user gets it: every documented name imported from 'hashgate' (package
// self-reference through package.json `exports` to the built dist), at run time in a plain Node
// process and at type level with tsc, never from src/.
import { beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Names the README, OPERATIONS and the module headers tell users to construct or call. The HBase
 * tiers are here with the adapter they all take: a tier whose store cannot be imported is unusable.
 */
const DOCUMENTED = [
  'HashGate', 'GATE_DEFAULTS', 'HashGateError', 'HashGateTypeError', 'HashGateRangeError', 'ErrorCodes',
  'murmur3_128', 'murmur3_128Hex', 'murmur3_32', 'murmur3_64', 'murmur3_x86_128', 'xxh64', 'hashBatch', 'bucketOf',
  'bucketsOf', 'jumpBucket', 'jumpBucketsOf', 'canonicalJson', 'packKeys', 'packLines',
  'BloomFilter', 'CountingBloomFilter', 'SwappableBloom', 'rebuild',
  'DedupService', 'windowId',
  'TieredCache', 'MemoryColdStore', 'HBaseColdStore', 'coldTableDdl', 'HotColdStore',
  'HBaseStore', 'Blacklist', 'BehaviorHistory', 'RiskCheck', 'HBaseIdStore',
  'IdRegistry', 'MemoryIdStore', 'RedisIdStore', 'FingerprintIndex',
  'createMetrics', 'resolveMetrics', 'metricsHandler', 'serveMetrics', 'noopMetrics',
];

/** Every `import { ... } from 'hashgate'` in the user docs. */
function namesImportedInDocs(): string[] {
  const out = new Set<string>();
  for (const f of ['README.md', 'docs/OPERATIONS.md']) {
    const text = readFileSync(join(repo, f), 'utf8');
    for (const m of text.matchAll(/import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*['"]hashgate['"]/g)) {
      for (const part of m[1]!.split(',')) {
        const name = part.trim().replace(/^type\s+/, '').split(/\s+as\s+/)[0]!.trim();
        if (name) out.add(name);
      }
    }
  }
  return [...out];
}

function run(cmd: string, args: string[]): { status: number | null; out: string } {
  const r = spawnSync(cmd, args, { cwd: repo, encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('package exports', () => {
  beforeAll(() => {
    // `npm test` builds first; a bare vitest run on a fresh checkout builds here
    if (!existsSync(join(repo, 'dist/src/index.js'))) expect(run('npm', ['run', 'build', '--silent']).status).toBe(0);
  });

  it('package.json exports "." to the built entry points', () => {
    const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as {
      name: string;
      exports: Record<string, { types: string; import: string }>;
    };
    expect(pkg.name).toBe('hashgate');
    const root = pkg.exports['.']!;
    expect(existsSync(join(repo, root.import))).toBe(true);
    expect(existsSync(join(repo, root.types))).toBe(true);
  });

  it('every documented name imports from "hashgate" in a plain Node process, and the HBase tiers accept its HBaseStore', () => {
    const docs = namesImportedInDocs();
    expect(docs).toEqual(expect.arrayContaining(['HashGate', 'metricsHandler', 'hashBatch']));
    const names = [...new Set([...DOCUMENTED, ...docs])];
    // Static named imports: a missing export fails at link time, exactly as in a user's module.
    const script = `
      import { ${names.join(', ')} } from 'hashgate';
      import * as all from 'hashgate';
      const kinds = {};
      for (const n of ${JSON.stringify(names)}) kinds[n] = typeof all[n];
      // construction does not connect: this only proves the pieces fit together
      const store = new HBaseStore({ zookeeper: '127.0.0.1:1' });
      const tiers = [
        new HBaseColdStore({ store }), new Blacklist({ store }), new BehaviorHistory({ store }),
        new RiskCheck({ store }), new HBaseIdStore({ hbase: store }),
      ].map((t) => t.constructor.name);
      await store.close();
      const entry = import.meta.resolve('hashgate');
      console.log(JSON.stringify({ kinds, tiers, entry }));
    `;
    const r = run(process.execPath, ['--input-type=module', '-e', script]);
    expect(r.out).not.toMatch(/SyntaxError|does not provide an export/);
    expect(r.status).toBe(0);
    const res = JSON.parse(r.out.trim().split('\n').pop()!) as { kinds: Record<string, string>; tiers: string[]; entry: string };
    const missing = Object.entries(res.kinds).filter(([, k]) => k === 'undefined').map(([n]) => n);
    expect(missing).toEqual([]);
    expect(res.tiers).toEqual(['HBaseColdStore', 'Blacklist', 'BehaviorHistory', 'RiskCheck', 'HBaseIdStore']);
    expect(res.entry).toMatch(/\/dist\/src\/index\.js$/); // the package, not src/
  });

  it('a TypeScript user type-checks against the published declarations (HBase tiers, options and result types)', () => {
    const tsc = join(repo, 'node_modules/typescript/bin/tsc');
    const r = run(process.execPath, [
      tsc, '--noEmit', '--strict', '--noUncheckedIndexedAccess', '--module', 'nodenext', '--moduleResolution', 'nodenext',
      '--target', 'es2022', '--types', 'node', '--skipLibCheck', 'test/fixtures/exports-user.ts',
    ]);
    expect(r.out).toBe('');
    expect(r.status).toBe(0);
  });
});
