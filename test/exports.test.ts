// The package as a user gets it: the root and every subpath export imported by name ('hashgate',
// 'hashgate/bloom', ...: package self-reference through package.json `exports` to the built dist),
// at run time in a plain Node process and at type level with tsc, never from src/.
import { beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Every run-time name of the package root, exactly: what a service needs. Anything else belongs
 * in a subpath; adding a name here is an API decision, not a side effect of `export *`.
 */
const ROOT = [
  'DEDUP_DEFAULTS', 'ErrorCodes', 'GATE_DEFAULTS', 'HashGate', 'HashGateError', 'HashGateRangeError', 'HashGateTypeError',
  'bucketOf', 'bucketsOf', 'canonicalJson', 'createMetrics', 'hashBatch', 'jumpBucket', 'jumpBucketsOf', 'metricsHandler',
  'murmur3_128', 'murmur3_128Hex', 'murmur3_32', 'murmur3_64', 'murmur3_x86_128', 'packKeys', 'packLines', 'serveMetrics',
  'windowId', 'xxh64',
];

/** Names the README, OPERATIONS and the module headers tell users to construct or call, by entry point. */
const DOCUMENTED: Record<string, string[]> = {
  'hashgate/bloom': [
    'BloomFilter', 'CountingBloomFilter', 'SwappableBloom', 'rebuild', 'RedisBloom', 'RedisBloomReplica', 'rebuildRedisBloom',
    'readRebuildStatus', 'ExportFileKeys', 'RedisSetWindowKeys', 'HBaseScanKeys', 'redisBloomMetrics',
  ],
  'hashgate/cache': ['TieredCache', 'MemoryColdStore', 'HBaseColdStore', 'coldTableDdl', 'HotColdStore', 'InvalidationBus', 'encodeValue', 'decodeValue'],
  'hashgate/hbase': ['HBaseStore', 'Blacklist', 'BehaviorHistory', 'RiskCheck'],
  'hashgate/dedup': ['DedupService', 'windowId', 'DEDUP_DEFAULTS'],
  'hashgate/ids': ['IdRegistry', 'MemoryIdStore', 'RedisIdStore', 'HBaseIdStore', 'logicalId'],
  'hashgate/fingerprint': ['FingerprintIndex', 'MemoryIndexBackend', 'RedisIndexBackend'],
  'hashgate/metrics': [
    'createMetrics', 'resolveMetrics', 'metricsHandler', 'serveMetrics', 'noopMetrics', 'PromMetrics', 'bloomStats', 'piscinaStats',
    'journalDirStats', 'cacheTierTotals', 'CHANNEL_BATCH_START', 'CHANNEL_BATCH_END', 'CHANNEL_STORE_ERROR',
  ],
};

/** Names no entry point may export: validators, test hooks, removed aliases. */
const PRIVATE = [
  'checkInt', 'checkUint32', 'checkNumber', 'checkOneOf', 'checkKnownKeys', 'codeFor', 'describe', 'invalidType', 'invalidUrl',
  'outOfRange', 'underOption', 'withOptionPath', 'checkTable', 'openWithTestHooks', 'gatePool', 'checkKeys', 'hashChecked',
];

/** Every `import { ... } from 'hashgate…'` in the user docs, by module specifier. */
function namesImportedInDocs(): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const f of ['README.md', 'docs/OPERATIONS.md', 'docs/REDIS-BLOOM.md']) {
    if (!existsSync(join(repo, f))) continue;
    const text = readFileSync(join(repo, f), 'utf8');
    for (const m of text.matchAll(/import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*['"](hashgate(?:\/[a-z]+)?)['"]/g)) {
      const names = out.get(m[2]!) ?? new Set<string>();
      out.set(m[2]!, names);
      for (const part of m[1]!.split(',')) {
        const isType = /^\s*type\s/.test(part) || /import\s+type/.test(m[0]);
        const name = part.trim().replace(/^type\s+/, '').split(/\s+as\s+/)[0]!.trim();
        if (name && !isType) names.add(name);
      }
    }
  }
  return out;
}

function run(cmd: string, args: string[]): { status: number | null; out: string } {
  const r = spawnSync(cmd, args, { cwd: repo, encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

function pkg(): { name: string; exports: Record<string, { types: string; import: string } | string>; typesVersions: Record<string, Record<string, string[]>> } {
  return JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8'));
}

const SUBPATHS = Object.keys(DOCUMENTED);

describe('package exports', () => {
  beforeAll(() => {
    // `npm test` builds first; a bare vitest run on a fresh checkout builds here
    if (!existsSync(join(repo, 'dist/src/entries/bloom.js'))) expect(run('npm', ['run', 'build', '--silent']).status).toBe(0);
  });

  it('package.json exports the root and each subpath to built entry points, types first, and maps them for node10 resolution', () => {
    const p = pkg();
    expect(p.name).toBe('hashgate');
    const specs = ['.', ...SUBPATHS.map((s) => `./${s.slice('hashgate/'.length)}`)];
    expect(Object.keys(p.exports).filter((k) => k !== './package.json').sort()).toEqual(specs.sort());
    for (const spec of specs) {
      const e = p.exports[spec] as { types: string; import: string };
      expect(Object.keys(e)[0], spec).toBe('types');
      expect(existsSync(join(repo, e.import)), e.import).toBe(true);
      expect(existsSync(join(repo, e.types)), e.types).toBe(true);
      if (spec !== '.') expect(p.typesVersions['*']![spec.slice(2)], spec).toEqual([e.types.slice(2)]);
    }
  });

  it('the root exports exactly the pinned names; every subpath loads; nothing exports a validator or test hook', () => {
    const script = `
      const out = {};
      for (const spec of ${JSON.stringify(['hashgate', ...SUBPATHS])}) out[spec] = Object.keys(await import(spec)).sort();
      console.log(JSON.stringify(out));
    `;
    const r = run(process.execPath, ['--input-type=module', '-e', script]);
    expect(r.status, r.out).toBe(0);
    const got = JSON.parse(r.out.trim().split('\n').pop()!) as Record<string, string[]>;
    expect(got['hashgate']).toEqual([...ROOT].sort());
    for (const [spec, names] of Object.entries(got)) {
      expect(names.filter((n) => PRIVATE.includes(n)), spec).toEqual([]);
    }
    // One home per class: a subpath re-exports a root name only for the free functions and defaults
    // a standalone component needs beside it, never another subpath's class.
    const homes = new Map<string, string[]>();
    for (const spec of SUBPATHS) for (const n of got[spec]!) if (!ROOT.includes(n)) homes.set(n, [...(homes.get(n) ?? []), spec]);
    expect([...homes].filter(([, specs]) => specs.length > 1)).toEqual([]);
  });

  it('every documented name imports by name from its entry point in a plain Node process, and the HBase tiers accept its HBaseStore', () => {
    const wanted = new Map<string, Set<string>>(Object.entries(DOCUMENTED).map(([k, v]) => [k, new Set(v)]));
    wanted.set('hashgate', new Set(ROOT));
    const docs = namesImportedInDocs();
    expect([...(docs.get('hashgate') ?? [])]).toEqual(expect.arrayContaining(['HashGate', 'metricsHandler', 'hashBatch']));
    for (const [spec, names] of docs) for (const n of names) (wanted.get(spec) ?? wanted.set(spec, new Set()).get(spec)!).add(n);
    // Static named imports: a missing export fails at link time, exactly as in a user's module.
    let i = 0;
    const bound = new Set<string>();
    const imports = [...wanted].map(([spec, names]) => {
      const n = i++;
      // a name the root shares with a subpath is bound once under its own name
      const local = (name: string) => (bound.has(name) ? `${name} as m${n}_${name}` : (bound.add(name), name));
      return `import { ${[...names].map(local).join(', ')} } from '${spec}'; import * as m${n} from '${spec}';`;
    });
    const script = `
      ${imports.join('\n')}
      const all = [${[...wanted.keys()].map((spec, j) => `[${JSON.stringify(spec)}, m${j}]`).join(', ')}];
      const missing = [];
      for (const [spec, mod] of all) for (const n of ${JSON.stringify(Object.fromEntries([...wanted].map(([k, v]) => [k, [...v]])))}[spec]) if (mod[n] === undefined) missing.push(spec + ':' + n);
      // construction does not connect: this only proves the pieces fit together
      const store = new HBaseStore({ zookeeper: '127.0.0.1:1' });
      const tiers = [
        new HBaseColdStore({ store }), new Blacklist({ store }), new BehaviorHistory({ store }),
        new RiskCheck({ store }), new HBaseIdStore({ hbase: store }),
      ].map((t) => t.constructor.name);
      await store.close();
      const entry = import.meta.resolve('hashgate/bloom');
      console.log(JSON.stringify({ missing, tiers, entry }));
    `;
    const r = run(process.execPath, ['--input-type=module', '-e', script]);
    expect(r.out).not.toMatch(/SyntaxError|does not provide an export/);
    expect(r.status).toBe(0);
    const res = JSON.parse(r.out.trim().split('\n').pop()!) as { missing: string[]; tiers: string[]; entry: string };
    expect(res.missing).toEqual([]);
    expect(res.tiers).toEqual(['HBaseColdStore', 'Blacklist', 'BehaviorHistory', 'RiskCheck', 'HBaseIdStore']);
    expect(res.entry).toMatch(/\/dist\/src\/entries\/bloom\.js$/); // the package, not src/
  });

  it('a TypeScript user type-checks against the published declarations (subpaths, serveMetrics(gate.metrics), no test hooks)', () => {
    const tsc = join(repo, 'node_modules/typescript/bin/tsc');
    const r = run(process.execPath, [
      tsc, '--noEmit', '--strict', '--noUncheckedIndexedAccess', '--module', 'nodenext', '--moduleResolution', 'nodenext',
      '--target', 'es2022', '--types', 'node', '--skipLibCheck', 'test/fixtures/exports-user.ts',
    ]);
    expect(r.out).toBe('');
    expect(r.status).toBe(0);
  });
});
