// Hot/cold separation: values live in Redis with a TTL (7 days by default) and reach the
// cold store (HBase, 90 days through its column-family TTL) either on write (dual-write) or when
// migrateCold() finds them close to expiry. Migration is at-least-once and idempotent: cold puts
// are keyed and carry the original timestamp, the archived mark is a compare-and-set on the exact
// bytes read, a SCAN cursor checkpoint makes runs resumable, and a token lock keeps runs single.
// On a Redis Cluster the pass walks the masters one after another in address order (each has its
// own SCAN cursor; the checkpoint names the master and its cursor), reads and marks through that
// master's own connection, one single-key mark script per key since keys of a batch span slots.
import type { Cluster, Redis } from 'ioredis';
import { ErrorCodes, HashGateError, checkInt, checkOneOf, invalidType, outOfRange } from '../errors.js';
import {
  FLAG_ARCHIVED,
  FLAGS_OFFSET,
  encodeValue,
  readEnvelope,
  wrapEnvelope,
} from '../cache/codec.js';
import { checkTable, type TieredCache } from '../cache/tiered-cache.js';
import { CACHE_DEFAULTS } from '../cache/options.js';
import type { BloomWritable, CacheValue, ColdEntry, ColdStore } from '../cache/types.js';
import type { InvalidationBus } from '../cache/bus.js';
import { setMany } from '../cache/redis-tier.js';
import { isCluster } from '../redis/client.js';
// the Redis layer's owner-token lock (SET NX PX; compare-and-refresh/-release in Lua)
import { RedisLock } from '../redis/lock.js';
import { LuaScript, defineScripts, queueScript, runScript } from '../redis/scripts.js';
import { hashTagOf, redissonSuffixKey } from '../bloom/redisson.js';

export const TIERING_DEFAULTS = {
  mode: 'migrate',
  hotTtlSeconds: 7 * 24 * 3600,
  prefix: CACHE_DEFAULTS.redis.prefix,
  thresholdMs: 3_600_000,
  batchSize: 500,
  lockKey: 'hg:migrate:lock',
  cursorKey: 'hg:migrate:cursor',
  lockTtlMs: 60_000,
  maxWriteBatch: 10_000,
} as const;

export type TieringMode = 'migrate' | 'dual-write';

export interface HotColdOptions {
  /** Standalone or Cluster (migrateCold() then scans every master; see lockKey). */
  redis: Redis | Cluster;
  /** Needed for dual-write and migrateCold(). */
  cold?: ColdStore;
  /** 'migrate' (default): Redis only, migrateCold() archives later. 'dual-write': cold too, on write. */
  mode?: TieringMode;
  hotTtlSeconds?: number;
  /** Must match the TieredCache's redis.prefix. Default 'hg:v:'. */
  prefix?: string;
  /** Local copies in this cache are invalidated on write (and, if it has a bus, fleet-wide). */
  cache?: TieredCache;
  /** Writers without a cache (or whose cache has no bus): written keys are published here. */
  bus?: InvalidationBus;
  /** Written keys are added so a Bloom gate in front of the cache lets them through. */
  bloom?: BloomWritable | ((table: string) => BloomWritable | undefined);
  lockKey?: string;
  /**
   * The checkpoint. On a Cluster it must share the lock key's slot (the checkpoint script writes
   * both); left unset there it is `{lockKey}:cursor`.
   */
  cursorKey?: string;
  now?: () => number;
}

export interface WriteEntry {
  key: string;
  value: CacheValue;
  /** Original event time (epoch ms); defaults to now(). */
  ts?: number;
}

export interface WriteResult {
  written: number;
  coldWritten: number;
  /** Dual-write only: the cold write failed; the values stay unarchived so migrateCold() retries them. */
  coldError?: { code: string; message: string };
}

export interface MigrateOptions {
  /** Keys whose remaining TTL is below this are archived. Default 1 h. */
  thresholdMs?: number;
  /** SCAN COUNT and max keys per cold mput. Default 500. */
  batchSize?: number;
  /** Stop (checkpointed, resumable) after this many SCAN batches. Default unlimited. */
  maxBatches?: number;
  /** Only these tables. Default all under the prefix. */
  tables?: string[];
  /** Continue from the saved cursor (default true); false starts a fresh pass. */
  resume?: boolean;
  lockTtlMs?: number;
  /** Count candidates without writing anything. */
  dryRun?: boolean;
  onBatch?: (progress: MigrateResult) => void;
  /** Stop after the current batch (its checkpoint is saved, so the next run resumes). */
  signal?: AbortSignal;
}

export interface MigrateResult {
  /** False when another run holds the lock; nothing was done. */
  acquired: boolean;
  /** True when the SCAN pass reached cursor 0 (the checkpoint is cleared). */
  complete: boolean;
  /** SCAN cursor; on a Cluster `host:port/cursor` of the master being scanned ('0' when complete). */
  resumedFrom: string;
  cursor: string;
  batches: number;
  scanned: number;
  candidates: number;
  migrated: number;
  alreadyArchived: number;
  noTtl: number;
  foreign: number;
  /** Values rewritten between read and mark; the new value is archived by a later pass. */
  raced: number;
  lockLost: boolean;
  /** Stopped early through options.signal. */
  aborted: boolean;
  dryRun: boolean;
}

const MARK = new LuaScript(`local n = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i] then
    redis.call('SETRANGE', KEYS[i], ${FLAGS_OFFSET}, ARGV[#KEYS + i]); n = n + 1
  end
end
return n`);

const CHECKPOINT = new LuaScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if ARGV[3] == '' then redis.call('DEL', KEYS[2]) else redis.call('SET', KEYS[2], ARGV[3]) end
return 1`);

const globEscape = (s: string): string => s.replace(/[*?[\]\\]/g, '\\$&');

export class HotColdStore {
  readonly #redis: Redis | Cluster;
  readonly #cold: ColdStore | undefined;
  readonly #mode: TieringMode;
  readonly #ttlMs: number;
  readonly #prefix: string;
  readonly #cache: TieredCache | undefined;
  readonly #bus: InvalidationBus | undefined;
  readonly #bloom: HotColdOptions['bloom'];
  readonly #lockKey: string;
  readonly #cursorKey: string;
  readonly #cursorKeyGiven: boolean;
  readonly #now: () => number;

  constructor(opts: HotColdOptions) {
    if (opts === null || typeof opts !== 'object') throw invalidType('options', 'an object', opts);
    if (!opts.redis || typeof opts.redis.set !== 'function') throw invalidType('redis', 'an ioredis client', opts.redis);
    this.#redis = opts.redis;
    this.#cold = opts.cold;
    this.#mode = checkOneOf('mode', opts.mode ?? TIERING_DEFAULTS.mode, ['migrate', 'dual-write'] as const);
    if (this.#mode === 'dual-write' && !this.#cold) throw invalidType('cold', "a ColdStore when mode is 'dual-write'", opts.cold);
    this.#ttlMs = checkInt('hotTtlSeconds', opts.hotTtlSeconds ?? TIERING_DEFAULTS.hotTtlSeconds, 1) * 1000;
    this.#prefix = opts.prefix ?? TIERING_DEFAULTS.prefix;
    if (typeof this.#prefix !== 'string') throw invalidType('prefix', 'a string', opts.prefix);
    this.#cache = opts.cache;
    if (opts.bus !== undefined && typeof opts.bus?.publish !== 'function') throw invalidType('bus', 'an InvalidationBus', opts.bus);
    // the cache's invalidate() already publishes on its own bus: publish once, not twice
    this.#bus = opts.bus !== undefined && opts.bus !== opts.cache?.bus ? opts.bus : undefined;
    this.#bloom = opts.bloom;
    this.#lockKey = opts.lockKey ?? TIERING_DEFAULTS.lockKey;
    this.#cursorKey = opts.cursorKey ?? TIERING_DEFAULTS.cursorKey;
    this.#cursorKeyGiven = opts.cursorKey !== undefined;
    this.#now = opts.now ?? Date.now;
  }

  redisKey(table: string, key: string): string {
    return this.#prefix + table + ':' + key;
  }

  async write(table: string, entries: readonly WriteEntry[], opts: { ttlSeconds?: number } = {}): Promise<WriteResult> {
    checkTable(table);
    if (!Array.isArray(entries)) throw invalidType('entries', 'an array', entries);
    if (entries.length > TIERING_DEFAULTS.maxWriteBatch) {
      throw outOfRange('entries.length', `at most ${TIERING_DEFAULTS.maxWriteBatch} per write`, entries.length);
    }
    const ttlMs = opts.ttlSeconds === undefined ? this.#ttlMs : checkInt('ttlSeconds', opts.ttlSeconds, 1) * 1000;
    const now = this.#now();
    const cold: ColdEntry[] = entries.map((e, i) => {
      if (typeof e?.key !== 'string' || e.key.length === 0) throw invalidType(`entries[${i}].key`, 'a non-empty string', e?.key);
      const ts = e.ts ?? now;
      if (typeof ts !== 'number' || !Number.isFinite(ts)) throw invalidType(`entries[${i}].ts`, 'a finite number', e.ts);
      return { key: e.key, value: encodeValue(e.value), ts };
    });
    const result: WriteResult = { written: 0, coldWritten: 0 };
    let flags = 0;
    if (this.#mode === 'dual-write' && cold.length > 0) {
      try {
        await this.#cold!.mput(table, cold);
        result.coldWritten = cold.length;
        flags = FLAG_ARCHIVED;
      } catch (e) {
        result.coldError = {
          code: typeof (e as { code?: unknown })?.code === 'string' ? (e as { code: string }).code : ErrorCodes.HBASE_UNAVAILABLE,
          message: e instanceof Error ? e.message : String(e),
        };
      }
    }
    const bloom = typeof this.#bloom === 'function' ? this.#bloom(table) : this.#bloom;
    // gate first: a lookup racing this write must never be told "absent" for a key already stored
    if (bloom) for (const c of cold) bloom.add(c.key);
    try {
      await setMany(this.#redis, cold.map((c) => ({ key: this.redisKey(table, c.key), value: wrapEnvelope(c.value, c.ts, flags), px: ttlMs })));
    } catch (cause) {
      throw new HashGateError(ErrorCodes.STORE, 'redis write failed', { cause });
    } finally {
      // also after a partial failure (a Cluster master down): the keys that did land must not
      // stay stale in any local tier; dropping the others too costs one reload
      if (this.#cache !== undefined || this.#bus !== undefined) {
        const keys = cold.map((c) => c.key);
        this.#cache?.invalidate(table, keys);
        this.#bus?.publish(table, keys);
      }
    }
    result.written = cold.length;
    return result;
  }

  async migrateCold(opts: MigrateOptions = {}): Promise<MigrateResult> {
    const thresholdMs = checkInt('thresholdMs', opts.thresholdMs ?? TIERING_DEFAULTS.thresholdMs, 1);
    const batchSize = checkInt('batchSize', opts.batchSize ?? TIERING_DEFAULTS.batchSize, 1, 100_000);
    const maxBatches = opts.maxBatches === undefined ? Infinity : checkInt('maxBatches', opts.maxBatches, 1);
    const lockTtlMs = checkInt('lockTtlMs', opts.lockTtlMs ?? TIERING_DEFAULTS.lockTtlMs, 100);
    const dryRun = opts.dryRun === true;
    const tables = opts.tables?.map((t, i) => checkTable(t, `tables[${i}]`));
    const tableSet = tables ? new Set(tables) : undefined;
    const cold = this.#cold;
    if (!cold && !dryRun) throw invalidType('cold', 'a ColdStore for migrateCold()', cold);
    const match =
      tables?.length === 1 ? globEscape(this.#prefix + tables[0] + ':') + '*' : globEscape(this.#prefix) + '*';

    const r: MigrateResult = {
      acquired: false, complete: false, resumedFrom: '0', cursor: '0', batches: 0, scanned: 0, candidates: 0,
      migrated: 0, alreadyArchived: 0, noTtl: 0, foreign: 0, raced: 0, lockLost: false, aborted: false, dryRun,
    };
    const client = this.#redis;
    const cluster = isCluster(client);
    let cursorKey = this.#cursorKey;
    if (cluster && hashTagOf(cursorKey) !== hashTagOf(this.#lockKey)) {
      if (this.#cursorKeyGiven) {
        throw new HashGateError(ErrorCodes.INVALID_OPTION, 'cursorKey must share the cluster slot of lockKey (use one {tag} in both)', { details: { name: 'cursorKey' } });
      }
      cursorKey = redissonSuffixKey(this.#lockKey, 'cursor');
    }
    const lock = await RedisLock.acquire(client, this.#lockKey, lockTtlMs);
    if (lock === undefined) return r;
    r.acquired = true;
    try {
      // one SCAN source per master, in address order (known once the lock's SET connected)
      const sources: Array<{ addr: string; node: Redis }> = cluster
        ? client.nodes('master').map((node) => ({ addr: `${node.options.host ?? ''}:${node.options.port ?? ''}`, node })).sort((a, b) => (a.addr < b.addr ? -1 : a.addr > b.addr ? 1 : 0))
        : [{ addr: '', node: client }];
      let si = 0;
      let cursor = '0';
      if (opts.resume !== false) {
        const saved = await client.get(cursorKey);
        if (saved) {
          try {
            const cp = JSON.parse(saved) as { match?: unknown; cursor?: unknown; node?: unknown };
            if (cp.match === match && typeof cp.cursor === 'string') {
              if (!cluster) cursor = cp.cursor;
              else if (typeof cp.node === 'string') {
                // masters before the saved one are done; a master that moved starts over (idempotent)
                si = Math.max(0, sources.findIndex((x) => x.addr >= (cp.node as string)));
                if (sources[si]?.addr === cp.node) cursor = cp.cursor;
              }
            }
          } catch {
            // an unreadable checkpoint only costs a fresh pass
          }
        }
      }
      const position = (): string => (si >= sources.length ? '0' : cluster ? `${sources[si]!.addr}/${cursor}` : cursor);
      r.resumedFrom = position();
      while (si < sources.length) {
        const src = sources[si]!;
        const [next, keys] = await src.node.scan(cursor, 'MATCH', match, 'COUNT', batchSize);
        r.batches++;
        r.scanned += keys.length;
        await this.#migrateBatch(src.node, cluster, keys, thresholdMs, batchSize, tableSet, dryRun, r);
        cursor = next;
        if (cursor === '0') si++;
        r.cursor = position();
        if (!dryRun) {
          const cp = si >= sources.length ? '' : JSON.stringify(cluster ? { match, node: sources[si]!.addr, cursor } : { match, cursor });
          const ok = await runScript(client, CHECKPOINT, 2, [this.#lockKey, cursorKey, lock.token, String(lockTtlMs), cp]);
          if (ok !== 1) {
            r.lockLost = true;
            break;
          }
        }
        opts.onBatch?.(r);
        if (opts.signal?.aborted) {
          r.aborted = true;
          break;
        }
        if (r.batches >= maxBatches) break;
      }
      r.complete = si >= sources.length && !r.lockLost;
      return r;
    } finally {
      if (!r.lockLost) await lock.release().catch(() => false);
    }
  }

  /** `node`: the connection the keys were scanned on (the client itself, or one Cluster master). */
  async #migrateBatch(
    node: Redis,
    cluster: boolean,
    keys: string[],
    thresholdMs: number,
    batchSize: number,
    tableSet: Set<string> | undefined,
    dryRun: boolean,
    r: MigrateResult,
  ): Promise<void> {
    if (keys.length === 0) return;
    const pipe = node.pipeline();
    for (const k of keys) pipe.pttl(k).getBuffer(k);
    const res = (await pipe.exec()) ?? [];
    const byTable = new Map<string, { keys: string[]; raw: Buffer[]; entries: ColdEntry[] }>();
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      const [e1, pttl] = res[2 * i] ?? [];
      const [e2, raw] = res[2 * i + 1] ?? [];
      if (e1 || e2) throw new HashGateError(ErrorCodes.STORE, 'redis read failed during migration', { cause: e1 ?? e2 });
      const sep = k.indexOf(':', this.#prefix.length);
      const table = sep > this.#prefix.length ? k.slice(this.#prefix.length, sep) : '';
      const env = Buffer.isBuffer(raw) ? readEnvelope(raw) : undefined;
      if (typeof pttl !== 'number' || pttl === -2) continue; // expired between SCAN and read
      if (!env || table === '' || (tableSet && !tableSet.has(table))) {
        r.foreign++;
        continue;
      }
      if (pttl === -1) {
        r.noTtl++;
        continue;
      }
      if (pttl >= thresholdMs) continue;
      if ((env.flags & FLAG_ARCHIVED) !== 0) {
        r.alreadyArchived++;
        continue;
      }
      r.candidates++;
      let g = byTable.get(table);
      if (!g) byTable.set(table, (g = { keys: [], raw: [], entries: [] }));
      g.keys.push(k);
      g.raw.push(raw as Buffer);
      g.entries.push({ key: k.slice(sep + 1), value: Buffer.from(env.payload), ts: env.ts });
    }
    if (dryRun) return;
    for (const [table, g] of byTable) {
      for (let off = 0; off < g.entries.length; off += batchSize) {
        const end = Math.min(g.entries.length, off + batchSize);
        try {
          await this.#cold!.mput(table, g.entries.slice(off, end));
        } catch (cause) {
          const code = typeof (cause as { code?: unknown })?.code === 'string' && String((cause as { code: string }).code).startsWith('HG_ERR_')
            ? ((cause as { code: string }).code as typeof ErrorCodes.HBASE)
            : ErrorCodes.HBASE_UNAVAILABLE;
          throw new HashGateError(code, `cold write failed while migrating table ${table}`, {
            cause,
            details: { table, migratedSoFar: r.migrated },
          });
        }
        const ks = g.keys.slice(off, end);
        const flagBytes = g.raw.slice(off, end).map((b) => Buffer.of(b[FLAGS_OFFSET]! | FLAG_ARCHIVED));
        const raws = g.raw.slice(off, end);
        let marked = 0;
        if (!cluster) marked = (await runScript(node, MARK, ks.length, [...ks, ...raws, ...flagBytes])) as number;
        else {
          // keys of one master span many slots: one single-key mark per key, pipelined
          defineScripts(node, MARK);
          const mp = node.pipeline();
          for (let i = 0; i < ks.length; i++) queueScript(mp, MARK, 1, [ks[i]!, raws[i]!, flagBytes[i]!]);
          for (const [err, n] of (await mp.exec()) ?? []) {
            if (err) throw new HashGateError(ErrorCodes.STORE, 'redis archive mark failed during migration', { cause: err });
            marked += Number(n);
          }
        }
        r.migrated += end - off;
        r.raced += end - off - marked;
      }
    }
  }
}
