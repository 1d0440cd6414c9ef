// The fault tests' TCP proxy delays traffic without reordering it: a stream that arrives out of
// order would hand a client replies that belong to other commands, a wrong answer the code under
// test never produced.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { startProxy, type TcpProxy } from './helpers/tcp-proxy.js';

describe('test TCP proxy', () => {
  let echo: Server;
  let proxy: TcpProxy;
  beforeAll(async () => {
    echo = createServer((s) => s.pipe(s));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
    const addr = echo.address();
    proxy = await startProxy(typeof addr === 'object' && addr !== null ? addr.port : 0);
  });
  afterAll(async () => {
    await proxy.close();
    await new Promise<void>((r) => echo.close(() => r()));
  });

  it('delayed both ways, thousands of small writes spread over many milliseconds come back in order', async () => {
    await proxy.delay(20, 'both');
    const c: Socket = connect(proxy.port, '127.0.0.1');
    c.setNoDelay(true);
    await new Promise<void>((r) => c.once('connect', () => r()));
    const N = 100_000;
    const parts: string[] = [];
    for (let i = 0; i < N; i++) parts.push(`${i};`);
    const expected = parts.join('');
    let got = '';
    const done = new Promise<void>((r) => {
      c.on('data', (d: Buffer) => {
        got += d.toString('latin1');
        if (got.length >= expected.length) r();
      });
    });
    // writes land across many event-loop turns and clock ticks, so chunks reach the proxy at
    // every phase of a millisecond
    for (let i = 0; i < N; i += 2) {
      c.write(parts[i]! + parts[i + 1]!);
      await new Promise((r) => setImmediate(r));
    }
    await done;
    c.destroy();
    await proxy.delay(0, 'both');
    expect(got.length).toBe(expected.length);
    // the first position where the stream differs, if any (-1: in order)
    let first = -1;
    for (let i = 0; i < got.length && first < 0; i++) if (got[i] !== expected[i]) first = i;
    expect(first).toBe(-1);
  }, 60_000);
});
