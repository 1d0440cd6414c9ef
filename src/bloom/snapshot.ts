// Bloom snapshots on disk. Two formats:
//
//  'hashgate' (default): a 48-byte little-endian header, then the data bytes as they sit in memory
//    off  size  field
//     0    4    magic "HGBF"
//     4    2    format version (1)
//     6    2    header length (48)
//     8    1    algorithm: 1 = murmur3_x64_128, Guava MURMUR128_MITZ_64 indexing
//     9    1    kind: 1 = bits (BloomFilter), 2 = 4-bit counters (CountingBloomFilter)
//    10    1    k (hash functions)
//    11    1    reserved (0)
//    12    4    seed (u32)
//    16    8    bitSize (bits, or counters for kind 2)
//    24    8    data length in bytes
//    32    4    CRC-32 of the data
//    36    8    reserved (0)
//    44    4    CRC-32 of header bytes 0..43
//  'guava': exactly Guava's BloomFilter.writeTo stream (no seed, no checksum: seed 0 implied).
//
// A snapshot whose algorithm, kind, k, bitSize or seed differs from what the caller expects is
// refused with HG_ERR_SNAPSHOT_MISMATCH; bad magic, truncation or a checksum failure with
// HG_ERR_SNAPSHOT_CORRUPT. Writes go to a temp file renamed into place, so a crash mid-write
// never leaves a half snapshot under the real name.
import { open, rename, unlink } from 'node:fs/promises';
import { crc32 } from 'node:zlib';
import { ErrorCodes, HashGateError, checkOneOf, invalidType } from '../errors.js';
import { BloomFilter, parseGuavaHeader, GUAVA_STRATEGY_MITZ_64 } from './bloom-filter.js';
import { CountingBloomFilter } from './counting.js';
import { shapeFor } from './sizing.js';

export const SNAPSHOT_MAGIC = 'HGBF';
export const SNAPSHOT_VERSION = 1;
export const SNAPSHOT_HEADER_BYTES = 48;
export const ALGORITHM_MURMUR128_MITZ_64 = 1;
export const KIND_BITS = 1;
export const KIND_COUNTERS = 2;
const CHUNK = 64 * 1024 * 1024;

export type SnapshotFormat = 'hashgate' | 'guava';

export interface SnapshotExpect {
  bitSize?: number;
  hashFunctions?: number;
  seed?: number;
}

export interface SnapshotInfo {
  format: SnapshotFormat;
  kind: 'bits' | 'counters';
  algorithm: 'MURMUR128_MITZ_64';
  hashFunctions: number;
  seed: number;
  bitSize: number;
  dataBytes: number;
}

const corrupt = (path: string, msg: string, details: Record<string, unknown> = {}) =>
  new HashGateError(ErrorCodes.SNAPSHOT_CORRUPT, `snapshot ${path}: ${msg}`, { details: { path, ...details } });
const mismatch = (path: string, msg: string, details: Record<string, unknown> = {}) =>
  new HashGateError(ErrorCodes.SNAPSHOT_MISMATCH, `snapshot ${path}: ${msg}`, { details: { path, ...details } });

function crcOf(data: Uint8Array): number {
  let c = 0;
  for (let o = 0; o < data.length; o += CHUNK) c = crc32(data.subarray(o, Math.min(data.length, o + CHUNK)), c);
  return c >>> 0;
}

function encodeHeader(info: Omit<SnapshotInfo, 'format' | 'algorithm'>, dataCrc: number): Buffer {
  const h = Buffer.alloc(SNAPSHOT_HEADER_BYTES);
  h.write(SNAPSHOT_MAGIC, 0, 'latin1');
  h.writeUInt16LE(SNAPSHOT_VERSION, 4);
  h.writeUInt16LE(SNAPSHOT_HEADER_BYTES, 6);
  h[8] = ALGORITHM_MURMUR128_MITZ_64;
  h[9] = info.kind === 'bits' ? KIND_BITS : KIND_COUNTERS;
  h[10] = info.hashFunctions;
  h.writeUInt32LE(info.seed >>> 0, 12);
  h.writeBigUInt64LE(BigInt(info.bitSize), 16);
  h.writeBigUInt64LE(BigInt(info.dataBytes), 24);
  h.writeUInt32LE(dataCrc, 32);
  h.writeUInt32LE(crc32(h.subarray(0, 44)) >>> 0, 44);
  return h;
}

/** Atomically (temp file + rename) writes `filter` to `path`. */
export async function writeSnapshot(
  filter: BloomFilter | CountingBloomFilter,
  path: string,
  options: { format?: SnapshotFormat } = {},
): Promise<void> {
  const format = checkOneOf('options.format', options.format ?? 'hashgate', ['hashgate', 'guava'] as const);
  let parts: Uint8Array[];
  if (filter instanceof BloomFilter) {
    if (format === 'guava') {
      if (filter.seed !== 0) throw mismatch(path, `the Guava format cannot record seed ${filter.seed} (Guava hashes with seed 0)`);
      const head = Buffer.alloc(6);
      head[0] = GUAVA_STRATEGY_MITZ_64;
      head[1] = filter.hashFunctions;
      head.writeInt32BE(filter.bitSize / 64, 2);
      parts = [head];
      const bits = filter.bitsView();
      for (let o = 0; o < bits.length; o += CHUNK) {
        const c = Buffer.from(bits.subarray(o, Math.min(bits.length, o + CHUNK)));
        parts.push(c.swap64());
      }
    } else {
      const bits = filter.bitsView();
      const header = encodeHeader({ kind: 'bits', hashFunctions: filter.hashFunctions, seed: filter.seed, bitSize: filter.bitSize, dataBytes: bits.length }, crcOf(bits));
      parts = [header, bits];
    }
  } else if (filter instanceof CountingBloomFilter) {
    if (format === 'guava') throw invalidType('options.format', "'hashgate' for a CountingBloomFilter (Guava has no counting format)", format);
    const data = filter.bytesView();
    parts = [encodeHeader({ kind: 'counters', hashFunctions: filter.hashFunctions, seed: filter.seed, bitSize: filter.size, dataBytes: data.length }, crcOf(data)), data];
  } else {
    throw invalidType('filter', 'a BloomFilter or CountingBloomFilter', filter);
  }
  const tmp = `${path}.tmp-${process.pid}-${Date.now()}`;
  const fh = await open(tmp, 'w');
  try {
    for (const p of parts) {
      for (let o = 0; o < p.length; o += CHUNK) {
        const c = p.subarray(o, Math.min(p.length, o + CHUNK));
        // fs cannot write from a SharedArrayBuffer-backed view: copy such chunks first.
        await fh.write(c.buffer instanceof SharedArrayBuffer ? Buffer.from(c) : c);
      }
    }
    await fh.sync();
  } catch (e) {
    await fh.close().catch(() => undefined);
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  await fh.close();
  await rename(tmp, path);
}

/** Reads and validates a snapshot header without loading the data. */
export async function readSnapshotInfo(path: string): Promise<SnapshotInfo> {
  const fh = await open(path, 'r');
  try {
    return await readInfo(fh, path);
  } finally {
    await fh.close();
  }
}

type FileHandle = Awaited<ReturnType<typeof open>>;

async function readInfo(fh: FileHandle, path: string): Promise<SnapshotInfo> {
  const size = (await fh.stat()).size;
  const h = Buffer.alloc(SNAPSHOT_HEADER_BYTES);
  const { bytesRead } = await fh.read(h, 0, h.length, 0);
  if (bytesRead >= 4 && h.toString('latin1', 0, 4) === SNAPSHOT_MAGIC) {
    if (bytesRead < SNAPSHOT_HEADER_BYTES) throw corrupt(path, `truncated header (${bytesRead} bytes)`);
    if ((crc32(h.subarray(0, 44)) >>> 0) !== h.readUInt32LE(44)) throw corrupt(path, 'header checksum mismatch');
    const version = h.readUInt16LE(4);
    if (version !== SNAPSHOT_VERSION || h.readUInt16LE(6) !== SNAPSHOT_HEADER_BYTES) throw mismatch(path, `unsupported format version ${version}`, { version });
    if (h[8] !== ALGORITHM_MURMUR128_MITZ_64) throw mismatch(path, `unknown algorithm id ${h[8]}`, { algorithm: h[8] });
    if (h[9] !== KIND_BITS && h[9] !== KIND_COUNTERS) throw mismatch(path, `unknown kind ${h[9]}`, { kind: h[9] });
    const bitSize = Number(h.readBigUInt64LE(16));
    const dataBytes = Number(h.readBigUInt64LE(24));
    const kind = h[9] === KIND_BITS ? 'bits' : 'counters';
    const want = kind === 'bits' ? bitSize / 8 : bitSize / 2;
    if (dataBytes !== want || bitSize % 64 !== 0 || bitSize <= 0) throw corrupt(path, `data length ${dataBytes} does not fit bitSize ${bitSize}`);
    if (size !== SNAPSHOT_HEADER_BYTES + dataBytes) throw corrupt(path, `file is ${size} bytes, header says ${SNAPSHOT_HEADER_BYTES + dataBytes}`);
    return { format: 'hashgate', kind, algorithm: 'MURMUR128_MITZ_64', hashFunctions: h[10]!, seed: h.readUInt32LE(12), bitSize, dataBytes };
  }
  if (bytesRead === 0) throw corrupt(path, 'empty file');
  let g;
  try {
    g = parseGuavaHeader(h.subarray(0, bytesRead));
  } catch (e) {
    if ((e as HashGateError).code === ErrorCodes.SNAPSHOT_MISMATCH && h[0] !== 0) throw corrupt(path, 'neither a hashgate snapshot (magic HGBF) nor a Guava Bloom stream', { cause: String(e) });
    throw e;
  }
  if (size !== 6 + g.words * 8) throw corrupt(path, `Guava stream is ${size} bytes, header says ${6 + g.words * 8}`);
  return { format: 'guava', kind: 'bits', algorithm: 'MURMUR128_MITZ_64', hashFunctions: g.hashFunctions, seed: 0, bitSize: g.words * 64, dataBytes: g.words * 8 };
}

function checkExpect(path: string, info: SnapshotInfo, expect: SnapshotExpect | undefined): void {
  if (expect === undefined) return;
  for (const f of ['bitSize', 'hashFunctions', 'seed'] as const) {
    if (expect[f] !== undefined && expect[f] !== info[f]) {
      throw mismatch(path, `${f} is ${info[f]}, expected ${expect[f]}`, { field: f, got: info[f], want: expect[f] });
    }
  }
}

async function readData(fh: FileHandle, path: string, info: SnapshotInfo, into: Uint8Array): Promise<void> {
  const start = info.format === 'hashgate' ? SNAPSHOT_HEADER_BYTES : 6;
  const buf = Buffer.allocUnsafe(Math.min(CHUNK, info.dataBytes));
  let crc = 0;
  for (let o = 0; o < info.dataBytes; o += CHUNK) {
    const n = Math.min(CHUNK, info.dataBytes - o);
    const { bytesRead } = await fh.read(buf, 0, n, start + o);
    if (bytesRead !== n) throw corrupt(path, 'truncated data');
    const c = buf.subarray(0, n);
    if (info.format === 'hashgate') crc = crc32(c, crc);
    else c.swap64();
    into.set(c, o);
  }
  if (info.format === 'hashgate') {
    const h = Buffer.alloc(4);
    await fh.read(h, 0, 4, 32);
    if ((crc >>> 0) !== h.readUInt32LE(0)) throw corrupt(path, 'data checksum mismatch');
  }
}

/**
 * Loads a BloomFilter from either format (detected from the first bytes). `expect` pins the
 * shape/seed the caller runs with; any difference is HG_ERR_SNAPSHOT_MISMATCH.
 */
export async function readSnapshot(path: string, options: { expect?: SnapshotExpect } = {}): Promise<BloomFilter> {
  const fh = await open(path, 'r');
  try {
    const info = await readInfo(fh, path);
    if (info.kind !== 'bits') throw mismatch(path, 'holds a CountingBloomFilter; use readCountingSnapshot', { kind: info.kind });
    checkExpect(path, info, options.expect);
    shapeFor(info.bitSize, info.hashFunctions, 'snapshot bitSize');
    // Read straight into the fresh (not yet shared) filter: no second copy of a GB-sized array.
    const f = BloomFilter.withShape({ bitSize: info.bitSize, hashFunctions: info.hashFunctions }, info.seed);
    await readData(fh, path, info, f.bitsView());
    f.recountBits();
    return f;
  } finally {
    await fh.close();
  }
}

export async function readCountingSnapshot(path: string, options: { expect?: SnapshotExpect } = {}): Promise<CountingBloomFilter> {
  const fh = await open(path, 'r');
  try {
    const info = await readInfo(fh, path);
    if (info.kind !== 'counters') throw mismatch(path, 'holds a plain BloomFilter, not counters', { kind: info.kind });
    checkExpect(path, info, options.expect);
    const f = CountingBloomFilter.withShape(info.bitSize, info.hashFunctions, info.seed);
    await readData(fh, path, info, f.bytesView());
    return f;
  } finally {
    await fh.close();
  }
}
