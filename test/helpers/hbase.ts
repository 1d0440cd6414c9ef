// Test access to a real HBase (services/hbase). In CI, .ci/run starts it before the tests and
// exports HBASE_ZK=127.0.0.1:<port>; suites connect to that. Outside CI, without HBASE_ZK, the
// helper reuses an instance started by `npm run services:hbase` or starts one itself (java + mvn
// needed, ~25 s) and stops it when the suite ends; without java/mvn the suite skips loudly.
// Under CI=true a missing or unreachable HBase fails the suite.
//
//   const hbaseOk = hbaseConfigured('hbase adapter');          // at collection time
//   describe.skipIf(!hbaseOk)('...', () => {
//     let hb: HBaseHarness;
//     beforeAll(async () => { hb = await ensureHBase(); });
//     afterAll(async () => { await hb?.release(); });
//     it('...', async () => {
//       const t = await hb.createTable('blacklist', ['base:bloom=ROW', 'detail'], ['3', '7']);
//       const store = hb.store();
//       ...
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { HBaseStore, type HBaseStoreOptions } from '../../src/hbase/client.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const svc = join(repo, 'services', 'hbase');
const DEFAULT_ZK_PORT = 21810;

export interface HBaseHarness {
  /** ZooKeeper quorum, e.g. 127.0.0.1:21810 */
  zookeeper: string;
  /** a new adapter on this HBase; closed by release() */
  store(options?: Omit<HBaseStoreOptions, 'zookeeper'>): HBaseStore;
  /**
   * Creates (replacing) a table with a unique name derived from `base`, e.g.
   * createTable('hist', ['e:versions=1,ttl=2,bloom=ROWCOL'], ['1', '2']). Returns the name.
   */
  createTable(base: string, families: string[], splits?: string[]): Promise<string>;
  /** a unique table name (never a prefix of another name this helper hands out) */
  uniqueName(base: string): string;
  /** Runs HBaseDdl commands (one per line) in one JVM; resolves with its OK lines, rejects on ERR. */
  ddl(...commands: string[]): Promise<string[]>;
  /** drops the tables created here, closes the stores, stops HBase if this helper started it */
  release(): Promise<void>;
}

function hasCommand(cmd: string, args: string[]): boolean {
  return spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;
}

/**
 * Sync decision at collection time: true if the suite should run. Under CI=true always true (a
 * missing HBase then fails in ensureHBase). Outside CI false, with a loud warning, when neither
 * HBASE_ZK is set nor java and mvn exist to start one.
 */
export function hbaseConfigured(suite: string): boolean {
  if (process.env['HBASE_ZK'] || process.env['CI'] === 'true') return true;
  if (hasCommand('java', ['-version']) && hasCommand('mvn', ['-v'])) return true;
  console.warn(`\n!!! SKIPPING ${suite}: no HBase (set HBASE_ZK, or install JDK 17 + Maven so ` +
    `services/hbase/start.sh can run one) !!!\n`);
  return false;
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => { out += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, out, err }));
    child.stdin.end(input ?? '');
  });
}

function pidAlive(file: string): boolean {
  if (!existsSync(file)) return false;
  const pid = Number(readFileSync(file, 'utf8').trim());
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Starts an HBase via services/hbase/start.sh with the given env (ports, HBASE_RUN). */
export async function startHBaseService(env: NodeJS.ProcessEnv = {}): Promise<string> {
  const r = await run(join(svc, 'start.sh'), [], { ...process.env, ...env });
  const line = r.out.split('\n').find((l) => l.startsWith('HBASE_ZK='));
  if (r.code !== 0 || !line) throw new Error(`services/hbase/start.sh failed (exit ${r.code}):\n${r.err}`);
  return line.slice('HBASE_ZK='.length).trim();
}

export async function stopHBaseService(env: NodeJS.ProcessEnv = {}): Promise<void> {
  const r = await run(join(svc, 'stop.sh'), [], { ...process.env, ...env });
  if (r.code !== 0) throw new Error(`services/hbase/stop.sh failed (exit ${r.code}):\n${r.err}`);
}

let counter = 0;
const runToken = randomBytes(4).toString('hex');

export async function ensureHBase(): Promise<HBaseHarness> {
  let zookeeper = process.env['HBASE_ZK'];
  let startedHere = false;
  if (!zookeeper) {
    if (process.env['CI'] === 'true') {
      throw new Error('CI=true but HBASE_ZK is not set: .ci/run must start services/hbase/start.sh and export HBASE_ZK');
    }
    const port = Number(process.env['HBASE_ZK_PORT'] ?? DEFAULT_ZK_PORT);
    if (pidAlive(join(repo, '.services', 'hbase', 'hbase.pid'))) {
      zookeeper = `127.0.0.1:${port}`;
    } else {
      console.warn('hbase helper: starting HBase via services/hbase/start.sh (set HBASE_ZK to reuse a running one)');
      zookeeper = await startHBaseService();
      startedHere = process.env['HBASE_KEEP'] !== '1';
    }
  }
  const zkPort = zookeeper.split(',')[0]!.split(':')[1] ?? String(DEFAULT_ZK_PORT);
  const stores: HBaseStore[] = [];
  const tables: string[] = [];

  // fail fast and clearly if HBase is not answering
  const probe = new HBaseStore({ zookeeper, operationTimeoutMs: 15_000 });
  try {
    await probe.ready();
  } catch (err) {
    throw new Error(`HBase at ZooKeeper ${zookeeper} is not reachable: ${(err as Error).message}`, { cause: err });
  } finally {
    await probe.close();
  }

  const ddl = async (...commands: string[]): Promise<string[]> => {
    const r = await run(join(svc, 'ddl.sh'), ['batch'], { ...process.env, HBASE_ZK_PORT: zkPort }, commands.join('\n') + '\n');
    const lines = r.out.split('\n').filter((l) => l.length > 0);
    const bad = lines.filter((l) => l.startsWith('ERR '));
    if (r.code !== 0 || bad.length > 0) {
      throw new Error(`HBaseDdl failed (exit ${r.code}): ${bad.join('; ') || r.err.slice(-2000)}`);
    }
    return lines;
  };

  const uniqueName = (base: string): string => {
    // fixed-width counter and a trailing 'z': no name handed out is a prefix of another
    counter++;
    return `hg_${base}_${runToken}${String(counter).padStart(4, '0')}z`;
  };

  return {
    zookeeper,
    store(options = {}) {
      const s = new HBaseStore({ ...options, zookeeper });
      stores.push(s);
      return s;
    },
    uniqueName,
    ddl,
    async createTable(base, families, splits) {
      const name = uniqueName(base);
      const args = ['create', name, ...families.flatMap((f) => ['-f', f]), '--replace'];
      if (splits && splits.length > 0) args.push('-s', splits.join(','));
      await ddl(args.join(' '));
      tables.push(name);
      return name;
    },
    async release() {
      await Promise.all(stores.map((s) => s.close()));
      if (startedHere) {
        await stopHBaseService();
      } else if (tables.length > 0) {
        await ddl(...tables.map((t) => `drop ${t}`)).catch((err) => console.warn(`hbase helper: drop failed: ${String(err)}`));
      }
    },
  };
}
