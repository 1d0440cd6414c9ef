// Parallel dry run: cuts every file into line-aligned regions and has worker threads parse, hash
// and bucket them (src/loader/region-worker.ts); the main thread only merges counts and writes
// rejects in file order, so line numbers and totals equal the single-threaded run's.
import { existsSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ErrorCodes, HashGateError } from '../errors.js';
import type { ParseSpec } from './parse.js';
import { REGION_WORKER, type CountsRequest, type RegionReply, type RegionResult, type RegionTask } from './region-worker.js';

// dist/src/loader/parallel.js -> its sibling; src/loader/parallel.ts (vitest) -> the built one.
const WORKER_CANDIDATES = ['./region-worker.js', '../../dist/src/loader/region-worker.js'];

function regionWorkerFile(): string {
  for (const rel of WORKER_CANDIDATES) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(p)) return p;
  }
  throw new HashGateError(ErrorCodes.WORKER, 'region-worker.js not found: run `npm run build` first', { details: { tried: WORKER_CANDIDATES } });
}

/** Region size: big enough that a task's ~50 us round trip is noise, small enough to balance. */
export const REGION_BYTES = 8 << 20;

/** Line starts that cut `size` bytes into regions of about `regionBytes`: [0, b1, ..., size]. */
export async function lineAlignedCuts(path: string, size: number, regionBytes: number): Promise<number[]> {
  const cuts = [0];
  if (size === 0) return [0, 0];
  const fh = await open(path, 'r');
  try {
    const probe = Buffer.allocUnsafe(64 * 1024);
    let target = regionBytes;
    while (target < size) {
      // the first line start at or after target: one past the first LF at or after target - 1
      let pos = target - 1;
      let cut = size;
      while (pos < size) {
        const { bytesRead } = await fh.read(probe, 0, probe.length, pos);
        if (bytesRead === 0) break;
        const nl = probe.subarray(0, bytesRead).indexOf(10);
        if (nl >= 0) {
          cut = pos + nl + 1;
          break;
        }
        pos += bytesRead;
      }
      if (cut >= size) break;
      cuts.push(cut);
      target = cut + regionBytes;
    }
  } finally {
    await fh.close();
  }
  cuts.push(size);
  return cuts;
}

export interface ParallelSpec {
  threads: number;
  readBufferBytes: number;
  spec: ParseSpec;
  buckets: number;
  compact: boolean;
  secret?: Uint8Array;
  regionBytes?: number;
  signal?: AbortSignal;
}

/** One worker thread running region-worker.js and the tasks it has been given, oldest first. */
interface RegionThread {
  worker: Worker;
  pending: { resolve: (r: RegionResult | Uint32Array) => void; reject: (e: unknown) => void }[];
}

/** Posts `m` to thread `t`; its reply (replies come in message order) settles the promise. */
function ask<T extends RegionResult | Uint32Array>(t: RegionThread, m: RegionTask | CountsRequest): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    t.pending.push({ resolve: resolve as (r: RegionResult | Uint32Array) => void, reject });
    t.worker.postMessage(m);
  });
}

/**
 * Runs every region of `files` on `p.threads` worker threads, at most 2 tasks per thread in
 * flight, and hands the results to `onRegion` in file and region order (so the caller can number
 * lines), then each thread's rows per bucket to `onBucketRows`. Once `p.signal` is aborted no
 * region starts, and those already started are still handed over: the bucket counts then cover
 * exactly the regions `onRegion` saw. Plain worker_threads rather than a pool library: a dry
 * run's start-up is part of its speed, and a thread here only ever runs one task after another.
 */
export async function runRegions(
  files: readonly string[],
  sizes: readonly number[],
  p: ParallelSpec,
  onRegion: (fileIndex: number, r: RegionResult, lastOfFile: boolean) => void,
  onBucketRows: (rows: Uint32Array) => void,
): Promise<void> {
  const file = regionWorkerFile();
  // threads start (and load their code) while this thread looks for the cuts
  const threads: RegionThread[] = Array.from({ length: p.threads }, () => {
    const t: RegionThread = { worker: new Worker(file, { workerData: { [REGION_WORKER]: true } }), pending: [] };
    t.worker.on('message', (m: RegionReply) => {
      const w = t.pending.shift();
      if (m.ok) w?.resolve('result' in m ? m.result : m.bucketRows);
      else w?.reject(new HashGateError(ErrorCodes.WORKER, `dry-run worker failed: ${m.message}`, { details: { error: m.message } }));
    });
    const fail = (err: unknown): void => {
      for (const w of t.pending.splice(0)) w.reject(new HashGateError(ErrorCodes.WORKER, `dry-run worker stopped: ${String(err)}`, { cause: err }));
    };
    t.worker.on('error', fail);
    t.worker.on('exit', (code) => fail(`exit code ${code}`));
    return t;
  });
  try {
    const tasks: { fi: number; last: boolean; task: RegionTask }[] = [];
    for (let fi = 0; fi < files.length; fi++) {
      const cuts = await lineAlignedCuts(files[fi]!, sizes[fi]!, p.regionBytes ?? REGION_BYTES);
      for (let k = 0; k + 1 < cuts.length; k++) {
        tasks.push({
          fi,
          last: k + 2 === cuts.length,
          task: { path: files[fi]!, start: cuts[k]!, end: cuts[k + 1]!, readBufferBytes: p.readBufferBytes, spec: p.spec, buckets: p.buckets, compact: p.compact, ...(p.secret ? { secret: p.secret } : {}) },
        });
      }
    }
    const window = Math.max(2, p.threads * 2);
    const inFlight: Promise<RegionResult>[] = [];
    let next = 0;
    const launch = (): void => {
      while (next < tasks.length && inFlight.length < window && p.signal?.aborted !== true) {
        // the thread with the fewest tasks: a thread slowed by a busy core gets fewer
        let t = threads[0]!;
        for (const u of threads) if (u.pending.length < t.pending.length) t = u;
        const pr = ask<RegionResult>(t, tasks[next]!.task);
        pr.catch(() => undefined); // awaited in order below
        inFlight.push(pr);
        next++;
      }
    };
    launch();
    for (let done = 0; done < next; done++) {
      const r = await inFlight.shift()!;
      onRegion(tasks[done]!.fi, r, tasks[done]!.last);
      launch();
    }
    const counts = await Promise.all(threads.map((t) => ask<Uint32Array>(t, { counts: true } satisfies CountsRequest)));
    for (const rows of counts) if (rows.length > 0) onBucketRows(rows);
  } finally {
    for (const t of threads) t.worker.removeAllListeners('exit');
    await Promise.all(threads.map((t) => t.worker.terminate()));
  }
}
