// A pipelined RESP2 connection of our own to one Redis node, for the write paths that send one small command per key (SADD) by the thousand and read back one integer each, and for the cache's MGETs.
//
// Why not ioredis for these: ioredis makes a Command object, a promise and a parsed reply value per
// command. For a 10k-key batch of single-member SADDs that was ~10 us of Node CPU per key against
// ~1 us here, where one buffer carries a whole chunk of commands and the replies are read straight
// into the caller's answer array (`ReplySink`). On a standalone Redis the compact tables' own
// commands (count reads, INCRBY, DUMP, the split script) use the pipe too; the request-record
// scripts, Cluster control commands and administration go through the application's ioredis
// client, whose connection details this pipe copies (endpointOf): the same host, port or socket
// path, TLS options, username, password and db.
//
// Failure model: a reply error ("-WRONGTYPE ...") is one command's answer and goes to the sink.
// A connection that fails or closes fails every send whose replies are still owed with
// PipeLostError, which says how many of its replies did arrive (those answers stand; the rest are
// unknown: written, maybe applied). A send made while the pipe cannot connect fails with
// NotSentError: nothing was written. The pipe connects lazily and again after a failure, at the
// next send; callers time their sends themselves (InFlightLimit) and destroy() a stalled pipe.
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { NotSentError } from './inflight.js';

/**
 * A write of at least this many bytes is not held back to join the others of its tick. 4 KiB is
 * about 60 SADDs, i.e. a coalesced batch of one-key callers: Redis' work on it outweighs the
 * syscall it costs. At 32 KiB, two such batches answered in one read went back in one write, and
 * from then on Node and Redis took turns instead of overlapping (256 one-key callers: Node idle
 * for a third of the run, p50 1.3 ms against 0.9 ms at 4 KiB).
 */
const WRITE_AT_ONCE = 4 * 1024;
/**
 * While Redis owes at least BUSY_REPLIES replies it has work queued, and a write cannot make it
 * start sooner: writes of a tick then wait to leave together, until WRITE_WHEN_BUSY bytes are
 * held. When the replies of one read start a score of small batches (hundreds of callers of 100
 * keys, ~7 KiB a batch), a syscall each would cost a write and a wake-up of the server per batch.
 */
const BUSY_REPLIES = 2048;
const WRITE_WHEN_BUSY = 64 * 1024;

/** Where and how to connect: what an ioredis client's options say (see endpointOf). */
export interface PipeEndpoint {
  host?: string;
  port?: number;
  /** Unix socket path (instead of host and port). */
  path?: string;
  tls?: ConnectionOptions;
  username?: string;
  password?: string;
  /** SELECTed after connecting (standalone only). */
  db?: number;
  family?: number;
  connectTimeoutMs: number;
  /** CLIENT SETNAME, so operators can tell our connections apart in CLIENT LIST. */
  name?: string;
}

/** Receives the replies of one send, in order; `i` is the reply's index within the send. */
export interface ReplySink {
  int(i: number, v: number): void;
  error(i: number, message: string): void;
  /** Any other reply: a bulk string (Buffer, or null for nil), a simple string, an array of those. */
  value(i: number, v: RespValue): void;
  /**
   * True: bulk strings may be views of the socket's read buffer instead of copies, for a sink that
   * is done with its values before anything could keep them. A view holds that whole read buffer
   * in memory for as long as it lives; a copy per value is what it saves.
   */
  readonly views?: boolean;
}

export type RespValue = number | string | Buffer | null | RespValue[] | RespError;

/** An error reply inside an array (a top-level error goes to ReplySink.error). */
export class RespError {
  constructor(readonly message: string) {}
}

/** The connection went away while replies of a send were owed: the first `received` came, the rest did not. */
export class PipeLostError extends Error {
  constructor(
    message: string,
    readonly received: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'PipeLostError';
  }
}

/** A reply error of a one-reply call (call()). */
export class PipeReplyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReplyError';
  }
}

interface Pending {
  count: number;
  got: number;
  sink: ReplySink;
  /**
   * sink.views, read when the send is queued: read in onData, a sink class first met after the
   * reader was compiled was a map that code had not seen, and V8 threw it away and compiled the
   * reader again.
   */
  views: boolean;
  resolve: () => void;
  reject: (e: unknown) => void;
}

const CRLF = 13;
const RESOLVED = Promise.resolve();

/** One-reply sink of call(). */
class OneReply implements ReplySink {
  v: RespValue = null;
  err: string | undefined;
  constructor(readonly views: boolean) {}
  int(_i: number, v: number): void {
    this.v = v;
  }
  error(_i: number, message: string): void {
    this.err = message;
  }
  value(_i: number, v: RespValue): void {
    this.v = v;
  }
}

/**
 * Sink of the handshake replies: remembers the first error, but for the reply at `optional` (the
 * connection's name: a managed Redis that renames or denies CLIENT still serves our commands).
 */
class Handshake implements ReplySink {
  err: string | undefined;
  constructor(private readonly optional: number) {}
  int(): void {}
  value(): void {}
  error(i: number, message: string): void {
    if (i !== this.optional) this.err ??= message;
  }
}

/**
 * A bulk string argument its owner writes straight into the command's buffer: `length` bytes at
 * out[at..), returning at + length (a payload built for one command, with no buffer of its own).
 */
export interface ArgWriter {
  readonly length: number;
  writeTo(out: Buffer, at: number): number;
}

/** One command's arguments (a payload may be written straight into the command's buffer). */
export type CommandArgs = ReadonlyArray<string | Buffer | ArgWriter>;

/** Bytes a command takes at most (a UTF-16 unit is at most 3 bytes of UTF-8). */
function commandBound(args: CommandArgs): number {
  let size = 16;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    size += (typeof a === 'string' ? 3 * a.length : a.length) + 16;
  }
  return size;
}

/** Strings up to this long are checked and copied a char at a time: two calls into C++ cost more. */
const SHORT_STRING = 64;

/** Writes string `s` as a bulk string at out[p..); returns where it ended. */
function writeString(out: Buffer, p: number, s: string): number {
  const n = s.length;
  let ascii = n <= SHORT_STRING;
  for (let i = 0; ascii && i < n; i++) ascii = s.charCodeAt(i) < 128;
  if (ascii) {
    p = header(out, p, 36, n);
    for (let i = 0; i < n; i++) out[p + i] = s.charCodeAt(i);
    p += n;
  } else {
    p = header(out, p, 36, Buffer.byteLength(s));
    p += out.write(s, p, 'utf8');
  }
  out[p++] = 13;
  out[p++] = 10;
  return p;
}

/** Writes `*n` or `$n` and CRLF at out[p..) without a string; returns where it ended. */
function header(out: Buffer, p: number, mark: number, n: number): number {
  out[p++] = mark;
  let d = 1;
  while (d * 10 <= n) d *= 10;
  for (; d >= 1; d /= 10) out[p++] = 48 + (Math.floor(n / d) % 10);
  out[p++] = 13;
  out[p++] = 10;
  return p;
}

/** Writes one command at out[p..) (room for commandBound(args) bytes); returns where it ended. */
function writeCommand(out: Buffer, p: number, args: CommandArgs): number {
  p = header(out, p, 42, args.length);
  // indexed loops here and below: commands come as arrays of several shapes, and an iterator
  // over one it had not met deoptimized the compiled encoder
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (typeof a === 'string') {
      p = writeString(out, p, a);
      continue;
    }
    const len = a.length;
    p = header(out, p, 36, len);
    if (Buffer.isBuffer(a)) p += a.copy(out, p);
    else {
      const q = a.writeTo(out, p);
      // a writer that wrote other than it announced would put the connection out of step
      if (q !== p + len) throw new RangeError(`a command argument wrote ${q - p} bytes, not the ${len} it announced`);
      p = q;
    }
    out[p++] = 13;
    out[p++] = 10;
  }
  return p;
}

/** RESP array of bulk strings, in one buffer. */
export function encodeCommand(args: CommandArgs): Buffer {
  const out = Buffer.allocUnsafe(commandBound(args));
  return out.subarray(0, writeCommand(out, 0, args));
}

/**
 * Commands one after another in one buffer: a send of many (a round of splits: thousands of
 * commands carrying KiB payloads) takes one allocation, where a buffer per command and a concat
 * cost a pool refill every few commands and a second copy of every byte.
 */
export function encodeCommands(commands: ReadonlyArray<CommandArgs>): Buffer {
  let size = 0;
  for (let i = 0; i < commands.length; i++) size += commandBound(commands[i]!);
  const out = Buffer.allocUnsafe(size);
  let p = 0;
  for (let i = 0; i < commands.length; i++) p = writeCommand(out, p, commands[i]!);
  return out.subarray(0, p);
}

export class RespPipe {
  private socket: Socket | undefined;
  private connecting: Promise<void> | undefined;
  private ready = false;
  /** Sends whose replies are owed, oldest first (head index into the array). */
  private queue: Pending[] = [];
  private head = 0;
  /** Bytes of a reply that arrived split over reads. */
  private rest: Buffer | undefined;
  private closed = false;
  /** Why the last connection ended (for the errors of later sends). */
  lastError: Error | undefined;

  constructor(private readonly endpoint: PipeEndpoint) {}

  /** Whether a connection is up and past its handshake. */
  get isReady(): boolean {
    return this.ready;
  }

  /** Connects unless connected; rejects with NotSentError when it cannot (the next call tries again). */
  connect(): Promise<void> {
    if (this.closed) return Promise.reject(new NotSentError('the pipe is closed'));
    if (this.ready) return Promise.resolve();
    this.connecting ??= this.open().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private open(): Promise<void> {
    const e = this.endpoint;
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const fail = (err: Error): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.lastError = err;
        s.destroy();
        reject(new NotSentError(`cannot connect to Redis: ${err.message}`));
      };
      const opts = e.path !== undefined ? { path: e.path } : { host: e.host ?? '127.0.0.1', port: e.port ?? 6379, ...(e.family ? { family: e.family } : {}) };
      const s: Socket = e.tls !== undefined
        ? tlsConnect({ ...e.tls, ...opts, ...(e.path === undefined ? { servername: e.tls.servername ?? e.host } : {}) })
        : netConnect(opts);
      const timer = setTimeout(() => fail(new Error(`no connection within ${e.connectTimeoutMs} ms`)), e.connectTimeoutMs);
      s.setNoDelay(true);
      s.setKeepAlive(true, 30_000);
      s.on('error', (err) => {
        if (!settled) fail(err);
        else this.lost(s, err);
      });
      s.on('close', () => {
        if (!settled) fail(new Error('connection closed during the handshake'));
        else this.lost(s, this.lastError ?? new Error('connection closed'));
      });
      s.on('data', (d: Buffer) => {
        if (this.socket === s) this.onData(d);
      });
      s.once(e.tls !== undefined ? 'secureConnect' : 'connect', () => {
        this.socket = s;
        this.rest = undefined;
        this.arr = undefined;
        const cmds: Buffer[] = [];
        if (e.password !== undefined && e.password !== '') cmds.push(encodeCommand(e.username ? ['AUTH', e.username, e.password] : ['AUTH', e.password]));
        if (e.db !== undefined && e.db !== 0) cmds.push(encodeCommand(['SELECT', String(e.db)]));
        const named = e.name === undefined ? -1 : cmds.push(encodeCommand(['CLIENT', 'SETNAME', e.name])) - 1;
        cmds.push(encodeCommand(['PING']));
        const hs = new Handshake(named);
        // owed like any send's replies: onData counts every reply it reads off
        this.owedReplies += cmds.length;
        this.queue.push({
          count: cmds.length, got: 0, sink: hs, views: false,
          resolve: () => {
            if (settled) return;
            if (hs.err !== undefined) return fail(new Error(hs.err));
            settled = true;
            clearTimeout(timer);
            this.ready = true;
            resolve();
          },
          reject: (err) => fail(err as Error),
        });
        s.write(Buffer.concat(cmds));
      });
    });
  }

  /**
   * Writes `bytes` (`count` commands) and resolves once their `count` replies went to `sink`.
   * Rejects with NotSentError (nothing written) or PipeLostError (written; `received` replies came).
   */
  async send(bytes: Uint8Array, count: number, sink: ReplySink): Promise<void> {
    if (!this.ready) await this.connect();
    return new Promise<void>((resolve, reject) => this.write(bytes, count, sink, resolve, reject));
  }

  /** send() when the pipe is ready already; undefined otherwise (the caller connects first). */
  sendNow(bytes: Uint8Array, count: number, sink: ReplySink): Promise<void> | undefined {
    return this.ready ? new Promise<void>((resolve, reject) => this.write(bytes, count, sink, resolve, reject)) : undefined;
  }

  /**
   * send() with callbacks in place of a promise, for a caller that settles its own caller from
   * them (a one-key call then takes no promise turn per layer). `resolve` runs while the reply's
   * read is handled, after the pipe's own state is updated; `reject` from a later microtask.
   * Neither runs before sendWith returns, and neither may throw.
   */
  sendWith(bytes: Uint8Array, count: number, sink: ReplySink, resolve: () => void, reject: (e: unknown) => void): void {
    if (this.ready) this.write(bytes, count, sink, resolve, reject);
    else this.connect().then(() => this.write(bytes, count, sink, resolve, reject), reject);
  }

  private write(bytes: Uint8Array, count: number, sink: ReplySink, resolve: () => void, reject: (e: unknown) => void): void {
    const s = this.socket;
    if (s === undefined || !this.ready || s.destroyed || !s.writable) {
      const err = new NotSentError('the Redis pipe is not connected');
      RESOLVED.then(() => reject(err));
      return;
    }
    this.queue.push({ count, got: 0, sink, views: sink.views === true, resolve, reject });
    const idle = this.owedReplies === 0 && !this.corked;
    const busy = this.owedReplies >= BUSY_REPLIES;
    this.owedReplies += count;
    // The first write to an idle server leaves at once: the round trip of a lone one-key call
    // starts now rather than after the tick (uncorking at the tick's end measured 0.8 us on its
    // critical path). Later small writes of a tick leave together in one syscall (each write to
    // a loopback socket wakes the server). A big one leaves at once, with what was corked before
    // it: Redis can start on it while the caller still prepares the next, unless Redis is busy
    // anyway.
    if (idle) {
      s.write(bytes);
      return;
    }
    if (!this.corked) {
      this.corked = true;
      this.corkedBytes = 0;
      s.cork();
      process.nextTick(this.uncork, s, ++this.corkGen);
    }
    s.write(bytes);
    this.corkedBytes += bytes.length;
    if (busy ? this.corkedBytes >= WRITE_WHEN_BUSY : bytes.length >= WRITE_AT_ONCE) this.uncork(s, this.corkGen);
  }
  /** Replies owed on the current connection (a send's all, until its last reply came). */
  private owedReplies = 0;
  /** Bytes written since the socket was last corked. */
  private corkedBytes = 0;
  private corked = false;
  /** Which cork a scheduled uncork belongs to (a big write may have lifted it already). */
  private corkGen = 0;
  private readonly uncork = (s: Socket, gen: number): void => {
    if (!this.corked || gen !== this.corkGen) return;
    this.corked = false;
    s.uncork();
  };

  /**
   * One command; resolves with its reply, rejects with PipeReplyError on an error reply. With
   * `views`, a bulk string reply is a view of the read it came in, not a copy (for a caller that
   * reads it at once and keeps nothing of it).
   */
  async call(args: ReadonlyArray<string | Buffer | ArgWriter>, views = false): Promise<RespValue> {
    const one = new OneReply(views);
    await this.send(encodeCommand(args), 1, one);
    if (one.err !== undefined) throw new PipeReplyError(one.err);
    return one.v;
  }

  /** Cuts the connection: every send still owed replies fails (PipeLostError); the next send reconnects. */
  destroy(reason = 'connection cut'): void {
    const s = this.socket;
    if (s === undefined) return;
    this.lost(s, new Error(reason));
    s.destroy();
  }

  /** Cuts the connection for good. */
  close(): void {
    this.closed = true;
    this.destroy('the pipe is closed');
  }

  private lost(s: Socket, err: Error): void {
    if (this.socket !== s) return;
    this.socket = undefined;
    this.ready = false;
    this.rest = undefined;
    this.arr = undefined;
    this.lastError = err;
    const q = this.queue;
    const h = this.head;
    this.queue = [];
    this.head = 0;
    this.owedReplies = 0;
    if (h === q.length) return;
    // from a microtask: a sendWith caller's reject may send again, which must not reconnect
    // while this loss is still being handled
    RESOLVED.then(() => {
      for (let i = h; i < q.length; i++) {
        const p = q[i]!;
        p.reject(new PipeLostError(`the Redis connection was lost with ${p.count - p.got} of ${p.count} replies owed (${err.message})`, p.got, { cause: err }));
      }
    });
  }

  private onData(chunk: Buffer): void {
    let buf = chunk;
    if (this.rest !== undefined) {
      buf = Buffer.concat([this.rest, chunk]);
      this.rest = undefined;
    }
    const end = buf.length;
    let p = 0;
    while (p < end) {
      const cur = this.queue[this.head];
      if (cur === undefined) {
        // a reply nobody asked for: the stream is out of step, which only a new connection fixes
        this.destroy('Redis sent a reply no command was waiting for');
        return;
      }
      const sink = cur.sink;
      this.views = cur.views;
      let i = cur.got;
      const n = cur.count;
      // the replies of one send, as many as this read holds
      while (i < n && p < end) {
        const c = buf[p]!;
        if (c === 58 && this.arr === undefined && p + 3 < end && buf[p + 2] === CRLF) {
          // ":d\r\n", the usual SADD/SISMEMBER answer
          sink.int(i, buf[p + 1]! - 48);
          p += 4;
          i++;
          continue;
        }
        // an array's first byte is '*' only in the read that starts it
        const top = this.arr !== undefined || c === 42;
        const q = top ? this.parseTop(buf, p, end) : this.parse(buf, p, end);
        if (q === -2) {
          this.destroy(`Redis sent a reply of unknown type ${this.badType}`);
          return;
        }
        if (q < 0) {
          // an array reply read in part keeps its elements: only the rest is kept and read again
          if (this.arr !== undefined) p = this.arrResume;
          break;
        }
        const v = this.lastValue;
        if (top) sink.value(i, v);
        else if (c === 58) sink.int(i, v as number);
        else if (c === 45) sink.error(i, v as string);
        else sink.value(i, v);
        p = q;
        i++;
      }
      cur.got = i;
      if (i < n) {
        if (p < end) this.rest = Buffer.from(buf.subarray(p));
        return;
      }
      this.owedReplies -= n;
      this.queue[this.head++] = undefined as unknown as Pending;
      if (this.head === this.queue.length) {
        this.queue = [];
        this.head = 0;
      } else if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      cur.resolve();
    }
  }

  /**
   * A top-level array reply read in part (an MGET of many values spans many reads): its elements
   * so far, how many, and where in the last read the first missing one starts. Without it each
   * read parsed the whole reply again from its first byte: quadratic in the reply's size.
   */
  private arr: RespValue[] | undefined;
  private arrAt = 0;
  private arrResume = 0;

  /** parse() of a top-level array, resumable: -1 leaves this.arr holding what was read. */
  private parseTop(buf: Buffer, p: number, end: number): number {
    let out = this.arr;
    if (out === undefined) {
      const nl = buf.indexOf(CRLF, p + 1);
      if (nl < 0 || nl + 1 >= end) return -1;
      const len = parseIntAt(buf, p + 1, nl);
      if (len < 0) {
        this.lastValue = null;
        return nl + 2;
      }
      out = new Array<RespValue>(len);
      this.arr = out;
      this.arrAt = 0;
      p = nl + 2;
    }
    const r = this.elements(buf, p, end, out, this.arrAt);
    if (r === -1) {
      this.arrAt = this.elemAt;
      this.arrResume = this.elemResume;
    }
    if (r < 0) return r;
    this.arr = undefined;
    this.lastValue = out;
    return r;
  }

  /** Where elements() stopped: the first element missing and where it starts. */
  private elemAt = 0;
  private elemResume = 0;

  /**
   * Reads the elements out[k..] of an array from buf[p..end): the position after the last, -2 if
   * one is not RESP, or -1 with elemAt and elemResume saying which one was not complete.
   */
  private elements(buf: Buffer, p: number, end: number, out: RespValue[], k: number): number {
    for (; k < out.length; k++) {
      const r = p >= end ? -1 : this.parse(buf, p, end);
      if (r === -2) return r;
      if (r === -1) {
        this.elemAt = k;
        this.elemResume = p;
        return -1;
      }
      out[k] = buf[p] === 45 ? new RespError(this.lastValue as string) : this.lastValue;
      p = r;
    }
    return p;
  }

  /** The sink being read takes views of bulk strings (ReplySink.views). */
  private views = false;

  /** The value parse() read last (a field, not a return value: no object per reply). */
  private lastValue: RespValue = null;

  /** First byte of a reply parse() could not read (for the error that cuts the connection). */
  private badType = 0;

  /** Parses one reply at buf[p..end); returns the position after it, -1 if it is not complete, -2 if it is not RESP. */
  private parse(buf: Buffer, p: number, end: number): number {
    const c = buf[p]!;
    if (c !== 58 && c !== 43 && c !== 45 && c !== 36 && c !== 42) {
      this.badType = c;
      return -2;
    }
    const nl = buf.indexOf(CRLF, p + 1);
    if (nl < 0 || nl + 1 >= end) return -1;
    switch (c) {
      case 58: // ':' integer
        this.lastValue = parseIntAt(buf, p + 1, nl);
        return nl + 2;
      case 43: // '+' simple string
      case 45: // '-' error
        this.lastValue = buf.toString('utf8', p + 1, nl);
        return nl + 2;
      case 36: { // '$' bulk string
        const len = parseIntAt(buf, p + 1, nl);
        if (len < 0) {
          this.lastValue = null;
          return nl + 2;
        }
        const s = nl + 2;
        if (s + len + 2 > end) return -1;
        // every read is a buffer of its own (no onread buffer is reused), so a view stays valid
        this.lastValue = this.views ? buf.subarray(s, s + len) : Buffer.from(buf.subarray(s, s + len));
        return s + len + 2;
      }
      case 42: { // '*' array
        const len = parseIntAt(buf, p + 1, nl);
        if (len < 0) {
          this.lastValue = null;
          return nl + 2;
        }
        const out: RespValue[] = new Array(len);
        const q = this.elements(buf, nl + 2, end, out, 0);
        if (q < 0) return q;
        this.lastValue = out;
        return q;
      }
      default:
        return -2;
    }
  }
}

function parseIntAt(buf: Buffer, s: number, e: number): number {
  let neg = false;
  if (buf[s] === 45) {
    neg = true;
    s++;
  }
  let v = 0;
  for (let i = s; i < e; i++) v = v * 10 + (buf[i]! - 48);
  return neg ? -v : v;
}
