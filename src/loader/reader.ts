// Streams one file through a fixed buffer: yields regions of complete lines with their absolute
// byte offsets, so memory stays constant whatever the file size. A line longer than the buffer is
// reported and skipped up to its newline instead of growing the buffer.
import { open, type FileHandle } from 'node:fs/promises';
import { NL } from './parse.js';

export interface Region {
  buf: Buffer;
  start: number;
  end: number;
  /** Absolute file offset of buf[start]. */
  offset: number;
  /** True when the region runs to end of file (its last line may lack a newline). */
  final: boolean;
}

export interface OversizeLine {
  /** Absolute offset of the line start. */
  offset: number;
  /** First bytes of the line (for the rejects file). */
  head: Buffer;
  /** Offset just past the line's newline (or EOF). */
  next: number;
}

export class FileChunkReader {
  private fh: FileHandle | undefined;
  private readonly buf: Buffer;
  /** Absolute file offset of buf[0]. */
  private base: number;
  private fill = 0;
  private pos = 0;
  private eof = false;

  constructor(private readonly path: string, bufferSize: number, startOffset = 0) {
    this.buf = Buffer.allocUnsafe(bufferSize);
    this.base = startOffset;
  }

  async open(): Promise<void> {
    this.fh = await open(this.path, 'r');
  }

  async close(): Promise<void> {
    await this.fh?.close();
    this.fh = undefined;
  }

  private async readMore(): Promise<void> {
    // keep the unconsumed tail (a partial line) at the front, then fill the rest
    if (this.pos > 0) {
      this.buf.copyWithin(0, this.pos, this.fill);
      this.base += this.pos;
      this.fill -= this.pos;
      this.pos = 0;
    }
    while (this.fill < this.buf.length && !this.eof) {
      const { bytesRead } = await this.fh!.read(this.buf, this.fill, this.buf.length - this.fill, this.base + this.fill);
      if (bytesRead === 0) this.eof = true;
      this.fill += bytesRead;
    }
  }

  /**
   * Next region of complete lines, an oversize line to reject, or null at end of file.
   * The returned buffer is reused by the next call.
   */
  async next(): Promise<Region | OversizeLine | null> {
    await this.readMore();
    if (this.fill === 0) return null;
    const lastNl = this.buf.lastIndexOf(NL, this.fill - 1);
    if (lastNl >= 0 && !(this.eof && lastNl < this.fill - 1)) {
      const r: Region = { buf: this.buf, start: 0, end: lastNl + 1, offset: this.base, final: false };
      this.pos = lastNl + 1;
      return r;
    }
    if (this.eof) {
      const r: Region = { buf: this.buf, start: 0, end: this.fill, offset: this.base, final: true };
      this.pos = this.fill;
      return r;
    }
    // buffer full and no newline: one line longer than the buffer
    const offset = this.base;
    const head = Buffer.from(this.buf.subarray(0, Math.min(256, this.fill)));
    for (;;) {
      const nl = this.buf.indexOf(NL, this.pos);
      if (nl >= 0 && nl < this.fill) {
        this.pos = nl + 1;
        return { offset, head, next: this.base + this.pos };
      }
      this.pos = this.fill;
      await this.readMore();
      if (this.fill === 0) return { offset, head, next: this.base };
    }
  }
}

export const isOversize = (r: Region | OversizeLine): r is OversizeLine => 'head' in r;
