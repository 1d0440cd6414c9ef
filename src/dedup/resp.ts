// RESP for the one EVALSHA a standalone firstSeen batch sends, built straight into one Buffer:
// ioredis would otherwise create a string per member and re-encode every argument (~10% of the
// CPU of a batch), and compact members are written as decimals directly from the digest bytes.
import { Command } from 'ioredis';
import type { Member } from './layout.js';

const digits = new Uint8Array(24);
/** Separate scratch for int64(): header() reuses `digits` for the length prefix. */
const num = new Uint8Array(24);

export class RespWriter {
  buf: Buffer;
  p = 0;

  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(Math.max(64, size));
  }

  private ensure(n: number): void {
    if (this.p + n <= this.buf.length) return;
    const b = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.p + n));
    this.buf.copy(b, 0, 0, this.p);
    this.buf = b;
  }

  /** Non-negative integer as ASCII digits. */
  private uint(v: number): void {
    if (v < 10) {
      this.buf[this.p++] = 48 + v;
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
    const len = Buffer.byteLength(s);
    this.header(36, len);
    this.ensure(len + 2);
    this.p += this.buf.write(s, this.p, len, 'utf8');
    this.crlf();
  }

  member(m: Member): void {
    if (typeof m === 'string') this.str(m);
    else {
      this.header(36, m.length);
      this.ensure(m.length + 2);
      m.copy(this.buf, this.p);
      this.p += m.length;
      this.crlf();
    }
  }

  /** Bulk string of the signed 64-bit decimal hi * 2^32 + lo (same digits as int64Decimal). */
  int64(lo: number, hi: number): void {
    let a = hi * 42949;
    let b = hi * 67296 + lo;
    const q = Math.floor(b / 1e5);
    a += q;
    b -= q * 1e5;
    // Build the digits backwards: |v| = A * 1e5 + B with 0 <= B < 1e5.
    let neg = false;
    let A = a;
    let B = b;
    if (a < 0) {
      neg = true;
      if (b === 0) A = -a;
      else {
        A = -a - 1;
        B = 1e5 - b;
      }
    }
    let n = 0;
    if (A === 0) {
      do {
        const d = Math.floor(B / 10);
        num[n++] = 48 + (B - d * 10);
        B = d;
      } while (B > 0);
    } else {
      for (let k = 0; k < 5; k++) {
        const d = Math.floor(B / 10);
        num[n++] = 48 + (B - d * 10);
        B = d;
      }
      while (A > 0) {
        const d = Math.floor(A / 10);
        num[n++] = 48 + (A - d * 10);
        A = d;
      }
    }
    if (neg) num[n++] = 45;
    this.header(36, n);
    this.ensure(n + 2);
    while (n > 0) this.buf[this.p++] = num[--n]!;
    this.crlf();
  }

  bytes(): Buffer {
    return this.buf.subarray(0, this.p);
  }
}

/** A command whose wire form we built; reply left as a Buffer. */
export class RawCommand extends Command {
  constructor(
    name: string,
    args: Array<string | Buffer>,
    private readonly wire: Buffer,
  ) {
    super(name, args, { replyEncoding: null });
  }

  override toWritable(): Buffer {
    return this.wire;
  }
}
