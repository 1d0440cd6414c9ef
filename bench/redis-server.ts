// A private redis-server for one bench suite (never the shared 6379), or undefined when the
// binary is missing so the suite can record itself as skipped instead of failing.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

export interface BenchRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
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

export async function startBenchRedis(tag: string): Promise<BenchRedis | undefined> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), `hashgate-bench-${tag}-`));
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
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
  if (!ok) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      await new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
