// Kernel jobs the gate and the Bloom call queue share: one-time batch checks and array answers.
import type { CheckedKeys } from '../hash/keys.js';
import type { KernelJob } from './pool.js';
import type { ChunkOp } from './messages.js';
import type { Lane } from './lanes.js';

/**
 * Checks a batch once. A bad batch is returned as the error to throw inside the batch timer, so
 * it is counted like any failed batch (n is the array length, or 0 when the shape is wrong).
 */
export function tryCheck(check: () => CheckedKeys, keys: unknown): { batch: CheckedKeys; n: number } | { batch: undefined; n: number; invalid: unknown } {
  try {
    const batch = check();
    return { batch, n: batch.count };
  } catch (invalid) {
    return { batch: undefined, n: Array.isArray(keys) ? keys.length : 0, invalid };
  }
}

/**
 * A job whose answer is an array with `width` elements per key, filled in place chunk by chunk.
 * `offload` runs only when the batch goes to the workers: it checks options and picks the task.
 */
export function arrayJob<A extends Uint8Array | Uint32Array>(
  inline: (batch: CheckedKeys) => A,
  offload: () => { op: ChunkOp; width: number },
  make: (length: number) => A,
  laneOut: (lane: Lane, count: number, width: number) => A,
): KernelJob<A> {
  let width = 1;
  return {
    inline,
    offload: (total) => {
      const o = offload();
      width = o.width;
      return { op: o.op, acc: make(total * width) };
    },
    fromLane: (out, lane, from, count) => (out.set(laneOut(lane, count, width), from * width), out),
    fromInline: (out, part, from) => (out.set(part, from * width), out),
  };
}
