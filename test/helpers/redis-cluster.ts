// A private 3-master Redis Cluster on free loopback ports for one suite: three
// `redis-server --cluster-enabled yes` processes joined with `redis-cli --cluster create
// ... --cluster-replicas 0 --cluster-yes`, ready when every node reports cluster_state:ok.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, redisAvailable } from './redis-server.js';

export interface RedisClusterHandle {
  nodes: Array<{ host: string; port: number }>;
  dir: string;
  /** SIGKILL one node (index into nodes). */
  kill(i: number): Promise<void>;
  /** Start a killed node again with its nodes.conf; waits until the cluster is ok again. */
  restart(i: number): Promise<void>;
  stop(): Promise<void>;
}

export const redisCliAvailable = (): boolean => spawnSync('redis-cli', ['--version'], { stdio: 'ignore' }).status === 0;

/** Outside CI missing binaries skip loudly; under CI=true they fail the suite. */
export function requireClusterOrSkip(suite: string): boolean {
  if (redisAvailable() && redisCliAvailable()) return true;
  if (process.env.CI === 'true') throw new Error(`${suite}: redis-server/redis-cli not found but CI=true`);
  console.warn(`\n!!! SKIPPING ${suite}: redis-server and redis-cli are needed for the cluster tests !!!\n`);
  return false;
}

async function ping(port: number): Promise<string | undefined> {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return await r.cluster('INFO');
  } catch {
    return undefined;
  } finally {
    r.disconnect();
  }
}

async function waitFor(cond: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`redis cluster: ${what} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Whether `port` can be bound on loopback right now (the cluster bus port must be free too). */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A free port whose cluster bus port (port + 10000) is free as well and not in `taken`. */
async function clusterPort(taken: number[]): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (p + 10000 < 65536 && !taken.includes(p) && (await portFree(p + 10000))) return p;
  }
}

export async function startRedisCluster(opts: { args?: string[] } = {}): Promise<RedisClusterHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'hashgate-cluster-'));
  const ports: number[] = [];
  while (ports.length < 3) ports.push(await clusterPort(ports));
  const procs: Array<ChildProcess | undefined> = [];
  /** Starts node i on ports[i]; resolves false if the process exited first (a port taken meanwhile). */
  const spawnNode = async (i: number): Promise<boolean> => {
    const port = ports[i]!;
    const ndir = join(dir, String(port));
    spawnSync('mkdir', ['-p', ndir]);
    const child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
        '--cluster-node-timeout', '2000', '--save', '', '--appendonly', 'no', '--dir', ndir, '--loglevel', 'warning', ...(opts.args ?? [])],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    procs[i] = child;
    const exited = new Promise<boolean>((resolve) => child.once('exit', () => resolve(false)));
    const up = waitFor(async () => child.exitCode !== null || child.signalCode !== null || (await ping(port)) !== undefined, 10_000, `node ${port} did not answer`)
      .then(() => child.exitCode === null && child.signalCode === null);
    return Promise.race([up, exited]);
  };
  const launch = async (i: number): Promise<void> => {
    if (!(await spawnNode(i))) throw new Error(`redis cluster: node ${ports[i]} exited during start-up`);
  };
  /** First start: a node whose port (or bus port) was taken between the check and the bind gets new ports. */
  const launchFresh = async (i: number): Promise<void> => {
    for (let attempt = 0; ; attempt++) {
      if (await spawnNode(i)) return;
      if (attempt === 4) throw new Error(`redis cluster: node ${ports[i]} exited during start-up ${attempt + 1} times`);
      ports[i] = await clusterPort(ports);
    }
  };
  const allOk = async (): Promise<boolean> => {
    for (const p of ports) if (!(await ping(p))?.includes('cluster_state:ok')) return false;
    return true;
  };
  try {
    for (let i = 0; i < 3; i++) await launchFresh(i);
    const res = spawnSync('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], {
      encoding: 'utf8',
    });
    if (res.status !== 0) throw new Error(`redis-cli --cluster create failed: ${res.stderr || res.stdout}`);
    await waitFor(allOk, 30_000, 'cluster_state:ok not reached');
  } catch (e) {
    for (const c of procs) c?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const stopOne = (i: number, sig: NodeJS.Signals): Promise<void> =>
    new Promise((resolve) => {
      const c = procs[i];
      if (!c || c.exitCode !== null || c.signalCode !== null) return resolve();
      c.once('exit', () => resolve());
      c.kill(sig);
    });
  return {
    nodes: ports.map((port) => ({ host: '127.0.0.1', port })),
    dir,
    kill: (i) => stopOne(i, 'SIGKILL'),
    async restart(i) {
      await stopOne(i, 'SIGKILL');
      await launch(i);
      await waitFor(allOk, 30_000, 'cluster_state:ok not reached after restart');
    },
    async stop() {
      await Promise.all([0, 1, 2].map((i) => stopOne(i, 'SIGTERM')));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
