// Looks at each input before anything is loaded: its identity for --resume (size, mtime and a
// hash of its first and last bytes, so a replaced file is reloaded), whether it is text at all,
// and, from a sample of lines across the inputs, the majority field count.
import { createHash } from 'node:crypto';
import { isUtf8 } from 'node:buffer';
import { open } from 'node:fs/promises';
import { ErrorCodes, HashGateError } from '../errors.js';
import { NL, CR, MAX_FIELDS } from './parse.js';

/** Bytes read from each end of a file for its identity hash and the text check. */
export const SNIFF_BYTES = 64 * 1024;

export interface FileIdentity {
  size: number;
  mtimeMs: number;
  /** sha256 (hex, 32 chars) of the first and of the last SNIFF_BYTES bytes. */
  head: string;
  tail: string;
}

export interface InspectedFile {
  path: string;
  identity: FileIdentity;
  /** The first SNIFF_BYTES bytes (fewer for a small file), for field-count sampling. */
  headBytes: Uint8Array;
}

const hash = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex').slice(0, 32);

/** Formats a binary file commonly starts with; named in the error so the fix is obvious. */
const MAGIC: [string, number[]][] = [
  ['gzip', [0x1f, 0x8b]],
  ['zip', [0x50, 0x4b, 0x03, 0x04]],
  ['zstd', [0x28, 0xb5, 0x2f, 0xfd]],
  ['bzip2', [0x42, 0x5a, 0x68]],
  ['xz', [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]],
  ['Parquet', [0x50, 0x41, 0x52, 0x31]],
  ['ORC', [0x4f, 0x52, 0x43]],
  ['Avro', [0x4f, 0x62, 0x6a, 0x01]],
  ['Hadoop SequenceFile', [0x53, 0x45, 0x51]],
];

/**
 * Why `sample` is not delimited text, or undefined when it is. A NUL byte, more than 1% control
 * bytes (other than TAB, CR, LF and the field delimiter: Hive's default delimiter is 0x01), or
 * mostly invalid UTF-8 lines mean binary data that would otherwise load as garbage keys.
 */
export function notTextReason(sample: Uint8Array, delimiter: number, atFileStart: boolean): string | undefined {
  if (sample.length === 0) return undefined;
  if (atFileStart) {
    for (const [name, magic] of MAGIC) {
      if (sample.length >= magic.length && magic.every((b, i) => sample[i] === b)) return `looks like ${name} data (decompress or export it as text first)`;
    }
  }
  let control = 0;
  for (let i = 0; i < sample.length; i++) {
    const b = sample[i]!;
    if (b === 0) return 'contains NUL bytes';
    if ((b < 0x20 || b === 0x7f) && b !== NL && b !== CR && b !== 9 && b !== delimiter) control++;
  }
  if (control * 100 > sample.length) return `${control} of ${sample.length} sampled bytes are control characters`;
  if (!isUtf8(sample)) {
    // count lines that are invalid UTF-8 (a few bad rows are rejects, not a binary file); the
    // sample's first and last lines may be cut mid-character, so they are left out
    let bad = 0;
    let lines = 0;
    let s = atFileStart ? 0 : sample.indexOf(NL) + 1;
    for (;;) {
      const e = sample.indexOf(NL, s);
      if (e < 0) break;
      lines++;
      if (!isUtf8(sample.subarray(s, e))) bad++;
      s = e + 1;
    }
    if (lines === 0 || bad * 2 > lines) return lines === 0 ? 'has no complete line and is not UTF-8' : `${bad} of ${lines} sampled lines are not UTF-8`;
  }
  return undefined;
}

async function readAt(fh: import('node:fs/promises').FileHandle, pos: number, len: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(len);
  let got = 0;
  while (got < len) {
    const { bytesRead } = await fh.read(buf, got, len - got, pos + got);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return buf.subarray(0, got);
}

/** Identity and text check of one file; throws HG_ERR_PARSE (details.reason 'not-text') for binary. */
export async function inspectFile(path: string, delimiter: number): Promise<InspectedFile> {
  const fh = await open(path, 'r');
  try {
    const st = await fh.stat();
    const headBytes = await readAt(fh, 0, Math.min(SNIFF_BYTES, st.size));
    const tailStart = Math.max(0, st.size - SNIFF_BYTES);
    const tailBytes = tailStart === 0 ? headBytes : await readAt(fh, tailStart, st.size - tailStart);
    const why = notTextReason(headBytes, delimiter, true) ?? (tailStart > 0 ? notTextReason(tailBytes, delimiter, false) : undefined);
    if (why !== undefined) {
      throw new HashGateError(ErrorCodes.PARSE, `${path} is not a text export: it ${why}; nothing was loaded`, {
        details: { file: path, reason: 'not-text' },
      });
    }
    return { path, identity: { size: st.size, mtimeMs: st.mtimeMs, head: hash(headBytes), tail: hash(tailBytes) }, headBytes };
  } finally {
    await fh.close();
  }
}

/** True when the file at `id`'s path still has that identity. */
export function sameIdentity(a: Partial<FileIdentity> | undefined, b: FileIdentity): boolean {
  return a !== undefined && a.size === b.size && a.mtimeMs === b.mtimeMs && a.head === b.head && a.tail === b.tail;
}

/** Most lines sampled for the field count. */
export const SAMPLE_LINES = 10_000;

/**
 * The field count most sampled lines have (complete, non-empty lines from the start of each
 * file, up to SAMPLE_LINES). One malformed first line can no longer decide it; with no clear
 * majority (more than half the sample) the caller must say --field-count.
 */
export function sampleFieldCount(heads: readonly Uint8Array[], delimiter: number): { fieldCount: number; sampled: number; share: number } {
  const counts = new Map<number, number>();
  let sampled = 0;
  for (const h of heads) {
    let s = 0;
    while (sampled < SAMPLE_LINES) {
      const e = h.indexOf(NL, s);
      if (e < 0) break;
      let le = e;
      if (le > s && h[le - 1] === CR) le--;
      if (le > s) {
        let nf = 1;
        for (let i = s; i < le; i++) if (h[i] === delimiter) nf++;
        if (nf <= MAX_FIELDS) counts.set(nf, (counts.get(nf) ?? 0) + 1);
        sampled++;
      }
      s = e + 1;
    }
    // a small file without a final newline: its last line counts too
    if (sampled < SAMPLE_LINES && s < h.length && h.length < SNIFF_BYTES) {
      let nf = 1;
      for (let i = s; i < h.length; i++) if (h[i] === delimiter) nf++;
      if (nf <= MAX_FIELDS) counts.set(nf, (counts.get(nf) ?? 0) + 1);
      sampled++;
    }
    if (sampled >= SAMPLE_LINES) break;
  }
  let best = 0;
  let bestN = 0;
  for (const [nf, n] of counts) if (n > bestN || (n === bestN && nf < best)) (best = nf), (bestN = n);
  return { fieldCount: bestN * 2 > sampled ? best : 0, sampled, share: sampled === 0 ? 0 : bestN / sampled };
}

/** Inspections a load runs at once: thousands of part files must not exhaust file descriptors. */
const INSPECT_CONCURRENCY = 16;
const EMPTY = new Uint8Array(0);

export interface InspectedInputs {
  identities: FileIdentity[];
  sizes: number[];
  bytesTotal: number;
  /** The given field count, or the sampled majority. */
  fieldCount: number;
  /** Mean bytes per line over the complete lines of the sampled file heads (0: none sampled). */
  bytesPerLine: number;
}

/** Mean length of the complete lines (newline included) in the heads, up to SAMPLE_LINES lines. */
export function meanLineBytes(heads: readonly Uint8Array[]): number {
  let lines = 0;
  let bytes = 0;
  for (const h of heads) {
    let s = 0;
    for (;;) {
      const e = h.indexOf(NL, s);
      if (e < 0 || lines >= SAMPLE_LINES) break;
      bytes += e + 1 - s;
      lines++;
      s = e + 1;
    }
    if (lines >= SAMPLE_LINES) break;
  }
  return lines === 0 ? 0 : bytes / lines;
}

/**
 * Inspects every input (identity for --resume, text check) before anything is loaded and, when
 * `fieldCount` is 0, samples the majority field count; no clear majority is an error.
 */
export async function inspectInputs(files: readonly string[], delimiter: number, fieldCount: number): Promise<InspectedInputs> {
  const inspected = new Array<InspectedFile>(files.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(INSPECT_CONCURRENCY, files.length) }, async () => {
      while (next < files.length) {
        const i = next++;
        const f = await inspectFile(files[i]!, delimiter);
        // the field-count sample reads the heads of the first files only: memory stays ~1 MiB
        if (i >= INSPECT_CONCURRENCY) f.headBytes = EMPTY;
        inspected[i] = f;
      }
    }),
  );
  const sizes = inspected.map((f) => f.identity.size);
  const bytesPerLine = meanLineBytes(inspected.map((f) => f.headBytes));
  if (fieldCount === 0) {
    const smp = sampleFieldCount(
      inspected.map((f) => f.headBytes),
      delimiter,
    );
    if (smp.sampled > 0 && smp.fieldCount === 0) {
      throw new HashGateError(
        ErrorCodes.PARSE,
        `no field count is shared by most sampled lines (${smp.sampled} lines, the commonest count on ${Math.round(smp.share * 100)}%); give --field-count`,
        { details: { reason: 'field-count', sampled: smp.sampled } },
      );
    }
    fieldCount = smp.fieldCount;
  }
  return { identities: inspected.map((f) => f.identity), sizes, bytesTotal: sizes.reduce((a, b) => a + b, 0), fieldCount, bytesPerLine };
}
