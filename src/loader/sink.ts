// Where loaded batches go. The loader only needs "add these members to this (window, bucket),
// idempotently, and tell me when it is acknowledged"; the Redis layouts implement that.
import { Command, type Cluster, type Redis } from 'ioredis';

/** One batch of one (window, bucket): key i = keys[keyOffsets[i] .. keyOffsets[i+1]). */
export interface SinkBatch {
  window: string;
  bucket: number;
  count: number;
  keys: Uint8Array;
  keyOffsets: Uint32Array;
}

export interface LoadSink {
  readonly name: string;
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

/** RESP for `SADD key m1 m2 ...` built in one allocation. */
export function encodeSadd(key: string, batch: SinkBatch): Buffer {
  const keyBuf = Buffer.from(key);
  const n = batch.count;
  const ko = batch.keyOffsets;
  const bytes = ko[n]! - ko[0]!;
  // per member: '$' + up to 10 digits + CRLF + data + CRLF
  const size = 64 + keyBuf.length + bytes + n * 15;
  const out = Buffer.allocUnsafe(size);
  let p = 0;
  out[p++] = 42; // '*'
  p = writeInt(out, p, n + 2);
  out[p++] = CRLF_0;
  out[p++] = CRLF_1;
  p += out.write('$4\r\nSADD\r\n$', p, 'latin1');
  p = writeInt(out, p, keyBuf.length);
  out[p++] = CRLF_0;
  out[p++] = CRLF_1;
  p += keyBuf.copy(out, p);
  out[p++] = CRLF_0;
  out[p++] = CRLF_1;
  const src = batch.keys;
  for (let i = 0; i < n; i++) {
    const s = ko[i]!;
    const e = ko[i + 1]!;
    out[p++] = 36; // '$'
    p = writeInt(out, p, e - s);
    out[p++] = CRLF_0;
    out[p++] = CRLF_1;
    if (e - s < 48) for (let j = s; j < e; j++) out[p++] = src[j]!;
    else {
      out.set(src.subarray(s, e), p);
      p += e - s;
    }
    out[p++] = CRLF_0;
    out[p++] = CRLF_1;
  }
  return out.subarray(0, p);
}

/**
 * The seed-compatible `sets` layout: key `{prefix}:{window}:{bucket}`, members = raw key bytes,
 * so a Java service using the seed's scheme reads and writes the same sets.
 */
export class RedisSetsSink implements LoadSink {
  readonly name = 'redis-sets';
  constructor(private readonly redis: Redis | Cluster, private readonly prefix: string, private readonly ownsClient = true) {}

  keyOf(window: string, bucket: number): string {
    return `${this.prefix}:${window}:${bucket}`;
  }

  async add(batch: SinkBatch): Promise<number> {
    const key = this.keyOf(batch.window, batch.bucket);
    const cmd = new RawCommand('sadd', key, encodeSadd(key, batch));
    const r = await (this.redis as Redis).sendCommand(cmd);
    return typeof r === 'number' ? r : Number(r);
  }

  async close(): Promise<void> {
    if (!this.ownsClient) return;
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}
