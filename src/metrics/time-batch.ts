// Batch timing around one call: batchStart before it, batchEnd after it whether it resolves or
// rejects, so a failed batch is counted as an error instead of vanishing from the metrics.
import type { BatchOp, Metrics } from './types.js';

export async function timeBatch<T>(metrics: Metrics, op: BatchOp, keys: number, run: () => T | Promise<T>): Promise<T> {
  const start = metrics.batchStart(op, keys);
  try {
    const out = await run();
    metrics.batchEnd(op, keys, start);
    return out;
  } catch (err) {
    metrics.batchEnd(op, keys, start, err);
    throw err;
  }
}
