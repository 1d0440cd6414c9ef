// A private redis-server for one bench suite (never the shared 6379), or undefined when the
// binary is missing so the suite can record itself as skipped instead of failing.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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
