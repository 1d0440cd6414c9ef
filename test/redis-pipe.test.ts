// The pipelined RESP connection against a real redis-server: thousands of commands per send with
// replies split anywhere by the network, every reply type, per-command errors, a connection cut
// mid-send (which replies arrived is reported), a dead server, AUTH and SELECT.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import fc from 'fast-check';
import { NotSentError } from '../src/redis/inflight.js';
import { PipeLostError, PipeReplyError, RespError, RespPipe, encodeCommand, encodeCommands, type ReplySink, type RespValue } from '../src/redis/pipe.js';
import { endpointOf } from '../src/redis/pipes.js';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';
import { startProxy, type TcpProxy } from './helpers/tcp-proxy.js';

const has = requireRedisOrSkip('redis pipe');

/** Collects every reply of a send, in order. */
class Collect implements ReplySink {
  readonly got: Array<RespValue | { err: string }> = [];
  int(i: number, v: number): void {
    this.got[i] = v;
  }
  error(i: number, message: string): void {
    this.got[i] = { err: message };
  }
  value(i: number, v: RespValue): void {
    this.got[i] = v;
  }
}

/** RESP of commands built from strings, the plain way (the encoders' reference). */
const reference = (cmds: ReadonlyArray<ReadonlyArray<string | Buffer>>): Buffer =>
  Buffer.concat(cmds.flatMap((c) => [
    Buffer.from(`*${c.length}\r\n`),
    ...c.flatMap((a) => {
      const b = typeof a === 'string' ? Buffer.from(a, 'utf8') : a;
      return [Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n')];
    }),
  ]));

describe('encodeCommand, encodeCommands', () => {
  it('write what the plain string-built RESP says, every length of every digit count, one command or many in one buffer', () => {
    const arg = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 40 }),
      fc.uint8Array({ maxLength: 40 }).map((u) => Buffer.from(u)),
      fc.constantFrom(0, 9, 10, 99, 100, 999, 1000, 12345).map((n) => 'x'.repeat(n)),
    );
    const cmd = fc.array(arg, { minLength: 1, maxLength: 12 });
    fc.assert(fc.property(fc.array(cmd, { maxLength: 12 }), (cmds) => {
      const want = reference(cmds);
      expect(encodeCommands(cmds)).toEqual(want);
      expect(Buffer.concat(cmds.map((c) => encodeCommand(c)))).toEqual(want);
    }), { numRuns: 300 });
  });

  it('an argument written by its owner lands in place in a buffer of many commands', () => {
    const bytes = Buffer.from(Array.from({ length: 1200 }, (_, i) => (i * 31) & 0xff));
    const writer = { length: bytes.length, writeTo: (out: Buffer, at: number) => at + bytes.copy(out, at) };
    const got = encodeCommands([['RESTORE', 'k1', '0', writer], ['EVALSHA', 'abc', '1', 'k'], ['RESTORE', 'k2', '0', writer]]);
    expect(got).toEqual(reference([['RESTORE', 'k1', '0', bytes], ['EVALSHA', 'abc', '1', 'k'], ['RESTORE', 'k2', '0', bytes]]));
    expect(() => encodeCommands([['PING'], ['SET', 'k', { length: 5, writeTo: (_o: Buffer, at: number) => at + 4 }]])).toThrow(RangeError);
  });
});

describe.skipIf(!has)('RespPipe', () => {
  let srv: RedisServer;
  let r: Redis;
  beforeAll(async () => {
    srv = await startRedis();
    r = new Redis(srv.url);
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
  });

  it('answers thousands of pipelined SADDs in order, whatever the chunk boundaries of the replies', async () => {
    const pipe = new RespPipe({ host: '127.0.0.1', port: srv.port, connectTimeoutMs: 2000 });
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(fc.integer({ min: 0, max: 300 }), { minLength: 1, maxLength: 3000 }), async (members) => {
          await r.del('pipe:set');
          const bytes = Buffer.concat(members.map((m) => encodeCommand(['SADD', 'pipe:set', String(m)])));
          const sink = new Collect();
          await pipe.send(bytes, members.length, sink);
          const seen = new Set<number>();
          expect(sink.got).toEqual(members.map((m) => (seen.has(m) ? 0 : (seen.add(m), 1))));
        }),
        { numRuns: 40, seed: 5 },
      );
    } finally {
      pipe.close();
    }
  });

  it('a send to an idle server, or one of 4 KiB or more (a coalesced batch of one-key callers), leaves at once; a smaller one behind others waits for the end of the tick, and behind thousands of owed replies for 64 KiB', async () => {
    const pipe = new RespPipe({ host: '127.0.0.1', port: srv.port, connectTimeoutMs: 2000 });
    try {
      await pipe.send(encodeCommand(['PING']), 1, new Collect());
      // TIME runs when Redis reads the send: before or after the caller let go of the thread
      const ranWhileBusy = async (filler: number, owed = 0): Promise<boolean> => {
        // commands sent just before in the same tick (their replies are owed when ours is written)
        const ahead = owed === 0 ? undefined : pipe.send(Buffer.concat(Array.from({ length: owed }, () => encodeCommand(['PING']))), owed, new Collect());
        const sink = new Collect();
        const sent = pipe.send(Buffer.concat([encodeCommand(['SET', 'pipe:filler', 'x'.repeat(filler)]), encodeCommand(['TIME'])]), 2, sink);
        const end = Date.now() + 300;
        while (Date.now() < end) {
          // the caller keeps the thread (hashing its next piece, say)
        }
        await sent;
        await ahead;
        const [sec, usec] = (sink.got[1] as Buffer[]).map(Number) as [number, number];
        return sec * 1000 + usec / 1000 < end;
      };
      // nothing owed: a lone call's round trip starts at once, whatever its size
      expect(await ranWhileBusy(100)).toBe(true);
      expect(await ranWhileBusy(3_000)).toBe(true);
      // behind a send of the same tick: small writes wait to leave together, big ones go
      expect(await ranWhileBusy(40_000, 1)).toBe(true);
      expect(await ranWhileBusy(4_200, 1)).toBe(true);
      expect(await ranWhileBusy(3_000, 1)).toBe(false);
      expect(await ranWhileBusy(100, 1)).toBe(false);
      // behind thousands of owed replies Redis has work queued: writes of the tick wait to leave
      // together until 64 KiB are held
      expect(await ranWhileBusy(4_200, 3000)).toBe(false);
      expect(await ranWhileBusy(70_000, 3000)).toBe(true);
    } finally {
      pipe.close();
    }
  });

  it('every reply type: integers, errors per command, bulk (binary, empty, nil), simple strings, nested arrays', async () => {
    const pipe = new RespPipe({ host: '127.0.0.1', port: srv.port, connectTimeoutMs: 2000 });
    try {
      const bin = Buffer.from([0, 13, 10, 255, 36, 42]);
      await r.set('pipe:bin', bin);
      await r.set('pipe:str', 'x');
      const cmds: Array<Array<string | Buffer>> = [
        ['SET', 'pipe:k', 'v'], ['GET', 'pipe:bin'], ['GET', 'pipe:none'], ['SET', 'pipe:empty', ''], ['GET', 'pipe:empty'],
        ['INCRBY', 'pipe:n', '-12345678901'], ['SADD', 'pipe:str', 'm'], ['MGET', 'pipe:k', 'pipe:none', 'pipe:bin'],
        ['EVAL', "return {1, 'a', {redis.error_reply('E1 nested'), -2}}", '0'], ['PING'],
      ];
      const sink = new Collect();
      await pipe.send(encodeCommands(cmds), cmds.length, sink);
      expect(sink.got).toEqual([
        'OK', bin, null, 'OK', Buffer.alloc(0), -12345678901, { err: expect.stringMatching(/^WRONGTYPE /) as unknown as string },
        [Buffer.from('v'), null, bin], [1, Buffer.from('a'), [new RespError('E1 nested'), -2]], 'PONG',
      ]);
      await expect(pipe.call(['SADD', 'pipe:str', 'm'])).rejects.toBeInstanceOf(PipeReplyError);
      expect(await pipe.call(['GET', 'pipe:k'])).toEqual(Buffer.from('v'));
    } finally {
      pipe.close();
    }
  });

  it('an argument its writer puts straight into the command arrives byte for byte; a writer that writes other than it announced is refused before anything is sent', async () => {
    const pipe = new RespPipe({ host: '127.0.0.1', port: srv.port, connectTimeoutMs: 2000 });
    const bytes = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 37) & 0xff));
    const writer = (len: number) => ({ length: len, writeTo: (out: Buffer, at: number) => at + bytes.copy(out, at) });
    try {
      expect(await pipe.call(['SET', 'pipe:writer', writer(bytes.length)])).toBe('OK');
      // a bulk string reply as a view of its read, or as a copy: the same bytes
      expect(await pipe.call(['GET', 'pipe:writer'], true)).toEqual(bytes);
      expect(await pipe.call(['GET', 'pipe:writer'])).toEqual(bytes);
      expect(() => encodeCommand(['SET', 'pipe:writer', writer(bytes.length + 1)])).toThrow(RangeError);
      await expect(pipe.call(['SET', 'pipe:writer', writer(bytes.length - 1)])).rejects.toThrow(/wrote 300 bytes, not the 299/);
      expect(await r.getBuffer('pipe:writer')).toEqual(bytes);
    } finally {
      pipe.close();
    }
  });

  it('array replies that span many reads (an MGET of large values) come whole and in order, between other replies', async () => {
    const pipe = new RespPipe({ host: '127.0.0.1', port: srv.port, connectTimeoutMs: 2000 });
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(fc.option(fc.integer({ min: 0, max: 40_000 }), { nil: undefined }), { minLength: 1, maxLength: 300 }), fc.integer({ min: 0, max: 9 }), async (sizes, tail) => {
          await r.flushall();
          const keys = sizes.map((_, i) => `pipe:mget:${i}`);
          // CRLF and '*' inside the values: only lengths may delimit them
          const val = (i: number, n: number): Buffer => Buffer.alloc(n, `${i}\r\n*$:`);
          const set = r.pipeline();
          sizes.forEach((n, i) => n !== undefined && set.set(keys[i]!, val(i, n)));
          await set.exec();
          const cmds: Array<Array<string | Buffer>> = [['MGET', ...keys], ['INCRBY', 'pipe:tail', String(tail)], ['MGET', keys[0]!, 'pipe:absent'], ['PING']];
          const sink = new Collect();
          await pipe.send(encodeCommands(cmds), cmds.length, sink);
          const first = sizes[0] === undefined ? null : val(0, sizes[0]);
          expect(sink.got).toEqual([sizes.map((n, i) => (n === undefined ? null : val(i, n))), tail, [first, null], 'PONG']);
        }),
        { numRuns: 12, seed: 23 },
      );
    } finally {
      pipe.close();
    }
  });

  it('a cut mid-send fails it with PipeLostError saying how many replies came; the next send reconnects', async () => {
    const proxy: TcpProxy = await startProxy(srv.port);
    const pipe = new RespPipe({ host: '127.0.0.1', port: proxy.port, connectTimeoutMs: 2000 });
    try {
      await r.del('pipe:cut');
      expect(await pipe.call(['PING'])).toBe('PONG');
      await proxy.stall('down');
      const sink = new Collect();
      const sending = pipe.send(Buffer.concat(Array.from({ length: 100 }, (_, i) => encodeCommand(['SADD', 'pipe:cut', String(i)]))), 100, sink);
      await new Promise((res) => setTimeout(res, 200));
      pipe.destroy('test cut');
      const err = await sending.then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(PipeLostError);
      expect((err as PipeLostError).received).toBe(sink.got.length);
      await proxy.resume();
      // the commands did reach Redis (outcome unknown to the pipe, known here)
      expect(await r.scard('pipe:cut')).toBe(100);
      expect(await pipe.call(['SADD', 'pipe:cut', '100'])).toBe(1);
    } finally {
      pipe.close();
      await proxy.close();
    }
  });

  it('sendWith: resolve runs once every reply is in the sink; a cut rejects what is owed from a later microtask, with PipeLostError; a fresh pipe connects first', async () => {
    const proxy: TcpProxy = await startProxy(srv.port);
    const pipe = new RespPipe({ host: '127.0.0.1', port: proxy.port, connectTimeoutMs: 2000 });
    const settled = (bytes: Uint8Array, count: number, sink: Collect): { done: Promise<unknown>; sync: boolean } => {
      let sync = true;
      const done = new Promise<unknown>((res) =>
        pipe.sendWith(
          bytes,
          count,
          sink,
          () => res(sink.got.length === count ? 'ok' : `only ${sink.got.length} replies`),
          (e) => res(sync ? new Error('rejected synchronously') : e),
        ),
      );
      sync = false;
      return { done, sync };
    };
    try {
      await r.del('pipe:with');
      const first = new Collect();
      // not connected yet: sendWith connects, then writes
      expect(await settled(encodeCommand(['SADD', 'pipe:with', 'a']), 1, first).done).toBe('ok');
      expect(first.got).toEqual([1]);
      await proxy.stall('down');
      const owed = new Collect();
      const cut = settled(Buffer.concat([encodeCommand(['SADD', 'pipe:with', 'b']), encodeCommand(['SADD', 'pipe:with', 'a'])]), 2, owed);
      await new Promise((res) => setTimeout(res, 100));
      pipe.destroy('test cut');
      const err = await cut.done;
      expect(err).toBeInstanceOf(PipeLostError);
      expect((err as PipeLostError).received).toBe(0);
      await proxy.resume();
      const again = new Collect();
      expect(await settled(encodeCommand(['SADD', 'pipe:with', 'c']), 1, again).done).toBe('ok');
      expect(again.got).toEqual([1]);
    } finally {
      pipe.close();
      await proxy.close();
    }
  });

  it('a server nobody listens on: NotSentError (nothing written), and the pipe works once it is back', async () => {
    const other = await startRedis();
    const pipe = new RespPipe({ host: '127.0.0.1', port: other.port, connectTimeoutMs: 1000 });
    try {
      await other.kill();
      await expect(pipe.call(['PING'])).rejects.toBeInstanceOf(NotSentError);
      await other.restart();
      expect(await pipe.call(['PING'])).toBe('PONG');
    } finally {
      pipe.close();
      await other.stop();
    }
  });

  it('a Redis that refuses CLIENT SETNAME (renamed away, or denied by an ACL) still connects; a wrong password does not', async () => {
    const renamed = await startRedis({ args: ['--rename-command', 'CLIENT', ''] });
    const acl = await startRedis();
    const admin = new Redis(acl.port);
    const users: Redis[] = [];
    try {
      await admin.acl('SETUSER', 'nocmd', 'on', '>pw', '~*', '+@all', '-client');
      const user = new Redis({ port: acl.port, username: 'nocmd', password: 'pw', lazyConnect: true });
      users.push(user);
      for (const ep of [
        { host: '127.0.0.1', port: renamed.port, connectTimeoutMs: 2000, name: 'hashgate' },
        { ...endpointOf(user, 2000), name: 'hashgate' },
      ]) {
        const pipe = new RespPipe(ep);
        try {
          expect(await pipe.call(['SADD', 'named:set', 'm'])).toBe(1);
        } finally {
          pipe.close();
        }
      }
      const wrong = new RespPipe({ host: '127.0.0.1', port: acl.port, connectTimeoutMs: 2000, username: 'nocmd', password: 'not-it', name: 'hashgate' });
      await expect(wrong.call(['PING'])).rejects.toBeInstanceOf(NotSentError);
      wrong.close();
    } finally {
      for (const u of users) u.disconnect();
      admin.disconnect();
      await renamed.stop();
      await acl.stop();
    }
  });

  it('connects as the ioredis client does: password, username (ACL) and db', async () => {
    const secured = await startRedis();
    const setup = new Redis(secured.port);
    await setup.config('SET', 'requirepass', 'sekret');
    setup.disconnect();
    const admin = new Redis({ port: secured.port, password: 'sekret' });
    try {
      await admin.acl('SETUSER', 'svc', 'on', '>pw2', '~*', '+@all');
      const client = new Redis({ port: secured.port, username: 'svc', password: 'pw2', db: 3, lazyConnect: true });
      const pipe = new RespPipe(endpointOf(client, 2000));
      try {
        await pipe.call(['SET', 'where', 'db3']);
        await admin.select(3);
        expect(await admin.get('where')).toBe('db3');
        expect(String(await pipe.call(['ACL', 'WHOAMI']))).toBe('svc');
      } finally {
        pipe.close();
        client.disconnect();
      }
      const wrong = new RespPipe({ host: '127.0.0.1', port: secured.port, password: 'nope', connectTimeoutMs: 2000 });
      const err = await wrong.call(['PING']).then(() => undefined, (e: unknown) => e as Error);
      expect(err).toBeInstanceOf(NotSentError);
      // the reason, never the password
      expect(err!.message).toMatch(/WRONGPASS|invalid/);
      expect(err!.message).not.toContain('nope');
      wrong.close();
    } finally {
      admin.disconnect();
      await secured.stop();
    }
  });
});
