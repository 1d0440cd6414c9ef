// Where loaded batches go. The loader only needs "add these members to this (window, bucket),
// idempotently, and tell me when it is acknowledged"; the Redis layouts implement that.
import { Command, type Cluster, type Redis } from 'ioredis';
import { ErrorCodes, HashGateError } from '../errors.js';
import { bucketKey, hllKey, metaField, metaKey } from '../dedup/layout.js';
import { copyWords, viewOf } from './buffers.js';

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
  /** Adds every member; must be idempotent (a retried batch re-adds). Resolves with the number of
   *  members Redis reported as new (best effort), rejects when the batch was not acknowledged. */
  add(batch: SinkBatch): Promise<number>;
  close(): Promise<void>;
}

/** Retry only what can heal by itself; WRONGTYPE, NOAUTH, NOPERM and the like fail at once. */
export function isTransient(err: unknown): boolean {
  const e = err as { code?: string; message?: string; name?: string };
  const msg = `${e?.name ?? ''} ${e?.code ?? ''} ${e?.message ?? ''}`;
  return /ECONNRESET|ECONNREFUSED|ECONNABORTED|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTCONN|Connection is closed|Stream isn't writeable|MaxRetriesPerRequest|enableOfflineQueue|Command timed out|timed out|LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY|OOM|Failed to refresh slots|None of startup nodes/i.test(msg);
}

/**
 * A SADD whose wire form is built by us: one Buffer per batch instead of ioredis encoding every
 * member argument. args keep only the key so Cluster still routes by its slot.
 */
class RawCommand extends Command {
  constructor(name: string, key: string, private readonly wire: Buffer) {
    super(name, [key], { replyEncoding: null });
  }
  override toWritable(): Buffer {
    return this.wire;
  }
}

const CRLF_0 = 13;
const CRLF_1 = 10;

/** Writes the decimal digits of a non-negative integer at buf[p]; returns the new position. */
function writeInt(buf: Buffer, p: number, v: number): number {
  if (v < 10) {
    buf[p] = 48 + v;
    return p + 1;
  }
  const s = String(v);
  for (let i = 0; i < s.length; i++) buf[p + i] = s.charCodeAt(i);
  return p + s.length;
}

/**
 * Signed 64-bit decimal of 8 little-endian bytes at src[p] (the compact layout's member), written
 * at out[q]; returns the new position. BigInt's own toString beats hand-rolled limb division 2x.
 */
const scratch8 = new Uint8Array(8);
const scratchView = new DataView(scratch8.buffer);
export function writeInt64Le(out: Buffer, q: number, src: Uint8Array, p: number): number {
  for (let i = 0; i < 8; i++) scratch8[i] = src[p + i]!;
  const s = scratchView.getBigInt64(0, true).toString();
  for (let i = 0; i < s.length; i++) out[q++] = s.charCodeAt(i);
  return q;
}

/** RESP bulk strings of a batch's members: raw key bytes ('sets') or int64 decimals ('compact'). */
export function encodeMembers(batch: SinkBatch, compact: boolean, headRoom = 0, rows?: Uint32Array, offsOut?: Uint32Array): Buffer {
  const n = rows ? rows.length : batch.count;
  const ko = batch.keyOffsets;
  const src = batch.keys;
  let bytes = 0;
  if (!compact) {
    if (rows) for (let j = 0; j < n; j++) bytes += ko[rows[j]! + 1]! - ko[rows[j]!]!;
    else bytes = ko[n]! - ko[0]!;
  }
  const out = Buffer.allocUnsafe(headRoom + (compact ? n * 28 : bytes + n * 15));
  const sdv = viewOf(src);
  const odv = viewOf(out);
  let p = headRoom;
  for (let j = 0; j < n; j++) {
    if (offsOut) offsOut[j] = p - headRoom;
    const i = rows ? rows[j]! : j;
    const s = ko[i]!;
    const e = ko[i + 1]!;
    out[p++] = 36; // '$'
    if (compact) {
      // reserve 2 digits for the length, write the number, then fill the length in
      const lenAt = p;
      p += 4;
      const end = writeInt64Le(out, p, src, s);
      const len = end - p;
      if (len < 10) {
        out.copyWithin(lenAt + 3, p, end);
        out[lenAt] = 48 + len;
        out[lenAt + 1] = CRLF_0;
        out[lenAt + 2] = CRLF_1;
        p = end - 1;
      } else {
        out[lenAt] = 48 + Math.floor(len / 10);
        out[lenAt + 1] = 48 + (len % 10);
        out[lenAt + 2] = CRLF_0;
        out[lenAt + 3] = CRLF_1;
        p = end;
      }
    } else {
      p = writeInt(out, p, e - s);
      out[p++] = CRLF_0;
      out[p++] = CRLF_1;
      p = copyWords(src, sdv, s, e, out, odv, p);
    }
    out[p++] = CRLF_0;
    out[p++] = CRLF_1;
  }
  if (offsOut) offsOut[n] = p - headRoom;
  return out.subarray(0, p);
}

/** `*<n+2>\r\n$len\r\nCMD\r\n$len\r\nkey\r\n` followed by the encoded members. */
export function commandWire(cmd: string, key: string, count: number, members: Buffer): Buffer {
  const head = `*${count + 2}\r\n$${cmd.length}\r\n${cmd}\r\n$${Buffer.byteLength(key)}\r\n${key}\r\n`;
  const hl = Buffer.byteLength(head);
  const out = Buffer.allocUnsafe(hl + members.length);
  out.write(head, 0, 'utf8');
  members.copy(out, hl);
  return out;
}

export type LoaderLayout = 'sets' | 'compact';

/** Key names come from the dedup store's layout module, so loader and store never disagree. */
export const layoutKeys = {
  bucket: (layout: LoaderLayout, prefix: string, window: string, bucket: number): string => bucketKey({ layout, prefix }, window, bucket),
  hll: (layout: LoaderLayout, prefix: string, window: string): string => hllKey(prefix, window, layout),
  meta: (prefix: string, window: string): string => metaKey(prefix, window),
  metaField: (layout: LoaderLayout): string => metaField(layout),
};

export interface RedisLayoutSinkOptions {
  layout: LoaderLayout;
  prefix: string;
  buckets: number;
  /** Also PFADD members to the window's HyperLogLog (what `hashgate stats` reads). Default true. */
  hll?: boolean;
  /** Quit the client on close(). Default true. */
  ownsClient?: boolean;
}

/**
 * Writes batches in the dedup store's layouts. 'sets' keeps raw keys (key
 * `{prefix}:{window}:{bucket}`, members = raw key bytes) so a Java service using it reads and
 * writes the same sets; 'compact' stores 64-bit digest members in intset buckets. The loader gives
 * 'compact' batches whose "keys" are the 8 digest bytes, bucketed by digest bytes 8..15.
 */
export class RedisLayoutSink implements LoadSink {
  readonly name: string;
  readonly layout: LoaderLayout;
  private readonly hll: boolean;
  private readonly prepared = new Map<string, Promise<void>>();

  constructor(readonly redis: Redis | Cluster, readonly opts: RedisLayoutSinkOptions) {
    this.layout = opts.layout;
    this.hll = opts.hll ?? true;
    this.name = `redis-${opts.layout}`;
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
        const mk = layoutKeys.meta(this.opts.prefix, window);
        const field = layoutKeys.metaField(this.layout);
        await this.redis.hsetnx(mk, field, String(this.opts.buckets));
        const v = Number(await this.redis.hget(mk, field));
        if (v !== this.opts.buckets) {
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

  /** Holds socket writes until uncork(): the commands of one batch leave in one writev. */
  private cork(): () => void {
    const streams: { cork(): void; uncork(): void }[] = [];
    const r = this.redis as unknown as { stream?: { cork(): void; uncork(): void }; nodes?: (role: string) => { stream?: { cork(): void; uncork(): void } }[] };
    if (typeof r.nodes === 'function') for (const n of r.nodes('master')) n.stream && streams.push(n.stream);
    else if (r.stream) streams.push(r.stream);
    for (const st of streams) st.cork();
    return () => {
      for (const st of streams) st.uncork();
    };
  }

  /** One SADD per bucket of a grouped batch, all written at once; one PFADD for the whole batch. */
  private async addGrouped(batch: SinkBatch, rb: Uint32Array): Promise<number> {
    const { layout, prefix } = this.opts;
    const n = batch.count;
    const compact = layout === 'compact';
    // every member is encoded once; SADDs copy their rows' encodings, PFADD copies them all
    const offs = new Uint32Array(n + 1);
    const all = encodeMembers(batch, compact, 0, undefined, offs);
    const allView = viewOf(all);
    // order rows by bucket: bucket * 2^20 + row sorts as one Float64Array (rows < 2^20)
    const order = new Float64Array(n);
    for (let i = 0; i < n; i++) order[i] = rb[i]! * 1048576 + i;
    order.sort();
    const r = this.redis as Redis;
    const adds: Promise<unknown>[] = [];
    const uncork = this.cork();
    try {
      for (let a = 0; a < n; ) {
        const bucket = Math.floor(order[a]! / 1048576);
        let b = a + 1;
        let bytes = 0;
        while (b < n && Math.floor(order[b]! / 1048576) === bucket) b++;
        for (let j = a; j < b; j++) {
          const row = order[j]! % 1048576;
          bytes += offs[row + 1]! - offs[row]!;
        }
        const key = layoutKeys.bucket(layout, prefix, batch.window, bucket);
        const head = `*${b - a + 2}\r\n$4\r\nSADD\r\n$${Buffer.byteLength(key)}\r\n${key}\r\n`;
        const hl = Buffer.byteLength(head);
        const wire = Buffer.allocUnsafe(hl + bytes);
        wire.write(head, 0, 'utf8');
        const wv = viewOf(wire);
        let p = hl;
        for (let j = a; j < b; j++) {
          const row = order[j]! % 1048576;
          p = copyWords(all, allView, offs[row]!, offs[row + 1]!, wire, wv, p);
        }
        adds.push(r.sendCommand(new RawCommand('sadd', key, wire)) as Promise<unknown>);
        a = b;
      }
      if (this.hll) {
        const hk = layoutKeys.hll(layout, prefix, batch.window);
        adds.push((r.sendCommand(new RawCommand('pfadd', hk, commandWire('PFADD', hk, n, all))) as Promise<unknown>).then(() => 0));
      }
    } finally {
      uncork();
    }
    const res = await Promise.all(adds);
    let added = 0;
    for (const v of res) added += Number(v);
    return added;
  }

  async add(batch: SinkBatch): Promise<number> {
    // while the client is reconnecting, fail at once: the loader's backoff decides when to retry,
    // instead of every batch queueing behind ioredis' reconnect attempts
    const st = this.redis.status;
    if (st === 'reconnecting' || st === 'close' || st === 'end') throw new Error(`Connection is closed (client ${st})`);
    if (batch.rowBuckets) return this.addGrouped(batch, batch.rowBuckets);
    const { layout, prefix } = this.opts;
    const key = layoutKeys.bucket(layout, prefix, batch.window, batch.bucket);
    // members are encoded once, right after room for the SADD header; PFADD copies them
    const head = `*${batch.count + 2}\r\n$4\r\nSADD\r\n$${Buffer.byteLength(key)}\r\n${key}\r\n`;
    const hl = Buffer.byteLength(head);
    const wire = encodeMembers(batch, layout === 'compact', hl);
    wire.write(head, 0, 'utf8');
    const r = this.redis as Redis;
    if (this.hll) {
      const hk = layoutKeys.hll(layout, prefix, batch.window);
      const members = wire.subarray(hl);
      const uncork = this.cork();
      let sadd: Promise<unknown>;
      let pfadd: Promise<unknown>;
      try {
        sadd = r.sendCommand(new RawCommand('sadd', key, wire)) as Promise<unknown>;
        pfadd = r.sendCommand(new RawCommand('pfadd', hk, commandWire('PFADD', hk, batch.count, members))) as Promise<unknown>;
      } finally {
        uncork();
      }
      const [added] = await Promise.all([sadd, pfadd]);
      return Number(added);
    }
    return Number(await r.sendCommand(new RawCommand('sadd', key, wire)));
  }

  async close(): Promise<void> {
    if (this.opts.ownsClient === false) return;
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}
