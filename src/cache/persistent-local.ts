// Optional persistent second local tier of TieredCache (`local: { path }`): an LMDB file on the
// host under the in-memory LRU, so a restarted instance answers its hot keys from disk instead of
// sending every first lookup to Redis/HBase, and the processes of one host share it.
//
// Entries: key `${table}\0${key}`, value [expiresAt f64 BE][msgpack payload]. Only values found in
// a lower tier are written (never a negative answer: "not present" is never persisted), and an
// entry is served at most `persistTtlMs` after it was read from Redis/HBase: that is the staleness
// bound this tier adds. invalidate() removes entries here too. Writes go through lmdb-js's
// asynchronous batching (one transaction per event turn, off the lookup's path); a lookup never
// waits for them.
//
// Bounded: at most `persistMaxEntries` entries. Over the bound, expired entries are removed first,
// then entries in key order (this is a warm-start cache, not an LRU: the in-memory tier above it
// keeps the recency order).
import type { Database, RootDatabase } from 'lmdb';
import { openPrivateEnv } from '../dedup/lmdb-store.js';
import { ErrorCodes, HashGateError, checkInt, invalidType } from '../errors.js';
import { decodeValue, encodeValue } from './codec.js';
import type { CacheValue } from './types.js';

export const PERSISTENT_DEFAULTS = { ttlMs: 3_600_000, maxEntries: 1_000_000 } as const;
/** lmdb-js key limit with 4 KiB pages; longer table+key pairs simply skip this tier. */
const MAX_KEY_BYTES = 1978;
const EVICT_BATCH = 10_000;

export interface PersistentLocalOptions {
  path: string;
  ttlMs: number;
  maxEntries: number;
  now: () => number;
}

export interface PersistentLocalStats {
  hits: number;
  misses: number;
  expired: number;
  writes: number;
  evicted: number;
  errors: number;
  entries: number;
}

/** Validates `local.path`, `local.persistTtlMs`, `local.persistMaxEntries`; undefined without a path. */
export function parsePersistentLocal(local: Record<string, unknown>, now: () => number): PersistentLocalOptions | undefined {
  const path = local.path;
  if (path === undefined) {
    for (const k of ['persistTtlMs', 'persistMaxEntries']) {
      if (local[k] !== undefined) throw new HashGateError(ErrorCodes.INVALID_OPTION, `local.${k} needs local.path`, { details: { name: `local.${k}` } });
    }
    return undefined;
  }
  if (typeof path !== 'string' || path === '' || path.includes('\0')) throw invalidType('local.path', 'a directory path', path);
  return {
    path,
    ttlMs: checkInt('local.persistTtlMs', local.persistTtlMs ?? PERSISTENT_DEFAULTS.ttlMs, 1),
    maxEntries: checkInt('local.persistMaxEntries', local.persistMaxEntries ?? PERSISTENT_DEFAULTS.maxEntries, 1),
    now,
  };
}

export class PersistentLocalTier {
  private readonly env: RootDatabase;
  private readonly db: Database<Buffer, string>;
  private readonly counters = { hits: 0, misses: 0, expired: 0, writes: 0, evicted: 0, errors: 0 };
  private entries: number;
  private evicting: Promise<void> | undefined;
  private closed = false;
  /** Payload bytes of the value the last get() returned (the LRU above charges them). */
  lastBytes = 0;

  constructor(private readonly opts: PersistentLocalOptions) {
    try {
      this.env = openPrivateEnv(opts.path, { maxDbs: 4 });
      this.db = this.env.openDB<Buffer, string>({ name: 'hg:l2', encoding: 'binary' });
      this.entries = (this.db.getStats() as { entryCount: number }).entryCount;
    } catch (cause) {
      throw new HashGateError(ErrorCodes.STORE, `local.path: cannot open the persistent local tier at ${opts.path}: ${(cause as Error).message}`, { cause });
    }
  }

  private static id(table: string, key: string): string | undefined {
    const id = `${table}\u0000${key}`;
    return id.length * 3 > MAX_KEY_BYTES && Buffer.byteLength(id) > MAX_KEY_BYTES ? undefined : id;
  }

  /** The live value, or undefined (absent, expired, unreadable). Synchronous: one mmap read. */
  get(table: string, key: string): CacheValue | undefined {
    if (this.closed) return undefined;
    const id = PersistentLocalTier.id(table, key);
    if (id === undefined) return undefined;
    let buf: Buffer | undefined;
    try {
      buf = this.db.getBinaryFast(id);
    } catch {
      this.counters.errors++;
      return undefined;
    }
    if (buf === undefined || buf.length < 8) {
      this.counters.misses++;
      return undefined;
    }
    if (buf.readDoubleBE(0) <= this.opts.now()) {
      this.counters.expired++;
      return undefined;
    }
    try {
      const v = decodeValue(buf.subarray(8));
      this.counters.hits++;
      this.lastBytes = buf.length - 8;
      return v;
    } catch {
      this.counters.errors++;
      return undefined;
    }
  }

  /** Stores a value read from a lower tier; returns at once (the write commits in the background). */
  put(table: string, key: string, value: CacheValue): void {
    if (this.closed) return;
    const id = PersistentLocalTier.id(table, key);
    if (id === undefined) return;
    let payload: Buffer;
    try {
      payload = encodeValue(value);
    } catch {
      this.counters.errors++;
      return;
    }
    const buf = Buffer.allocUnsafe(8 + payload.length);
    buf.writeDoubleBE(this.opts.now() + this.opts.ttlMs, 0);
    payload.copy(buf, 8);
    const existed = this.db.doesExist(id);
    this.db.put(id, buf).then(
      () => {
        this.counters.writes++;
        if (!existed) this.entries++;
        if (this.entries > this.opts.maxEntries) this.evict();
      },
      () => void this.counters.errors++,
    );
  }

  remove(table: string, keys: readonly string[]): void {
    if (this.closed) return;
    for (const key of keys) {
      const id = PersistentLocalTier.id(table, key);
      if (id !== undefined) this.db.remove(id).then((had) => void (had && this.entries--), () => void this.counters.errors++);
    }
  }

  /** Expired entries first, then entries in key order, until 90% of the bound. */
  private evict(): void {
    if (this.evicting !== undefined || this.closed) return;
    this.evicting = (async () => {
      const count = (): number => (this.db.getStats() as { entryCount: number }).entryCount;
      this.entries = count();
      const target = Math.floor(this.opts.maxEntries * 0.9);
      const now = this.opts.now();
      for (const pass of ['expired', 'any'] as const) {
        let start: string | undefined;
        while (this.entries > target && !this.closed) {
          const ids: string[] = [];
          let seen = 0;
          for (const { key, value } of this.db.getRange(start === undefined ? { limit: EVICT_BATCH } : { start, limit: EVICT_BATCH })) {
            seen++;
            start = `${key}\u0000`;
            if (pass === 'any' || value.length < 8 || value.readDoubleBE(0) <= now) {
              ids.push(key);
              if (pass === 'any' && this.entries - ids.length <= target) break;
            }
          }
          if (ids.length > 0) {
            await this.db.transaction(() => {
              for (const id of ids) this.db.removeSync(id);
            });
            this.counters.evicted += ids.length;
            this.entries = count();
          }
          if (seen < EVICT_BATCH) break; // end of the table (or the bound was reached)
        }
      }
    })()
      .catch(() => void this.counters.errors++)
      .finally(() => (this.evicting = undefined));
  }

  stats(): PersistentLocalStats {
    if (!this.closed) {
      this.env.resetReadTxn();
      this.entries = (this.db.getStats() as { entryCount: number }).entryCount;
    }
    return { ...this.counters, entries: this.entries };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.evicting;
    await this.env.close();
  }
}
