// Sends full batch buffers to the sink, with retry, the failed file and back-pressure.
// A bounded number of batches is in flight (the reader waits), errors that heal by themselves are
// retried with jittered backoff, batches that still fail go to the failed file, and early flushes
// bound buffered bytes and keep the checkpoint moving.
import { ErrorCodes, HashGateError } from '../errors.js';
import { redact } from '../util/redact.js';
import type { AppendFile } from './append-file.js';
import type { Batcher } from './batcher.js';
import type { BatchBuffer } from './buffers.js';
import type { Checkpointer } from './checkpointer.js';
import type { LoadFailure } from './failure.js';
import { isTransient, type LoadSink, type SinkBatch } from './sink.js';

export interface DispatcherInit {
  sink: LoadSink;
  batcher: Batcher;
  /** Window ids by window index (grows while the load finds windows). */
  windows: readonly string[];
  buckets: number;
  concurrency: number;
  retries: number;
  retryDelayMs: number;
  retryMaxDelayMs: number;
  maxBufferedBytes: number;
  maxLiveSegments: number;
  /** Where rows of batches that failed for good go; without it such a batch ends the load. */
  failedOut: AppendFile | undefined;
  checkpointer: Checkpointer;
  failure: LoadFailure;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class Dispatcher {
  loaded = 0;
  failed = 0;
  newMembers = 0;
  batches = 0;
  failedBatches = 0;
  retries = 0;
  lastError: string | undefined;
  inFlight = 0;
  /** The last batch failed for good: the store is down, so later batches do not back off. */
  private degraded = false;
  private wake: (() => void) | undefined;

  constructor(private readonly init: DispatcherInit) {}

  /** Takes `buf` out of the batcher and sends it once fewer than `concurrency` batches are in
   *  flight; resolves when it is on its way, not when it is acknowledged. */
  async dispatch(buf: BatchBuffer): Promise<void> {
    const { batcher, concurrency, failure } = this.init;
    batcher.detach(buf);
    while (this.inFlight >= concurrency) {
      await new Promise<void>((r) => (this.wake = r));
      failure.throwIfFailed();
    }
    this.inFlight++;
    this.send(buf)
      .catch(failure.record)
      .finally(() => {
        this.inFlight--;
        batcher.recycle(buf);
        const w = this.wake;
        this.wake = undefined;
        w?.();
      });
  }

  /** Dispatches every non-empty buffer `pred` picks. */
  async flushWhere(pred: (b: BatchBuffer) => boolean): Promise<void> {
    for (const b of [...this.init.batcher.active]) if (b.count > 0 && pred(b)) await this.dispatch(b);
  }

  /** Back-pressure after each region: keeps buffered bytes under the cap and the checkpoint moving. */
  async relieve(): Promise<void> {
    const { batcher, maxBufferedBytes, checkpointer, maxLiveSegments } = this.init;
    // global cap: flush every bucket, fullest first (big batches are the cheap ones)
    if (batcher.buffered > maxBufferedBytes) {
      const list = [...batcher.active].sort((a, b) => b.count - a.count);
      for (const b of list) {
        await this.dispatch(b);
        if (batcher.buffered <= maxBufferedBytes / 2) break;
      }
    }
    // a rarely-hit bucket must not pin the checkpoint forever
    if (checkpointer.liveSegments > maxLiveSegments) {
      const cut = checkpointer.halfwayCut();
      await this.flushWhere((b) => b.segs[0]! < cut);
    }
  }

  /** Resolves when no batch is in flight. */
  async drain(): Promise<void> {
    while (this.inFlight > 0) await new Promise<void>((r) => (this.wake = r));
  }

  private async send(buf: BatchBuffer): Promise<void> {
    const { sink, batcher, windows, buckets, retries, retryDelayMs, retryMaxDelayMs, failedOut, checkpointer } = this.init;
    const batch: SinkBatch = { window: windows[batcher.windowOf(buf)]!, bucket: buf.bkts[0]!, count: buf.count, keys: buf.keys, keyOffsets: buf.keyOffs };
    if (batcher.groups < buckets) batch.rowBuckets = buf.bkts;
    let ok = false;
    for (let attempt = 0; ; attempt++) {
      try {
        await sink.prepareWindow?.(batch.window);
        // not `+= await`: that reads the sum before the await and loses other batches' counts
        const added = await sink.add(batch);
        this.newMembers += added;
        ok = true;
        break;
      } catch (err) {
        // a bucket-count conflict is the operator's to fix: no retry, no failed file
        if ((err as HashGateError)?.code === ErrorCodes.INVALID_OPTION) throw err;
        this.lastError = redact((err as Error)?.message ?? String(err));
        // while the store keeps failing whole retry rounds, later batches try once and go
        // straight to the failed file instead of each waiting out its own backoff
        if (!isTransient(err) || attempt >= (this.degraded ? 0 : retries)) break;
        this.retries++;
        const d = Math.min(retryMaxDelayMs, retryDelayMs * 2 ** attempt);
        await sleep(d * (0.5 + Math.random() / 2));
      }
    }
    this.batches++;
    this.degraded = !ok;
    if (ok) this.loaded += buf.count;
    else {
      this.failedBatches++;
      if (!failedOut) throw new HashGateError(ErrorCodes.STORE, `a batch failed after ${retries} retries and no --failed-file is set: ${this.lastError}`);
      await failedOut.write(buf.linesAsText());
      this.failed += buf.count;
      checkpointer.recordFailed(buf.segs, buf.count);
    }
    checkpointer.settle(buf.segs, buf.count);
    checkpointer.advance();
  }
}
