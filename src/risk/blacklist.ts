// Blacklist on HBase: row key `userType_blacklistType_userId`, family `base` (status) and `detail`
// (reason, updateTime). A Bloom filter of every blacklisted row key answers "not blacklisted"
// without any HBase call for keys that miss it; the rest go to HBase in one batched mget.
//
// The filter is either per process (built from a table scan at start(), kept current by this
// process's imports, rebuilt periodically: an import on another instance stays invisible here
// until then) or shared (`filter: RedisBloom`, a Redis-held filter every instance and Redisson
// reads: an import on any instance is visible to all as soon as its addAll returns). Keys enter
// the filter before their HBase write, so a concurrent check never misses a key HBase has. When
// the shared filter cannot answer, every key goes to HBase: an unreachable filter never reads as
// "not blacklisted".
// With a `bus`, a per-process filter also learns other instances' imports at once (they publish
// their row keys), and rebuilds from the table after a bus outage, when messages may be lost.
//
// Create the table with: HBaseDdl create blacklist -f base:bloom=ROW -f detail:bloom=ROW [-s ...]
import { HashGateError, ErrorCodes, checkInt, checkNumber, invalidType } from '../errors.js';
import { BloomFilter, SwappableBloom } from '../bloom/index.js';
import type { RedisBloom } from '../bloom/redis-bloom.js';
import type { HBaseStore } from '../hbase/client.js';
import type { BusListener, InvalidationBus } from '../cache/bus.js';

export const BLACKLIST_DEFAULTS = {
  table: 'blacklist',
  /** Bloom sizing: expected blacklisted keys and false-positive rate. */
  expectedItems: 1_000_000,
  fpp: 0.001,
  /** rows per mput in importBlacklist */
  batch: 500,
  /** rows per mget in isBlacklisted (keys that passed the Bloom filter) */
  checkBatch: 1_000,
  /** periodic Bloom rebuild from a table scan; 0 = never */
  rebuildIntervalMs: 60 * 60 * 1000,
  /** status value written by importBlacklist when the entry has none */
  status: '1',
} as const;

/** HBaseDdl families for this table. */
export const BLACKLIST_FAMILIES = ['base:bloom=ROW', 'detail:bloom=ROW'] as const;

export interface BlacklistKey {
  userType: string;
  blacklistType: string;
  userId: string;
}

export interface BlacklistEntry extends BlacklistKey {
  /** default '1'; a row whose status is '0' counts as not blacklisted */
  status?: string;
  reason?: string;
  /** ms; default now() */
  updateTime?: number;
}

export interface BlacklistRecord extends BlacklistKey {
  status: string;
  reason: string | undefined;
  updateTime: number | undefined;
}

export interface BlacklistOptions {
  store: HBaseStore;
  table?: string;
  expectedItems?: number;
  fpp?: number;
  batch?: number;
  rebuildIntervalMs?: number;
  /**
   * Shared Redis-held filter used instead of the per-process one (open it with expectedItems/fpp
   * so start() can create it). start() fills it from a table scan unless a completed scan of this
   * table is recorded next to it. No periodic rebuild (rebuildIntervalMs is ignored): swap a new
   * generation in with `hashgate bloom rebuild` to drop removed keys.
   */
  filter?: RedisBloom;
  now?: () => number;
  /**
   * Fleet-wide changes: imports and removals are published (table + row keys); keys other
   * instances import enter this filter on receipt, so they stop answering "not blacklisted" within
   * the bus delay instead of at their next rebuild. After a bus outage the filter is rebuilt.
   */
  bus?: InvalidationBus;
}

export interface BlacklistStats {
  checks: number;
  /** answered by the Bloom filter alone */
  bloomNegatives: number;
  /** keys looked up in HBase */
  hbaseLookups: number;
  /** keys that passed the filter but were not (or no longer) in HBase */
  falsePositives: number;
  rebuilds: number;
  lastRebuildKeys: number;
  /** checks whose shared filter call failed, so every key went to HBase */
  filterErrors: number;
}

const SEP = '_';

/** Row key `userType_blacklistType_userId`; the two type fields may not contain '_'. */
export function blacklistRowKey(k: BlacklistKey, name = 'entry'): string {
  if (typeof k !== 'object' || k === null) throw invalidType(name, 'an object', k);
  for (const f of ['userType', 'blacklistType', 'userId'] as const) {
    const v = k[f];
    if (typeof v !== 'string' || v.length === 0) throw invalidType(`${name}.${f}`, 'a non-empty string', v);
    if (f !== 'userId' && v.includes(SEP)) {
      throw new HashGateError(ErrorCodes.INVALID_ARG, `${name}.${f} must not contain '${SEP}'`, { details: { name: `${name}.${f}` } });
    }
  }
  return `${k.userType}${SEP}${k.blacklistType}${SEP}${k.userId}`;
}

function parseRowKey(key: string): BlacklistKey {
  const a = key.indexOf(SEP);
  const b = key.indexOf(SEP, a + 1);
  return { userType: key.slice(0, a), blacklistType: key.slice(a + 1, b), userId: key.slice(b + 1) };
}

export class Blacklist {
  readonly table: string;
  readonly #store: HBaseStore;
  readonly #expectedItems: number;
  readonly #fpp: number;
  readonly #batch: number;
  readonly #rebuildIntervalMs: number;
  readonly #now: () => number;
  readonly #shared: RedisBloom | undefined;
  #bloom: SwappableBloom | undefined;
  #started = false;
  #timer: NodeJS.Timeout | undefined;
  readonly #bus: InvalidationBus | undefined;
  #busOff: (() => void) | undefined;
  readonly #busListener: BusListener = {
    keys: (table, keys) => {
      // removals arrive too: adding them only costs false positives until the next rebuild
      if (table === this.table) this.#bloom?.addAll(keys as string[]);
    },
    resync: () => {
      this.rebuild().catch(() => undefined); // a failed rebuild keeps the current filter
    },
  };
  #stats: BlacklistStats = { checks: 0, bloomNegatives: 0, hbaseLookups: 0, falsePositives: 0, rebuilds: 0, lastRebuildKeys: 0, filterErrors: 0 };

  constructor(options: BlacklistOptions) {
    if (typeof options !== 'object' || options === null || typeof options.store?.mget !== 'function') {
      throw invalidType('options.store', 'an HBaseStore', options?.store);
    }
    this.#store = options.store;
    this.table = options.table ?? BLACKLIST_DEFAULTS.table;
    this.#expectedItems = checkInt('options.expectedItems', options.expectedItems ?? BLACKLIST_DEFAULTS.expectedItems, 1);
    this.#fpp = checkNumber('options.fpp', options.fpp ?? BLACKLIST_DEFAULTS.fpp, 0, 1, true);
    this.#batch = checkInt('options.batch', options.batch ?? BLACKLIST_DEFAULTS.batch, 1, 100_000);
    this.#rebuildIntervalMs = checkInt('options.rebuildIntervalMs', options.rebuildIntervalMs ?? BLACKLIST_DEFAULTS.rebuildIntervalMs, 0);
    this.#now = options.now ?? Date.now;
    if (options.bus !== undefined && typeof options.bus?.publish !== 'function') throw invalidType('options.bus', 'an InvalidationBus', options.bus);
    this.#bus = options.bus;
    if (options.filter !== undefined && (typeof options.filter !== 'object' || typeof options.filter?.containsAll !== 'function')) {
      throw invalidType('options.filter', 'a RedisBloom', options.filter);
    }
    this.#shared = options.filter;
  }

  /** Builds the Bloom filter from a full scan and starts the periodic rebuild. */
  async start(): Promise<void> {
    if (this.#started) return;
    if (this.#shared) {
      const shared = this.#shared;
      const created = shared.size === 0 ? await shared.tryInit() : false;
      if (!created && shared.size === 0) await shared.reload();
      // A filter someone else created (another instance still scanning, Redisson, an older
      // deployment) may lack rows already in the table: scan unless a completed scan of this
      // table is recorded. Adds are idempotent, so instances starting together may all scan.
      if (created || (await shared.getFlag('filledFrom')) !== this.table) {
        let batch: string[] = [];
        let n = 0;
        for await (const key of this.#scanKeys(() => n++)) {
          batch.push(key);
          if (batch.length >= 4096) {
            await shared.addAll(batch);
            batch = [];
          }
        }
        if (batch.length > 0) await shared.addAll(batch);
        await shared.setFlag('filledFrom', this.table);
        this.#stats.lastRebuildKeys = n;
      }
      this.#started = true;
      return;
    }
    // listen before the scan: an import elsewhere during it reaches the filter either way
    const early: string[][] = [];
    let missed = false;
    const listen: BusListener = {
      keys: (t, k) => void (t === this.table && early.push(k as string[])),
      // the bus (re)subscribed during the scan: imports before that may be in neither
      resync: () => void (missed = true),
    };
    const off = this.#bus?.subscribe(listen);
    let f: BloomFilter;
    try {
      f = await this.#build();
    } finally {
      off?.();
    }
    for (const k of early) f.addAll(k);
    this.#started = true;
    this.#bloom = new SwappableBloom(f);
    this.#busOff = this.#bus?.subscribe(this.#busListener);
    if (missed) this.rebuild().catch(() => undefined);
    if (this.#rebuildIntervalMs > 0) {
      this.#timer = setInterval(() => {
        this.rebuild().catch(() => undefined); // a failed rebuild keeps the current filter
      }, this.#rebuildIntervalMs);
      this.#timer.unref();
    }
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#busOff?.();
    this.#busOff = undefined;
  }

  stats(): BlacklistStats {
    return { ...this.#stats };
  }

  /** Rebuilds the filter from the table (drops removed keys); checks keep running meanwhile. */
  async rebuild(): Promise<void> {
    this.#requireStarted();
    if (this.#shared) {
      throw new HashGateError(ErrorCodes.INVALID_ARG, 'Blacklist.rebuild() rebuilds a per-process filter; a shared filter is rebuilt fleet-wide with `hashgate bloom rebuild`');
    }
    const bloom = this.#requireBloom();
    let count = 0;
    await bloom.rebuild(this.#scanKeys(() => count++), { expectedItems: this.#expectedItems, fpp: this.#fpp });
    this.#stats.rebuilds++;
    this.#stats.lastRebuildKeys = count;
  }

  /** Writes entries in batches of `batch` rows; keys enter the Bloom filter before their write. */
  async importBlacklist(entries: readonly BlacklistEntry[], options: { batch?: number } = {}): Promise<{ imported: number; batches: number }> {
    this.#requireStarted();
    if (!Array.isArray(entries)) throw invalidType('entries', 'an array', entries);
    const batch = checkInt('options.batch', options.batch ?? this.#batch, 1, 100_000);
    const rows = entries.map((e, i) => {
      const key = blacklistRowKey(e, `entries[${i}]`);
      const values: Record<string, string> = {
        'base:status': e.status ?? BLACKLIST_DEFAULTS.status,
        'detail:updateTime': String(e.updateTime ?? this.#now()),
      };
      if (e.reason !== undefined) values['detail:reason'] = e.reason;
      return { row: key, values };
    });
    let batches = 0;
    for (let i = 0; i < rows.length; i += batch) {
      const part = rows.slice(i, i + batch);
      // filter first: a concurrent check must never miss a key that is already in HBase
      if (this.#shared) await this.#shared.addAll(part.map((r) => r.row));
      else this.#requireBloom().addAll(part.map((r) => r.row));
      await this.#store.mput(this.table, part);
      this.#bus?.publish(this.table, part.map((r) => r.row), this.#busListener);
      batches++;
    }
    return { imported: rows.length, batches };
  }

  /** Deletes entries. Their keys stay in the filter (false positives) until the next rebuild. */
  async removeFromBlacklist(keys: readonly BlacklistKey[]): Promise<void> {
    if (!Array.isArray(keys)) throw invalidType('keys', 'an array', keys);
    const rows = keys.map((k, i) => blacklistRowKey(k, `keys[${i}]`));
    for (let i = 0; i < rows.length; i += this.#batch) {
      const part = rows.slice(i, i + this.#batch);
      await this.#store.mdelete(this.table, part);
      this.#bus?.publish(this.table, part, this.#busListener);
    }
  }

  /** One boolean per key, in order. Keys that miss the Bloom filter never reach HBase. */
  async isBlacklisted(keys: readonly BlacklistKey[]): Promise<boolean[]> {
    const records = await this.lookup(keys);
    return records.map((r) => r !== null && r.status !== '0');
  }

  /** The stored record per key (null when absent), through the same Bloom gate. */
  async lookup(keys: readonly BlacklistKey[]): Promise<(BlacklistRecord | null)[]> {
    this.#requireStarted();
    if (!Array.isArray(keys)) throw invalidType('keys', 'an array', keys);
    const rows = keys.map((k, i) => blacklistRowKey(k, `keys[${i}]`));
    this.#stats.checks += rows.length;
    const out: (BlacklistRecord | null)[] = new Array(rows.length).fill(null);
    if (rows.length === 0) return out;
    let maybe: ArrayLike<number | boolean>;
    if (this.#shared) {
      try {
        maybe = await this.#shared.containsAll(rows);
      } catch {
        // unknown is not absent: without the filter's answer HBase decides for every key
        this.#stats.filterErrors++;
        maybe = new Uint8Array(rows.length).fill(1);
      }
    } else {
      maybe = this.#requireBloom().mightContainAll(rows);
    }
    const idx: number[] = [];
    for (let i = 0; i < rows.length; i++) if (maybe[i]) idx.push(i);
    this.#stats.bloomNegatives += rows.length - idx.length;
    for (let s = 0; s < idx.length; s += BLACKLIST_DEFAULTS.checkBatch) {
      const part = idx.slice(s, s + BLACKLIST_DEFAULTS.checkBatch);
      this.#stats.hbaseLookups += part.length;
      const got = await this.#store.mget(this.table, part.map((i) => rows[i]!));
      got.forEach((row, j) => {
        const i = part[j]!;
        const status = row?.columns['base:status'];
        if (!row || status === undefined) {
          this.#stats.falsePositives++;
          return;
        }
        const updateTime = row.columns['detail:updateTime'];
        out[i] = {
          ...parseRowKey(rows[i]!),
          status: status.toString(),
          reason: row.columns['detail:reason']?.toString(),
          updateTime: updateTime === undefined ? undefined : Number(updateTime.toString()),
        };
      });
    }
    return out;
  }

  #requireStarted(): void {
    if (!this.#started) throw new HashGateError(ErrorCodes.INVALID_ARG, 'Blacklist.start() must resolve before use');
  }

  #requireBloom(): SwappableBloom {
    if (!this.#bloom) throw new HashGateError(ErrorCodes.INVALID_ARG, 'Blacklist.start() must resolve before use');
    return this.#bloom;
  }

  async #build(): Promise<BloomFilter> {
    const f = BloomFilter.create({ expectedItems: this.#expectedItems, fpp: this.#fpp });
    let n = 0;
    const batch: string[] = [];
    for await (const key of this.#scanKeys(() => n++)) {
      batch.push(key);
      if (batch.length >= 4096) {
        f.addAll(batch);
        batch.length = 0;
      }
    }
    if (batch.length > 0) f.addAll(batch);
    this.#stats.lastRebuildKeys = n;
    return f;
  }

  async *#scanKeys(onKey: () => void): AsyncGenerator<string> {
    // only the status column: the filter needs keys, not details
    for await (const row of this.#store.scanIterator(this.table, { columns: ['base:status'], batchSize: 1000 })) {
      onKey();
      yield row.key.toString();
    }
  }
}
