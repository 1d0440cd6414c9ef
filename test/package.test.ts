// The published package, as a user installs it: pack the repo, install the tarball into a scratch
// app (from the tarball and the local npm cache where it can), then run an ESM, a CommonJS and a
// TypeScript consumer against it. ioredis and prom-client are peer dependencies: the scratch app
// gets the newest versions npm installs for them, a second app pins the oldest supported ones,
// and both run a consumer that hands hashgate its own Redis client and Registry.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import * as root from '../src/index.js';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';

const repo = resolve(import.meta.dirname, '..');
const fixtures = join(repo, 'test/fixtures/consumer');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** Every value export of the root that the README and docs/API.md name; a user's code may rely on each. */
export const DOCUMENTED = [
  'HashGate', 'GATE_DEFAULTS', 'DEDUP_DEFAULTS',
  'murmur3_128', 'murmur3_128Hex', 'murmur3_32', 'murmur3_x86_128', 'murmur3_64', 'xxh64', 'hashBatch',
  'bucketOf', 'bucketsOf', 'jumpBucket', 'jumpBucketsOf', 'packKeys', 'packLines', 'canonicalJson', 'windowId',
  'ErrorCodes', 'HashGateError', 'HashGateTypeError', 'HashGateRangeError', 'createMetrics', 'metricsHandler', 'serveMetrics',
] as const;

/** The subpath exports and a name each must provide. */
const SUBPATHS = {
  'hashgate/bloom': ['BloomFilter', 'RedisBloom'], 'hashgate/cache': ['TieredCache', 'HotColdStore'], 'hashgate/hbase': ['HBaseStore', 'Blacklist'],
  'hashgate/dedup': ['DedupService'], 'hashgate/ids': ['IdRegistry'], 'hashgate/fingerprint': ['FingerprintIndex'], 'hashgate/metrics': ['bloomStats'],
} as const;

/** A full tsc of the consumer and every declaration it reaches (skipLibCheck off) on a busy 2-core box. */
const TSC_TIMEOUT_MS = 240_000;

/** The oldest versions the peer ranges in package.json allow; the newest are what npm picks by itself. */
const OLDEST_PEERS = { ioredis: '5.3.0', 'prom-client': '14.0.0' } as const;

/** Types a strict app with skipLibCheck off needs for the newest peers' own imports, not for hashgate's. */
const TYPES_FOR_PEERS = ['@types/redis-errors@^1.2.0'] as const;

let work: string;
let app: string;
let oldApp: string;
let files: string[];

function install(dir: string, specs: string[]): void {
  execFileSync('mkdir', ['-p', dir]);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'scratch-app', private: true, type: 'module' }));
  execFileSync(npm, ['install', '--prefer-offline', '--no-audit', '--no-fund', ...specs], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function installedVersion(dir: string, name: string): string {
  return (JSON.parse(readFileSync(join(dir, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'hashgate-pack-'));
  // `npm pack` runs the prepare script, so this also proves a fresh clone builds what it ships
  const out = execFileSync(npm, ['pack', '--json', '--pack-destination', work], { cwd: repo, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const info = JSON.parse(out) as Array<{ filename: string; files: Array<{ path: string }> }>;
  files = info[0]!.files.map((f) => f.path);
  const tarball = join(work, info[0]!.filename);
  app = join(work, 'app');
  // ioredis 6.1 declarations import the untyped `redis-errors`; under `strict` with skipLibCheck off
  // that is an error in ioredis itself for any app, so the app adds the types as its message says.
  install(app, [tarball, ...TYPES_FOR_PEERS]);
  oldApp = join(work, 'old-peers');
  install(oldApp, [tarball, ...Object.entries(OLDEST_PEERS).map(([name, v]) => `${name}@${v}`)]);
}, 300_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('ships the library, workers, wasm, LICENSE and CHANGELOG; no benchmarks, no source maps', () => {
    for (const f of ['dist/src/index.js', 'dist/src/index.d.ts', 'dist/src/cli/main.js', 'dist/workers/kernel-worker.js',
      'wasm/hashgate.wasm', 'LICENSE', 'CHANGELOG.md', 'README.md', 'package.json']) {
      expect(files, f).toContain(f);
    }
    // One kernel binary serves hashing and Bloom filters.
    expect(files.filter((f) => f.endsWith('.wasm'))).toEqual(['wasm/hashgate.wasm']);
    expect(files.filter((f) => f.startsWith('dist/bench') || f.startsWith('dist/test'))).toEqual([]);
    expect(files.filter((f) => f.endsWith('.map'))).toEqual([]);
    const installed = join(app, 'node_modules/hashgate/dist/src/index.js');
    expect(readFileSync(installed, 'utf8')).not.toMatch(/sourceMappingURL/);
  });

  it('installs the peers once, at the app level: the newest by default, the oldest supported when the app pins them', () => {
    for (const dir of [app, oldApp]) {
      for (const dep of ['ioredis', 'prom-client']) expect(existsSync(join(dir, 'node_modules/hashgate/node_modules', dep)), dep).toBe(false);
    }
    expect(installedVersion(app, 'ioredis')).toMatch(/^6\./);
    expect(installedVersion(app, 'prom-client')).toMatch(/^15\./);
    expect(installedVersion(oldApp, 'ioredis')).toBe(OLDEST_PEERS.ioredis);
    expect(installedVersion(oldApp, 'prom-client')).toBe(OLDEST_PEERS['prom-client']);
    const pkg = JSON.parse(readFileSync(join(app, 'node_modules/hashgate/package.json'), 'utf8'));
    expect(pkg.dependencies).not.toHaveProperty('ioredis');
    expect(pkg.dependencies).not.toHaveProperty('prom-client');
    for (const range of Object.values<string>(pkg.dependencies)) expect(range).toMatch(/^\^/);
    expect(pkg.allowScripts).toMatchObject({ lmdb: true });
  });

  it('installs without the HBase client or its old dependencies', () => {
    expect(existsSync(join(app, 'node_modules/hashgate'))).toBe(true);
    for (const dep of ['hbase-rpc-client', 'underscore', 'protobufjs']) {
      expect(existsSync(join(app, 'node_modules', dep)), dep).toBe(false);
    }
    const pkg = JSON.parse(readFileSync(join(app, 'node_modules/hashgate/package.json'), 'utf8'));
    expect(pkg.peerDependenciesMeta['hbase-rpc-client'].optional).toBe(true);
    expect(readdirSync(join(app, 'node_modules/hashgate'))).toContain('LICENSE');
  });
});

describe('consumers of the installed package', () => {
  it('an ESM consumer finds every documented export and the workers/wasm inside the package', () => {
    copyFileSync(join(fixtures, 'esm.mjs'), join(app, 'esm.mjs'));
    const r = spawnSync(process.execPath, ['esm.mjs', JSON.stringify(DOCUMENTED)], { cwd: app, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout.trim()) as { ok: boolean; exports: string[] };
    expect(out.ok).toBe(true);
    // the tarball exports exactly what the source exports
    expect(out.exports).toEqual(Object.keys(root).sort());
  });

  it('every subpath export loads from the installed package', () => {
    const script = `for (const [spec, names] of Object.entries(${JSON.stringify(SUBPATHS)})) {
      const m = await import(spec);
      for (const n of names) if (m[n] === undefined) throw new Error(spec + ' lacks ' + n);
    }`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: app, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('a CommonJS consumer gets the package through require() (where Node has require(esm)) and import()', () => {
    copyFileSync(join(fixtures, 'cjs.cjs'), join(app, 'cjs.cjs'));
    const r = spawnSync(process.execPath, ['cjs.cjs'], { cwd: app, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('cjs ok');
  });

  it('the bin runs from the installed package', () => {
    const r = spawnSync(process.execPath, [join(app, 'node_modules/.bin/hashgate'), 'hash', 'hello'], { cwd: app, encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^029bbd41b3a7d8cb191dae486a901e5b\thello/);
    const v = spawnSync(process.execPath, [join(app, 'node_modules/.bin/hashgate'), '--version'], { cwd: app, encoding: 'utf8' });
    expect(v.stdout.trim()).toBe(JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')).version);
  });

  for (const [name, compilerOptions] of [
    ['NodeNext', { module: 'NodeNext', moduleResolution: 'NodeNext' }],
    ['node10 (moduleResolution: node)', { module: 'commonjs', moduleResolution: 'node10' }],
    ['bundler', { module: 'ESNext', moduleResolution: 'bundler' }],
    ['NodeNext with the DOM lib', { module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2022', 'DOM'] }],
  ] as const) {
    it(`a TypeScript consumer type-checks against the installed declarations (${name})`, () => {
      const ts = readFileSync(join(fixtures, 'typed.ts'), 'utf8') +
        `\nimport * as all from 'hashgate';\nexport const everyExport = [${DOCUMENTED.map((n) => `all.${n}`).join(', ')}];\n`;
      writeFileSync(join(app, 'typed.ts'), ts);
      const tsconfig = {
        compilerOptions: {
          target: 'ES2022', lib: ['ES2022'], ...compilerOptions, strict: true, noEmit: true, skipLibCheck: false,
          types: ['node'], typeRoots: [join(repo, 'node_modules/@types')], ignoreDeprecations: '5.0',
        },
        files: ['typed.ts'],
      };
      writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(tsconfig));
      const r = spawnSync(process.execPath, [join(repo, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: app, encoding: 'utf8' });
      expect(r.stdout + r.stderr).toBe('');
      expect(r.status).toBe(0);
    }, TSC_TIMEOUT_MS);
  }
});

const HAVE_REDIS = requireRedisOrSkip('package peers');

describe.runIf(HAVE_REDIS)('the app\'s own ioredis and prom-client (peer dependencies), oldest and newest supported', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => server?.stop());

  for (const [label, dir] of [['newest', () => app], ['oldest', () => oldApp]] as const) {
    it(`${label}: the gate, RedisBloom and serveMetrics take the app's Redis client and Registry`, () => {
      copyFileSync(join(fixtures, 'peers.mjs'), join(dir(), 'peers.mjs'));
      const r = spawnSync(process.execPath, ['peers.mjs', String(server.port)], { cwd: dir(), encoding: 'utf8', timeout: 60_000 });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      const versions = JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, string>;
      expect(versions).toEqual({ ioredis: installedVersion(dir(), 'ioredis'), 'prom-client': installedVersion(dir(), 'prom-client') });
    });

    it(`${label}: their clients and registries type-check where hashgate takes them`, () => {
      copyFileSync(join(fixtures, 'peers.ts'), join(dir(), 'peers.ts'));
      const tsconfig = {
        compilerOptions: {
          target: 'ES2022', lib: ['ES2022'], module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: true,
          types: ['node'], typeRoots: [join(repo, 'node_modules/@types')],
        },
        files: ['peers.ts'],
      };
      writeFileSync(join(dir(), 'tsconfig.peers.json'), JSON.stringify(tsconfig));
      const r = spawnSync(process.execPath, [join(repo, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.peers.json'], { cwd: dir(), encoding: 'utf8' });
      expect(r.stdout + r.stderr).toBe('');
      expect(r.status).toBe(0);
    }, TSC_TIMEOUT_MS);
  }
});
