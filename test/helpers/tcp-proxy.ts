// A TCP proxy between a client and a real server that can delay, stall and cut traffic, for fault
// tests. It runs in a child process (node:net): a test process busy hashing must not delay the
// network it is tested against.
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

export type Direction = 'up' | 'down' | 'both';

export interface TcpProxy {
  readonly port: number;
  readonly url: string;
  /** Adds `ms` to every chunk in `dir` ('up' = client to server, 'down' = server to client), keeping order. */
  delay(ms: number, dir?: Direction): Promise<void>;
  /** Holds traffic in `dir` (buffered, not lost) until resume(); new connections are accepted but stalled too. */
  stall(dir?: Direction): Promise<void>;
  /** Releases what stall() held, in order. */
  resume(): Promise<void>;
  /** Destroys every open connection (both sides), as a network failure would. */
  cut(): Promise<void>;
  /** Resets every open connection and every new one until restore(): the server looks down. */
  refuse(): Promise<void>;
  /** Accepts connections again after refuse(). */
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  const child: ChildProcess = fork(join(import.meta.dirname, 'tcp-proxy-child.mjs'), [String(targetPort), targetHost], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const port = await new Promise<number>((res, rej) => {
    child.once('message', (m) => res((m as { port: number }).port));
    child.once('exit', (code) => rej(new Error(`proxy exited with ${code}`)));
  });
  let next = 0;
  const waiting = new Map<number, () => void>();
  child.on('message', (m) => {
    const id = (m as { id?: number }).id;
    if (id !== undefined) waiting.get(id)?.();
    if (id !== undefined) waiting.delete(id);
  });
  const op = (msg: Record<string, unknown>): Promise<void> =>
    new Promise<void>((res) => {
      const id = next++;
      waiting.set(id, res);
      child.send({ ...msg, id });
    });
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    delay: (ms, dir = 'both') => op({ op: 'delay', ms, dir }),
    stall: (dir = 'both') => op({ op: 'stall', dir }),
    resume: () => op({ op: 'resume' }),
    cut: () => op({ op: 'cut' }),
    refuse: () => op({ op: 'refuse' }),
    restore: () => op({ op: 'restore' }),
    async close() {
      if (child.exitCode !== null) return;
      const gone = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGKILL');
      await gone;
    },
  };
}
