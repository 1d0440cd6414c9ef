// Transport layer of the HBase adapter: hbase-rpc-client's RPC connection (HBase's "HBas" preamble +
// protobuf ClientService over TCP) and its protobuf messages, wrapped so that every call has a
// deadline, a dropped socket fails its pending calls at once, and every failure is a HashGateError.
//
// Why not the library's Client class: against HBase 2.6 (checked live) it crashes the process on
// table-state rows in hbase:meta, never calls back when a region server refuses a connection,
// emits an unhandled 'error' event when ZooKeeper is slow, returns mget results in region order
// instead of request order and walks multi-region scans with off-by-one start keys. Its wire code
// (Connection, protobuf definitions, ZooKeeper meta decoding) works, so that is what we use.

import { createRequire } from 'node:module';
import { HashGateError, ErrorCodes } from '../errors.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
interface WireLib {
  libDir: string;
  LibConnection: new (opts: Record<string, unknown>) => LibConnectionInstance;
  zkProto: { decodeMeta(data: Buffer): { server: { hostName: string; port: number } } | undefined };
  zookeeper: any;
  proto: any;
}
let wire: WireLib | undefined;

/**
 * Loads hbase-rpc-client on first use. It is an optional peer dependency: services that never
 * touch HBase do not install it (nor its old underscore/protobufjs), so nothing may load it at
 * import time of the package root.
 */
export function loadHBaseClient(): WireLib {
  if (wire !== undefined) return wire;
  const require = createRequire(import.meta.url);
  let libDir: string;
  try {
    libDir = require.resolve('hbase-rpc-client/package.json').replace(/package\.json$/, '');
  } catch (err) {
    throw new HashGateError(
      ErrorCodes.MISSING_DEPENDENCY,
      'the HBase tier needs the optional peer dependency hbase-rpc-client: npm install hbase-rpc-client@0.1.15',
      { cause: err, details: { dependency: 'hbase-rpc-client' } },
    );
  }
  const libRequire = createRequire(libDir + 'lib/client.js');
  const ProtoBuf: any = libRequire('protobufjs');
  // the library's modules expect camelCase field names and set this only in client.js; it must be
  // set before any .proto file is loaded (connection.js loads its own on require)
  ProtoBuf.convertFieldsToCamelCase = true;
  wire = {
    libDir,
    LibConnection: libRequire('./connection'),
    zkProto: libRequire('./zk-protobuf'),
    // node-zookeeper-client is what the library itself reaches ZooKeeper with (via zookeeper-watcher)
    zookeeper: createRequire(libRequire.resolve('zookeeper-watcher'))('node-zookeeper-client'),
    proto: ProtoBuf.loadProtoFile(libDir + 'proto/Client.proto').build(),
  };
  return wire;
}

/** protobuf message classes (RegionInfo, BinaryComparator, ...) of HBase's Client.proto */
export function proto(): any {
  return loadHBaseClient().proto;
}

interface LibConnectionInstance {
  rpc: Record<RpcMethod, (req: unknown, cb: (err: unknown, res: any) => void) => void>;
  socket: import('node:net').Socket;
  on(ev: string, fn: (...a: unknown[]) => void): void;
  once(ev: string, fn: (...a: unknown[]) => void): void;
  removeAllListeners(): void;
}
/* eslint-enable @typescript-eslint/no-explicit-any */

export type RpcMethod = 'Get' | 'Mutate' | 'Scan' | 'Multi';

/** Server-side exception as sent in the RPC response header. */
export interface RemoteException {
  exceptionClassName: string;
  stackTrace?: string;
}

export function unavailable(message: string, details: Record<string, unknown>, cause?: unknown): HashGateError {
  return new HashGateError(ErrorCodes.HBASE_UNAVAILABLE, message, { details, cause });
}

/**
 * Server exception text without row keys: HBase quotes the row (`row='...'`), region boundaries
 * (`startKey=`, `getEndKey()=`) and region names (`table,startRow,ts.hash.`), all user data here.
 */
export function redactServerMessage(text: string): string {
  return text
    .replace(/\b(row|startKey|endKey|getStartKey\(\)|getEndKey\(\))\s*=\s*('[^']*'|"[^"]*"|[^\s,]+)/g, '$1=<redacted>')
    .replace(/([A-Za-z0-9_.:-]+),[^\s]*?,(\d{10,}\.[0-9a-f]{32}\.)/g, '$1,<redacted>,$2');
}

export function remoteError(ex: RemoteException, details: Record<string, unknown>): HashGateError {
  const firstLine = redactServerMessage((ex.stackTrace ?? '').split('\n')[0] ?? '');
  return new HashGateError(ErrorCodes.HBASE, `HBase: ${firstLine || ex.exceptionClassName}`, {
    details: { ...details, exceptionClassName: ex.exceptionClassName },
  });
}

/**
 * One TCP connection to a region server. Calls are rejected (never left hanging) when the socket
 * closes, when the connect does not finish within connectTimeoutMs, or after their own timeout.
 */
export class RpcConnection {
  readonly address: string;
  private conn: LibConnectionInstance | null;
  private readonly pending = new Set<(err: HashGateError) => void>();
  private readonly ready: Promise<void>;
  closed = false;

  constructor(host: string, port: number, connectTimeoutMs: number, private readonly callTimeoutMs: number) {
    this.address = `${host}:${port}`;
    const conn = new (loadHBaseClient().LibConnection)({
      host,
      port,
      // the library's own per-call timer; ours (below) is shorter or equal and rejects first
      callTimeout: callTimeoutMs + 1000,
      tcpNoDelay: true,
      tcpKeepAlive: true,
      effectiveUser: 'hashgate',
    });
    this.conn = conn;
    this.ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(unavailable(`HBase region server ${this.address}: connect timed out after ${connectTimeoutMs} ms`,
          { server: this.address, timeoutMs: connectTimeoutMs }));
        this.close();
      }, connectTimeoutMs);
      conn.once('connect', () => {
        clearTimeout(timer);
        resolve();
      });
      conn.on('close', () => {
        clearTimeout(timer);
        const err = unavailable(`HBase region server ${this.address}: connection closed`, { server: this.address });
        reject(err);
        this.markClosed(err);
      });
    });
    // a rejected connect with nobody waiting yet must not become an unhandled rejection
    this.ready.catch(() => undefined);
  }

  private markClosed(err: HashGateError): void {
    if (this.closed) return;
    this.closed = true;
    for (const fail of this.pending) fail(err);
    this.pending.clear();
  }

  close(): void {
    const conn = this.conn;
    this.conn = null;
    this.markClosed(unavailable(`HBase connection ${this.address} closed by client`, { server: this.address }));
    if (conn) {
      conn.removeAllListeners();
      conn.socket.on('error', () => undefined);
      conn.socket.destroy();
    }
  }

  async call(method: RpcMethod, request: unknown, timeoutMs = this.callTimeoutMs): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
    await this.ready;
    const conn = this.conn;
    if (this.closed || !conn) throw unavailable(`HBase connection ${this.address} is closed`, { server: this.address });
    return new Promise((resolve, reject) => {
      let done = false;
      const finish = (err: HashGateError | null, value?: unknown): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.pending.delete(fail);
        if (err) reject(err);
        else resolve(value);
      };
      const fail = (err: HashGateError): void => finish(err);
      const timer = setTimeout(() => finish(unavailable(
        `HBase ${method} on ${this.address} timed out after ${timeoutMs} ms`,
        { server: this.address, method, timeoutMs, timeout: true })), timeoutMs);
      this.pending.add(fail);
      try {
        conn.rpc[method](request, (err: unknown, res: unknown) => {
          if (!err) return finish(null, res);
          if (err === 'timedout') {
            return finish(unavailable(`HBase ${method} on ${this.address} timed out`, { server: this.address, method, timeout: true }));
          }
          if (typeof err === 'object' && err !== null && 'exceptionClassName' in err) {
            return finish(remoteError(err as RemoteException, { server: this.address, method }));
          }
          finish(new HashGateError(ErrorCodes.HBASE, `HBase ${method} failed: ${String((err as Error)?.message ?? err)}`,
            { cause: err, details: { server: this.address, method } }));
        });
      } catch (err) {
        finish(new HashGateError(ErrorCodes.HBASE, `HBase ${method}: bad request: ${(err as Error).message}`,
          { cause: err, details: { method } }));
      }
    });
  }
}

/**
 * Reads the hbase:meta location from ZooKeeper (znode <root>/meta-region-server). A short-lived
 * ZooKeeper session per read: the location is cached by the caller and only re-read after meta
 * RPCs fail, and a lingering session would keep reconnecting forever while HBase is down.
 */
export function readMetaLocation(quorum: string, root: string, timeoutMs: number): Promise<{ host: string; port: number }> {
  return new Promise((resolve, reject) => {
    const { zookeeper, zkProto } = loadHBaseClient();
    const client = zookeeper.createClient(quorum, { sessionTimeout: Math.max(timeoutMs, 4000), spinDelay: 200, retries: 0 });
    let done = false;
    const finish = (err: HashGateError | null, value?: { host: string; port: number }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      try { client.close(); } catch { /* already closed */ }
      if (err) reject(err);
      else resolve(value!);
    };
    const timer = setTimeout(() => finish(unavailable(
      `ZooKeeper ${quorum}: no hbase:meta location within ${timeoutMs} ms (is HBase running?)`,
      { zookeeper: quorum, timeoutMs, timeout: true })), timeoutMs);
    client.once('connected', () => {
      client.getData(`${root}/meta-region-server`, (err: unknown, data: Buffer | undefined) => {
        if (err) {
          return finish(unavailable(`ZooKeeper ${quorum}: cannot read ${root}/meta-region-server: ${String(err)}`,
            { zookeeper: quorum }, err));
        }
        const decoded = data ? zkProto.decodeMeta(data) : undefined;
        if (!decoded?.server) {
          return finish(unavailable(`ZooKeeper ${quorum}: ${root}/meta-region-server is not a meta location`, { zookeeper: quorum }));
        }
        finish(null, { host: decoded.server.hostName, port: Number(decoded.server.port) });
      });
    });
    client.connect();
  });
}

/** ByteBuffer (protobufjs 2 bytes field) or Buffer -> Buffer */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function toBuf(b: any): Buffer {
  if (b == null) return Buffer.alloc(0);
  if (Buffer.isBuffer(b)) return b;
  return b.toBuffer();
}
