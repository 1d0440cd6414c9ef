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

/** One of the reader's two buffers: buf[0, fill) holds file bytes starting at offset `base`. */
interface Half {
  buf: Buffer;
  base: number;
  fill: number;
  eof: boolean;
}

/**
 * Double-buffered: while the caller parses one buffer, the next chunk is already being read into
 * the other (the read runs on libuv's thread pool), so parsing rarely waits for I/O.
 */
export class FileChunkReader {
  private fh: FileHandle | undefined;
  private readonly halves: [Half, Half];
  private cur = 0;
  private pending: Promise<void> | undefined;

  /** `endOffset`: stop there as if the file ended (a region that ends on a line boundary).
   *  `buffers`: two buffers of `bufferSize` bytes to read into instead of new ones (a worker
   *  reading region after region reuses its pair; one reader at a time may use them). */
  constructor(private readonly path: string, bufferSize: number, startOffset = 0, private readonly endOffset = Infinity, buffers?: readonly [Buffer, Buffer]) {
    this.halves = [
      { buf: buffers?.[0] ?? Buffer.allocUnsafe(bufferSize), base: startOffset, fill: 0, eof: false },
      { buf: buffers?.[1] ?? Buffer.allocUnsafe(bufferSize), base: startOffset, fill: 0, eof: false },
    ];
  }

  async open(): Promise<void> {
    this.fh = await open(this.path, 'r');
    this.pending = this.fillHalf(this.halves[0]);
  }

  async close(): Promise<void> {
    await this.pending?.catch(() => undefined);
    await this.fh?.close();
    this.fh = undefined;
  }

  /** Reads until the half is full or the file ends. */
  private async fillHalf(s: Half): Promise<void> {
    while (s.fill < s.buf.length && !s.eof) {
      const want = Math.min(s.buf.length - s.fill, this.endOffset - (s.base + s.fill));
      if (want <= 0) {
        s.eof = true;
        break;
      }
      const { bytesRead } = await this.fh!.read(s.buf, s.fill, want, s.base + s.fill);
      if (bytesRead === 0) s.eof = true;
      s.fill += bytesRead;
    }
  }

  /** Moves x[from, fill) to the other half's front and starts filling the rest of it. */
  private handOff(x: Half, from: number): void {
    const y = this.halves[this.cur ^ 1]!;
    y.base = x.base + from;
    y.fill = x.buf.copy(y.buf, 0, from, x.fill);
    y.eof = x.eof;
    this.cur ^= 1;
    this.pending = this.fillHalf(y);
  }

  /**
   * Next region of complete lines, an oversize line to reject, or null at end of file.
   * The returned buffer stays valid until the following call.
   */
  async next(): Promise<Region | OversizeLine | null> {
    await this.pending;
    this.pending = undefined;
    const x = this.halves[this.cur]!;
    if (x.fill === 0) return null;
    const lastNl = x.buf.lastIndexOf(NL, x.fill - 1);
    if (lastNl >= 0 && !(x.eof && lastNl < x.fill - 1)) {
      const r: Region = { buf: x.buf, start: 0, end: lastNl + 1, offset: x.base, final: false };
      this.handOff(x, lastNl + 1);
      return r;
    }
    if (x.eof) {
      const r: Region = { buf: x.buf, start: 0, end: x.fill, offset: x.base, final: true };
      this.handOff(x, x.fill);
      return r;
    }
    // buffer full and no newline: one line longer than the buffer; skip to its end
    const offset = x.base;
    const head = Buffer.from(x.buf.subarray(0, Math.min(256, x.fill)));
    for (;;) {
      const nl = x.buf.indexOf(NL);
      if (nl >= 0 && nl < x.fill) {
        this.handOff(x, nl + 1);
        return { offset, head, next: x.base + nl + 1 };
      }
      x.base += x.fill;
      x.fill = 0;
      await this.fillHalf(x);
      if (x.fill === 0) {
        this.handOff(x, 0);
        return { offset, head, next: x.base };
      }
    }
  }
}

export const isOversize = (r: Region | OversizeLine): r is OversizeLine => 'head' in r;
