// Region location for the HBase adapter, with the two HBase 2 compatibility fixes hbase-rpc-client
// (written for HBase 0.98-1.2) lacks:
//  1. HBase 2 rejects Get{closest_row_before} on hbase:meta (HBASE-20225), so the region holding a
//     row is found with a one-row *reversed scan* of meta starting at "table,row,99999999999999",
//     as the Java client does. Meta is ordered by its own comparator (table, start key, region id),
//     so this lands on the region with the greatest start key <= row.
//  2. HBase 2 keeps table-state rows (row = table name, family "table") in hbase:meta. Rows
//     without info:regioninfo, and regions of another table, offline or split parents, are skipped.
// Locations are cached per table in start-key order and dropped when a server reports the region
// gone (NotServingRegion, RegionMoved, table dropped and recreated, ...).

import { RpcConnection, proto, toBuf, remoteError } from './wire.js';
import { HashGateError, ErrorCodes } from '../errors.js';

export interface RegionLocation {
  table: string;
  /** full region name as stored in hbase:meta; sent as the RegionSpecifier */
  name: Buffer;
  startKey: Buffer;
  /** empty = last region */
  endKey: Buffer;
  /** "host:port" */
  server: string;
}

const META_REGION = Buffer.from('hbase:meta,,1');
const NINES = '99999999999999';

/** Server exceptions that mean "this cached location is stale: look it up again and retry". */
export function isRelocateException(className: string): boolean {
  return /NotServingRegion|RegionMoved|RegionOpening|RegionOffline|ServerNotRunningYet|RegionServerStopped|RegionServerAborted|UnknownRegion|RegionTooBusy|CallQueueTooBig|PleaseHold/i
    .test(className);
}

export function compareBytes(a: Buffer, b: Buffer): number {
  return Buffer.compare(a, b);
}

export interface MetaAccess {
  /** connection to the server hosting hbase:meta (re-resolved through ZooKeeper on failure) */
  metaConnection(): Promise<RpcConnection>;
  /** forget the meta location after a failed meta RPC */
  invalidateMeta(): void;
  countRpc(method: string): void;
  metaTimeoutMs(): number;
}

export class RegionCache {
  /** per table: regions sorted by start key */
  private readonly byTable = new Map<string, RegionLocation[]>();

  constructor(private readonly meta: MetaAccess, private readonly maxTables = 1024) {}

  cached(table: string, row: Buffer): RegionLocation | undefined {
    const list = this.byTable.get(table);
    if (!list) return undefined;
    // binary search: last region with startKey <= row
    let lo = 0;
    let hi = list.length - 1;
    let found: RegionLocation | undefined;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const r = list[mid]!;
      if (compareBytes(r.startKey, row) <= 0) {
        found = r;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    if (found && (found.endKey.length === 0 || compareBytes(row, found.endKey) < 0)) return found;
    return undefined;
  }

  /** Region holding `row` (cached or looked up in meta). */
  async locate(table: string, row: Buffer): Promise<RegionLocation> {
    return this.cached(table, row) ?? this.lookup(table, row);
  }

  /** The region just before `region` in key order (for reversed scans), or null for the first one. */
  async previous(region: RegionLocation): Promise<RegionLocation | null> {
    if (region.startKey.length === 0) return null;
    const table = region.table;
    // meta key (table, startKey, "") sorts just below the region itself: the reversed scan's
    // first row is the region before it
    const metaKey = Buffer.concat([Buffer.from(`${table},`), region.startKey, Buffer.from(',')]);
    return this.lookupMeta(table, metaKey, region.startKey, true);
  }

  invalidateTable(table: string): void {
    this.byTable.delete(table);
  }

  invalidate(region: RegionLocation): void {
    const list = this.byTable.get(region.table);
    if (!list) return;
    const i = list.findIndex((r) => r.name.equals(region.name));
    if (i >= 0) list.splice(i, 1);
  }

  invalidateServer(server: string): void {
    for (const [table, list] of this.byTable) {
      const kept = list.filter((r) => r.server !== server);
      if (kept.length === 0) this.byTable.delete(table);
      else this.byTable.set(table, kept);
    }
  }

  private async lookup(table: string, row: Buffer): Promise<RegionLocation> {
    const metaKey = Buffer.concat([Buffer.from(`${table},`), row, Buffer.from(`,${NINES}`)]);
    const region = await this.lookupMeta(table, metaKey, row, false);
    if (!region) {
      throw new HashGateError(ErrorCodes.HBASE, `HBase table ${table} not found`, {
        details: { table, exceptionClassName: 'org.apache.hadoop.hbase.TableNotFoundException' },
      });
    }
    return region;
  }

  private async lookupMeta(table: string, metaKey: Buffer, row: Buffer, previous: boolean): Promise<RegionLocation | null> {
    let conn: RpcConnection;
    let resp: any; // eslint-disable-line @typescript-eslint/no-explicit-any
    try {
      conn = await this.meta.metaConnection();
      this.meta.countRpc('metaScan');
      resp = await conn.call('Scan', {
        region: { type: 'REGION_NAME', value: META_REGION },
        scan: {
          startRow: metaKey,
          // exclusive lower bound "table,," keeps the scan inside this table's region rows
          stopRow: Buffer.from(`${table},,`),
          reversed: true,
          column: [{ family: Buffer.from('info') }],
        },
        numberOfRows: 1,
        closeScanner: true,
      }, this.meta.metaTimeoutMs());
    } catch (err) {
      if (err instanceof HashGateError && err.code === ErrorCodes.HBASE_UNAVAILABLE) this.meta.invalidateMeta();
      throw err;
    }
    const result = resp?.results?.[0];
    const region = result ? parseMetaRow(result) : null;
    if (!region || region.table !== table) return null;
    if (!region.server) {
      // in transition (being opened after create/move/split): retryable
      throw remoteError({ exceptionClassName: 'org.apache.hadoop.hbase.NotServingRegionException',
        stackTrace: `region of ${table} is not assigned yet` }, { table });
    }
    if (!previous && region.endKey.length !== 0 && compareBytes(row, region.endKey) >= 0) {
      // a hole in meta (region being split/merged): retryable
      throw remoteError({ exceptionClassName: 'org.apache.hadoop.hbase.NotServingRegionException',
        stackTrace: `no region of ${table} holds the row yet` }, { table });
    }
    this.store(region);
    return region;
  }

  private store(region: RegionLocation): void {
    let list = this.byTable.get(region.table);
    if (!list) {
      if (this.byTable.size >= this.maxTables) {
        const oldest = this.byTable.keys().next().value;
        if (oldest !== undefined) this.byTable.delete(oldest);
      }
      list = [];
      this.byTable.set(region.table, list);
    }
    // drop cached regions overlapping the new one (they were split/merged/recreated)
    const kept = list.filter((r) => !overlaps(r, region));
    kept.push(region);
    kept.sort((a, b) => compareBytes(a.startKey, b.startKey));
    this.byTable.set(region.table, kept);
  }
}

function overlaps(a: RegionLocation, b: RegionLocation): boolean {
  const aEndsBeforeB = a.endKey.length !== 0 && compareBytes(a.endKey, b.startKey) <= 0;
  const bEndsBeforeA = b.endKey.length !== 0 && compareBytes(b.endKey, a.startKey) <= 0;
  return !aEndsBeforeB && !bEndsBeforeA;
}

/** One hbase:meta row -> region location; null for table-state rows and unusable regions. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function parseMetaRow(result: any): RegionLocation | null {
  let regionInfo: Buffer | null = null;
  let server = '';
  let rowKey: Buffer | null = null;
  for (const cell of result.cell ?? []) {
    const family = toBuf(cell.family).toString();
    const qualifier = toBuf(cell.qualifier).toString();
    rowKey ??= toBuf(cell.row);
    if (family !== 'info') continue;
    if (qualifier === 'regioninfo') regionInfo = toBuf(cell.value);
    else if (qualifier === 'server') server = toBuf(cell.value).toString();
  }
  if (!regionInfo || !rowKey) return null;
  // value = "PBUF" magic + RegionInfo protobuf
  const body = regionInfo.subarray(0, 4).toString() === 'PBUF' ? regionInfo.subarray(4) : regionInfo;
  const info = proto().RegionInfo.decode(body);
  if (info.offline || info.split) return null;
  const ns = toBuf(info.tableName.namespace).toString();
  const qual = toBuf(info.tableName.qualifier).toString();
  return {
    table: ns === 'default' ? qual : `${ns}:${qual}`,
    name: rowKey,
    startKey: toBuf(info.startKey),
    endKey: toBuf(info.endKey),
    server,
  };
}
