// A private redis-server for one bench suite (never the shared 6379), or undefined when the
// binary is missing so the suite can record itself as skipped instead of failing; and a private
// Redis Cluster of a few masters on this host.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

export interface BenchRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
  /** kill -9 (an outage); restart() brings a fresh, empty server back on the same port. */
  kill(): Promise<void>;
  restart(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

/** A redis-server on `port`, once it answers PING; undefined when it did not come up. */
async function launch(port: number, dir: string, args: readonly string[]): Promise<ChildProcess | undefined> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...args], {
    stdio: 'ignore',
  });
  let spawnFailed = false;
  child.once('error', () => (spawnFailed = true));
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => undefined);
  const deadline = Date.now() + 10_000;
  let ok = false;
  while (!ok && !spawnFailed && Date.now() < deadline) {
    try {
      await probe.connect();
      await probe.ping();
      ok = true;
    } catch {
      probe.disconnect();
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  probe.disconnect();
  if (ok) return child;
  child.kill('SIGKILL');
  return undefined;
}

const exit = (child: ChildProcess, signal: NodeJS.Signals): Promise<void> =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill(signal);
  });

/** `args` are added to the command line (later settings win, e.g. --appendonly yes). */
export async function startBenchRedis(tag: string, args: readonly string[] = []): Promise<BenchRedis | undefined> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), `hashgate-bench-${tag}-`));
  let child = await launch(port, dir, args);
  if (child === undefined) {
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      await exit(child!, 'SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
    async kill() {
      await exit(child!, 'SIGKILL');
    },
    async restart() {
      await exit(child!, 'SIGKILL');
      const c = await launch(port, dir, args);
      if (c === undefined) throw new Error(`redis-server did not come back on port ${port}`);
      child = c;
    },
  };
}

export interface BenchCluster {
  /** `host:port,...` as `hashgate load --cluster` takes it. */
  address: string;
  nodes: { host: string; port: number }[];
  stop(): Promise<void>;
}

/** A port whose cluster bus port (port + 10000) is free too. */
async function clusterPortFree(taken: number[]): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (p > 55_000 || taken.includes(p)) continue;
    const bus = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(false));
      s.listen(p + 10_000, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (bus) return p;
  }
}

async function clusterOk(port: number): Promise<boolean> {
  const r = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return String(await r.call('CLUSTER', 'INFO')).includes('cluster_state:ok');
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

/**
 * A private Redis Cluster of `masters` masters (no replicas, no persistence) on this host, joined by
 * `redis-cli --cluster create`; undefined when redis-server or redis-cli is missing or it did not
 * come up within 30 s.
 */
export async function startBenchCluster(tag: string, masters = 3): Promise<BenchCluster | undefined> {
  const dir = mkdtempSync(join(tmpdir(), `hashgate-bench-${tag}-cluster-`));
  const ports: number[] = [];
  const children: ChildProcess[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(children.map((c) => exit(c, 'SIGTERM')));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters; i++) {
      const port = await clusterPortFree(ports);
      const nodeDir = join(dir, String(port));
      mkdirSync(nodeDir);
      const child = await launch(port, nodeDir, ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000']);
      if (child === undefined) throw new Error(`node ${port} did not start`);
      ports.push(port);
      children.push(child);
    }
    const made = spawnSync('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { stdio: 'ignore' });
    if (made.status !== 0) throw new Error('redis-cli --cluster create failed');
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ok = await Promise.all(ports.map(clusterOk));
      if (ok.every(Boolean)) break;
      if (Date.now() > deadline) throw new Error('cluster_state:ok not reached in 30 s');
      await new Promise((r) => setTimeout(r, 200));
    }
  } catch {
    await stop();
    return undefined;
  }
  return { address: ports.map((p) => `127.0.0.1:${p}`).join(','), nodes: ports.map((port) => ({ host: '127.0.0.1', port })), stop };
}
