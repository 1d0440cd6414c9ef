// What the main thread (src/pool/pool.ts) and the kernel worker (workers/kernel-worker.ts) say to
// each other: the data a worker starts with, and one task per chunk of keys in a lane.
import type { HashAlgorithm } from '../hash/index.js';
import type { BloomSharedDescriptor } from '../bloom/index.js';
import type { LaneLayout } from './lanes.js';

export interface KernelWorkerData {
  /** Lane i's memory (src/pool/lanes.ts lays it out): its own, or the Bloom filter's. */
  lanes: WebAssembly.Memory[];
  /** Byte offset of lane i in lanes[i]. */
  laneBases: number[];
  layout: LaneLayout;
  bloom?: BloomSharedDescriptor;
  /** Lets tests make a worker throw or die on purpose; never set in production. */
  testHooks?: boolean;
}

/** What to compute over a chunk of keys. */
export type ChunkOp =
  | { op: 'hash'; algorithm: HashAlgorithm; seed: number }
  | { op: 'buckets'; buckets: number }
  | { op: 'bloomAdd' }
  /** bloomAdd writing a 1/0 "changed a bit" byte per key to the lane's results (merged calls). */
  | { op: 'bloomAddFlags' }
  | { op: 'bloomCheck' };

/**
 * One task: an op over the first `count` keys of lane `lane`; 'ready' answers the worker's
 * threadId once the worker has started; 'throw' and 'exit' are test hooks.
 * `utf16`: the lane holds string keys as UTF-16 code units (Bloom ops only; see fillLane).
 */
export type KernelTask = (ChunkOp & { lane: number; count: number; utf16?: boolean }) | { op: 'ready' | 'throw' | 'exit' };
