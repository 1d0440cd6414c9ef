// RedisBloomReplica: a local copy of a Redis-held filter in a SharedArrayBuffer, so checks cost no
// round trip. Both layouts of RedisBloom: Redisson's bits in a plain SharedArrayBuffer, or (layout
// 'guava') hashgate's BloomFilter bits loaded straight into a BloomFilter's shared memory, since
// the Redis string is that memory byte for byte (redis-guava.ts); other threads attach it with
// BloomFilter.fromShared(replica.filter.toShared()). The machinery below is the same for both:
// Redis bytes, Redis bit offsets in the change stream. Kept current three ways:
//   - initial and periodic full loads in GETRANGE chunks (never one huge reply), merged by OR;
//   - the change stream RedisBloom writers append to (`publish`), read with XREAD BLOCK on its own
//     connection; every entry carries a sequence number, and a missing number (the stream was
//     trimmed past us, or we were away) triggers a full load, as does every reconnect;
//   - the periodic full load also picks up writers that do not publish (Redisson, Java), so their
//     adds are visible within resyncIntervalMs plus one load.
//
// Guarantee: no false negative for a key whose add completed before the replica's last sync
// point (the start of the last full load, or the issue time of the last stream read that came
// back complete). Bits only go 0 -> 1 here; a filter recreated with another shape (rebuild and
// swap) is detected by its config and replaces the buffer.
import { EventEmitter } from 'node:events';
import { createHistogram } from 'node:perf_hooks';
import type { Cluster, Redis } from 'ioredis';
import { ErrorCodes, HashGateError, checkInt, invalidType } from '../errors.js';
import { redissonConfigKey, redissonIndexBlob, redissonKeysShareSlot, redissonSuffixKey } from './redisson.js';
import { guavaConfigKey } from './redis-guava.js';
import { BloomFilter } from './bloom-filter.js';
import { RedisBloom, type RedisBloomKey, type RedisBloomLayout } from './redis-bloom.js';

export const REDIS_BLOOM_REPLICA_DEFAULTS = {
  /** bytes per GETRANGE during a full load */
  chunkBytes: 256 * 1024,
  /** full load for writers that do not publish (Redisson); 0 = only on gaps and reconnects */
  resyncIntervalMs: 60_000,
  /** XREAD BLOCK timeout: also how often an idle replica confirms it is current */
  blockMs: 1_000,
  /** entries per XREAD */
  readCount: 1_000,
  /** containsAllFresh answers from Redis instead of the local bits past this staleness */
  maxStalenessMs: 5_000,
} as const;

export interface RedisBloomReplicaOptions {
  /** ioredis client; the replica duplicates it for its blocking stream reads. */
  redis: Redis | Cluster;
  name: string;
  /** The filter's layout, as given to RedisBloom (default 'redisson'). */
  layout?: RedisBloomLayout;
  chunkBytes?: number;
  resyncIntervalMs?: number;
  blockMs?: number;
  /**
   * containsAllFresh() answers locally while stats().stalenessMs is at most this; past it (the
   * stream is lost, Redis is unreachable) it asks Redis, which answers exactly or rejects.
   */
  maxStalenessMs?: number;
  now?: () => number;
}

export interface RedisBloomReplicaStats {
  size: number;
  hashIterations: number;
  /** sequence number of the last change-stream entry applied */
  seq: number;
  entriesApplied: number;
  /** full loads after the first (gaps, reconnects, period, config change) */
  resyncs: number;
  gaps: number;
  reconnects: number;
  /** ms since the last sync point (see the guarantee above) */
  stalenessMs: number;
  /** ms since the start of the last full load */
  sinceFullLoadMs: number;
  /** stream entry time (Redis clock) to applied here, in ms */
  lagP50Ms: number;
  lagP99Ms: number;
  lagMaxMs: number;
  lastError: string | undefined;
}

type Entry = [id: string, fields: Array<string | Buffer>];

export class RedisBloomReplica extends EventEmitter {
  readonly name: string;
  readonly configKey: string;
  readonly streamKey: string;
  readonly layout: RedisBloomLayout;
  readonly #redis: Redis | Cluster;
  /** layout 'guava': the BloomFilter whose bits #bits views */
  #filter: BloomFilter | undefined;
  #reader: Redis | Cluster | undefined;
  readonly #chunkBytes: number;
  readonly #resyncIntervalMs: number;
  readonly #blockMs: number;
  readonly #maxStalenessMs: number;
  readonly #now: () => number;
  /** publishing writer on the same filter, opened by the first add or fresh read through Redis */
  #writer: Promise<RedisBloom> | undefined;
  #buffer = new SharedArrayBuffer(0);
  #bits: Uint8Array<ArrayBufferLike> = new Uint8Array(new SharedArrayBuffer(0));
  #size = 0;
  #k = 0;
  #seq = 0;
  #lastId = '0-0';
  #syncAt = 0;
  #fullAt = 0;
  #closed = false;
  #needFull = false;
  /** the next full load replaces the bits instead of merging (a new generation was swapped in) */
  #replace = false;
  #loop: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #loading: Promise<void> | undefined;
  #lag = createHistogram();
  #stats = { entriesApplied: 0, resyncs: 0, gaps: 0, reconnects: 0, lastError: undefined as string | undefined };

  private constructor(o: RedisBloomReplicaOptions) {
    super();
    if (typeof o !== 'object' || o === null) throw invalidType('options', 'an object', o);
    if (typeof o.name !== 'string' || o.name.length === 0) throw invalidType('options.name', 'a non-empty string', o.name);
    if (typeof o.redis !== 'object' || o.redis === null || typeof (o.redis as Redis).duplicate !== 'function') {
      throw invalidType('options.redis', 'an ioredis Redis or Cluster client', o.redis);
    }
    if ((o.redis as Cluster).isCluster === true && !redissonKeysShareSlot(o.name)) throw invalidType('options.name', 'a name whose keys share a cluster slot', o.name);
    this.name = o.name;
    if (o.layout !== undefined && o.layout !== 'redisson' && o.layout !== 'guava') throw invalidType('options.layout', "'redisson' or 'guava'", o.layout);
    this.layout = o.layout ?? 'redisson';
    this.configKey = this.layout === 'guava' ? guavaConfigKey(o.name) : redissonConfigKey(o.name);
    this.streamKey = redissonSuffixKey(o.name, 'hg:changes');
    this.#redis = o.redis;
    this.#chunkBytes = checkInt('options.chunkBytes', o.chunkBytes ?? REDIS_BLOOM_REPLICA_DEFAULTS.chunkBytes, 1024, 64 * 1024 * 1024);
    this.#resyncIntervalMs = checkInt('options.resyncIntervalMs', o.resyncIntervalMs ?? REDIS_BLOOM_REPLICA_DEFAULTS.resyncIntervalMs, 0);
    this.#blockMs = checkInt('options.blockMs', o.blockMs ?? REDIS_BLOOM_REPLICA_DEFAULTS.blockMs, 10, 60_000);
    this.#maxStalenessMs = checkInt('options.maxStalenessMs', o.maxStalenessMs ?? REDIS_BLOOM_REPLICA_DEFAULTS.maxStalenessMs, 0);
    this.#now = o.now ?? Date.now;
  }

  /** Loads the filter (rejects when it does not exist) and starts following its changes. */
  static async open(options: RedisBloomReplicaOptions): Promise<RedisBloomReplica> {
    const r = new RedisBloomReplica(options);
    await r.#fullLoad();
    r.#reader = r.#redis.duplicate();
    r.#reader.on('error', (e: Error) => (r.#stats.lastError = e.message));
    // ioredis resends a blocked XREAD after reconnecting, so the loop sees no error: count
    // reconnects here and reload, since changes may have been missed meanwhile
    let connected = false;
    r.#reader.on('ready', () => {
      if (connected) {
        r.#stats.reconnects++;
        r.#needFull = true;
      }
      connected = true;
    });
    r.#loop = r.#follow();
    if (r.#resyncIntervalMs > 0) {
      r.#timer = setInterval(() => void r.resync().catch((e: unknown) => r.#fail(e)), r.#resyncIntervalMs);
      r.#timer.unref();
    }
    return r;
  }

  /**
   * The bitmap, in Redis bit order (bit i = byte i >> 3, mask 0x80 >> (i & 7)); readable from
   * workers. Layout 'guava': the whole memory of `filter` (its bits start at filter.bitsOffset).
   */
  get buffer(): SharedArrayBuffer {
    return this.#buffer;
  }

  /**
   * Layout 'guava': the BloomFilter holding the replica's bits (undefined for 'redisson'). Use it
   * for reads only (mightContain, toShared for workers, writeTo for a Guava snapshot): the replica
   * writes its bits. A filter recreated with another shape replaces it (event 'reset').
   */
  get filter(): BloomFilter | undefined {
    return this.#filter;
  }

  get size(): number {
    return this.#size;
  }

  get hashIterations(): number {
    return this.#k;
  }

  /** One byte per key (1 = possibly present), answered locally. */
  containsAll(keys: ReadonlyArray<string | Uint8Array>): Uint8Array {
    if (!Array.isArray(keys)) throw invalidType('keys', 'an array of strings or Uint8Arrays', keys);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (typeof key !== 'string' && !(key instanceof Uint8Array)) throw invalidType(`keys[${i}]`, 'a string or Uint8Array', key);
    }
    if (this.#closed) throw new HashGateError(ErrorCodes.CLOSED, `RedisBloomReplica ${this.name} is closed`);
    if (this.#filter) return this.#filter.mightContainAll(keys as Array<string | Uint8Array>);
    const out = new Uint8Array(keys.length);
    const k = this.#k;
    const bits = this.#bits;
    for (let from = 0; from < keys.length; from += 8192) {
      const n = Math.min(8192, keys.length - from);
      const blob = redissonIndexBlob(keys, from, n, k, this.#size);
      for (let j = 0; j < n; j++) {
        let ok = 1;
        for (let i = 0; i < k; i++) {
          const ix = blob.readUInt32LE((j * k + i) * 4);
          if ((bits[ix >>> 3]! & (0x80 >>> (ix & 7))) === 0) {
            ok = 0;
            break;
          }
        }
        out[from + j] = ok;
      }
    }
    return out;
  }

  contains(key: string | Uint8Array): boolean {
    return this.containsAll([key])[0] === 1;
  }

  /**
   * containsAll with bounded staleness: the local bits while the replica synced within
   * maxStalenessMs, otherwise the filter in Redis (exact, or a typed rejection; never a stale "absent").
   */
  async containsAllFresh(keys: readonly RedisBloomKey[]): Promise<Uint8Array> {
    if (this.#closed) throw new HashGateError(ErrorCodes.CLOSED, `RedisBloomReplica ${this.name} is closed`);
    if (this.#now() - this.#syncAt <= this.#maxStalenessMs) return this.containsAll(keys as RedisBloomKey[]);
    return (await this.#writerFor()).containsAll(keys);
  }

  /**
   * Adds keys through Redis (published on the change stream, so every other replica applies them)
   * and, once Redis has them, into this replica's bits: this process reads its own adds at once.
   * One byte per key: 1 when it set a new bit in Redis.
   */
  async addAllFlags(keys: readonly RedisBloomKey[]): Promise<Uint8Array> {
    if (this.#closed) throw new HashGateError(ErrorCodes.CLOSED, `RedisBloomReplica ${this.name} is closed`);
    const w = await this.#writerFor();
    let flags: Uint8Array;
    try {
      flags = await w.addAllFlags(keys);
    } catch (err) {
      if (!(err instanceof HashGateError && err.code === ErrorCodes.BLOOM_CONFIG_CHANGED)) throw err;
      // a rebuild reshaped the filter: write with the stored shape, and load it here too
      await w.reload();
      flags = await w.addAllFlags(keys);
    }
    if (w.size === this.#size && w.hashIterations === this.#k) this.#setLocal(keys);
    else await this.resync();
    return flags;
  }

  /** addAllFlags, counted: how many keys set a new bit. */
  async addAll(keys: readonly RedisBloomKey[]): Promise<number> {
    const flags = await this.addAllFlags(keys);
    let n = 0;
    for (let i = 0; i < flags.length; i++) n += flags[i]!;
    return n;
  }

  #writerFor(): Promise<RedisBloom> {
    this.#writer ??= RedisBloom.open({ redis: this.#redis, name: this.name, layout: this.layout, publish: true });
    const w = this.#writer;
    // a failed open (Redis down) is retried by the next call
    w.catch(() => {
      if (this.#writer === w) this.#writer = undefined;
    });
    return w;
  }

  /** Sets the keys' bits here (the same bits the writer just set in Redis, for the same shape). */
  #setLocal(keys: readonly RedisBloomKey[]): void {
    if (this.#filter) {
      this.#filter.addAll(keys as Array<string | Uint8Array>);
      return;
    }
    const k = this.#k;
    const bits = this.#bits;
    for (let from = 0; from < keys.length; from += 8192) {
      const n = Math.min(8192, keys.length - from);
      const blob = redissonIndexBlob(keys, from, n, k, this.#size);
      for (let o = 0; o + 4 <= blob.length; o += 4) {
        const ix = blob.readUInt32LE(o);
        bits[ix >>> 3]! |= 0x80 >>> (ix & 7);
      }
    }
  }

  stats(): RedisBloomReplicaStats {
    const now = this.#now();
    const q = (p: number) => (this.#lag.count > 0 ? this.#lag.percentile(p) / 1000 : 0);
    return {
      size: this.#size,
      hashIterations: this.#k,
      seq: this.#seq,
      ...this.#stats,
      stalenessMs: now - this.#syncAt,
      sinceFullLoadMs: now - this.#fullAt,
      lagP50Ms: q(50),
      lagP99Ms: q(99),
      lagMaxMs: this.#lag.count > 0 ? this.#lag.max / 1000 : 0,
    };
  }

  /** A full load now (merged into the current bits unless the config changed). */
  async resync(): Promise<void> {
    this.#stats.resyncs++;
    await this.#fullLoad();
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#reader?.disconnect();
    await this.#loop?.catch(() => undefined);
  }

  #fail(e: unknown): void {
    this.#stats.lastError = e instanceof Error ? e.message : String(e);
    if (this.listenerCount('error') > 0) this.emit('error', e);
  }

  /** One load at a time; a load requested while one runs waits for it and then runs again. */
  async #fullLoad(): Promise<void> {
    while (this.#loading) await this.#loading.catch(() => undefined);
    this.#loading = this.#load();
    try {
      await this.#loading;
    } finally {
      this.#loading = undefined;
    }
  }

  async #load(): Promise<void> {
    const startedAt = this.#now();
    // position in the change stream first: everything published after it is replayed, everything
    // completed before it is in the bitmap read below
    const [cfg, last, seqRaw] = (await this.#redis
      .multi()
      .hmget(this.configKey, 'size', 'hashIterations')
      .xrevrange(this.streamKey, '+', '-', 'COUNT', 1)
      .get(redissonSuffixKey(this.name, 'hg:seq'))
      .exec())!.map(([err, v]) => {
      if (err) throw err;
      return v;
    }) as [[string | null, string | null], Entry[], string | null];
    const size = Number(cfg[0]);
    const k = Number(cfg[1]);
    if (!(size > 0) || !(k > 0)) {
      throw new HashGateError(ErrorCodes.BLOOM_NOT_INITIALIZED, `RedisBloomReplica ${this.name}: no config at ${this.configKey}`, { details: { name: this.name } });
    }
    let id = '0-0';
    let seq = Number(seqRaw ?? 0);
    const top = last[0];
    if (top !== undefined) {
      id = top[0];
      seq = Number(fieldOf(top[1], 's'));
    }
    const bytes = Math.ceil(size / 8);
    const reshape = size !== this.#size || k !== this.#k || this.#replace;
    this.#replace = false;
    let filter = this.#filter;
    let target: Uint8Array<ArrayBufferLike> = this.#bits;
    if (reshape && this.layout === 'guava') {
      if (size % 64 !== 0 || k > 255) {
        throw new HashGateError(ErrorCodes.BLOOM_SHAPE_MISMATCH, `RedisBloomReplica ${this.name}: a guava-layout config must have whole 64-bit words and k <= 255, found size=${size} hashIterations=${k}`, {
          details: { name: this.name, size, hashIterations: k },
        });
      }
      filter = BloomFilter.withShape({ bitSize: size, hashFunctions: k });
      target = new Uint8Array(filter.memory.buffer, filter.bitsOffset, bytes);
    } else if (reshape) target = new Uint8Array(new SharedArrayBuffer(bytes));
    for (let off = 0; off < bytes; off += this.#chunkBytes) {
      const end = Math.min(bytes, off + this.#chunkBytes) - 1;
      const part = await this.#redis.getrangeBuffer(this.name, off, end);
      for (let i = 0; i < part.length; i++) target[off + i]! |= part[i]!;
    }
    // bits were written under the filter, so its shared set-bit count is recomputed
    filter?.recountBits();
    if (reshape) {
      this.#buffer = target.buffer as SharedArrayBuffer;
      this.#bits = target;
      this.#filter = filter;
      this.#size = size;
      this.#k = k;
      if (this.#fullAt !== 0) this.emit('reset', { size, hashIterations: k });
    }
    // never move backwards: stream entries applied meanwhile stay applied
    if (seq >= this.#seq || reshape) {
      this.#seq = seq;
      this.#lastId = id;
    }
    this.#fullAt = startedAt;
    this.#syncAt = Math.max(this.#syncAt, startedAt);
    this.#needFull = false;
  }

  async #follow(): Promise<void> {
    const reader = this.#reader!;
    while (!this.#closed) {
      try {
        if (this.#needFull) await this.resync();
        const issuedAt = this.#now();
        const res = (await (reader as Redis).xreadBuffer(
          'COUNT', REDIS_BLOOM_REPLICA_DEFAULTS.readCount, 'BLOCK', this.#blockMs, 'STREAMS', this.streamKey, this.#lastId,
        )) as Array<[Buffer, Array<[Buffer, Buffer[]]>]> | null;
        const entries = res?.[0]?.[1] ?? [];
        for (const [idBuf, fields] of entries) {
          if (!this.#apply(idBuf.toString(), fields)) break;
        }
        if (entries.length > 0) this.#filter?.recountBits();
        // a read that began before a reconnect proves nothing about the time in between
        if (!this.#needFull && entries.length < REDIS_BLOOM_REPLICA_DEFAULTS.readCount) this.#syncAt = issuedAt;
        if (entries.length > 0) this.emit('applied', this.#seq);
      } catch (e) {
        if (this.#closed) return;
        this.#fail(e);
        // the connection dropped or Redis failed: what happened meanwhile is unknown
        this.#needFull = true;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** Applies one entry; false (and a full load pending) on a sequence gap or a shape change. */
  #apply(id: string, fields: Buffer[]): boolean {
    let seq = -1;
    let k = -1;
    let blob: Buffer | undefined;
    for (let i = 0; i + 1 < fields.length; i += 2) {
      const f = fields[i]!.toString();
      if (f === 's') seq = Number(fields[i + 1]!.toString());
      else if (f === 'k') k = Number(fields[i + 1]!.toString());
      else if (f === 'b') blob = fields[i + 1];
      else if (f === 'g') this.#replace = true;
    }
    if (seq <= this.#seq) return true; // already in the bits (loaded after it was published)
    if (this.#replace || seq !== this.#seq + 1 || k !== this.#k || blob === undefined) {
      if (seq !== this.#seq + 1 && !this.#replace) this.#stats.gaps++;
      this.#needFull = true;
      return false;
    }
    const bits = this.#bits;
    const size = this.#size;
    for (let o = 0; o + 4 <= blob.length; o += 4) {
      const ix = blob.readUInt32LE(o);
      if (ix < size) bits[ix >>> 3]! |= 0x80 >>> (ix & 7);
    }
    this.#seq = seq;
    this.#lastId = id;
    this.#stats.entriesApplied++;
    const ms = Number(id.slice(0, id.indexOf('-')));
    this.#lag.record(Math.max(1, Math.round((this.#now() - ms) * 1000)));
    return true;
  }
}

function fieldOf(fields: Array<string | Buffer>, name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (String(fields[i]) === name) return String(fields[i + 1]);
  return undefined;
}
