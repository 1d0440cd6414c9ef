// Worker side of a parallel dry run: reads one line-aligned byte region of a file itself, parses,
// hashes and buckets it with the same parser and kernel as the main thread, and returns only
// counts and the region's rejects, so nothing per row crosses threads. Rows per bucket add up in
// one array per thread, sent once when asked for: an array per region would cost a fill, a copy
// and a merge of every bucket's counter per region, 16 MiB each at 4,194,304 buckets for an 8 MiB
// region of about 200,000 rows.
import { parentPort, workerData } from 'node:worker_threads';
import { digestKeys } from '../dedup/layout.js';
import { RegionHasher, compactBuckets } from './hasher.js';
import { ChunkParser, R_TOO_LONG, type ParseSpec } from './parse.js';
import { FileChunkReader, isOversize } from './reader.js';

export interface RegionTask {
  path: string;
  /** Region [start, end): both on line starts (or end of file). */
  start: number;
  end: number;
  readBufferBytes: number;
  spec: ParseSpec;
  buckets: number;
  /** Compact layout: buckets from digest bytes 8..15 (of HMAC digests with `secret`). */
  compact: boolean;
  secret?: Uint8Array;
}

export interface RegionResult {
  lines: number;
  rows: number;
  bytes: number;
  /** Rejects: 0-based line index inside the region, reason code, first bytes of the line. */
  rejLine: number[];
  rejReason: number[];
  rejContent: Uint8Array[];
}

/** workerData key that makes this module serve tasks (importing it elsewhere starts nothing). */
export const REGION_WORKER = 'hashgateRegionWorker';

/** Asks a worker for the rows per bucket of every region it has run, and starts them over. */
export interface CountsRequest {
  counts: true;
}

/** What a worker posts back for each message, in message order: a region's result, or (for a
 *  CountsRequest) accepted rows per bucket, in bucket order (empty when it ran no region). */
export type RegionReply = { ok: true; result: RegionResult } | { ok: true; bucketRows: Uint32Array } | { ok: false; message: string };

// one parser and kernel per worker, rebuilt only when the buffer size or the spec changes
interface Engine {
  key: string;
  hasher: RegionHasher;
  parser: ChunkParser;
  compactOut: Uint32Array;
  /** The reader's two buffers, reused by every region (tasks run one at a time). */
  readBuffers: [Buffer, Buffer];
}
let cached: Engine | undefined;
/** Accepted rows per bucket over the regions run since the last CountsRequest. */
let bucketRows: Uint32Array | undefined;

function engine(task: RegionTask): Engine {
  const key = JSON.stringify([task.readBufferBytes, task.spec]);
  if (cached?.key !== key) {
    const maxRows = Math.ceil(task.readBufferBytes / 2) + 1;
    const hasher = new RegionHasher(task.readBufferBytes, maxRows);
    cached = {
      key,
      hasher,
      parser: new ChunkParser(task.spec, hasher, maxRows),
      compactOut: new Uint32Array(maxRows),
      readBuffers: [Buffer.allocUnsafe(task.readBufferBytes), Buffer.allocUnsafe(task.readBufferBytes)],
    };
  }
  cached.parser.fieldCount = task.spec.fieldCount;
  return cached;
}

/** Out of the async run() so it is a plain loop V8 optimises alone. */
function addCounts(counts: Uint32Array, b: Uint32Array, n: number): void {
  for (let i = 0; i < n; i++) counts[b[i]!]!++;
}

export default async function run(task: RegionTask): Promise<RegionResult> {
  const { hasher, parser, compactOut, readBuffers } = engine(task);
  const out: RegionResult = { lines: 0, rows: 0, bytes: 0, rejLine: [], rejReason: [], rejContent: [] };
  if (bucketRows?.length !== task.buckets) {
    if (bucketRows !== undefined) throw new RangeError('regions of one run share a bucket count');
    bucketRows = new Uint32Array(task.buckets);
  }
  const counts = bucketRows;
  const reader = new FileChunkReader(task.path, task.readBufferBytes, task.start, task.end, readBuffers);
  await reader.open();
  try {
    for (;;) {
      const r = await reader.next();
      if (r === null) break;
      if (isOversize(r)) {
        out.rejLine.push(out.lines);
        out.rejReason.push(R_TOO_LONG);
        out.rejContent.push(Uint8Array.from(r.head));
        out.lines++;
        out.bytes += r.next - r.offset;
        continue;
      }
      parser.parse(r.buf, r.start, r.end, r.final);
      const n = parser.count;
      for (let j = 0; j < parser.rejReason.length; j++) {
        out.rejLine.push(out.lines + parser.rejLine[j]!);
        out.rejReason.push(parser.rejReason[j]!);
        const s = parser.rejStart[j]!;
        out.rejContent.push(Uint8Array.from(r.buf.subarray(s, Math.min(parser.rejEnd[j]!, s + 256))));
      }
      // the same bucket function as InputScan.region
      let b: Uint32Array;
      if (task.compact) {
        const d = task.secret ? digestKeys({ bytes: hasher.keyBytes, offsets: hasher.keyOffsets, count: n }, task.secret) : hasher.digests(n);
        b = compactBuckets(d, n, task.buckets, compactOut);
      } else b = hasher.buckets(n, task.buckets);
      addCounts(counts, b, n);
      out.rows += n;
      out.lines += parser.lines;
      out.bytes += r.end - r.start;
    }
  } finally {
    await reader.close();
  }
  return out;
}

// Tasks run one after another (they share the parser and kernel), in the order they came.
if (parentPort !== null && (workerData as Record<string, unknown> | null)?.[REGION_WORKER] === true) {
  const port = parentPort;
  let chain = Promise.resolve();
  port.on('message', (m: RegionTask | CountsRequest) => {
    chain = chain.then(async () => {
      try {
        if ('counts' in m) {
          const rows = bucketRows ?? new Uint32Array(0);
          bucketRows = undefined;
          port.postMessage({ ok: true, bucketRows: rows } satisfies RegionReply, [rows.buffer as ArrayBuffer]);
        } else port.postMessage({ ok: true, result: await run(m) } satisfies RegionReply);
      } catch (err) {
        port.postMessage({ ok: false, message: err instanceof Error ? err.message : String(err) } satisfies RegionReply);
      }
    });
  });
}
