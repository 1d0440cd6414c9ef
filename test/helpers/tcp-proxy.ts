// A loopback TCP proxy in front of a real server, for faults a process signal cannot make: a
// network that stalls (connections stay open, bytes stop moving) and one that refuses connections.
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  port: number;
  /** `redis://127.0.0.1:<port>` */
  url: string;
  /** Bytes stop moving both ways (held, not dropped); new connections are accepted and held too. */
  stall(): void;
  /** Delivers everything held and forwards again. */
  resume(): void;
  /** Resets every connection and every new one until restore(): the server looks down. */
  cut(): void;
  restore(): void;
  /** Connections currently open through the proxy. */
  readonly connections: number;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket | undefined;
  /** Held while stalled: [toUpstream, chunk]. */
  held: [boolean, Buffer][];
}

export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let stalled = false;
  let refusing = false;

  const drop = (p: Pair): void => {
    pairs.delete(p);
    p.client.destroy();
    p.upstream?.destroy();
  };

  const openUpstream = (p: Pair): void => {
    const up = connect(targetPort, targetHost);
    p.upstream = up;
    up.on('data', (d: Buffer) => {
      if (stalled) p.held.push([false, d]);
      else p.client.write(d);
    });
    up.on('error', () => drop(p));
    up.on('close', () => drop(p));
    // bytes the client sent before the upstream connected were held; send them now
    const early = p.held.filter(([toUp]) => toUp);
    p.held = p.held.filter(([toUp]) => !toUp);
    for (const [, d] of early) up.write(d);
  };

  const server: Server = createServer((client) => {
    if (refusing) {
      client.resetAndDestroy();
      return;
    }
    const p: Pair = { client, upstream: undefined, held: [] };
    pairs.add(p);
    client.on('data', (d: Buffer) => {
      if (stalled || p.upstream === undefined) p.held.push([true, d]);
      else p.upstream.write(d);
    });
    client.on('error', () => drop(p));
    client.on('close', () => drop(p));
    if (!stalled) openUpstream(p);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;

  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stall() {
      stalled = true;
    },
    resume() {
      stalled = false;
      for (const p of pairs) {
        if (p.upstream === undefined) {
          openUpstream(p);
          continue;
        }
        const held = p.held;
        p.held = [];
        for (const [toUp, d] of held) (toUp ? p.upstream : p.client).write(d);
      }
    },
    cut() {
      refusing = true;
      for (const p of [...pairs]) {
        p.client.resetAndDestroy();
        drop(p);
      }
    },
    restore() {
      refusing = false;
    },
    get connections() {
      return pairs.size;
    },
    async close() {
      for (const p of [...pairs]) drop(p);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
