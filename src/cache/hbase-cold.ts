// The cold tier on HBase: one row per key (row key = the lookup key), one cell `<family>:v` holding
// the msgpack payload, written with the value's original timestamp as the cell timestamp. The
// family's TTL (90 days by default, set at table creation) therefore counts from the first write,
// and HBase drops expired cells itself on read and compaction: no scan-and-delete job.
import { checkInt, invalidType } from '../errors.js';
import type { HBaseStore } from '../hbase/client.js';
import type { ColdCell, ColdEntry, ColdStore } from './types.js';

export const HBASE_COLD_DEFAULTS = {
  family: 'c',
  qualifier: 'v',
  /** Column-family TTL for cold tables (90 days: cold data outlives the 7-day hot tier by a quarter). */
  ttlSeconds: 90 * 24 * 3600,
} as const;

export interface HBaseColdStoreOptions {
  store: HBaseStore;
  family?: string;
  /** Logical table -> HBase table name. Default: identity. */
  tableName?: (table: string) => string;
}

export class HBaseColdStore implements ColdStore {
  readonly kind = 'hbase';
  readonly store: HBaseStore;
  readonly #column: string;
  readonly #columns: string[];
  readonly #tableName: (table: string) => string;

  constructor(opts: HBaseColdStoreOptions) {
    if (!opts?.store || typeof opts.store.mget !== 'function') throw invalidType('store', 'an HBaseStore', opts?.store);
    const family = opts.family ?? HBASE_COLD_DEFAULTS.family;
    if (typeof family !== 'string' || !/^[A-Za-z0-9_]+$/.test(family)) throw invalidType('family', 'a column family name', family);
    this.store = opts.store;
    this.#column = `${family}:${HBASE_COLD_DEFAULTS.qualifier}`;
    this.#columns = [this.#column];
    this.#tableName = opts.tableName ?? ((t) => t);
  }

  async mget(table: string, keys: readonly string[]): Promise<(ColdCell | undefined)[]> {
    const rows = await this.store.mget(this.#tableName(table), keys, { columns: this.#columns });
    const out: (ColdCell | undefined)[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i];
      const value = row?.columns[this.#column];
      if (!row || value === undefined) {
        out[i] = undefined;
        continue;
      }
      const cell = row.cells.find((c) => `${c.family}:${c.qualifier}` === this.#column);
      out[i] = { value, ts: cell?.timestamp ?? 0 };
    }
    return out;
  }

  async mput(table: string, entries: readonly ColdEntry[]): Promise<void> {
    if (entries.length === 0) return;
    await this.store.mput(
      this.#tableName(table),
      entries.map((e) => ({
        row: e.key,
        values: { [this.#column]: Buffer.from(e.value.buffer, e.value.byteOffset, e.value.byteLength) },
        timestamp: Math.trunc(e.ts),
      })),
    );
  }

  async close(): Promise<void> {
    await this.store.close();
  }
}

/**
 * The HBaseDdl line (services/hbase/ddl.sh) that creates a cold table: one family, one version,
 * the TTL in seconds, a ROW Bloom filter (point gets), optional pre-split points.
 */
export function coldTableDdl(
  table: string,
  opts: { family?: string; ttlSeconds?: number; splits?: string[] } = {},
): string {
  const ttl = checkInt('ttlSeconds', opts.ttlSeconds ?? HBASE_COLD_DEFAULTS.ttlSeconds, 1);
  const fam = opts.family ?? HBASE_COLD_DEFAULTS.family;
  const split = opts.splits?.length ? ` -s ${opts.splits.join(',')}` : '';
  return `create ${table} -f ${fam}:versions=1,ttl=${ttl},bloom=ROW${split} --if-not-exists`;
}
