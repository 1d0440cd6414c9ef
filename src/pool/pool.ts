// Where kernel work runs: on the calling thread, or on a piscina pool whose workers hash and probe
// the shared Bloom filter over keys encoded into shared lanes. Small batches never leave the main
// thread (a task round trip costs ~20-50 us, more than hashing a few thousand short keys); large
// ones are cut into lane-sized chunks and pipelined: the main thread encodes chunk i+1 while
// workers run i.
import { createRequire } from 'node:module';
import { Piscina } from 'piscina';
import { ErrorCodes, HashGateError } from '../errors.js';
import type { BloomSharedDescriptor } from '../bloom/index.js';
import { LanePool, fillLane, laneKeys, type Lane, type LaneLayout } from './lanes.js';
import type { CheckedKeys } from '../hash/keys.js';
import type { ChunkOp, KernelTask, KernelWorkerData } from './messages.js';

// One place names the built worker: package.json "imports" maps #kernel-worker to
// dist/workers/kernel-worker.js, the same file whether this module runs from dist or (vitest) src.
const WORKER_SPECIFIER = '#kernel-worker';

/**
 * Worker flags: require(esm) turned off where Node has it, for a process started without flags
 * (with flags the workers inherit them as they are: some, like --max-old-space-size, may not be
 * passed to a worker explicitly). piscina loads a worker file with require() before import(); on
 * Node 20 a require() of our ES module worker aborted a process once in a CI run ("IsGraphAsync
 * must be used on an instantiated module"). Refused, require() throws ERR_REQUIRE_ESM and piscina
 * takes the import() path alone.
 */
const WORKER_EXEC_ARGV =
  process.execArgv.length === 0 && process.allowedNodeEnvironmentFlags.has('--no-experimental-require-module')
    ? ['--no-experimental-require-module']
    : undefined;

function workerFile(): string {
  try {
    return createRequire(import.meta.url).resolve(WORKER_SPECIFIER);
  } catch (err) {
    throw new HashGateError(ErrorCodes.WORKER, 'kernel-worker.js not found: run `npm run build` first', {
      details: { specifier: WORKER_SPECIFIER },
      cause: err,
    });
  }
}

export interface KernelPoolOptions {
  /** Worker threads; 0 = no piscina, every batch runs on the calling thread. */
  threads: number;
  maxQueue: number;
  /** Batches with at most this many keys run on the calling thread. */
  inlineThreshold: number;
  layout: LaneLayout;
  /** Shared transfer lanes (bounds memory and in-flight chunks). */
  lanes: number;
  idleTimeoutMs: number;
  bloom?: BloomSharedDescriptor;
  testHooks?: boolean;
}

/** The kernel pool's own counters (HashGate.stats().pool). */
export interface KernelPoolStats {
  threads: number;
  tasks: number;
  failedTasks: number;
  queued: number;
  utilization: number;
}

/**
 * One batch of kernel work and how its answer is built, whichever thread computes it. `R` is the
 * answer: an output array, or a count.
 */
export interface KernelJob<R> {
  /** Answers keys on the calling thread: a whole small batch, or one key too large for a lane. */
  inline(batch: CheckedKeys): R;
  /**
   * Called once when the batch goes to the workers, before its first chunk (so option checks the
   * inline path does anyway cost nothing on small batches): the chunk task and the empty answer.
   */
  offload(total: number): { op: ChunkOp; acc: R };
  /** Adds the answer for keys[from..from+count) to acc: from a worker's lane, or from inline(). */
  fromLane(acc: R, lane: Lane, from: number, count: number, result: number): R;
  fromInline(acc: R, part: R, from: number): R;
  /**
   * Run the chunks one after another instead of side by side on several workers: a merged Bloom
   * add whose per-key "changed" answers must equal adding the keys one by one in order.
   */
  ordered?: boolean;
  /**
   * The worker op reads string keys as UTF-16 code units too (the Bloom ops): a batch of strings
   * then goes to the lanes as code units, not UTF-8 (see fillLane).
   */
  utf16?: boolean;
}

export class KernelPool {
  private readonly piscina: Piscina | undefined;
  private readonly lanes: LanePool | undefined;
  private pendingChunks = 0;
  private tasks = 0;
  private failedTasks = 0;

  constructor(private readonly options: KernelPoolOptions) {
    if (options.threads === 0) return;
    // With a Bloom filter, the lanes go in its memory: a worker then probes the bits straight
    // from a lane, not from a copy of its keys in the worker's scratch region.
    const b = options.bloom;
    this.lanes = new LanePool(options.layout, options.lanes, b === undefined ? undefined : { memory: b.memory, end: b.bitsOffset + b.bitSize / 8 });
    const workerData: KernelWorkerData = {
      lanes: this.lanes.memories,
      laneBases: this.lanes.bases,
      layout: options.layout,
      ...(options.bloom === undefined ? {} : { bloom: options.bloom }),
      ...(options.testHooks === true ? { testHooks: true } : {}),
    };
    this.piscina = new Piscina({
      filename: workerFile(),
      minThreads: options.threads,
      maxThreads: options.threads,
      // Every lane's task may wait at a worker, not in piscina's queue on this thread: a worker
      // that finishes one starts the next at once, instead of idling until this thread (busy
      // filling the next lane, or descheduled) turns its event loop to hand one over.
      concurrentTasksPerWorker: Math.max(1, Math.ceil(options.lanes / options.threads)),
      idleTimeout: options.idleTimeoutMs,
      workerData,
      ...(WORKER_EXEC_ARGV === undefined ? {} : { execArgv: WORKER_EXEC_ARGV }),
    });
    // A worker that dies is replaced by piscina; its task's promise rejects. Nothing else to do,
    // but an unhandled 'error' event would crash the host process.
    this.piscina.on('error', () => undefined);
  }

  /**
   * Resolves once every worker thread has started and answered a task (at once without threads),
   * with how many distinct threads answered. Never rejects: a worker that cannot start leaves its
   * error to the first batch that needs it.
   */
  ready(): Promise<number> {
    const piscina = this.piscina;
    if (piscina === undefined) return Promise.resolve(0);
    // piscina hands each task to its least busy worker, so one task per thread reaches them all
    const answers: Array<Promise<number>> = [];
    for (let i = 0; i < this.options.threads; i++) answers.push(piscina.run({ op: 'ready' } satisfies KernelTask) as Promise<number>);
    return Promise.allSettled(answers).then((rs) => {
      const ids = new Set<number>();
      for (const r of rs) if (r.status === 'fulfilled') ids.add(r.value);
      this.readyThreads = ids.size;
      return ids.size;
    });
  }
  /** Worker threads that answered the last ready() (0 before one resolved). */
  readyThreads = 0;

  /** False when every batch runs on the calling thread (threads: 0). */
  get threaded(): boolean {
    return this.piscina !== undefined;
  }

  /** Undefined when there are no worker threads. */
  stats(): KernelPoolStats | undefined {
    if (this.piscina === undefined) return undefined;
    return {
      threads: this.options.threads,
      tasks: this.tasks,
      failedTasks: this.failedTasks,
      queued: this.pendingChunks,
      utilization: this.piscina.utilization,
    };
  }

  /**
   * Runs `job` over a checked batch: on the calling thread when there are no workers or the batch
   * has at most inlineThreshold keys, else chunk by chunk on the workers. Rejects with
   * HG_ERR_QUEUE_FULL when the chunks waiting for a lane would exceed maxQueue.
   */
  async run<R>(batch: CheckedKeys, job: KernelJob<R>): Promise<R> {
    const { piscina, lanes } = this;
    const total = batch.count;
    if (piscina === undefined || lanes === undefined || total <= this.options.inlineThreshold) return job.inline(batch);
    const keys = batch.keys;
    const chunks = Math.ceil(total / this.options.layout.chunkKeys);
    if (this.pendingChunks + chunks > this.options.maxQueue) {
      throw new HashGateError(
        ErrorCodes.QUEUE_FULL,
        `pool queue is full: ${this.pendingChunks} chunks pending + ${chunks} would exceed maxQueue (${this.options.maxQueue})`,
        { details: { pending: this.pendingChunks, chunks, maxQueue: this.options.maxQueue } },
      );
    }
    const utf16 = job.utf16 === true && batch.strings;
    // Keys per task: chunkKeys, or for a batch big enough to keep every worker busy with larger
    // tasks, up to a whole lane (LANE_CHUNKS * chunkKeys): fewer round trips, same answers.
    const chunkKeys = this.options.layout.chunkKeys;
    const per = Math.min(laneKeys(this.options.layout), Math.max(chunkKeys, Math.floor(total / (4 * this.options.threads))));
    const offloaded = job.offload(total);
    const op = offloaded.op;
    let acc = offloaded.acc;
    this.pendingChunks += chunks;
    const running: Promise<void>[] = [];
    let firstError: unknown;
    let from = 0;
    // Unordered jobs: when every lane is busy and some hold this batch's own tasks, this thread
    // answers the next keys itself instead of idling until a lane frees (busy lanes' tasks are
    // queued at the workers, see the constructor, so they stay busy meanwhile). Keys answered
    // here are copied once, into this thread's own scratch, and never cross to another core. A
    // batch that holds no lane yet (concurrent small calls) waits for one, as before.
    const share = job.ordered !== true;
    const shareKeys = Math.max(1, chunkKeys >>> 1);
    try {
      while (from < total && firstError === undefined) {
        let lane = share ? lanes.tryAcquire() : undefined;
        if (lane === undefined && share && running.length > 0) {
          const to = Math.min(total, from + shareKeys);
          acc = job.fromInline(acc, job.inline(batch.slice(from, to)), from);
          from = to;
          // One event-loop turn: finished tasks (their messages) free their lanes.
          await new Promise<void>((resolve) => setImmediate(resolve));
          continue;
        }
        lane ??= await lanes.acquire();
        let to: number;
        try {
          to = fillLane(lane, keys, from, total, utf16, per);
        } catch (err) {
          lanes.release(lane);
          throw err;
        }
        if (to === from) {
          // One key larger than a lane: answer it here rather than refuse it.
          lanes.release(lane);
          acc = job.fromInline(acc, job.inline(batch.slice(from, from + 1)), from);
          from += 1;
          continue;
        }
        const start = from;
        const count = to - from;
        from = to;
        this.tasks++;
        const task = (utf16 ? { ...op, lane: lane.index, count, utf16 } : { ...op, lane: lane.index, count }) as KernelTask;
        running.push(
          (piscina.run(task) as Promise<number>).then(
            (result) => {
              try {
                acc = job.fromLane(acc, lane, start, count, result);
              } finally {
                lanes.release(lane);
              }
            },
            (err: unknown) => {
              this.failedTasks++;
              lanes.release(lane);
              firstError ??= err;
            },
          ),
        );
        if (job.ordered === true) await running[running.length - 1];
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
    return acc;
  }

  /** Test-only: make one worker throw or exit (needs testHooks and threads > 0). */
  async runRaw(task: KernelTask): Promise<number> {
    if (this.piscina === undefined) throw new HashGateError(ErrorCodes.WORKER, 'no worker threads (threads: 0)');
    this.tasks++;
    try {
      return (await this.piscina.run(task)) as number;
    } catch (err) {
      this.failedTasks++;
      throw new HashGateError(ErrorCodes.WORKER, `worker task failed: ${(err as Error).message}`, { cause: err });
    }
  }

  async close(): Promise<void> {
    await this.piscina?.destroy();
    this.lanes?.close();
  }
}
