// HBase adapter: the one place hashgate talks to HBase (2.x) through hbase-rpc-client's protobuf RPC.
//
//   const hb = new HBaseStore({ zookeeper: '127.0.0.1:21810' });     // or env HBASE_ZK
//   await hb.put('t', 'row1', { 'cf:q': 'v' });
//   const row = await hb.get('t', 'row1');          // { key, columns: { 'cf:q': Buffer }, cells } | null
//   const rows = await hb.mget('t', ['a', 'b']);     // request order, null where absent
//   await hb.mput('t', [{ row: 'a', values: { 'cf:q': 'x' } }]);
//   await hb.delete('t', 'a');                       // whole row, or { columns: ['cf', 'cf:q'] }
//   await hb.mdelete('t', ['a', 'b']);
//   await hb.ready('t');                             // ZooKeeper + meta answer, table located
//   const ok = await hb.checkAndPut('t', 'a', { column: 'cf:q', value: null }, { 'cf:q': 'x' });
//   await hb.scan('t', { prefix: 'user1_', reversed: true, limit: 10 });
//   for await (const r of hb.scanIterator('t', { startRow: 'a', stopRow: 'm' })) ...
//   hb.callCounts();  // { ops: { get: 1, ... }, rpcs: { Get: 1, Multi: 0, ..., metaScan: 1 } }
//   await hb.close();
//
// Semantics
// - Rows, qualifiers and values are Buffers or strings (UTF-8). Columns are written 'family:qualifier'.
// - Scan ranges are in key order whatever the direction: startRow inclusive, stopRow exclusive,
//   prefix = every row starting with it. `reversed` walks the same range from the end (newest
//   first for reversed-timestamp keys). `limit` bounds the rows; scan() without a limit stops at
//   DEFAULTS.scanLimit and rejects with HG_ERR_CAPACITY if more rows remain (use scanIterator()).
// - Every operation has a deadline (operationTimeoutMs, including region lookups and retries of
//   stale locations); each RPC has callTimeoutMs. Errors: HashGateError with code
//   HG_ERR_HBASE_UNAVAILABLE (ZooKeeper/region server unreachable, connection lost, timeout) or
//   HG_ERR_HBASE (server-side exception: details.exceptionClassName, e.g. table not found).
// - HBase 2 fixes (see regions.ts): region lookup by reversed meta scan, table-state rows
//   skipped; cached locations are dropped and re-resolved when a region moves or its table is
//   dropped and recreated under a live client.
// - callCounts() counts adapter operations (ops) and RPCs sent (rpcs), so callers can prove that
//   e.g. a Bloom-gated absent key never reached HBase; options.onRpc sees each RPC as it is sent.
// - mget/mput/mdelete group rows per region server (one Multi RPC per server, at most maxBatch
//   actions each) and retry only the rows whose region moved. Scans read a region until an empty
//   batch (HBase 2 sends short batches mid-region) and resume after the last row if the region
//   moves mid-scan.
// - Tables are created with services/hbase (HBaseDdl): this client has no admin API.

import { setTimeout as sleep } from 'node:timers/promises';
import { HashGateError, ErrorCodes, invalidType } from '../errors.js';
import { RpcConnection, readMetaLocation, redactServerMessage, toBuf, unavailable, proto, loadHBaseClient, type RpcMethod } from './wire.js';
import { RegionCache, isRelocateException, compareBytes, type RegionLocation } from './regions.js';
import { bytes, deleteFields, getFields, parseResult, positive, putFields, regionSpec, remoteClass, rowKey, splitColumn } from './fields.js';
import { scanRegions, type ScanHost } from './scanner.js';

export type Bytes = Buffer | string;

export interface HBaseCell {
  family: string;
  qualifier: string;
  value: Buffer;
  /** ms since epoch */
  timestamp: number;
}

export interface HBaseRow {
  key: Buffer;
  /** newest value per 'family:qualifier' */
  columns: Record<string, Buffer>;
  /** every cell returned (several versions per column when maxVersions > 1), server order */
  cells: HBaseCell[];
}

export interface ReadOptions {
  /** 'family' or 'family:qualifier'; default all */
  columns?: string[];
  /** versions per column (default 1) */
  maxVersions?: number;
}

export interface WriteOptions {
  /** cell timestamp in ms (default: server time) */
  timestamp?: number;
}

export interface PutEntry {
  row: Bytes;
  values: Record<string, Bytes>;
  timestamp?: number;
}

export interface ScanOptions extends ReadOptions {
  prefix?: Bytes;
  startRow?: Bytes;
  stopRow?: Bytes;
  reversed?: boolean;
  limit?: number;
  /** rows per Scan RPC (default DEFAULTS.scanBatch) */
  batchSize?: number;
}

export interface HBaseStoreOptions {
  /** ZooKeeper quorum 'host:port[,host:port]'; default env HBASE_ZK */
  zookeeper?: string;
  /** default '/hbase' */
  zookeeperRoot?: string;
  /** whole-operation deadline in ms, including lookups and retries */
  operationTimeoutMs?: number;
  /** per-RPC timeout in ms */
  callTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** actions per Multi RPC; larger mget/mput are split */
  maxBatch?: number;
  /** called for every RPC sent (method, table); for tests and metrics */
  onRpc?: (method: string, table: string) => void;
}

export const DEFAULTS = {
  zookeeperRoot: '/hbase',
  operationTimeoutMs: 10_000,
  callTimeoutMs: 5_000,
  connectTimeoutMs: 3_000,
  maxBatch: 1_000,
  scanBatch: 500,
  scanLimit: 100_000,
  retryPauseMs: 100,
} as const;

export interface HBaseCallCounts {
  ops: Record<'get' | 'mget' | 'put' | 'mput' | 'delete' | 'mdelete' | 'checkAndPut' | 'scan', number>;
  rpcs: Record<'Get' | 'Mutate' | 'Multi' | 'Scan' | 'metaScan', number>;
}

type OpName = keyof HBaseCallCounts['ops'];

interface Deadline {
  at: number;
  op: string;
  table: string;
}

export class HBaseStore {
  private readonly zookeeper: string;
  private readonly zookeeperRoot: string;
  private readonly operationTimeoutMs: number;
  private readonly callTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly maxBatch: number;
  private readonly onRpc: ((method: string, table: string) => void) | undefined;
  private readonly connections = new Map<string, RpcConnection>();
  private metaServer: Promise<string> | null = null;
  private readonly regions: RegionCache;
  private closed = false;
  private counts: HBaseCallCounts = freshCounts();
  // what scanRegions (scanner.ts) uses of this store
  private readonly scanHost: ScanHost;

  constructor(options: HBaseStoreOptions = {}) {
    if (typeof options !== 'object' || options === null) throw invalidType('options', 'an object', options);
    const zk = options.zookeeper ?? process.env['HBASE_ZK'];
    if (typeof zk !== 'string' || zk.length === 0) {
      throw invalidType('options.zookeeper', 'a ZooKeeper quorum string (or env HBASE_ZK)', zk);
    }
    this.zookeeper = zk;
    this.zookeeperRoot = options.zookeeperRoot ?? DEFAULTS.zookeeperRoot;
    this.operationTimeoutMs = positive('options.operationTimeoutMs', options.operationTimeoutMs, DEFAULTS.operationTimeoutMs);
    this.callTimeoutMs = positive('options.callTimeoutMs', options.callTimeoutMs, Math.min(DEFAULTS.callTimeoutMs, this.operationTimeoutMs));
    this.connectTimeoutMs = positive('options.connectTimeoutMs', options.connectTimeoutMs, Math.min(DEFAULTS.connectTimeoutMs, this.operationTimeoutMs));
    this.maxBatch = positive('options.maxBatch', options.maxBatch, DEFAULTS.maxBatch);
    this.onRpc = options.onRpc;
    // fail here, with a coded error naming the missing peer dependency, rather than on the first call
    loadHBaseClient();
    this.regions = new RegionCache({
      metaConnection: () => this.metaConnection(),
      invalidateMeta: () => { this.metaServer = null; },
      countRpc: (m) => this.countRpc(m, 'hbase:meta'),
      metaTimeoutMs: () => this.callTimeoutMs,
    });
    this.scanHost = {
      operationTimeoutMs: this.operationTimeoutMs,
      scanBatch: DEFAULTS.scanBatch,
      retryPauseMs: DEFAULTS.retryPauseMs,
      locate: (table, key, below) =>
        this.withDeadline('scan', table, (d) => this.retrying(d, async () => (below ? this.regionBelow(table, key) : this.regions.locate(table, key)))),
      scanRpc: (region, table, request) => this.withDeadline('scan', table, (d) => this.rpc(region, 'Scan', request, d)),
      closeScanner: (region, scannerId) => this.closeScanner(region, scannerId),
      invalidateTable: (table) => this.regions.invalidateTable(table),
    };
  }

  /** Snapshot of operation and RPC counters since construction or the last reset. */
  callCounts(): HBaseCallCounts {
    return { ops: { ...this.counts.ops }, rpcs: { ...this.counts.rpcs } };
  }

  resetCallCounts(): void {
    this.counts = freshCounts();
  }

  /** Resolves once ZooKeeper and hbase:meta answer (locates the first region of `table` if given). */
  async ready(table?: string): Promise<void> {
    return this.withDeadline('ready', table ?? 'hbase:meta', async (d) => {
      if (table) await this.retrying(d, () => this.regions.locate(table, Buffer.alloc(0)));
      else await this.metaConnection();
    });
  }

  async get(table: string, row: Bytes, options: ReadOptions = {}): Promise<HBaseRow | null> {
    this.count('get');
    const key = rowKey('row', row);
    return this.withDeadline('get', table, (d) => this.retrying(d, async () => {
      const region = await this.regions.locate(table, key);
      const resp = await this.rpc(region, 'Get', {
        region: regionSpec(region),
        gxt: getFields(key, options),
      }, d);
      return parseResult(resp?.result);
    }));
  }

  /** Gets many rows; results in request order, null for absent rows. */
  async mget(table: string, rows: readonly Bytes[], options: ReadOptions = {}): Promise<(HBaseRow | null)[]> {
    this.count('mget');
    if (!Array.isArray(rows)) throw invalidType('rows', 'an array', rows);
    const keys = rows.map((r, i) => rowKey(`rows[${i}]`, r));
    const out: (HBaseRow | null)[] = new Array(keys.length).fill(null);
    if (keys.length === 0) return out;
    await this.withDeadline('mget', table, (d) => this.multi(table, keys.map((k) => ({ gxt: getFields(k, options) })),
      keys, d, (i, result) => { out[i] = parseResult(result); }));
    return out;
  }

  async put(table: string, row: Bytes, values: Record<string, Bytes>, options: WriteOptions = {}): Promise<void> {
    this.count('put');
    const key = rowKey('row', row);
    const mutation = putFields(key, values, options.timestamp, 'values');
    await this.withDeadline('put', table, (d) => this.retrying(d, async () => {
      const region = await this.regions.locate(table, key);
      await this.rpc(region, 'Mutate', { region: regionSpec(region), mutation }, d);
    }));
  }

  async mput(table: string, entries: readonly PutEntry[]): Promise<void> {
    this.count('mput');
    if (!Array.isArray(entries)) throw invalidType('entries', 'an array', entries);
    const keys: Buffer[] = [];
    const actions = entries.map((e, i) => {
      if (typeof e !== 'object' || e === null) throw invalidType(`entries[${i}]`, 'an object', e);
      const key = rowKey(`entries[${i}].row`, e.row);
      keys.push(key);
      return { mutation: putFields(key, e.values, e.timestamp, `entries[${i}].values`) };
    });
    if (actions.length === 0) return;
    await this.withDeadline('mput', table, (d) => this.multi(table, actions, keys, d, () => undefined));
  }

  /** Deletes a whole row, or only the given 'family' / 'family:qualifier' columns (all versions). */
  async delete(table: string, row: Bytes, options: { columns?: string[]; timestamp?: number } = {}): Promise<void> {
    this.count('delete');
    const key = rowKey('row', row);
    const mutation = deleteFields(key, options.columns, options.timestamp);
    await this.withDeadline('delete', table, (d) => this.retrying(d, async () => {
      const region = await this.regions.locate(table, key);
      await this.rpc(region, 'Mutate', { region: regionSpec(region), mutation }, d);
    }));
  }

  async mdelete(table: string, rows: readonly Bytes[]): Promise<void> {
    this.count('mdelete');
    if (!Array.isArray(rows)) throw invalidType('rows', 'an array', rows);
    const keys = rows.map((r, i) => rowKey(`rows[${i}]`, r));
    if (keys.length === 0) return;
    await this.withDeadline('mdelete', table, (d) => this.multi(table, keys.map((k) => ({ mutation: deleteFields(k) })),
      keys, d, () => undefined));
  }

  /**
   * Atomically applies `values` to `row` if `check.column` currently equals `check.value`
   * (null or empty: the column is absent). Resolves true if the put was applied.
   */
  async checkAndPut(table: string, row: Bytes, check: { column: string; value: Bytes | null },
    values: Record<string, Bytes>, options: WriteOptions = {}): Promise<boolean> {
    this.count('checkAndPut');
    const key = rowKey('row', row);
    if (typeof check !== 'object' || check === null) throw invalidType('check', 'an object', check);
    const [family, qualifier] = splitColumn('check.column', check.column);
    const expected = check.value === null ? Buffer.alloc(0) : bytes('check.value', check.value);
    const mutation = putFields(key, values, options.timestamp, 'values');
    const comparator = new (proto().BinaryComparator)({ comparable: { value: expected } });
    return this.withDeadline('checkAndPut', table, (d) => this.retrying(d, async () => {
      const region = await this.regions.locate(table, key);
      const resp = await this.rpc(region, 'Mutate', {
        region: regionSpec(region),
        mutation,
        condition: {
          row: key,
          family,
          qualifier,
          compareType: 'EQUAL',
          comparator: { name: 'org.apache.hadoop.hbase.filter.BinaryComparator', serializedComparator: comparator.encode() },
        },
      }, d);
      return resp?.processed === true;
    }));
  }

  /** Collects a scan (see file header for range semantics). */
  async scan(table: string, options: ScanOptions = {}): Promise<HBaseRow[]> {
    const explicit = options.limit !== undefined;
    const limit = explicit ? options.limit! : DEFAULTS.scanLimit + 1;
    const rows: HBaseRow[] = [];
    for await (const row of this.scanIterator(table, { ...options, limit })) rows.push(row);
    if (!explicit && rows.length > DEFAULTS.scanLimit) {
      throw new HashGateError(ErrorCodes.CAPACITY, `HBase scan of ${table} has more than ${DEFAULTS.scanLimit} rows; pass limit or use scanIterator()`,
        { details: { table, limit: DEFAULTS.scanLimit } });
    }
    return rows;
  }

  /**
   * Streams a scan region by region, one Scan RPC per batch; the deadline applies per batch, so
   * a slow consumer does not fail the scan (HBase keeps an idle scanner for 60 s).
   */
  async *scanIterator(table: string, options: ScanOptions = {}): AsyncGenerator<HBaseRow> {
    this.count('scan');
    yield* scanRegions(this.scanHost, table, options);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const c of this.connections.values()) c.close();
    this.connections.clear();
    this.metaServer = null;
  }

  // ---- internals ----

  /** region holding the greatest rows strictly below `key` */
  private async regionBelow(table: string, key: Buffer): Promise<RegionLocation | null> {
    const holding = await this.regions.locate(table, key);
    if (compareBytes(holding.startKey, key) < 0) return holding;
    return this.regions.previous(holding);
  }

  private closeScanner(region: RegionLocation, scannerId: unknown): void {
    const conn = this.connections.get(region.server);
    if (!conn || conn.closed) return;
    this.countRpc('Scan', region.table);
    conn.call('Scan', { region: regionSpec(region), scannerId, numberOfRows: 0, closeScanner: true }).catch(() => undefined);
  }

  private count(op: OpName): void {
    this.counts.ops[op]++;
    if (this.closed) throw new HashGateError(ErrorCodes.CLOSED, 'HBaseStore is closed');
  }

  private countRpc(method: string, table: string): void {
    const rpcs = this.counts.rpcs as Record<string, number>;
    rpcs[method] = (rpcs[method] ?? 0) + 1;
    this.onRpc?.(method, table);
  }

  private async metaConnection(): Promise<RpcConnection> {
    this.metaServer ??= readMetaLocation(this.zookeeper, this.zookeeperRoot, this.connectTimeoutMs + 2000)
      .then(({ host, port }) => `${host}:${port}`);
    const pending = this.metaServer;
    try {
      return this.connection(await pending);
    } catch (err) {
      if (this.metaServer === pending) this.metaServer = null;
      throw err;
    }
  }

  private connection(server: string): RpcConnection {
    let conn = this.connections.get(server);
    if (conn && !conn.closed) return conn;
    const i = server.lastIndexOf(':');
    conn = new RpcConnection(server.slice(0, i), Number(server.slice(i + 1)), this.connectTimeoutMs, this.callTimeoutMs);
    this.connections.set(server, conn);
    return conn;
  }

  private async rpc(region: RegionLocation, method: RpcMethod, request: unknown, d: Deadline): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
    const conn = this.connection(region.server);
    this.countRpc(method, region.table);
    const timeout = Math.max(1, Math.min(this.callTimeoutMs, d.at - Date.now()));
    try {
      return await conn.call(method, request, timeout);
    } catch (err) {
      if (err instanceof HashGateError && err.code === ErrorCodes.HBASE_UNAVAILABLE) {
        // server gone or restarted: drop it and everything located on it, re-read meta next time
        this.connections.delete(region.server);
        conn.close();
        this.regions.invalidateServer(region.server);
        this.metaServer = null;
      }
      throw err;
    }
  }

  private async withDeadline<T>(op: string, table: string, fn: (d: Deadline) => Promise<T>): Promise<T> {
    if (this.closed) throw new HashGateError(ErrorCodes.CLOSED, 'HBaseStore is closed');
    const d: Deadline = { at: Date.now() + this.operationTimeoutMs, op, table };
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(unavailable(`HBase ${op} on ${table} did not finish within ${this.operationTimeoutMs} ms`,
        { op, table, timeoutMs: this.operationTimeoutMs, timeout: true })), this.operationTimeoutMs);
    });
    try {
      return await Promise.race([fn(d), expired]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Runs `attempt` again after stale-location errors (region moved, table recreated, server
   * restarted) until the deadline; the error of the last attempt is what the caller sees.
   */
  private async retrying<T>(d: Deadline, attempt: () => Promise<T>): Promise<T> {
    let pause: number = DEFAULTS.retryPauseMs;
    for (let tries = 0; ; tries++) {
      try {
        return await attempt();
      } catch (err) {
        if (!(err instanceof HashGateError) || this.closed) throw err;
        const relocate = err.code === ErrorCodes.HBASE && isRelocateException(remoteClass(err));
        const reconnect = err.code === ErrorCodes.HBASE_UNAVAILABLE && err.details?.['timeout'] !== true && tries < 2;
        if (!relocate && !reconnect) throw err;
        if (relocate) this.regions.invalidateTable(d.table);
        if (Date.now() + pause >= d.at) throw err;
        await sleep(pause);
        pause = Math.min(pause * 2, 1000);
      }
    }
  }

  /**
   * Sends actions grouped per region server (one Multi RPC per server and chunk), maps results back
   * to request indexes and retries the actions whose region answered with a stale-location error.
   */
  private async multi(table: string, actions: Record<string, unknown>[], keys: Buffer[], d: Deadline,
    onResult: (index: number, result: unknown) => void): Promise<void> {
    let todo = keys.map((_, i) => i);
    let pause: number = DEFAULTS.retryPauseMs;
    let reconnects = 0;
    for (;;) {
      const retry: number[] = [];
      let lastError: HashGateError | null = null;
      // group by server, then region
      const byServer = new Map<string, Map<string, { region: RegionLocation; idx: number[] }>>();
      for (const i of todo) {
        let region: RegionLocation;
        try {
          region = await this.regions.locate(table, keys[i]!);
        } catch (err) {
          if (err instanceof HashGateError && err.code === ErrorCodes.HBASE && isRelocateException(remoteClass(err))) {
            retry.push(i);
            lastError = err;
            continue;
          }
          throw err;
        }
        let regs = byServer.get(region.server);
        if (!regs) byServer.set(region.server, (regs = new Map()));
        const rk = region.name.toString('latin1');
        let g = regs.get(rk);
        if (!g) regs.set(rk, (g = { region, idx: [] }));
        g.idx.push(i);
      }
      const sends: Promise<void>[] = [];
      for (const regs of byServer.values()) {
        // chunk: at most maxBatch actions per Multi RPC
        let chunk: { region: RegionLocation; idx: number[] }[] = [];
        let size = 0;
        const flush = (): void => {
          if (chunk.length === 0) return;
          const groups = chunk;
          chunk = [];
          size = 0;
          sends.push(this.sendMulti(groups, actions, d, onResult, retry).catch((err) => {
            if (err instanceof HashGateError && err.code === ErrorCodes.HBASE_UNAVAILABLE && err.details?.['timeout'] !== true) {
              for (const g of groups) retry.push(...g.idx);
              lastError = err;
              return;
            }
            throw err;
          }));
        };
        for (const g of regs.values()) {
          for (let s = 0; s < g.idx.length; s += this.maxBatch) {
            const part = g.idx.slice(s, s + this.maxBatch);
            if (size + part.length > this.maxBatch) flush();
            chunk.push({ region: g.region, idx: part });
            size += part.length;
          }
        }
        flush();
      }
      await Promise.all(sends);
      if (retry.length === 0) return;
      const failed = lastError as HashGateError | null;
      if (failed?.code === ErrorCodes.HBASE_UNAVAILABLE && ++reconnects > 2) throw failed;
      if (Date.now() + pause >= d.at) {
        throw lastError ?? unavailable(`HBase ${d.op} on ${table}: regions still moving at the deadline`, { table });
      }
      this.regions.invalidateTable(table);
      await sleep(pause);
      pause = Math.min(pause * 2, 1000);
      todo = retry;
    }
  }

  private async sendMulti(groups: { region: RegionLocation; idx: number[] }[], actions: Record<string, unknown>[],
    d: Deadline, onResult: (index: number, result: unknown) => void, retry: number[]): Promise<void> {
    const first = groups[0]!.region;
    const resp = await this.rpc(first, 'Multi', {
      regionAction: groups.map((g) => ({
        region: regionSpec(g.region),
        action: g.idx.map((i) => ({ index: i, ...actions[i] })),
      })),
    }, d);
    const results: any[] = resp?.regionActionResult ?? []; // eslint-disable-line @typescript-eslint/no-explicit-any
    groups.forEach((g, gi) => {
      const rar = results[gi];
      if (rar?.exception) {
        const name = String(rar.exception.name ?? '');
        if (isRelocateException(name)) {
          this.regions.invalidate(g.region);
          retry.push(...g.idx);
          return;
        }
        throw new HashGateError(ErrorCodes.HBASE, `HBase ${d.op}: ${name}`, { details: { table: d.table, exceptionClassName: name } });
      }
      for (const roe of rar?.resultOrException ?? []) {
        const index = Number(roe.index);
        if (roe.exception) {
          const name = String(roe.exception.name ?? '');
          if (isRelocateException(name)) {
            retry.push(index);
            continue;
          }
          throw new HashGateError(ErrorCodes.HBASE, `HBase ${d.op}: ${name}: ${redactServerMessage(toBuf(roe.exception.value).toString().split('\n')[0] ?? '')}`,
            { details: { table: d.table, exceptionClassName: name, index } });
        }
        onResult(index, roe.result);
      }
    });
  }
}

function freshCounts(): HBaseCallCounts {
  return {
    ops: { get: 0, mget: 0, put: 0, mput: 0, delete: 0, mdelete: 0, checkAndPut: 0, scan: 0 },
    rpcs: { Get: 0, Mutate: 0, Multi: 0, Scan: 0, metaScan: 0 },
  };
}
