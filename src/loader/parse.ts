// Byte-level line parser for export files: turns a region of complete lines into packed keys
// (written straight into the hashing kernel's memory) plus per-row line positions, without
// creating a JS string per row. Rejected lines are collected separately and never stop a load.
import { isUtf8 } from 'node:buffer';
import { MAX_KEY_BYTES } from '../util/limits.js';

export const NL = 10;
export const CR = 13;

/** Why a line was rejected; the names are what the rejects file and the summary show. */
export const REJECT_NAMES = ['', 'empty', 'field-count', 'invalid-utf8', 'too-long', 'bad-window', 'key-too-long', 'too-many-windows'] as const;
export const R_EMPTY = 1;
export const R_FIELDS = 2;
export const R_UTF8 = 3;
export const R_TOO_LONG = 4;
export const R_WINDOW = 5;
/** The key (the selected fields, concatenated) is longer than the library accepts for a lookup. */
export const R_KEY_TOO_LONG = 6;
/** The row's window would exceed the loader's window limit. */
export const R_WINDOWS_CAP = 7;
export type RejectName = Exclude<(typeof REJECT_NAMES)[number], ''>;

/** More fields than this on one line is treated as a wrong field count (bounded scratch space). */
export const MAX_FIELDS = 256;

export interface ParseSpec {
  /** Field delimiter byte ('|' for Hive exports written with `fields terminated BY '|'`). */
  delimiter: number;
  /** Which fields form the key, in order; null = all fields concatenated (e.g. name|idNo -> name+idNo). */
  fields: readonly number[] | null;
  /** Expected fields per line; 0 = take it from the first well-formed line (the loader never
   *  passes 0: it samples the input and takes the majority count, see sampleFieldCount). */
  fieldCount: number;
  /** Longest accepted line in bytes, without its line ending. */
  maxLineBytes: number;
  /** Longest accepted key in bytes; default MAX_KEY_BYTES, what `firstSeen` accepts, so every
   *  loaded key can be queried. */
  maxKeyBytes?: number;
  /** Field holding the row's date when windows come from the data; -1 = fixed window. */
  windowField: number;
}

export interface ParseOutput {
  /** Key bytes, key i = keyBytes[keyOffsets[i] .. keyOffsets[i+1]). */
  keyBytes: Uint8Array;
  keyOffsets: Uint32Array;
}

/**
 * Appends to `out` the start of every line in buf[start, end) that is not valid UTF-8, in order.
 * A run of whole lines is valid exactly when each of its lines is (LF never occurs inside a
 * multi-byte sequence), so runs are halved at a line start until each bad line stands alone:
 * a few native checks per bad line instead of one per line.
 */
export function invalidUtf8Lines(buf: Uint8Array, start: number, end: number, out: number[]): void {
  if (isUtf8(buf.subarray(start, end))) return;
  const mid = start + ((end - start) >> 1);
  // cut after the first LF at or past the middle, else after the last LF before it
  let nl = buf.indexOf(NL, mid);
  if (nl < 0 || nl + 1 >= end) nl = mid > start ? buf.lastIndexOf(NL, mid - 1) : -1;
  if (nl < start || nl + 1 >= end) {
    out.push(start);
    return;
  }
  invalidUtf8Lines(buf, start, nl + 1, out);
  invalidUtf8Lines(buf, nl + 1, end, out);
}

/**
 * Parses one buffer region at a time. Outputs are overwritten by every `parse` call; the caller
 * consumes them (hash, bucket, copy) before parsing the next region.
 */
export class ChunkParser {
  fieldCount: number;
  readonly keyBytes: Uint8Array;
  readonly keyOffsets: Uint32Array;
  /** Per accepted row: line start/end (end excludes CR/LF) relative to the parsed buffer. */
  readonly rowStart: Uint32Array;
  readonly rowEnd: Uint32Array;
  /** Per accepted row: 0-based line index inside the parsed region. */
  readonly rowLine: Uint32Array;
  /** Per accepted row: window field position (only filled when spec.windowField >= 0). */
  readonly rowWinStart: Uint32Array;
  readonly rowWinEnd: Uint32Array;
  count = 0;
  /** Lines seen in the last region (accepted + rejected). */
  lines = 0;
  /** Rejects of the last region: line index, start, end, reason code. Rare, so plain arrays. */
  rejLine: number[] = [];
  rejStart: number[] = [];
  rejEnd: number[] = [];
  rejReason: number[] = [];
  /** Starts of the last region's lines that are not valid UTF-8, ascending, then -1. */
  private readonly badStarts: number[] = [];

  private readonly spec: ParseSpec;
  private readonly keyView: DataView;
  private rowsN = 0;
  private lineN = 0;
  private readonly fieldStart = new Int32Array(MAX_FIELDS + 1);
  private readonly maxField: number;
  private readonly maxKey: number;

  constructor(spec: ParseSpec, out: ParseOutput, maxRows: number) {
    this.spec = spec;
    this.maxKey = spec.maxKeyBytes ?? MAX_KEY_BYTES;
    this.fieldCount = spec.fieldCount;
    this.keyBytes = out.keyBytes;
    this.keyOffsets = out.keyOffsets;
    this.keyView = new DataView(out.keyBytes.buffer, out.keyBytes.byteOffset, out.keyBytes.byteLength);
    this.rowStart = new Uint32Array(maxRows);
    this.rowEnd = new Uint32Array(maxRows);
    this.rowLine = new Uint32Array(maxRows);
    const win = spec.windowField >= 0;
    this.rowWinStart = new Uint32Array(win ? maxRows : 0);
    this.rowWinEnd = new Uint32Array(win ? maxRows : 0);
    let mf = spec.windowField;
    for (const f of spec.fields ?? []) mf = Math.max(mf, f);
    this.maxField = mf;
  }

  /**
   * Parses the lines in buf[start, end). Every line must end with LF except, when `final` is
   * true, the last one (a file without a final newline). Key bytes must fit in keyBytes: the
   * caller sizes it to at least `end - start`.
   */
  parse(buf: Uint8Array, start: number, end: number, final: boolean): void {
    this.count = 0;
    this.lines = 0;
    this.rejLine.length = 0;
    this.rejStart.length = 0;
    this.rejEnd.length = 0;
    this.rejReason.length = 0;
    this.keyOffsets[0] = 0;
    if (end <= start) return;
    // One native validation of the whole region; when it has bad bytes, native checks of ever
    // smaller runs of whole lines find the bad lines, so the others keep the fast path.
    const bad = this.badStarts;
    bad.length = 0;
    if (!isUtf8(buf.subarray(start, end))) invalidUtf8Lines(buf, start, end, bad);
    bad.push(-1);
    if (this.spec.fields === null && this.spec.windowField < 0) this.parseAll(buf, start, end, final);
    else this.parseSelected(buf, start, end, final);
  }

  private reject(line: number, s: number, e: number, reason: number): void {
    this.rejLine.push(line);
    this.rejStart.push(s);
    this.rejEnd.push(e);
    this.rejReason.push(reason);
  }

  /**
   * Fast path: key = the line without its delimiters (all fields concatenated, in order). Scans
   * 4 bytes at a time (SWAR): every word is stored to the key as is, and when it holds an LF or
   * the delimiter the key and the scan advance only up to the first such byte, found from the
   * word's mask, so no plain byte is ever handled one at a time (but in a region's last 3 bytes).
   * The store may run up to 3 bytes past the key: they are overwritten by the next bytes, and
   * stay inside keyBytes because a key never holds more bytes than the scan has read.
   */
  private parseAll(buf: Uint8Array, start: number, end: number, final: boolean): void {
    const delim = this.spec.delimiter;
    const kb = this.keyBytes;
    const kdv = this.keyView;
    const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    const dmask = (delim * 0x01010101) | 0;
    const end4 = end - 4;
    const maxLen = this.spec.maxLineBytes;
    const maxKey = this.maxKey;
    const ko = this.keyOffsets;
    const rowStart = this.rowStart;
    const rowEnd = this.rowEnd;
    const rowLine = this.rowLine;
    let fc = this.fieldCount;
    // start of the next line that is not valid UTF-8 (-1: none left)
    const bad = this.badStarts;
    let nextBad = bad[0]!;
    let badIdx = 0;
    let rows = 0;
    let line = 0;
    let kp = 0;
    let ls = start;
    let nd = 0;
    let i = start;
    while (i < end) {
      let b: number;
      if (i <= end4) {
        const v = dv.getInt32(i, true);
        const x = v ^ 0x0a0a0a0a;
        const y = v ^ dmask;
        // classic "word has a zero byte" test on v^LF and v^delimiter; its lowest set bit marks
        // the first such byte exactly (borrows only flag bytes above a real zero byte)
        const m = (((x - 0x01010101) & ~x) | ((y - 0x01010101) & ~y)) & 0x80808080;
        kdv.setInt32(kp, v, true);
        if (m === 0) {
          kp += 4;
          i += 4;
          continue;
        }
        const t = (31 - Math.clz32(m & -m)) >> 3;
        kp += t;
        i += t;
        b = buf[i]!;
      } else {
        b = buf[i]!;
        if (b !== NL && b !== delim) {
          kb[kp++] = b;
          i++;
          continue;
        }
      }
      if (b !== NL) {
        nd++;
        i++;
        continue;
      }
      // end of line inlined for the common case (a good line); anything else takes endLineAll
      const cr = i > ls && buf[i - 1] === CR && delim !== CR ? 1 : 0;
      const le = i - cr;
      const kEnd = kp - cr;
      if (le > ls && le - ls <= maxLen && nd + 1 === fc && kEnd > ko[rows]! && kEnd - ko[rows]! <= maxKey && ls !== nextBad) {
        rowStart[rows] = ls;
        rowEnd[rows] = le;
        rowLine[rows] = line++;
        ko[++rows] = kEnd;
        kp = kEnd;
      } else {
        this.rowsN = rows;
        this.lineN = line;
        const isBad = ls === nextBad;
        if (isBad) nextBad = bad[++badIdx]!;
        kp = this.endLineAll(buf, ls, i, nd, kp, isBad);
        rows = this.rowsN;
        line = this.lineN;
        fc = this.fieldCount;
      }
      nd = 0;
      ls = ++i;
    }
    this.rowsN = rows;
    this.lineN = line;
    if (final && ls < end) this.endLineAll(buf, ls, end, nd, kp, ls === nextBad);
    this.count = this.rowsN;
    this.lines = this.lineN;
  }

  /** Validates one line of the fast path; returns the key write position after it. */
  private endLineAll(buf: Uint8Array, ls: number, lineEnd: number, nd: number, kp: number, badUtf8: boolean): number {
    const ko = this.keyOffsets;
    const rows = this.rowsN;
    const kStart = ko[rows]!;
    let le = lineEnd;
    if (le > ls && buf[le - 1] === CR) {
      le--;
      if (this.spec.delimiter !== CR) kp--;
    }
    let reason = 0;
    if (le === ls) reason = R_EMPTY;
    else if (le - ls > this.spec.maxLineBytes) reason = R_TOO_LONG;
    else if (badUtf8) reason = R_UTF8;
    else if (this.fieldCount === 0) this.fieldCount = nd + 1;
    if (reason === 0 && nd + 1 !== this.fieldCount) reason = R_FIELDS;
    if (reason === 0 && kp === kStart) reason = R_EMPTY;
    if (reason === 0 && kp - kStart > this.maxKey) reason = R_KEY_TOO_LONG;
    const line = this.lineN++;
    if (reason !== 0) {
      this.reject(line, ls, le, reason);
      return kStart;
    }
    this.rowStart[rows] = ls;
    this.rowEnd[rows] = le;
    this.rowLine[rows] = line;
    this.rowsN = rows + 1;
    ko[rows + 1] = kp;
    return kp;
  }

  /** General path: record field boundaries, then copy the selected fields in the given order. */
  private parseSelected(buf: Uint8Array, start: number, end: number, final: boolean): void {
    const delim = this.spec.delimiter;
    const maxLen = this.spec.maxLineBytes;
    const fields = this.spec.fields;
    const wf = this.spec.windowField;
    const fs = this.fieldStart;
    const kb = this.keyBytes;
    const ko = this.keyOffsets;
    let kp = 0;
    let ls = start;
    let nd = 0;
    let line = 0;
    let rows = 0;
    const bad = this.badStarts;
    let nextBad = bad[0]!;
    let badIdx = 0;
    fs[0] = start;
    const stop = final && buf[end - 1] !== NL ? end + 1 : end;
    for (let i = start; i < stop; i++) {
      const b = i < end ? buf[i]! : NL;
      if (b !== NL) {
        if (b === delim) {
          nd++;
          if (nd <= MAX_FIELDS) fs[nd] = i + 1;
        }
        continue;
      }
      let le = i;
      if (le > ls && buf[le - 1] === CR) le--;
      const nf = nd + 1;
      const isBad = ls === nextBad;
      if (isBad) nextBad = bad[++badIdx]!;
      let reason = 0;
      if (le === ls) reason = R_EMPTY;
      else if (le - ls > maxLen) reason = R_TOO_LONG;
      else if (nf > MAX_FIELDS || nf <= this.maxField) reason = R_FIELDS;
      else if (isBad) reason = R_UTF8;
      else if (this.fieldCount === 0) this.fieldCount = nf;
      if (reason === 0 && nf !== this.fieldCount) reason = R_FIELDS;
      const kStart = kp;
      if (reason === 0) {
        fs[nf] = le + 1; // sentinel so field f ends at fs[f+1]-1
        if (fields === null) {
          for (let f = 0; f < nf; f++) for (let p = fs[f]!, e = fs[f + 1]! - 1; p < e; p++) kb[kp++] = buf[p]!;
        } else {
          for (let j = 0; j < fields.length; j++) {
            const f = fields[j]!;
            for (let p = fs[f]!, e = fs[f + 1]! - 1; p < e; p++) kb[kp++] = buf[p]!;
          }
        }
        if (kp === kStart) reason = R_EMPTY;
        else if (kp - kStart > this.maxKey) reason = R_KEY_TOO_LONG;
      }
      if (reason !== 0) {
        this.reject(line, ls, le, reason);
        kp = kStart;
      } else {
        this.rowStart[rows] = ls;
        this.rowEnd[rows] = le;
        this.rowLine[rows] = line;
        if (wf >= 0) {
          this.rowWinStart[rows] = fs[wf]!;
          this.rowWinEnd[rows] = fs[wf + 1]! - 1;
        }
        rows++;
        ko[rows] = kp;
      }
      line++;
      nd = 0;
      ls = i + 1;
      fs[0] = ls;
    }
    this.count = rows;
    this.lines = line;
  }
}
