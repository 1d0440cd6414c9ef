// Starts a private redis-server on a free loopback port for one suite. Never touches 6379: the
// machine's shared instance belongs to other people.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RedisServerOptions {
  /** Extra redis-server arguments, e.g. ['--appendonly', 'yes', '--appendfsync', 'always']. */
  args?: string[];
  port?: number;
  /** Keep data dir across restart() (needed for AOF tests). Default true. */
  keepDir?: boolean;
}

export interface RedisServer {
  port: number;
  url: string;
  dir: string;
  readonly pid: number | undefined;
  stop(): Promise<void>;
  kill(signal?: NodeJS.Signals): Promise<void>;
  restart(): Promise<void>;
}

export const redisAvailable = (): boolean =>
  spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;

/** Outside CI a missing binary skips loudly; under CI=true it must fail the suite. */
export function requireRedisOrSkip(suite: string): boolean {
  if (redisAvailable()) return true;
  if (process.env.CI === 'true') throw new Error(`${suite}: redis-server not found but CI=true`);
  console.warn(`\n!!! SKIPPING ${suite}: redis-server is not installed (apt-get install redis-server) !!!\n`);
  return false;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.write('PING\r\n');
        s.once('data', (d) => {
          s.destroy();
          resolve(d.toString().startsWith("+PONG"));
        });
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export async function startRedis(opts: RedisServerOptions = {}): Promise<RedisServer> {
  let port = opts.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'hashgate-redis-'));
  let child: ChildProcess | undefined;

  const launch = async (): Promise<void> => {
    const args = [
      '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', dir, '--daemonize', 'no', '--loglevel', 'warning', ...(opts.args ?? []),
    ];
    child = spawn('redis-server', args, { stdio: ['ignore', 'ignore', 'inherit'] });
    const exited = new Promise<never>((_, reject) =>
      child!.once('exit', (code) => reject(new Error(`redis-server exited early with code ${code}`))),
    );
    exited.catch(() => undefined);
    await Promise.race([waitForPort(port, 10_000), exited]);
  };

  const waitExit = (signal: NodeJS.Signals): Promise<void> =>
    new Promise((resolve) => {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return resolve();
      c.once('exit', () => resolve());
      c.kill(signal);
    });

  // A port picked by freePort can be taken (by another suite's server or an outgoing connection's
  // ephemeral port) before redis-server binds it: the server then exits, and a new port is tried.
  for (let attempt = 0; ; attempt++) {
    try {
      await launch();
      break;
    } catch (e) {
      const early = child !== undefined && (child.exitCode !== null || child.signalCode !== null);
      if (!early || opts.port !== undefined || attempt === 4) throw e;
      port = await freePort();
    }
  }
  const server: RedisServer = {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    get pid() {
      return child?.pid;
    },
    async kill(signal = 'SIGKILL') {
      await waitExit(signal);
    },
    async stop() {
      await waitExit('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
    async restart() {
      await waitExit('SIGKILL');
      await launch();
    },
  };
  return server;
}

/**
 * Total members over every set whose key matches `pattern` (SCAN with TYPE set, never KEYS): the
 * sub-buckets of compact buckets that split match too, their state strings do not count.
 */
export async function scardSum(redis: import('ioredis').Redis, pattern: string): Promise<number> {
  let total = 0;
  let cursor = '0';
  do {
    const [c, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000, 'TYPE', 'set');
    cursor = c;
    if (keys.length) {
      const p = redis.pipeline();
      for (const k of keys) p.scard(k);
      // a set that became a string since the SCAN (a split compact sub-bucket) counts nothing
      for (const [err, n] of (await p.exec())!) if (err === null) total += n as number;
    }
  } while (cursor !== '0');
  return total;
}
