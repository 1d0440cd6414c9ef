// ShardedRedisBloom: one logical Bloom filter held in Redis as 2^b slices, for more keys than one
// Redis string holds (2^32 bits, about 448M keys at 1%). Each slice is an ordinary RedisBloom of
// its own (Redisson or Guava layout, own config, own scripts, own change stream) under its own
// cluster hash tag `{name#i}`, so the slices spread over a cluster's masters and a Java client that
// knows a key's slice reads that slice key with Redisson / Guava and computes the same bits.
//
// A key's slice is the top b bits of the second half of its 128-bit hash (Redisson's h1, Guava's
// upperEight): bits the index math inside a slice masks off or reduces away (redissonSlices,
// guavaSlices). Every slice is sized for ceil(n / 2^b) keys at the filter's fpp.
//
// The slice count decides where a key's bits live, so a client using another count would answer
// "absent" for keys it routes elsewhere: the count is stored in `{name}:hg:sharded`, created
// atomically by the first tryInit, and every client adopts the stored count (reads and writes
// reject with HG_ERR_BLOOM_NOT_INITIALIZED until it exists). Each slice's script still checks
// that slice's stored size and hash count on every call.
import type { Cluster, Redis } from 'ioredis';
import { ErrorCodes, HashGateError, HashGateTypeError, checkInt, checkNumber, invalidType, outOfRange } from '../errors.js';
import { RedisBloom, REDIS_BLOOM_DEFAULTS, type RedisBloomKey, type RedisBloomLayout, type RedisBloomOptions } from './redis-bloom.js';
import { redissonShape, redissonSlices, redissonSuffixKey, REDISSON_MAX_BITS } from './redisson.js';
import { GUAVA_REDIS_MAX_BITS, guavaRedisShape, guavaSlices } from './redis-guava.js';

export const SHARDED_REDIS_BLOOM_DEFAULTS = Object.freeze({
  /** Most keys a sharded filter may be sized for. */
  maxExpectedItems: 1e10,
  /** Most slices (slice numbers come from 16 hash bits). */
  maxShards: 1024,
  /** Without options.shards, the fewest slices (a power of two) of at most this many bits each. */
  sliceBits: 2 ** 31,
} as const);

export interface ShardedRedisBloomOptions extends Omit<RedisBloomOptions, 'snapshotBytesPerProbe' | 'clientSnapshotBytesPerProbe'> {
  /**
   * Number of slices, a power of two up to 1024, used when tryInit() creates the filter (the stored
   * count wins afterwards). Default: the fewest whose slices stay at or below 2^31 bits.
   */
  shards?: number;
}

/** The sharded filter's keys in Redis: its descriptor and one name per slice. */
export function shardedDescriptorKey(name: string): string {
  return redissonSuffixKey(name, 'hg:sharded');
}

/** Slice i of filter `name`: its own hash tag, so slices land on different cluster slots. */
export function sliceName(name: string, i: number): string {
  return `{${name}#${i}}`;
}

/** Slices for `expectedItems` at `fpp`: the given count checked, or the default one chosen. */
export function shardedShape(
  layout: RedisBloomLayout,
  expectedItems: number,
  fpp: number,
  shards?: number,
): { shards: number; sliceItems: number; sliceBits: number; hashIterations: number } {
  const D = SHARDED_REDIS_BLOOM_DEFAULTS;
  if (expectedItems > D.maxExpectedItems) throw outOfRange('options.expectedItems', `at most ${D.maxExpectedItems} for a sharded filter`, expectedItems);
  const shapeOf = (s: number) => {
    const items = Math.ceil(expectedItems / s);
    if (layout === 'guava') {
      const g = guavaRedisShape(items, fpp, 'options');
      return { sliceItems: items, sliceBits: g.bitSize, hashIterations: g.hashFunctions };
    }
    const r = redissonShape(items, fpp);
    return { sliceItems: items, sliceBits: r.size, hashIterations: r.hashIterations };
  };
  const max = layout === 'guava' ? GUAVA_REDIS_MAX_BITS : REDISSON_MAX_BITS;
  if (shards !== undefined) {
    let s;
    try {
      s = shapeOf(shards);
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      throw outOfRange('options.shards', `large enough for slices of at most ${max} bits (${expectedItems} keys at fpp ${fpp})`, shards);
    }
    return { shards, ...s };
  }
  for (let s = 1; s <= D.maxShards; s *= 2) {
    let shape;
    try {
      shape = shapeOf(s);
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      continue;
    }
    if (shape.sliceBits <= D.sliceBits || s === D.maxShards) return { shards: s, ...shape };
  }
  throw outOfRange('options.expectedItems', `small enough for ${D.maxShards} slices of at most ${max} bits at fpp ${fpp}`, expectedItems);
}

function checkShards(name: string, v: unknown): number {
  const s = checkInt(name, v, 1, SHARDED_REDIS_BLOOM_DEFAULTS.maxShards);
  if ((s & (s - 1)) !== 0) throw outOfRange(name, 'a power of two', s);
  return s;
}

/** Runs fn(i) for every i in `items`, at most `limit` at once; rejects with the first failure after all settle. */
async function bounded(items: readonly number[], limit: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async (): Promise<void> => {
    while (next < items.length && failure === undefined) {
      const i = items[next++]!;
      try {
        await fn(i);
      } catch (err) {
        failure ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failure !== undefined) throw failure;
}

export class ShardedRedisBloom {
  readonly name: string;
  readonly layout: RedisBloomLayout;
  readonly descriptorKey: string;
  readonly #redis: Redis | Cluster;
  readonly #options: ShardedRedisBloomOptions;
  readonly #expectedItems: number | undefined;
  readonly #fpp: number | undefined;
  readonly #wantShards: number | undefined;
  readonly #maxInFlight: number;
  #slices: RedisBloom[] = [];
  #bits = 0;

  private constructor(o: ShardedRedisBloomOptions) {
    if (typeof o !== 'object' || o === null) throw invalidType('options', 'an object', o);
    if (typeof o.name !== 'string' || o.name.length === 0) throw invalidType('options.name', 'a non-empty string', o.name);
    if (/[{}]/.test(o.name)) {
      throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, 'options.name of a sharded filter must not contain { or } (each slice gets its own hash tag)', { name: 'options.name' });
    }
    if (typeof o.redis !== 'object' || o.redis === null) throw invalidType('options.redis', 'an ioredis Redis or Cluster client', o.redis);
    if (o.layout !== undefined && o.layout !== 'redisson' && o.layout !== 'guava') throw invalidType('options.layout', "'redisson' or 'guava'", o.layout);
    this.name = o.name;
    this.layout = o.layout ?? 'redisson';
    this.descriptorKey = shardedDescriptorKey(o.name);
    this.#redis = o.redis;
    this.#options = o;
    this.#expectedItems = o.expectedItems === undefined ? undefined : checkInt('options.expectedItems', o.expectedItems, 1);
    this.#fpp = o.fpp === undefined ? undefined : checkNumber('options.fpp', o.fpp, 0, 1, true);
    this.#wantShards = o.shards === undefined ? undefined : checkShards('options.shards', o.shards);
    if (this.#expectedItems !== undefined && this.#fpp !== undefined) shardedShape(this.layout, this.#expectedItems, this.#fpp, this.#wantShards); // validate early
    this.#maxInFlight = checkInt('options.maxInFlight', o.maxInFlight ?? REDIS_BLOOM_DEFAULTS.maxInFlight, 1, 64);
    if (o.maxBatch !== undefined) checkInt('options.maxBatch', o.maxBatch, 1, 100_000);
  }

  /** Validates options and reads the stored slice count if the filter exists (tryInit() creates it). */
  static async open(options: ShardedRedisBloomOptions): Promise<ShardedRedisBloom> {
    const b = new ShardedRedisBloom(options);
    await b.reload().catch((err: unknown) => {
      if (!(err instanceof HashGateError && err.code === ErrorCodes.BLOOM_NOT_INITIALIZED)) throw err;
    });
    return b;
  }

  /** Slice count in use (0 until the descriptor has been read). */
  get shards(): number {
    return this.#slices.length;
  }

  /** The slices, slice i under sliceName(name, i): ordinary RedisBloom filters (for replicas, Java). */
  get slices(): readonly RedisBloom[] {
    return this.#slices;
  }

  /**
   * Creates the descriptor and every slice's config unless they exist; resolves true when this
   * call created the descriptor. The stored slice count and slice shapes win.
   */
  async tryInit(): Promise<boolean> {
    if (this.#expectedItems === undefined || this.#fpp === undefined) {
      throw invalidType('options.expectedItems and options.fpp', 'numbers (tryInit needs a size)', this.#expectedItems ?? this.#fpp);
    }
    const want = shardedShape(this.layout, this.#expectedItems, this.#fpp, this.#wantShards);
    // one MULTI: a concurrent tryInit with another count finds all four fields or none
    const created = await this.#call(async () => {
      const res = (await this.#redis
        .multi()
        .hsetnx(this.descriptorKey, 'shards', String(want.shards))
        .hsetnx(this.descriptorKey, 'layout', this.layout)
        .hsetnx(this.descriptorKey, 'expectedInsertions', String(this.#expectedItems))
        .hsetnx(this.descriptorKey, 'falseProbability', String(this.#fpp))
        .exec())!;
      for (const [err] of res) if (err) throw err;
      return Number(res[0]![1]) === 1;
    });
    // slices are opened with this client's sizing for the stored count; a slice's stored shape wins
    await this.reload();
    await bounded(this.#indexes(), this.#maxInFlight, async (i) => {
      await this.#slices[i]!.tryInit();
    });
    return created;
  }

  /** Re-reads the descriptor and every slice's config. */
  async reload(): Promise<{ shards: number; layout: RedisBloomLayout }> {
    const [s, layout] = await this.#call(() => this.#redis.hmget(this.descriptorKey, 'shards', 'layout'));
    const shards = s === null || s === undefined || !/^\d+$/.test(s) ? 0 : Number(s);
    if (shards === 0 || (shards & (shards - 1)) !== 0 || shards > SHARDED_REDIS_BLOOM_DEFAULTS.maxShards) {
      this.#slices = [];
      this.#bits = 0;
      throw new HashGateError(ErrorCodes.BLOOM_NOT_INITIALIZED, `ShardedRedisBloom ${this.name}: no valid descriptor at ${this.descriptorKey} (call tryInit())`, {
        details: { name: this.name },
      });
    }
    if (layout !== this.layout) {
      throw new HashGateError(ErrorCodes.BLOOM_CONFIG_CHANGED, `ShardedRedisBloom ${this.name}: the filter is stored in the ${layout ?? '-'} layout; open it with that layout`, {
        details: { name: this.name, layout: this.layout },
      });
    }
    if (shards !== this.#slices.length) {
      const items = this.#expectedItems === undefined ? undefined : Math.ceil(this.#expectedItems / shards);
      const opened: RedisBloom[] = [];
      await bounded(Array.from({ length: shards }, (_, i) => i), this.#maxInFlight * 4, async (i) => {
        opened[i] = await RedisBloom.open(this.#sliceOptions(sliceName(this.name, i), items));
      });
      this.#slices = opened;
      this.#bits = Math.log2(shards);
    } else {
      await bounded(this.#indexes(), this.#maxInFlight, async (i) => {
        await this.#slices[i]!.reload().catch((err: unknown) => {
          if (!(err instanceof HashGateError && err.code === ErrorCodes.BLOOM_NOT_INITIALIZED)) throw err;
        });
      });
    }
    return { shards, layout: this.layout };
  }

  #sliceOptions(name: string, items: number | undefined): RedisBloomOptions {
    const o = this.#options;
    const out: RedisBloomOptions = { redis: this.#redis, name, layout: this.layout, maxInFlight: 1 };
    if (items !== undefined) out.expectedItems = items;
    if (this.#fpp !== undefined) out.fpp = this.#fpp;
    if (o.maxBatch !== undefined) out.maxBatch = o.maxBatch;
    if (o.publish !== undefined) out.publish = o.publish;
    return out;
  }

  #indexes(): number[] {
    return Array.from({ length: this.#slices.length }, (_, i) => i);
  }

  /** The slice of every key (for tests and tools that read one slice directly). */
  sliceOf(keys: readonly RedisBloomKey[]): Uint16Array {
    this.#checkKeys(keys, 'keys');
    if (this.#slices.length === 0) throw this.#notInitialized();
    return this.#route(keys);
  }

  #route(keys: readonly RedisBloomKey[]): Uint16Array {
    const out = new Uint16Array(keys.length);
    const part = new Uint16Array(Math.min(keys.length, 8192));
    for (let from = 0; from < keys.length; from += 8192) {
      const n = Math.min(8192, keys.length - from);
      if (this.layout === 'guava') guavaSlices(keys, from, n, this.#bits, part);
      else redissonSlices(keys, from, n, this.#bits, part);
      out.set(part.subarray(0, n), from);
    }
    return out;
  }

  #checkKeys(keys: readonly RedisBloomKey[], argName: string): void {
    if (!Array.isArray(keys)) throw invalidType(argName, 'an array of strings or Uint8Arrays', keys);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (typeof key !== 'string' && !(key instanceof Uint8Array)) throw invalidType(`${argName}[${i}]`, 'a string or Uint8Array', key);
    }
  }

  /** Keys grouped by slice, run slice by slice (at most maxInFlight slices at once), answers in key order. */
  async #perSlice(keys: readonly RedisBloomKey[], run: (slice: RedisBloom, keys: RedisBloomKey[]) => Promise<Uint8Array>): Promise<Uint8Array> {
    this.#checkKeys(keys, 'keys');
    const out = new Uint8Array(keys.length);
    if (keys.length === 0) return out;
    if (this.#slices.length === 0) await this.reload();
    const slices = this.#slices;
    const route = this.#route(keys);
    // counting sort by slice: positions of slice s's keys are order[start[s] .. start[s + 1])
    const start = new Uint32Array(slices.length + 1);
    for (let j = 0; j < keys.length; j++) start[route[j]! + 1]!++;
    for (let s = 0; s < slices.length; s++) start[s + 1]! += start[s]!;
    const order = new Uint32Array(keys.length);
    const fill = start.slice(0, slices.length);
    for (let j = 0; j < keys.length; j++) order[fill[route[j]!]!++] = j;
    const used: number[] = [];
    for (let s = 0; s < slices.length; s++) if (start[s + 1]! > start[s]!) used.push(s);
    const counted = this.#countStill(slices.length);
    const sent = bounded(used, this.#maxInFlight, async (s) => {
      const at = order.subarray(start[s]!, start[s + 1]!);
      const part = new Array<RedisBloomKey>(at.length);
      for (let j = 0; j < at.length; j++) part[j] = keys[at[j]!]!;
      const r = await run(slices[s]!, part);
      for (let j = 0; j < at.length; j++) out[at[j]!] = r[j]!;
    });
    await Promise.all([counted, sent]);
    return out;
  }

  /** Adds every key; resolves how many of them set at least one new bit. */
  async addAll(keys: readonly RedisBloomKey[]): Promise<number> {
    const flags = await this.addAllFlags(keys);
    let changed = 0;
    for (let i = 0; i < flags.length; i++) changed += flags[i]!;
    return changed;
  }

  /** One byte per key: 1 when it set a new bit in its slice. */
  addAllFlags(keys: readonly RedisBloomKey[]): Promise<Uint8Array> {
    return this.#perSlice(keys, (slice, part) => slice.addAllFlags(part));
  }

  /** One byte per key: 1 = possibly present, 0 = definitely absent. Rejects rather than guess. */
  containsAll(keys: readonly RedisBloomKey[]): Promise<Uint8Array> {
    return this.#perSlice(keys, (slice, part) => slice.containsAll(part));
  }

  /** One key; calls in the same tick to the same slice share one script call (RedisBloom.add). */
  add(key: RedisBloomKey): Promise<boolean> {
    return this.#one(key, (slice) => slice.add(key));
  }

  /** One key; calls in the same tick to the same slice share one script call (RedisBloom.contains). */
  contains(key: RedisBloomKey): Promise<boolean> {
    return this.#one(key, (slice) => slice.contains(key));
  }

  async #one(key: RedisBloomKey, run: (slice: RedisBloom) => Promise<boolean>): Promise<boolean> {
    if (typeof key !== 'string' && !(key instanceof Uint8Array)) throw invalidType('key', 'a string or Uint8Array', key);
    if (this.#slices.length === 0) await this.reload();
    const [, answer] = await Promise.all([this.#countStill(this.#slices.length), run(this.#slices[this.#route([key])[0]!]!)]);
    return answer;
  }

  /**
   * Rejects when the stored slice count is no longer the one this call routed by (the filter was
   * deleted and created again with another count): slices of equal size would not notice, and
   * keys routed by the old count could read "absent". Sent alongside the slice calls (its own
   * slot), so it costs no extra round-trip time.
   */
  async #countStill(shards: number): Promise<void> {
    const stored = await this.#call(() => this.#redis.hget(this.descriptorKey, 'shards'));
    if (stored !== String(shards)) {
      throw new HashGateError(
        ErrorCodes.BLOOM_CONFIG_CHANGED,
        `ShardedRedisBloom ${this.name}: the stored slice count is ${stored ?? '-'}, this client routes by ${shards}; call reload() to adopt it`,
        { details: { name: this.name, expected: { shards }, found: { shards: stored } } },
      );
    }
  }

  /** Estimated keys added: the sum of every slice's estimate. */
  async count(): Promise<number> {
    if (this.#slices.length === 0) await this.reload();
    let total = 0;
    await bounded(this.#indexes(), this.#maxInFlight, async (i) => {
      const n = await this.#slices[i]!.count();
      total += n;
    });
    return total;
  }

  /** Deletes every slice, then the descriptor. */
  async delete(): Promise<boolean> {
    if (this.#slices.length === 0) {
      try {
        await this.reload();
      } catch (err) {
        if (err instanceof HashGateError && err.code === ErrorCodes.BLOOM_NOT_INITIALIZED) return false;
        throw err;
      }
    }
    await bounded(this.#indexes(), this.#maxInFlight, async (i) => {
      await this.#slices[i]!.delete();
    });
    this.#slices = [];
    this.#bits = 0;
    return (await this.#call(() => this.#redis.del(this.descriptorKey))) > 0;
  }

  #notInitialized(): HashGateError {
    return new HashGateError(ErrorCodes.BLOOM_NOT_INITIALIZED, `ShardedRedisBloom ${this.name}: no descriptor read yet (call tryInit() or reload())`, { details: { name: this.name } });
  }

  async #call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof HashGateError || err instanceof TypeError || err instanceof RangeError) throw err;
      const msg = err instanceof Error ? err.message : String(err);
      throw new HashGateError(ErrorCodes.STORE, `ShardedRedisBloom ${this.name}: Redis call failed: ${msg}`, { cause: err, details: { name: this.name } });
    }
  }
}
