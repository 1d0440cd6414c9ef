// Where loaded batches go. The loader only needs "add these members to this (window, bucket),
// idempotently, and tell me when it is acknowledged"; the Redis layouts implement that.
import type { Cluster, Redis } from 'ioredis';
import { ErrorCodes, HashGateError } from '../errors.js';
import { bucketKey, metaField, metaKey } from '../dedup/layout.js';
import type { RespWriter } from '../redis/resp.js';
import { PipeRouter } from '../redis/pipes.js';
import { targetSubBuckets } from '../dedup/growth.js';
import { RedisWriter, type MemberSource } from '../dedup/redis-writer.js';
import { resolveWindowBuckets } from '../dedup/redis-store.js';
import { TableGrowth, intsetLimitOf } from '../dedup/tables.js';
import { viewOf } from './buffers.js';

/** One batch of one (window, bucket): key i = keys[keyOffsets[i] .. keyOffsets[i+1]). */
export interface SinkBatch {
  window: string;
  /** The bucket of every row, unless `rowBuckets` is given (a batch spanning a group of buckets). */
  bucket: number;
  rowBuckets?: Uint32Array;
  count: number;
  keys: Uint8Array;
  keyOffsets: Uint32Array;
}

export interface LoadSink {
  readonly name: string;
  /** 'compact' sinks get 8 digest bytes per key, bucketed by digest bytes 8..15; default raw keys. */
  readonly layout?: 'sets' | 'compact';
  /** Called once per window before its first batch (e.g. to record the bucket count). */
  prepareWindow?(window: string): Promise<void>;
  /** Called once before the first batch when all rows go to one window: about `rows` rows will come. */
  plan?(info: { window: string; rows: number }): Promise<void>;
  /** Adds every member; must be idempotent (a retried batch re-adds). Resolves with the number of
   *  members Redis reported as new (best effort), rejects when the batch was not acknowledged. */
  add(batch: SinkBatch): Promise<number>;
  close(): Promise<void>;
}

/** Retry only what can heal by itself; WRONGTYPE, NOAUTH, NOPERM and the like fail at once. */
export function isTransient(err: unknown): boolean {
  const e = err as { code?: string; message?: string; name?: string };
  const msg = `${e?.name ?? ''} ${e?.code ?? ''} ${e?.message ?? ''}`;
  return /ECONNRESET|ECONNREFUSED|ECONNABORTED|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTCONN|Connection is closed|Stream isn't writeable|MaxRetriesPerRequest|enableOfflineQueue|Command timed out|timed out|connection was lost|connection closed|not connected|cannot connect|no reply|stalled|LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY|OOM|Failed to refresh slots|None of startup nodes/i.test(msg);
}


/**
 * Appends the RESP bulk strings of a batch's members (or of its `rows`) to `w`: raw key bytes
 * ('sets') or int64 decimals of the 8 digest bytes ('compact'). `offsOut[j]` gets where member j
 * starts, relative to where the first one starts.
 */
export function encodeMembers(batch: SinkBatch, compact: boolean, w: RespWriter, rows?: Uint32Array, offsOut?: Uint32Array): void {
  const n = rows ? rows.length : batch.count;
  const ko = batch.keyOffsets;
  const src = batch.keys;
  const sdv = viewOf(src);
  const base = w.p;
  for (let j = 0; j < n; j++) {
    if (offsOut) offsOut[j] = w.p - base;
    const i = rows ? rows[j]! : j;
    if (compact) w.int64(sdv, ko[i]!);
    else w.bulk(src, ko[i]!, ko[i + 1]!, sdv);
  }
  if (offsOut) offsOut[n] = w.p - base;
}

export type LoaderLayout = 'sets' | 'compact';

/** Key names come from the dedup store's layout module, so loader and store never disagree. */
export const layoutKeys = {
  bucket: (layout: LoaderLayout, prefix: string, window: string, bucket: number): string => bucketKey({ layout, prefix }, window, bucket),
  meta: (prefix: string, window: string): string => metaKey(prefix, window),
  metaField: (layout: LoaderLayout): string => metaField(layout),
};

export interface RedisLayoutSinkOptions {
  layout: LoaderLayout;
  prefix: string;
  buckets: number;
  /** @deprecated The window count (what `hashgate stats` reports as approximate) is always kept. */
  hll?: boolean;
  /** Quit the client on close(). Default true. */
  ownsClient?: boolean;
  /** Per-command stall timeout of the sink's own connections. Default 30000. */
  commandTimeoutMs?: number;
  /** SADDs per send. Default 2000. */
  maxKeysPerCommand?: number;
  /** Sends in flight per connection. Default 4. */
  maxInFlight?: number;
}

/** Tables a load's sizing splits at once (each table's splits run one after another). */
const PLAN_CONCURRENCY = 32;

/**
 * Writes batches in the dedup store's layouts, through the dedup store's writer (one SADD per
 * bucket or compact sub-bucket per batch, src/dedup/redis-writer.ts). 'sets' keeps raw keys (key
 * `{prefix}:{window}:{bucket}`, members = raw key bytes) so a Java service using it reads and
 * writes the same sets; 'compact' stores 64-bit digest members in intset sub-buckets. The loader
 * gives 'compact' batches whose "keys" are the 8 digest bytes, bucketed by digest bytes 8..15.
 */
export class RedisLayoutSink implements LoadSink {
  readonly name: string;
  readonly layout: LoaderLayout;
  private readonly prepared = new Map<string, Promise<void>>();
  private readonly router: PipeRouter;
  private readonly growth: TableGrowth;
  private readonly writer: RedisWriter;

  constructor(readonly redis: Redis | Cluster, readonly opts: RedisLayoutSinkOptions) {
    this.layout = opts.layout;
    this.name = `redis-${opts.layout}`;
    this.router = new PipeRouter(redis, { connectTimeoutMs: 5000, maxInFlight: opts.maxInFlight ?? 4, commandTimeoutMs: opts.commandTimeoutMs ?? 30_000 });
    this.growth = new TableGrowth(this.router);
    this.writer = new RedisWriter(this.router, this.growth, opts.maxKeysPerCommand ?? 2000, () => intsetLimitOf(redis));
  }

  /** Bucket count already recorded for `window` (first writer wins), if any. */
  async recordedBuckets(window: string): Promise<number | undefined> {
    const v = await this.redis.hget(layoutKeys.meta(this.opts.prefix, window), layoutKeys.metaField(this.layout));
    return v === null ? undefined : Number(v);
  }

  /** Records our bucket count for `window`, refusing to mix two bucketings in one window. */
  prepareWindow(window: string): Promise<void> {
    let p = this.prepared.get(window);
    if (!p) {
      p = (async () => {
        const v = await resolveWindowBuckets(this.redis, this.opts.prefix, window, this.layout, this.opts.buckets, true);
        if (v !== this.opts.buckets) {
          const mk = layoutKeys.meta(this.opts.prefix, window);
          throw new HashGateError(
            ErrorCodes.INVALID_OPTION,
            `--buckets: window ${window} of prefix ${this.opts.prefix} already uses ${v} ${this.layout} buckets (${mk}); load it with --buckets ${v}`,
            { details: { window, recorded: v, requested: this.opts.buckets } },
          );
        }
      })();
      p.catch(() => this.prepared.delete(window));
      this.prepared.set(window, p);
    }
    return p;
  }

  /**
   * Sizes a compact window for `rows` more members before the load writes any: every table is
   * split to what the window count will call for, while its sub-buckets are still empty (a split
   * then moves nothing). Best effort: without it the tables split as they fill.
   */
  async plan(info: { window: string; rows: number }): Promise<void> {
    if (this.layout !== 'compact') return;
    try {
      await this.prepareWindow(info.window);
      const wt = this.growth.window(`${this.opts.prefix}:${info.window}`, 'compact', this.opts.buckets, await intsetLimitOf(this.redis));
      const all = Array.from({ length: wt.T }, (_, t) => t);
      await wt.read(all);
      const expected = wt.count + info.rows;
      let next = 0;
      await Promise.all(Array.from({ length: Math.min(PLAN_CONCURRENCY, wt.T) }, async () => {
        while (next < wt.T) {
          const t = next++;
          await wt.splitTo(t, targetSubBuckets(t, expected, wt.T, wt.alpha));
        }
      }));
    } catch {
      // the window still grows as it fills
    }
  }

  async add(batch: SinkBatch): Promise<number> {
    // while the client is reconnecting, fail at once: the loader's backoff decides when to retry,
    // instead of every batch queueing behind ioredis' reconnect attempts
    const st = this.redis.status;
    if (st === 'reconnecting' || st === 'close' || st === 'end') throw new Error(`Connection is closed (client ${st})`);
    const n = batch.count;
    const bucket = batch.rowBuckets ?? new Uint32Array(n).fill(batch.bucket);
    const src: MemberSource = { base: `${this.opts.prefix}:${batch.window}`, layout: this.layout, buckets: this.opts.buckets, count: n, bucket };
    if (this.layout === 'compact') {
      src.dv = viewOf(batch.keys);
      src.offs = batch.keyOffsets;
    } else {
      const keys = batch.keys;
      const ko = batch.keyOffsets;
      src.member = (j) => Buffer.from(keys.buffer, keys.byteOffset + ko[j]!, ko[j + 1]! - ko[j]!);
      src.bytes = keys;
      src.offs = ko;
    }
    return this.writer.addGrouped(src);
  }

  async close(): Promise<void> {
    await this.growth.close().catch(() => undefined);
    this.router.close();
    if (this.opts.ownsClient === false) return;
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}
