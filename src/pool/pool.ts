// The worker side of HashGate: a piscina pool whose workers hash and probe the shared Bloom
// filter over keys encoded into shared slots. Small batches never leave the main thread (a task
// round trip costs ~20-50 us, more than hashing a few thousand short keys); large ones are cut
// into slot-sized chunks and pipelined: the main thread encodes chunk i+1 while workers run i.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { ErrorCodes, HashGateError } from '../errors.js';
import type { BloomSharedDescriptor } from '../bloom/index.js';
import { SlotPool, fillSlot, type KeyInput, type Slot, type SlotLayout } from './slots.js';
import type { KernelTask, KernelWorkerData } from '../../workers/kernel-worker.js';

// dist/src/pool/pool.js -> dist/workers; src/pool/pool.ts (vitest) -> the built dist/workers.
const WORKER_CANDIDATES = ['../../workers/kernel-worker.js', '../../dist/workers/kernel-worker.js'];

export function workerFile(): string {
  for (const rel of WORKER_CANDIDATES) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(p)) return p;
  }
  throw new HashGateError(ErrorCodes.WORKER, 'kernel-worker.js not found: run `npm run build` first', {
    details: { tried: WORKER_CANDIDATES },
  });
}

export interface KernelPoolOptions {
  threads: number;
  maxQueue: number;
  layout: SlotLayout;
  slots: number;
  idleTimeoutMs: number;
  bloom?: BloomSharedDescriptor;
  testHooks?: boolean;
}

export type ChunkOp =
  | { op: 'hash'; algorithm: 'murmur3_128' | 'murmur3_32' | 'xxh64'; seed: number }
  | { op: 'buckets'; buckets: number }
  | { op: 'bloomAdd' }
  | { op: 'bloomCheck' };

export interface PoolStats {
  threads: number;
  tasks: number;
  failedTasks: number;
  queued: number;
  utilization: number;
}

export class KernelPool {
  private readonly piscina: Piscina;
  private readonly slots: SlotPool;
  private pendingChunks = 0;
  private tasks = 0;
  private failedTasks = 0;

  constructor(private readonly options: KernelPoolOptions) {
    this.slots = new SlotPool(options.layout, options.slots);
    const workerData: KernelWorkerData = {
      slots: this.slots.buffers,
      layout: options.layout,
      ...(options.bloom === undefined ? {} : { bloom: options.bloom }),
      ...(options.testHooks === true ? { testHooks: true } : {}),
    };
    this.piscina = new Piscina({
      filename: workerFile(),
      minThreads: options.threads,
      maxThreads: options.threads,
      idleTimeout: options.idleTimeoutMs,
      workerData,
    });
    // A worker that dies is replaced by piscina; its task's promise rejects. Nothing else to do,
    // but an unhandled 'error' event would crash the host process.
    this.piscina.on('error', () => undefined);
  }

  stats(): PoolStats {
    return {
      threads: this.options.threads,
      tasks: this.tasks,
      failedTasks: this.failedTasks,
      queued: this.pendingChunks,
      utilization: this.piscina.utilization,
    };
  }

  /**
   * Runs `op` over keys[0..total) chunk by chunk. `onChunk(slot, from, count, result)` copies
   * each chunk's result out of the slot before the slot is reused. Rejects with HG_ERR_QUEUE_FULL
   * when the chunks waiting for a slot would exceed maxQueue.
   */
  async run(
    keys: KeyInput,
    total: number,
    op: ChunkOp,
    onChunk: (slot: Slot, from: number, count: number, result: number) => void,
    inline: (from: number, to: number) => void,
  ): Promise<void> {
    const chunkKeys = this.options.layout.chunkKeys;
    const chunks = Math.ceil(total / chunkKeys);
    if (this.pendingChunks + chunks > this.options.maxQueue) {
      throw new HashGateError(
        ErrorCodes.QUEUE_FULL,
        `pool queue is full: ${this.pendingChunks} chunks pending + ${chunks} would exceed maxQueue (${this.options.maxQueue})`,
        { details: { pending: this.pendingChunks, chunks, maxQueue: this.options.maxQueue } },
      );
    }
    this.pendingChunks += chunks;
    const running: Promise<void>[] = [];
    let firstError: unknown;
    let from = 0;
    try {
      while (from < total && firstError === undefined) {
        const slot = await this.slots.acquire();
        let to: number;
        try {
          to = fillSlot(slot, keys, from, total);
        } catch (err) {
          this.slots.release(slot);
          throw err;
        }
        if (to === from) {
          // One key larger than a slot: hash it here rather than refuse it.
          this.slots.release(slot);
          inline(from, from + 1);
          from += 1;
          continue;
        }
        const start = from;
        const count = to - from;
        from = to;
        this.tasks++;
        const task = { ...op, slot: slotIndex(slot), count } as KernelTask;
        running.push(
          (this.piscina.run(task) as Promise<number>).then(
            (result) => {
              try {
                onChunk(slot, start, count, result);
              } finally {
                this.slots.release(slot);
              }
            },
            (err: unknown) => {
              this.failedTasks++;
              this.slots.release(slot);
              firstError ??= err;
            },
          ),
        );
      }
      await Promise.all(running);
    } finally {
      this.pendingChunks -= chunks;
    }
    if (firstError !== undefined) {
      if (firstError instanceof HashGateError) throw firstError;
      throw new HashGateError(ErrorCodes.WORKER, `worker task failed: ${(firstError as Error)?.message ?? String(firstError)}`, {
        cause: firstError,
      });
    }
  }

  /** Test-only: make one worker throw or exit (needs testHooks). */
  async runRaw(task: KernelTask): Promise<number> {
    this.tasks++;
    try {
      return (await this.piscina.run(task)) as number;
    } catch (err) {
      this.failedTasks++;
      throw new HashGateError(ErrorCodes.WORKER, `worker task failed: ${(err as Error).message}`, { cause: err });
    }
  }

  async close(): Promise<void> {
    await this.piscina.destroy();
  }
}

function slotIndex(slot: Slot): number {
  return slot.index;
}
