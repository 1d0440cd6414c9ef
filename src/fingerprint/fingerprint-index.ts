// Device-fingerprint inverted index: attribute value -> set of device ids, with a
// local Bloom filter of indexed values in front so a query naming a never-seen value is answered
// without touching storage.
import type { Cluster, Redis } from 'ioredis';
import { checkInt, checkKnownKeys, checkNumber, invalidType, outOfRange, HashGateError, ErrorCodes } from '../errors.js';
import { MemoryIndexBackend } from './memory.js';
import { RedisIndexBackend } from './redis.js';
import { createValueGate, type ValueGate } from './value-gate.js';
import type { Attributes, IndexBackend, QueryOptions } from './types.js';
import { isSharedGate, type SharedGate } from '../bloom/shared-gate.js';
import { parseCoalesceOptions, type CoalesceOptions } from '../util/coalescer.js';

export const DEFAULTS = {
  keyPrefix: 'idx',
  /** Standalone: one partition (plain `idx:<attr>:<value>` keys). Cluster: see redis.ts for the trade-off. */
  shards: 1,
  clusterShards: 16,
  maxValueLength: 64,
  sinterThreshold: 4096,
  defaultLimit: 1000,
  maxLimit: 1_000_000,
  /** Attributes per device / terms per query: bounds Lua's unpack() and the script's arguments. */
  maxAttributes: 256,
  bloom: { expectedItems: 1_000_000, fpp: 0.001 },
} as const;

export interface FingerprintIndexOptions {
  /** ioredis client or Cluster; omitted = embedded in-memory backend. The caller owns the client. */
  redis?: Redis | Cluster;
  /** Custom storage (tests, other stores). Takes precedence over `redis`. */
  backend?: IndexBackend;
  keyPrefix?: string;
  /** Partitions (hash-tagged) for Redis; default 1 standalone, 16 on a Cluster. */
  shards?: number;
  /** Values longer than this (UTF-8 bytes) are stored under a murmur3_128 key. */
  maxValueLength?: number;
  defaultLimit?: number;
  /** Redis: smallest-set size up to which plain SINTER/SUNION runs; above it a Lua walk of the
   * smallest set stops at `limit` (default 4096). */
  sinterThreshold?: number;
  /** Redis: one round trip of GET raw + plain SINTER/SUNION instead of the query script; faster,
   * but no smallest-first early exit at `limit` (see RedisIndexBackendOptions). Default false. */
  directQueries?: boolean;
  /**
   * Local Bloom gate of indexed (attr, value) pairs, or false to disable. The gate only knows
   * values written through this instance or loaded by `rebuildGate()`: with several writers on
   * one Redis, use `sharedGate` instead (or call rebuildGate() after opening and disable the
   * local gate if other processes keep adding values this process must see immediately).
   */
  bloom?: false | { expectedItems?: number; fpp?: number };
  /** Inject a gate (anything with add/mightContain); overrides `bloom`. */
  gate?: ValueGate;
  /**
   * A gate every instance shares (src/bloom/shared-gate.ts: a Redis-held filter, or a
   * ReplicatedGate on the invalidation bus); overrides `gate` and `bloom`. Values written on any
   * instance pass it everywhere, so several writers need no per-process rebuildGate().
   */
  sharedGate?: SharedGate;
  /**
   * Redis: concurrent match/any calls merged into one script call per shard (`maxKeys` = query
   * terms per merged call, default 128), answered per caller exactly as if run one after
   * another; a put/remove first sends the queries issued before it. false: one script call per
   * query. Inside a HashGate the gate's `coalesce` option applies unless this one is set.
   */
  coalesce?: CoalesceOptions | false;
}

export interface IndexStats {
  /** Queries answered by the gate alone (no storage call). */
  gateShortCircuits: number;
  /** Query terms dropped from any() because the gate had never seen them. */
  gateDroppedTerms: number;
  backendQueries: number;
  writes: number;
}

const ATTR_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const gateKey = (attr: string, value: string): string => `${attr}\u0000${value}`;

function normalize(name: string, attrs: unknown, allowEmpty: boolean): Array<[string, string]> {
  if (attrs === null || typeof attrs !== 'object' || Array.isArray(attrs)) throw invalidType(name, 'an object of attribute values', attrs);
  const out: Array<[string, string]> = [];
  for (const [a, v] of Object.entries(attrs as Record<string, unknown>)) {
    if (!ATTR_RE.test(a)) throw outOfRange(`${name} attribute name`, 'matching /^[A-Za-z0-9_.-]{1,64}$/', a);
    if (typeof v === 'string') out.push([a, v]);
    else if (typeof v === 'number' || typeof v === 'boolean') out.push([a, String(v)]);
    else throw invalidType(`${name}.${a}`, 'a string, number or boolean', v);
  }
  if (!allowEmpty && out.length === 0) throw outOfRange(name, 'an object naming at least one attribute', attrs);
  if (out.length > DEFAULTS.maxAttributes) throw outOfRange(name, `at most ${DEFAULTS.maxAttributes} attributes`, out.length);
  return out;
}

function checkId(deviceId: unknown): string {
  if (typeof deviceId !== 'string' || deviceId.length === 0) throw invalidType('deviceId', 'a non-empty string', deviceId);
  return deviceId;
}

export class FingerprintIndex {
  readonly backend: IndexBackend;
  private readonly gate: ValueGate | undefined;
  private readonly shared: SharedGate | undefined;
  private readonly defaultLimit: number;
  private closed = false;
  private readonly st: IndexStats = { gateShortCircuits: 0, gateDroppedTerms: 0, backendQueries: 0, writes: 0 };

  constructor(options: FingerprintIndexOptions = {}) {
    if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options);
    checkKnownKeys('index', options, ['redis', 'backend', 'keyPrefix', 'shards', 'maxValueLength', 'defaultLimit', 'sinterThreshold', 'directQueries', 'bloom', 'gate', 'sharedGate', 'coalesce']);
    const coalesce = parseCoalesceOptions(options.coalesce, 'index.coalesce');
    if (options.bloom) checkKnownKeys('index.bloom', options.bloom, ['expectedItems', 'fpp']);
    const keyPrefix = options.keyPrefix ?? DEFAULTS.keyPrefix;
    if (typeof keyPrefix !== 'string' || !/^[A-Za-z0-9_.:-]{1,64}$/.test(keyPrefix)) {
      throw invalidType('index.keyPrefix', 'a string of [A-Za-z0-9_.:-], 1-64 chars', keyPrefix);
    }
    const maxValueLength = checkInt('index.maxValueLength', options.maxValueLength ?? DEFAULTS.maxValueLength, 1, 4096);
    this.defaultLimit = checkInt('index.defaultLimit', options.defaultLimit ?? DEFAULTS.defaultLimit, 1, DEFAULTS.maxLimit);
    const directQueries = options.directQueries ?? false;
    if (typeof directQueries !== 'boolean') throw invalidType('index.directQueries', 'a boolean', directQueries);
    if (options.backend) {
      this.backend = options.backend;
    } else if (options.redis) {
      const cluster = (options.redis as Cluster).isCluster === true;
      const shards = checkInt('index.shards', options.shards ?? (cluster ? DEFAULTS.clusterShards : DEFAULTS.shards), 1, 16384);
      const sinterThreshold = checkInt('index.sinterThreshold', options.sinterThreshold ?? DEFAULTS.sinterThreshold, 0);
      this.backend = new RedisIndexBackend({ client: options.redis, keyPrefix, shards, maxValueLength, sinterThreshold, directQueries, coalesce });
    } else {
      this.backend = new MemoryIndexBackend();
    }
    if (options.sharedGate !== undefined) {
      if (!isSharedGate(options.sharedGate)) throw invalidType('index.sharedGate', 'an object with addAll() and containsAll()', options.sharedGate);
      this.shared = options.sharedGate;
    } else if (options.gate) {
      if (typeof options.gate.add !== 'function' || typeof options.gate.mightContain !== 'function') {
        throw invalidType('index.gate', 'an object with add() and mightContain()', options.gate);
      }
      this.gate = options.gate;
    } else if (options.bloom !== false) {
      const b = options.bloom ?? {};
      if (b === null || typeof b !== 'object') throw invalidType('index.bloom', 'false or { expectedItems, fpp }', b);
      const expectedItems = checkInt('index.bloom.expectedItems', b.expectedItems ?? DEFAULTS.bloom.expectedItems, 1);
      const fpp = checkNumber('index.bloom.fpp', b.fpp ?? DEFAULTS.bloom.fpp, 0, 1, true);
      this.gate = createValueGate({ expectedItems, fpp });
    }
  }

  private live(): void {
    if (this.closed) throw new HashGateError(ErrorCodes.CLOSED, 'FingerprintIndex is closed');
  }

  private limitOf(opts: QueryOptions | undefined): number {
    if (opts === undefined) return this.defaultLimit;
    if (opts === null || typeof opts !== 'object') throw invalidType('options', 'an object', opts);
    return checkInt('options.limit', opts.limit ?? this.defaultLimit, 1, DEFAULTS.maxLimit);
  }

  /** Makes `attrs` the device's complete attribute set (attributes not named are dropped). */
  async put(deviceId: string, attrs: Attributes): Promise<void> {
    return this.write(deviceId, attrs, 'replace');
  }

  /** Replaces the named attributes' values and keeps the device's other attributes. */
  async update(deviceId: string, attrs: Attributes): Promise<void> {
    return this.write(deviceId, attrs, 'merge');
  }

  private async write(deviceId: string, attrs: Attributes, mode: 'replace' | 'merge'): Promise<void> {
    this.live();
    const id = checkId(deviceId);
    const terms = normalize('attrs', attrs, mode === 'replace');
    // gate first: a crash between the two then costs a false positive, never a false negative
    if (this.gate) for (const [a, v] of terms) this.gate.add(gateKey(a, v));
    if (this.shared) await this.shared.addAll(terms.map(([a, v]) => gateKey(a, v)));
    this.st.writes++;
    await this.backend.put(id, terms, mode);
  }

  /** Removes the device from every attribute set. Resolves true if it was indexed. */
  async remove(deviceId: string): Promise<boolean> {
    this.live();
    return this.backend.remove(checkId(deviceId));
  }

  async get(deviceId: string): Promise<Record<string, string> | undefined> {
    this.live();
    return this.backend.get(checkId(deviceId));
  }

  /** Devices having every given attribute value (intersection, smallest set first), at most `limit`. */
  async match(query: Attributes, opts?: QueryOptions): Promise<string[]> {
    this.live();
    const terms = normalize('query', query, false);
    const limit = this.limitOf(opts);
    if (this.gate) {
      for (const [a, v] of terms) {
        if (!this.gate.mightContain(gateKey(a, v))) {
          this.st.gateShortCircuits++;
          return [];
        }
      }
    } else if (this.shared) {
      const has = await this.shared.containsAll(terms.map(([a, v]) => gateKey(a, v)));
      if (has.includes(0)) {
        this.st.gateShortCircuits++;
        return [];
      }
    }
    this.st.backendQueries++;
    return this.backend.match(terms, limit);
  }

  /** Devices having at least one of the given attribute values (union), at most `limit`. */
  async any(query: Attributes, opts?: QueryOptions): Promise<string[]> {
    this.live();
    let terms = normalize('query', query, false);
    const limit = this.limitOf(opts);
    if (this.gate || this.shared) {
      const before = terms.length;
      if (this.gate) terms = terms.filter(([a, v]) => this.gate!.mightContain(gateKey(a, v)));
      else {
        const has = await this.shared!.containsAll(terms.map(([a, v]) => gateKey(a, v)));
        terms = terms.filter((_, i) => has[i] === 1);
      }
      this.st.gateDroppedTerms += before - terms.length;
      if (terms.length === 0) {
        this.st.gateShortCircuits++;
        return [];
      }
    }
    this.st.backendQueries++;
    return this.backend.any(terms, limit);
  }

  /** Loads every indexed value from storage into the gate (after opening on existing data). */
  async rebuildGate(): Promise<number> {
    this.live();
    const shared = this.shared;
    if (shared) {
      // batches: one shared-gate call per 4096 values, not one per value
      const load = (k: string[]): Promise<unknown> => (shared.loadAll ? shared.loadAll(k) : shared.addAll(k));
      let batch: string[] = [];
      const pending: Promise<unknown>[] = [];
      let total = 0;
      await this.backend.forEachValue((a, v) => {
        batch.push(gateKey(a, v));
        total++;
        if (batch.length === 4096) {
          pending.push(load(batch));
          batch = [];
        }
      });
      if (batch.length) pending.push(load(batch));
      await Promise.all(pending);
      return total;
    }
    if (!this.gate) return 0;
    let n = 0;
    await this.backend.forEachValue((a, v) => {
      this.gate!.add(gateKey(a, v));
      n++;
    });
    return n;
  }

  stats(): IndexStats {
    return { ...this.st };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.backend.close();
  }
}
