// Synthetic Hive-style exports (000000_0, 000001_0, ...) of name|idNo rows for tests, benches and
// `hashgate gen-export`: deterministic, with duplicates across files and optional dirt (CRLF,
// malformed lines, invalid UTF-8, an empty file) whose exact expected effect is returned.
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { prng as rng } from '../util/prng.js';

export interface GenerateOptions {
  dir: string;
  files: number;
  rowsPerFile: number;
  /** Fraction of rows that repeat a key written earlier (possibly in another file). */
  dupRatio?: number;
  seed?: number;
  /** Fraction of good rows written with CRLF. */
  crlfRatio?: number;
  /** Insert one malformed line (wrong field count) every N rows; 0 = never. */
  malformedEvery?: number;
  /** Insert one invalid UTF-8 line every N rows; 0 = never. */
  invalidUtf8Every?: number;
  /** Insert one empty line every N rows; 0 = never. */
  emptyEvery?: number;
  /** Add an extra empty file at the end. */
  emptyFile?: boolean;
  /** Leave the last line of every file without its newline. */
  noFinalNewline?: boolean;
  /** Append a third field (yyyyMMdd) spread over these years, for --window-from-field. */
  dateYears?: number[];
}

export interface ExpectedReject {
  file: string;
  line: number;
  reason: 'field-count' | 'invalid-utf8' | 'empty';
}

export interface GenerateResult {
  files: string[];
  bytes: number;
  /** Rows that are valid keys (including duplicates). */
  rows: number;
  /** Distinct keys overall, and per window id when dateYears is set (keys are distinct per year). */
  distinct: number;
  distinctByWindow: Record<string, number>;
  rejects: ExpectedReject[];
}

const SURNAMES = '王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈';
const GIVEN = '伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍建国红志文斌宇浩凯鹏飞云龙海波琳晨阳欣怡';


/** The key text of synthetic person i: name + '|' + 18-character ID number (unique per i). */
export function personLine(i: number): string {
  const name = SURNAMES[i % SURNAMES.length]! + GIVEN[Math.floor(i / SURNAMES.length) % GIVEN.length]! + (i % 3 === 0 ? GIVEN[(i >>> 7) % GIVEN.length]! : '');
  const id = String(110101 + (i % 899)) + String(i).padStart(11, '0') + 'X';
  return `${name}|${id}`;
}

export function hiveName(i: number): string {
  return `${String(i).padStart(6, '0')}_0`;
}

export function generateExport(opts: GenerateOptions): GenerateResult {
  const r = rng(opts.seed ?? 1);
  const dupRatio = opts.dupRatio ?? 0;
  const crlf = opts.crlfRatio ?? 0;
  mkdirSync(opts.dir, { recursive: true });
  const out: GenerateResult = { files: [], bytes: 0, rows: 0, distinct: 0, distinctByWindow: {}, rejects: [] };
  let next = 0; // next new person index
  const seenWin = new Set<string>();
  const totalFiles = opts.files + (opts.emptyFile ? 1 : 0);
  for (let f = 0; f < totalFiles; f++) {
    const path = join(opts.dir, hiveName(f));
    out.files.push(path);
    const fd = openSync(path, 'w');
    const rows = f < opts.files ? opts.rowsPerFile : 0;
    let parts: (string | Buffer)[] = [];
    let pending = 0;
    let line = 0;
    const flush = (): void => {
      const b = Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
      writeSync(fd, b);
      out.bytes += b.length;
      parts = [];
      pending = 0;
    };
    const push = (p: string | Buffer): void => {
      parts.push(p);
      pending += p.length;
      if (pending > 1 << 20) flush();
    };
    for (let i = 0; i < rows; i++) {
      const last = i === rows - 1;
      const eol = last && opts.noFinalNewline ? '' : r() < crlf ? '\r\n' : '\n';
      if (opts.malformedEvery && i > 0 && i % opts.malformedEvery === 0) {
        push(`broken-line-without-delimiter-${f}-${i}\n`);
        out.rejects.push({ file: path, line: ++line, reason: 'field-count' });
      }
      if (opts.invalidUtf8Every && i > 0 && i % opts.invalidUtf8Every === 0) {
        push(Buffer.concat([Buffer.from('坏'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from(`|${i}\n`)]));
        out.rejects.push({ file: path, line: ++line, reason: 'invalid-utf8' });
      }
      if (opts.emptyEvery && i > 0 && i % opts.emptyEvery === 0) {
        push(i % 2 === 0 ? '\n' : '\r\n');
        out.rejects.push({ file: path, line: ++line, reason: 'empty' });
      }
      const dup = next > 0 && r() < dupRatio;
      const p = dup ? Math.floor(r() * next) : next++;
      let text = personLine(p);
      if (opts.dateYears?.length) {
        // a person's year is a function of (person, draw), so duplicates may land in other years
        const y = opts.dateYears[Math.floor(r() * opts.dateYears.length)]!;
        text += `|${y}${String(1 + Math.floor(r() * 12)).padStart(2, '0')}${String(1 + Math.floor(r() * 28)).padStart(2, '0')}`;
        const k = `${y}:${p}`;
        if (!seenWin.has(k)) {
          seenWin.add(k);
          out.distinctByWindow[String(y)] = (out.distinctByWindow[String(y)] ?? 0) + 1;
        }
      }
      push(text + eol);
      line++;
      out.rows++;
    }
    flush();
    closeSync(fd);
  }
  out.distinct = next;
  return out;
}
