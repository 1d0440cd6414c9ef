// RedisBloom: a Bloom filter held in Redis that Redisson's RBloomFilter (StringCodec, or
// ByteArrayCodec for byte keys) reads and writes too: same keys, sizing, config strings, hash and
// bit indexes. Batches are hashed here and sent as one script call per chunk of `maxBatch` keys
// (chunks pipelined), each checking the stored config atomically with its bit reads or writes.
//
// `layout: 'guava'` holds hashgate's own BloomFilter bits instead (redis-guava.ts): same scripts,
// Guava indexes, config under `{name}:hg:guava`, so Redisson refuses it rather than misread it and
// a RedisBloomReplica loads it straight into a BloomFilter.
//
// Differences from Redisson, on purpose: `containsAll` on a filter whose config changed or
// vanished rejects (Redisson answers false, a silent false negative); `tryInit` adopts the stored
// shape when the filter already exists (Redisson keeps its own computed shape and then fails every
// add with "config has been changed").
import type { Cluster, Redis } from 'ioredis';
import { ErrorCodes, HashGateError, HashGateTypeError, checkInt, checkNumber, invalidType } from '../errors.js';
import {
  javaDoubleToString,
  javaLongToString,
  redissonConfigKey,
  redissonContainsAll,
  redissonIndexBlob,
  redissonKeysShareSlot,
  redissonShape,
  redissonSuffixKey,
} from './redisson.js';
import { defineScripts, type Scripted } from './redis-scripts.js';
import { guavaConfigKey, guavaContainsAll, guavaIndexBlob, guavaRedisShape } from './redis-guava.js';

/** Bit layout of a Redis-held filter: Redisson's RBloomFilter, or hashgate's BloomFilter (Guava). */
export type RedisBloomLayout = 'redisson' | 'guava';

export type RedisBloomKey = string | Uint8Array;

export const REDIS_BLOOM_DEFAULTS = {
  /** keys per script call: bounds the request size and how long one call holds Redis */
  maxBatch: 8192,
  /** script calls of one batch in flight at once (bounds client memory) */
  maxInFlight: 4,
  /**
   * Read the whole bitmap once per call when its size in bytes is at most this many times the
   * call's probes (keys * k): below that one copy costs less than a GETBIT per probe.
   */
  snapshotBytesPerProbe: 64,
  /**
   * containsAll fetches the bitmap (with its config, in one MULTI) and tests bits here when the
   * bitmap is at most this many bytes per probe of the whole call: about what the call's bit
   * indexes would cost on the wire anyway (4 bytes each), and no Lua time per probe.
   */
  clientSnapshotBytesPerProbe: 4,
  /** change-stream length kept for replicas when publishing (a replica further behind resyncs) */
  publishMaxLen: 10_000,
} as const;

export interface RedisBloomOptions {
  /** ioredis client (standalone or Cluster); not closed by RedisBloom. */
  redis: Redis | Cluster;
  /** Redis key of the bitmap, as given to Redisson's getBloomFilter(name). */
  name: string;
  /**
   * 'redisson' (default): Redisson's RBloomFilter bits and config. 'guava': hashgate's BloomFilter
   * bits (Guava sizing and indexes, seed 0), byte for byte as BloomFilter memory, for replicas that
   * attach a BloomFilter without conversion; not readable by Redisson.
   */
  layout?: RedisBloomLayout;
  /** Sizing for tryInit(); ignored when the filter already exists. */
  expectedItems?: number;
  fpp?: number;
  maxBatch?: number;
  maxInFlight?: number;
  /** 0 disables the whole-bitmap read mode; Infinity forces it. */
  snapshotBytesPerProbe?: number;
  /** 0 disables reading the bitmap into the client for large containsAll batches; Infinity forces it. */
  clientSnapshotBytesPerProbe?: number;
  /**
   * Append every add that changed bits to the filter's change stream, for RedisBloomReplica
   * instances (true, or { maxLen } to bound the stream; default about 10000 entries).
   */
  publish?: boolean | { maxLen?: number };
}

export interface RedisBloomConfig {
  size: number;
  hashIterations: number;
  /** As stored (absent when another writer did not store it). */
  expectedInsertions: number | undefined;
  falseProbability: number | undefined;
}

interface PendingChecks {
  write: boolean;
  keys: RedisBloomKey[];
  settle: Array<{ resolve(v: boolean): void; reject(e: unknown): void }>;
}

function parseIntField(v: string | null | undefined): number | undefined {
  if (v === null || v === undefined || !/^\d+$/.test(v)) return undefined;
  return Number(v);
}

export class RedisBloom {
  readonly name: string;
  readonly configKey: string;
  readonly layout: RedisBloomLayout;
  readonly #redis: Redis | Cluster;
  readonly #s: Scripted;
  readonly #expectedItems: number | undefined;
  readonly #fpp: number | undefined;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  readonly #snapshotFactor: number;
  readonly #clientFactor: number;
  readonly #publishMaxLen: number;
  /** Change stream and its sequence counter (replicas read them). */
  readonly streamKey: string;
  readonly seqKey: string;
  readonly metaKey: string;
  #size = 0;
  #k = 0;
  #pending: PendingChecks | undefined;
  #pendingAdds: PendingChecks | undefined;

  private constructor(o: RedisBloomOptions) {
    if (typeof o !== 'object' || o === null) throw invalidType('options', 'an object', o);
    if (typeof o.name !== 'string' || o.name.length === 0) throw invalidType('options.name', 'a non-empty string', o.name);
    if (typeof o.redis !== 'object' || o.redis === null) throw invalidType('options.redis', 'an ioredis Redis or Cluster client', o.redis);
    if ((o.redis as Cluster).isCluster === true && !redissonKeysShareSlot(o.name)) {
      throw new HashGateTypeError(
        ErrorCodes.INVALID_OPTION,
        `options.name puts the bitmap and ${redissonConfigKey(o.name)} in different cluster slots (a '{' without a non-empty '{tag}')`,
        { name: 'options.name' },
      );
    }
    this.name = o.name;
    if (o.layout !== undefined && o.layout !== 'redisson' && o.layout !== 'guava') throw invalidType('options.layout', "'redisson' or 'guava'", o.layout);
    this.layout = o.layout ?? 'redisson';
    this.configKey = this.layout === 'guava' ? guavaConfigKey(o.name) : redissonConfigKey(o.name);
    this.#redis = o.redis;
    this.#s = defineScripts(o.redis);
    this.#expectedItems = o.expectedItems === undefined ? undefined : checkInt('options.expectedItems', o.expectedItems, 1);
    this.#fpp = o.fpp === undefined ? undefined : checkNumber('options.fpp', o.fpp, 0, 1, true);
    if (this.#expectedItems !== undefined && this.#fpp !== undefined) this.#shape(); // validate early
    this.#maxBatch = checkInt('options.maxBatch', o.maxBatch ?? REDIS_BLOOM_DEFAULTS.maxBatch, 1, 100_000);
    this.#maxInFlight = checkInt('options.maxInFlight', o.maxInFlight ?? REDIS_BLOOM_DEFAULTS.maxInFlight, 1, 64);
    const f = o.snapshotBytesPerProbe ?? REDIS_BLOOM_DEFAULTS.snapshotBytesPerProbe;
    if (typeof f !== 'number' || Number.isNaN(f) || f < 0) throw invalidType('options.snapshotBytesPerProbe', 'a number >= 0', f);
    this.#snapshotFactor = f;
    const cf = o.clientSnapshotBytesPerProbe ?? REDIS_BLOOM_DEFAULTS.clientSnapshotBytesPerProbe;
    if (typeof cf !== 'number' || Number.isNaN(cf) || cf < 0) throw invalidType('options.clientSnapshotBytesPerProbe', 'a number >= 0', cf);
    this.#clientFactor = cf;
    this.streamKey = redissonSuffixKey(o.name, 'hg:changes');
    this.seqKey = redissonSuffixKey(o.name, 'hg:seq');
    this.metaKey = redissonSuffixKey(o.name, 'hg:meta');
    const pub = o.publish;
    if (pub === undefined || pub === false) this.#publishMaxLen = 0;
    else if (pub === true) this.#publishMaxLen = REDIS_BLOOM_DEFAULTS.publishMaxLen;
    else if (typeof pub === 'object' && pub !== null) {
      this.#publishMaxLen = checkInt('options.publish.maxLen', pub.maxLen ?? REDIS_BLOOM_DEFAULTS.publishMaxLen, 1, 10_000_000);
    } else throw invalidType('options.publish', 'a boolean or { maxLen }', pub);
  }

  /** Validates options and reads the stored config if the filter exists (tryInit() creates it). */
  static async open(options: RedisBloomOptions): Promise<RedisBloom> {
    const b = new RedisBloom(options);
    await b.reload().catch((err: unknown) => {
      if (!(err instanceof HashGateError && err.code === ErrorCodes.BLOOM_NOT_INITIALIZED)) throw err;
    });
    return b;
  }

  /** The shape this client hashes for (0/0 until the config has been read). */
  get size(): number {
    return this.#size;
  }

  get hashIterations(): number {
    return this.#k;
  }

  /**
   * Creates the config from options.expectedItems/fpp unless it already exists, exactly as
   * Redisson's tryInit does; resolves true when this call created it. Either way the client then
   * uses the stored shape (the existing config wins).
   */
  async tryInit(): Promise<boolean> {
    if (this.#expectedItems === undefined || this.#fpp === undefined) {
      throw invalidType('options.expectedItems and options.fpp', 'numbers (tryInit needs a size)', this.#expectedItems ?? this.#fpp);
    }
    const { size, hashIterations } = this.#shape();
    // the other layout's config on this name means its bitmap holds bits this client would misread
    const other = this.layout === 'guava' ? redissonConfigKey(this.name) : guavaConfigKey(this.name);
    if ((await this.#call(() => this.#redis.exists(other))) === 1) {
      throw new HashGateError(
        ErrorCodes.BLOOM_CONFIG_CHANGED,
        `RedisBloom ${this.name}: the filter exists in the ${this.layout === 'guava' ? 'redisson' : 'guava'} layout (config ${other}); open it with that layout`,
        { details: { name: this.name, layout: this.layout } },
      );
    }
    const [created, s, k] = await this.#call(() =>
      this.#s.hgBloomTryInit(this.configKey, javaLongToString(size), String(hashIterations), javaLongToString(this.#expectedItems!), javaDoubleToString(this.#fpp!)),
    );
    this.#adopt(s, k);
    return Number(created) === 1;
  }

  #shape(): { size: number; hashIterations: number } {
    if (this.layout === 'redisson') return redissonShape(this.#expectedItems!, this.#fpp!);
    const g = guavaRedisShape(this.#expectedItems!, this.#fpp!);
    return { size: g.bitSize, hashIterations: g.hashFunctions };
  }

  /** Re-reads the stored config (after HG_ERR_BLOOM_CONFIG_CHANGED, when the new shape is wanted). */
  async reload(): Promise<RedisBloomConfig> {
    const c = await this.config();
    if (c === null) throw this.#notInitialized();
    this.#size = c.size;
    this.#k = c.hashIterations;
    return c;
  }

  /** The stored config, or null when the filter does not exist. */
  async config(): Promise<RedisBloomConfig | null> {
    const [size, k, n, p] = await this.#call(() => this.#redis.hmget(this.configKey, 'size', 'hashIterations', 'expectedInsertions', 'falseProbability'));
    const s = parseIntField(size);
    const h = parseIntField(k);
    if (s === undefined || h === undefined || s === 0 || h === 0) return null;
    const fp = p === null || p === undefined ? undefined : Number(p);
    return { size: s, hashIterations: h, expectedInsertions: parseIntField(n), falseProbability: fp === undefined || Number.isNaN(fp) ? undefined : fp };
  }

  /** Adds every key; resolves how many of them set at least one new bit (Redisson's add count). */
  async addAll(keys: readonly RedisBloomKey[]): Promise<number> {
    const flags = await this.addAllFlags(keys);
    let changed = 0;
    for (let i = 0; i < flags.length; i++) changed += flags[i]!;
    return changed;
  }

  /** Adds every key; one byte per key: 1 when it set a new bit (was definitely absent before). */
  async addAllFlags(keys: readonly RedisBloomKey[]): Promise<Uint8Array> {
    const out = new Uint8Array(Array.isArray(keys) ? keys.length : 0);
    await this.#batches(keys, 'keys', async (blob, n, snapshot, from) => {
      const r =
        this.#publishMaxLen > 0
          ? await this.#s.hgBloomAddPublishBuffer(this.configKey, this.name, this.streamKey, this.seqKey, this.#size, this.#k, n, blob, snapshot, this.#publishMaxLen)
          : await this.#s.hgBloomAddBuffer(this.configKey, this.name, this.#size, this.#k, n, blob, snapshot, 0);
      if (r.length !== n) throw new HashGateError(ErrorCodes.STORE, `RedisBloom ${this.name}: script answered ${r.length} keys for ${n}`);
      for (let j = 0; j < n; j++) out[from + j] = r[j]! - 48;
    });
    return out;
  }

  /** One byte per key: 1 = possibly present, 0 = definitely absent. Rejects rather than guess. */
  async containsAll(keys: readonly RedisBloomKey[]): Promise<Uint8Array> {
    if (this.#size === 0 && Array.isArray(keys) && keys.length > 0) await this.reload();
    if (Array.isArray(keys) && keys.length > 0 && this.#size / 8 <= this.#clientFactor * keys.length * this.#k) return this.#containsHere(keys);
    const out = new Uint8Array(keys.length);
    await this.#batches(keys, 'keys', async (blob, n, snapshot, from) => {
      const r = await this.#s.hgBloomContainsBuffer(this.configKey, this.name, this.#size, this.#k, n, blob, snapshot);
      if (r.length !== n) throw new HashGateError(ErrorCodes.STORE, `RedisBloom ${this.name}: script answered ${r.length} keys for ${n}`);
      for (let j = 0; j < n; j++) out[from + j] = r[j]! - 48;
    });
    return out;
  }

  /** One MULTI reads the config and the bitmap (a consistent snapshot); bits are tested here. */
  async #containsHere(keys: readonly RedisBloomKey[]): Promise<Uint8Array> {
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (typeof key !== 'string' && !(key instanceof Uint8Array)) throw invalidType(`keys[${i}]`, 'a string or Uint8Array', key);
    }
    const size = this.#size;
    const k = this.#k;
    const [cfg, bm] = await this.#call(async () => {
      const res = (await this.#redis.multi().hmget(this.configKey, 'size', 'hashIterations').getBuffer(this.name).exec())!;
      for (const [err] of res) if (err) throw err;
      return [res[0]![1] as Array<string | null>, res[1]![1] as Buffer | null] as const;
    });
    if (cfg[0] !== String(size) || cfg[1] !== String(k)) {
      throw new HashGateError(
        ErrorCodes.BLOOM_CONFIG_CHANGED,
        `RedisBloom ${this.name}: stored config is size=${cfg[0] ?? '-'} hashIterations=${cfg[1] ?? '-'}, this client hashes for size=${size} hashIterations=${k}; call reload() to adopt it`,
        { details: { name: this.name, expected: { size, hashIterations: k }, found: { size: cfg[0], hashIterations: cfg[1] } } },
      );
    }
    const bitmap = bm ?? Buffer.alloc(0);
    return this.layout === 'guava' ? guavaContainsAll(keys, k, size, bitmap, this.#maxBatch) : redissonContainsAll(keys, k, size, bitmap, this.#maxBatch);
  }

  /** One key; concurrent calls in the same tick share one script call, like contains(). */
  add(key: RedisBloomKey): Promise<boolean> {
    return this.#enqueue(key, true);
  }

  /**
   * One key. Calls made in the same tick (concurrent request handlers) are merged into one
   * containsAll, as ioredis auto-pipelining merges commands: one round trip for all of them.
   */
  contains(key: RedisBloomKey): Promise<boolean> {
    return this.#enqueue(key, false);
  }

  #enqueue(key: RedisBloomKey, write: boolean): Promise<boolean> {
    if (typeof key !== 'string' && !(key instanceof Uint8Array)) return Promise.reject(invalidType('key', 'a string or Uint8Array', key));
    let p = write ? this.#pendingAdds : this.#pending;
    if (p === undefined || p.keys.length >= this.#maxBatch) {
      const q: PendingChecks = { keys: [], settle: [], write };
      p = q;
      if (write) this.#pendingAdds = q;
      else this.#pending = q;
      process.nextTick(() => this.#flush(q));
    }
    const batch = p;
    return new Promise<boolean>((resolve, reject) => {
      batch.keys.push(key);
      batch.settle.push({ resolve, reject });
    });
  }

  #flush(p: PendingChecks): void {
    if (this.#pending === p) this.#pending = undefined;
    if (this.#pendingAdds === p) this.#pendingAdds = undefined;
    (p.write ? this.addAllFlags(p.keys) : this.containsAll(p.keys)).then(
      (out) => {
        for (let i = 0; i < p.settle.length; i++) p.settle[i]!.resolve(out[i] === 1);
      },
      (err: unknown) => {
        for (const s of p.settle) s.reject(err);
      },
    );
  }

  /** Redisson's estimate of the number of keys added: round(-size / k * ln(1 - setBits / size)). */
  async count(): Promise<number> {
    const [size, k, bits] = await this.#call(() => this.#s.hgBloomCount(this.configKey, this.name));
    const m = Number(size);
    return Math.round((-m / Number(k)) * Math.log(1 - Number(bits) / m));
  }

  /**
   * hashgate's own notes about the filter, in a hash next to it (same slot; Redisson ignores it),
   * e.g. which source of truth it was filled from.
   */
  async getFlag(flag: string): Promise<string | null> {
    return this.#call(() => this.#redis.hget(this.metaKey, flag));
  }

  async setFlag(flag: string, value: string): Promise<void> {
    await this.#call(() => this.#redis.hset(this.metaKey, flag, value));
  }

  /** Deletes the bitmap and its config (as Redisson's delete()), and the spare a rebuild kept. */
  async delete(): Promise<boolean> {
    const n = await this.#call(() => this.#redis.del(this.name, this.configKey, redissonSuffixKey(this.name, 'hg:spare')));
    this.#size = 0;
    this.#k = 0;
    return n > 0;
  }

  #adopt(size: string, k: string): void {
    const s = parseIntField(size);
    const h = parseIntField(k);
    if (s === undefined || h === undefined || s === 0 || h === 0) throw this.#notInitialized();
    this.#size = s;
    this.#k = h;
  }

  #notInitialized(): HashGateError {
    return new HashGateError(ErrorCodes.BLOOM_NOT_INITIALIZED, `RedisBloom ${this.name}: no config at ${this.configKey} (call tryInit(), or create it with Redisson)`, {
      details: { name: this.name },
    });
  }

  /** Hashes keys chunk by chunk and runs `send` per chunk, at most maxInFlight at once. */
  async #batches(
    keys: readonly RedisBloomKey[],
    argName: string,
    send: (blob: Buffer, n: number, snapshot: string, from: number) => Promise<void>,
  ): Promise<void> {
    if (!Array.isArray(keys)) throw invalidType(argName, 'an array of strings or Uint8Arrays', keys);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (typeof key !== 'string' && !(key instanceof Uint8Array)) throw invalidType(`${argName}[${i}]`, 'a string or Uint8Array', key);
    }
    if (keys.length === 0) return;
    if (this.#size === 0) await this.reload();
    const size = this.#size;
    const k = this.#k;
    const inFlight = new Set<Promise<void>>();
    let failure: unknown;
    for (let from = 0; from < keys.length && failure === undefined; from += this.#maxBatch) {
      const n = Math.min(this.#maxBatch, keys.length - from);
      const blob = this.layout === 'guava' ? guavaIndexBlob(keys, from, n, k, size) : redissonIndexBlob(keys, from, n, k, size);
      const snapshot = size / 8 <= this.#snapshotFactor * n * k ? '1' : '0';
      const p: Promise<void> = this.#call(() => send(blob, n, snapshot, from)).then(
        () => void inFlight.delete(p),
        (err: unknown) => {
          inFlight.delete(p);
          failure ??= err;
        },
      );
      inFlight.add(p);
      if (inFlight.size >= this.#maxInFlight) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    if (failure !== undefined) throw failure;
  }

  /** Maps script and connection failures to coded errors; never lets a failure read as "absent". */
  async #call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof HashGateError || err instanceof TypeError || err instanceof RangeError) throw err;
      const msg = err instanceof Error ? err.message : String(err);
      const m = /HGBLOOMCONFIG (\S+) (\S+)/.exec(msg);
      if (m) {
        throw new HashGateError(
          ErrorCodes.BLOOM_CONFIG_CHANGED,
          `RedisBloom ${this.name}: stored config is size=${m[1]} hashIterations=${m[2]}, this client hashes for size=${this.#size} hashIterations=${this.#k}; call reload() to adopt it`,
          { cause: err, details: { name: this.name, expected: { size: this.#size, hashIterations: this.#k }, found: { size: m[1], hashIterations: m[2] } } },
        );
      }
      if (msg.includes('HGBLOOMNOCONFIG')) throw this.#notInitialized();
      throw new HashGateError(ErrorCodes.STORE, `RedisBloom ${this.name}: Redis call failed: ${msg}`, { cause: err, details: { name: this.name } });
    }
  }
}
