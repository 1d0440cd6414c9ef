// RESP commands built straight into one Buffer, and the ioredis command that sends such a buffer.
// ioredis would otherwise create a string per member and re-encode every argument (~10% of the CPU
// of a batch); the dedup store's request-record script calls are written here.
import { Command } from 'ioredis';
import { encodeUtf8, utf8Length } from '../hash/keys.js';
import { int64Bulk } from './int64.js';

export type Member = string | Buffer;

/** Scratch for the length prefix: header() writes its digits backwards here. */
const digits = new Uint8Array(24);

/**
 * Writers up to SLAB_TAKE bytes are carved from a shared slab, as Node's own Buffer pool does for
 * small buffers: a merged batch's command (~10 KiB) then costs no ArrayBuffer of its own, whose
 * allocation and collection showed in profiles. A region is never handed out twice; a slab is
 * freed by the GC once no command built in it is referenced any more.
 */
const SLAB_BYTES = 256 * 1024;
const SLAB_TAKE = 32 * 1024;
let slab: Buffer | undefined;
let slabOff = 0;

function take(size: number): Buffer {
  if (size > SLAB_TAKE) return Buffer.allocUnsafe(size);
  if (slab === undefined || slabOff + size > SLAB_BYTES) {
    slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
    slabOff = 0;
  }
  const b = slab.subarray(slabOff, slabOff + size);
  slabOff += size;
  return b;
}

export class RespWriter {
  buf: Buffer;
  p = 0;
  /** View of `buf` for copying 4 bytes at a time (made on first use: most writers never copy by words). */
  private dv: DataView | undefined;
  /** The slab this writer's region was carved from, and where that region ends in it. */
  private from: Buffer | undefined;
  private end = 0;

  constructor(size: number) {
    this.buf = take(Math.max(64, size));
    if (this.buf.buffer === slab?.buffer) {
      this.from = slab;
      this.end = slabOff;
    }
  }

  private ensure(n: number): void {
    if (this.p + n <= this.buf.length) return;
    const b = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.p + n));
    this.buf.copy(b, 0, 0, this.p);
    this.buf = b;
    this.from = undefined;
    this.dv = undefined;
  }

  /** Non-negative integer as ASCII digits. */
  private uint(v: number): void {
    if (v < 100) {
      if (v >= 10) this.buf[this.p++] = 48 + ((v / 10) | 0);
      this.buf[this.p++] = 48 + (v % 10);
      return;
    }
    let n = 0;
    while (v > 0) {
      const q = Math.floor(v / 10);
      digits[n++] = 48 + (v - q * 10);
      v = q;
    }
    while (n > 0) this.buf[this.p++] = digits[--n]!;
  }

  private crlf(): void {
    this.buf[this.p++] = 13;
    this.buf[this.p++] = 10;
  }

  header(prefix: number, n: number): void {
    this.ensure(24);
    this.buf[this.p++] = prefix;
    this.uint(n);
    this.crlf();
  }

  array(n: number): void {
    this.header(42, n);
  }

  str(s: string): void {
    const n = s.length;
    if (n <= 64) {
      // Short ASCII (bucket keys, counts, command names): copied char by char, no native call
      // to measure and another to encode; same bytes. Any other char rewinds to the general path.
      this.header(36, n);
      this.ensure(n + 2);
      const b = this.buf;
      const p0 = this.p;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 128) break;
        b[p0 + i] = c;
      }
      if (i === n) {
        this.p = p0 + n;
        this.crlf();
        return;
      }
      this.p = p0 - 3 - (n >= 10 ? 2 : 1); // back to the '$' of the header written above
    }
    const len = Buffer.byteLength(s);
    this.header(36, len);
    this.ensure(len + 2);
    this.p += this.buf.write(s, this.p, len, 'utf8');
    this.crlf();
  }

  /** Bulk string of a non-negative integer's decimal digits (the bytes str(String(v)) writes). */
  uintStr(v: number): void {
    if (v < 10) {
      this.ensure(8);
      const b = this.buf;
      b[this.p++] = 36;
      b[this.p++] = 49;
      this.crlf();
      b[this.p++] = 48 + v;
      this.crlf();
      return;
    }
    this.str(String(v));
  }

  /** Bulk string of the bytes src[s..e); `sdv` (a view of src) lets keys be copied 4 bytes at a time. */
  bulk(src: Uint8Array, s: number, e: number, sdv?: DataView): void {
    this.header(36, e - s);
    this.raw(src, s, e, sdv);
    this.crlf();
  }

  /**
   * Starts a bulk string of `len` bytes that the caller writes into `buf` from the returned offset
   * (before writing anything else): for arguments built byte by byte, without a buffer of their own.
   */
  bulkSpace(len: number): number {
    this.header(36, len);
    this.ensure(len + 2);
    const at = this.p;
    this.p += len;
    this.crlf();
    return at;
  }

  /**
   * Bulk string of `prefix`'s bytes followed by the UTF-8 of `s`: a key under a key prefix, with no
   * prefixed string made and no native call to measure it.
   */
  prefixed(prefix: Uint8Array, s: string): void {
    const pl = prefix.length;
    const at = this.bulkSpace(pl + utf8Length(s));
    const b = this.buf;
    // a prefix of a few dozen bytes copies faster in JS than through a native copy per key
    for (let i = 0; i < pl; i++) b[at + i] = prefix[i]!;
    encodeUtf8(s, b, at + pl, b);
  }

  member(m: Member): void {
    if (typeof m === 'string') this.str(m);
    else this.bulk(m, 0, m.length);
  }

  /** Bulk string of int64Decimal(dv, o): a compact member, written without a string or BigInt per member. */
  int64(dv: DataView, o: number): void {
    this.ensure(28);
    this.p = int64Bulk(this.buf, this.p, dv, o);
  }

  /** Bytes already in RESP form (e.g. members encoded once for several commands), copied as they are. */
  raw(src: Uint8Array, s: number, e: number, sdv?: DataView): void {
    const n = e - s;
    this.ensure(n + 2);
    if (n > 128) {
      this.buf.set(src.subarray(s, e), this.p);
      this.p += n;
      return;
    }
    // measured: keys of a few dozen bytes copy faster in JS (by words when a view is at hand)
    // than through set() on a subarray
    const b = this.buf;
    let p = this.p;
    if (sdv !== undefined) {
      const dv = (this.dv ??= new DataView(b.buffer, b.byteOffset, b.byteLength));
      for (; s + 4 <= e; s += 4, p += 4) dv.setUint32(p, sdv.getUint32(s, true), true);
    }
    for (; s < e; s++) b[p++] = src[s]!;
    this.p = p;
  }

  /**
   * The command written so far. Its unused tail goes back to the slab when no writer took a region
   * after this one; the writer then copies to a buffer of its own before writing more.
   */
  bytes(): Buffer {
    if (this.from !== undefined && this.from === slab && slabOff === this.end) {
      const used = (this.p + 7) & ~7;
      slabOff = this.end - this.buf.length + used;
      this.buf = this.buf.subarray(0, this.p);
      this.end = slabOff;
      this.dv = undefined;
      // region [start, start + used) stays this writer's; nothing past it is referenced by it
      this.from = undefined;
    }
    return this.buf.subarray(0, this.p);
  }
}

/**
 * A command whose wire form we built; reply left as a Buffer. `keys` are only what a Cluster
 * routes by (the wire already holds every argument); a standalone client needs none.
 */
export class RawCommand extends Command {
  constructor(
    name: string,
    keys: string[],
    private readonly wire: Buffer,
  ) {
    super(name, keys, { replyEncoding: null });
  }

  override toWritable(): Buffer {
    return this.wire;
  }
}

/**
 * A RawCommand that ioredis never times out: for callers that time their commands themselves from
 * when Redis can start on them (src/redis/inflight.ts); ioredis' commandTimeout runs from when a
 * command is queued, and fires before the reply is read whenever our own event loop was busy.
 */
export class UntimedRawCommand extends RawCommand {
  override setTimeout(): void {}
}
