// Behaviour history on HBase, one row per event, newest first within a user.
//
// Row key:  SS|userId|RRRRRRRRRRRRR|type|eventId
//   SS      salt, 2 hex digits: (bucketOf(userId, salts) + bucketOf(eventId, spread)) % salts.
//           The user's hash picks a home salt, and each user's events are spread over `spread`
//           consecutive salts, so neither many users nor one very active user writes into a
//           single region (pre-split the table on the salts: HBaseDdl ... -s 01,02,...).
//   RRR...  reversed timestamp, 13 digits: 9999999999999 - ts (ms). Ascending keys = newest first,
//           so a forward scan of one salt returns the user's events newest first, and a time range
//           is one contiguous key range.
//   type, eventId   make the key unique; eventId defaults to a random 12-hex id.
// Queries fan out over the user's `spread` salts (one scan each, in parallel) and merge the
// newest-first streams. userId and type may not contain '|'.
//
// Create the table with: HBaseDdl create user_behavior -f e:bloom=ROW -s 01,02,...,<salts-1>
import { randomBytes } from 'node:crypto';
import { HashGateError, ErrorCodes, checkInt, invalidType } from '../errors.js';
import { bucketOf } from '../hash/index.js';
import type { HBaseStore, HBaseRow } from '../hbase/client.js';

export const HISTORY_DEFAULTS = {
  table: 'user_behavior',
  /** salt buckets; pre-split the table on them */
  salts: 16,
  /** salts one user's events spread over (<= salts) */
  spread: 4,
  /** rows per mput */
  batch: 500,
  /** default and max rows a query returns */
  limit: 100,
  maxLimit: 10_000,
} as const;

export const HISTORY_FAMILY = 'e';
const MAX_TS = 9_999_999_999_999;
const SEP = '|';

export interface BehaviorEvent {
  userId: string;
  type: string;
  /** ms since epoch */
  ts: number;
  data?: string | Buffer;
  /** unique per (user, ts, type); default random */
  eventId?: string;
}

export interface StoredEvent {
  userId: string;
  type: string;
  ts: number;
  eventId: string;
  data: Buffer | undefined;
  rowKey: string;
}

export interface HistoryQuery {
  userId: string;
  type?: string;
  /** inclusive, ms */
  from?: number;
  /** exclusive, ms */
  to?: number;
  limit?: number;
}

export interface HistoryOptions {
  store: HBaseStore;
  table?: string;
  salts?: number;
  spread?: number;
  batch?: number;
}

/** The split keys for a table with `salts` salt buckets (every salt but the first). */
export function historySplitKeys(salts: number = HISTORY_DEFAULTS.salts): string[] {
  const keys: string[] = [];
  for (let s = 1; s < salts; s++) keys.push(saltHex(s));
  return keys;
}

function saltHex(s: number): string {
  return s.toString(16).padStart(2, '0');
}

function reversedTs(ts: number): string {
  return String(MAX_TS - ts).padStart(13, '0');
}

function checkPart(name: string, v: unknown): string {
  if (typeof v !== 'string' || v.length === 0) throw invalidType(name, 'a non-empty string', v);
  if (v.includes(SEP)) throw new HashGateError(ErrorCodes.INVALID_ARG, `${name} must not contain '${SEP}'`, { details: { name } });
  return v;
}

function checkTs(name: string, v: unknown): number {
  return checkInt(name, v, 0, MAX_TS);
}

export class BehaviorHistory {
  readonly table: string;
  readonly salts: number;
  readonly spread: number;
  readonly #store: HBaseStore;
  readonly #batch: number;

  constructor(options: HistoryOptions) {
    if (typeof options !== 'object' || options === null || typeof options.store?.scan !== 'function') {
      throw invalidType('options.store', 'an HBaseStore', options?.store);
    }
    this.#store = options.store;
    this.table = options.table ?? HISTORY_DEFAULTS.table;
    this.salts = checkInt('options.salts', options.salts ?? HISTORY_DEFAULTS.salts, 1, 256);
    this.spread = checkInt('options.spread', options.spread ?? Math.min(HISTORY_DEFAULTS.spread, this.salts), 1, this.salts);
    this.#batch = checkInt('options.batch', options.batch ?? HISTORY_DEFAULTS.batch, 1, 100_000);
  }

  /** Salts holding `userId`'s events, home salt first. */
  saltsOf(userId: string): number[] {
    const home = bucketOf(userId, this.salts);
    const out: number[] = [];
    for (let i = 0; i < this.spread; i++) out.push((home + i) % this.salts);
    return out;
  }

  rowKey(e: BehaviorEvent & { eventId: string }): string {
    const salt = (bucketOf(e.userId, this.salts) + bucketOf(e.eventId, this.spread)) % this.salts;
    return [saltHex(salt), e.userId, reversedTs(e.ts), e.type, e.eventId].join(SEP);
  }

  /** Writes events in batches; resolves with their row keys (in input order). */
  async appendEvents(events: readonly BehaviorEvent[]): Promise<string[]> {
    if (!Array.isArray(events)) throw invalidType('events', 'an array', events);
    const rows = events.map((e, i) => {
      if (typeof e !== 'object' || e === null) throw invalidType(`events[${i}]`, 'an object', e);
      const userId = checkPart(`events[${i}].userId`, e.userId);
      const type = checkPart(`events[${i}].type`, e.type);
      const ts = checkTs(`events[${i}].ts`, e.ts);
      const eventId = e.eventId === undefined ? randomBytes(6).toString('hex') : checkPart(`events[${i}].eventId`, e.eventId);
      const values: Record<string, string | Buffer> = { [`${HISTORY_FAMILY}:t`]: type };
      if (e.data !== undefined) values[`${HISTORY_FAMILY}:d`] = e.data;
      // cell timestamp = event time, so a family TTL ages events by when they happened
      return { row: this.rowKey({ userId, type, ts, eventId }), values, timestamp: ts };
    });
    for (let i = 0; i < rows.length; i += this.#batch) await this.#store.mput(this.table, rows.slice(i, i + this.#batch));
    return rows.map((r) => r.row);
  }

  /** A user's events, newest first; optionally one type and/or a [from, to) time range. */
  async query(q: HistoryQuery): Promise<StoredEvent[]> {
    if (typeof q !== 'object' || q === null) throw invalidType('query', 'an object', q);
    const userId = checkPart('query.userId', q.userId);
    const type = q.type === undefined ? undefined : checkPart('query.type', q.type);
    const limit = checkInt('query.limit', q.limit ?? HISTORY_DEFAULTS.limit, 1, HISTORY_DEFAULTS.maxLimit);
    const from = q.from === undefined ? 0 : checkTs('query.from', q.from);
    const to = q.to === undefined ? MAX_TS : checkTs('query.to', q.to);
    if (to <= from) return [];
    const perSalt = await Promise.all(this.saltsOf(userId).map(async (salt) => {
      const p = `${saltHex(salt)}${SEP}${userId}${SEP}`;
      // ts in [from, to)  <=>  reversed ts in [MAX-to+1, MAX-from]
      const startRow = p + reversedTs(to - 1);
      const stopRow = p + reversedTs(from) + String.fromCharCode(SEP.charCodeAt(0) + 1);
      const out: StoredEvent[] = [];
      // type is the key's 4th part: filter while streaming so `limit` counts matches only
      for await (const row of this.#store.scanIterator(this.table, { startRow, stopRow, batchSize: Math.min(limit, 1000) })) {
        const ev = parseEvent(row);
        if (!ev || (type !== undefined && ev.type !== type)) continue;
        out.push(ev);
        if (out.length >= limit) break;
      }
      return out;
    }));
    // k-way merge of newest-first lists (spread is small: concat + sort is as fast)
    const all = perSalt.flat();
    all.sort((a, b) => b.ts - a.ts || (a.rowKey < b.rowKey ? -1 : a.rowKey > b.rowKey ? 1 : 0));
    return all.slice(0, limit);
  }
}

function parseEvent(row: HBaseRow): StoredEvent | null {
  const key = row.key.toString();
  const parts = key.split(SEP);
  if (parts.length !== 5) return null;
  const [, userId, rts, type, eventId] = parts as [string, string, string, string, string];
  return { userId, type, ts: MAX_TS - Number(rts), eventId, data: row.columns[`${HISTORY_FAMILY}:d`], rowKey: key };
}
