// Runs the gate's bloomAdd/bloomCheck calls, merging concurrent ones into few kernel batches.
//
// Why: services make many small Bloom calls at once; one kernel batch (or one worker round trip)
// per call costs more than the bits it touches. Merged calls must still answer exactly as if each
// had run alone, one after another, so:
//   - both kinds share one queue in call order, and a flush becomes runs of same-kind calls, each
//     run one kernel batch;
//   - an add batch waits for every earlier batch (a check before it must not see its bits, and an
//     earlier add's bits decide which of its keys "changed");
//   - a check batch waits only for the last earlier add (checks do not change the filter, so
//     checks may overlap each other);
//   - each caller gets its own answer: its slice of the merged flags, or its own count of keys
//     that changed a bit.
import type { CheckedKeys, Key, Keys } from '../hash/keys.js';
import { checkKeys } from '../hash/keys.js';
import type { BloomFilter } from './bloom-filter.js';
import { addChecked, addFlagsChecked, containsChecked } from './bloom-filter.js';
import type { Metrics } from '../metrics/index.js';
import { timeBatch } from '../metrics/time-batch.js';
import type { KernelJob, KernelPool } from '../pool/pool.js';
import { arrayJob, tryCheck } from '../pool/jobs.js';
import { Coalescer, type ResolvedCoalesce } from '../util/coalescer.js';

/** One queued bloomAdd or bloomCheck call (merged Bloom batches keep call order). */
interface BloomCall {
  add: boolean;
  batch: CheckedKeys;
  /** bloomAdd: the count of changed keys; bloomCheck: the caller's own answers. */
  resolve: (v: number | Uint8Array) => void;
  reject: (e: unknown) => void;
}

/** The keys of several checked calls back to back, as one checked batch (no key bytes copied). */
function mergeBatches(calls: readonly BloomCall[], from: number, to: number, n: number): CheckedKeys {
  if (to - from === 1) return calls[from]!.batch;
  const keys = new Array<Key>(n);
  let p = 0;
  for (let i = from; i < to; i++) {
    const b = calls[i]!.batch;
    if (b.packed === undefined) {
      const list = b.keys as ReadonlyArray<Key>;
      for (let j = 0; j < b.count; j++) keys[p++] = list[j]!;
    } else for (let j = 0; j < b.count; j++) keys[p++] = b.at(j);
  }
  return checkKeys(keys);
}

/** Each caller's part of a merged answer: its own checks, or its count of changed keys. */
function answerBloom(calls: readonly BloomCall[], from: number, to: number, add: boolean, out: Uint8Array): void {
  let p = 0;
  for (let i = from; i < to; i++) {
    const c = calls[i]!;
    const m = c.batch.count;
    if (add) {
      let changed = 0;
      for (let j = p; j < p + m; j++) changed += out[j]!;
      c.resolve(changed);
    } else c.resolve(to - from === 1 ? out : out.slice(p, p + m));
    p += m;
  }
}

/**
 * bloomAdd of one call: the count of keys that changed a bit, summed over chunks. Chunks run one
 * after another: whether a key changes a bit depends on every key added before it, so chunks
 * finishing out of order would give a count no sequential run gives.
 */
function bloomAddJob(bloom: BloomFilter): KernelJob<number> {
  return {
    ordered: true,
    utf16: true,
    inline: (b) => addChecked(bloom, b),
    offload: () => ({ op: { op: 'bloomAdd' }, acc: 0 }),
    fromLane: (changed, _lane, _from, _count, result) => changed + result,
    fromInline: (changed, part) => changed + part,
  };
}

function rejectBloom(calls: readonly BloomCall[], from: number, to: number, err: unknown): void {
  for (let i = from; i < to; i++) calls[i]!.reject(err);
}

/**
 * The gate's Bloom calls on one filter. The gate checks that it is open before each call and
 * awaits close() before closing the pool, so calls queued before close still get their answers.
 */
export class BloomCallQueue {
  // Queue merging concurrent calls, both kinds in one call-ordered queue; undefined = no merging.
  private readonly calls: Coalescer<BloomCall> | undefined;
  // Bloom batches on the workers not yet done, and those of them that add (see run).
  private pending = 0;
  private addsPending = 0;
  // Settle when every Bloom batch started so far is done / when the last add batch is done.
  private all: Promise<void> | undefined;
  private lastAdd: Promise<void> | undefined;

  /** `inlineThreshold`: batches with at most this many keys run on the calling thread. */
  constructor(
    private readonly bloom: BloomFilter,
    private readonly pool: KernelPool,
    private readonly metrics: Metrics,
    coalesce: ResolvedCoalesce | false,
    private readonly inlineThreshold: number,
  ) {
    this.calls = coalesce === false ? undefined : new Coalescer<BloomCall>(coalesce, (calls) => this.flush(calls));
  }

  /** Resolves to how many keys changed at least one bit, counted as if run after earlier calls. */
  add(keys: Keys): Promise<number> {
    if (this.calls === undefined) return this.addAlone(keys);
    return this.queued(true, 'bloom_add', keys) as Promise<number>;
  }

  /** 1 = maybe present, 0 = definitely absent, per key, after every earlier add. */
  check(keys: Keys): Promise<Uint8Array> {
    if (this.calls === undefined) return this.checkAlone(keys);
    return this.queued(false, 'bloom_check', keys) as Promise<Uint8Array>;
  }

  /** Settles when every call queued so far has its answer. */
  async close(): Promise<void> {
    await this.calls?.drain();
  }

  private async addAlone(keys: Keys): Promise<number> {
    const bloom = this.bloom;
    const c = tryCheck(() => checkKeys(keys), keys);
    return timeBatch(this.metrics, 'bloom_add', c.n, () =>
      c.batch === undefined ? Promise.reject(c.invalid) : this.pool.run(c.batch, bloomAddJob(bloom)),
    );
  }

  private async checkAlone(keys: Keys): Promise<Uint8Array> {
    const bloom = this.bloom;
    const c = tryCheck(() => checkKeys(keys), keys);
    const job = arrayJob(
      (b) => containsChecked(bloom, b),
      () => ({ op: { op: 'bloomCheck' }, width: 1 }),
      (length) => new Uint8Array(length),
      (lane, count) => lane.views.out.subarray(0, count),
    );
    job.utf16 = true;
    return timeBatch(this.metrics, 'bloom_check', c.n, () => (c.batch === undefined ? Promise.reject(c.invalid) : this.pool.run(c.batch, job)));
  }

  // Not async: a merged call resolves straight from its batch, without a wrapper promise per call.
  private queued(add: boolean, op: 'bloom_add' | 'bloom_check', keys: Keys): Promise<number | Uint8Array> {
    // Checked before queueing, so a bad key rejects only its own call.
    const c = tryCheck(() => checkKeys(keys), keys);
    if (!this.metrics.enabled) return c.batch === undefined ? Promise.reject(c.invalid) : this.enqueue(add, c.batch);
    return timeBatch(this.metrics, op, c.n, () => (c.batch === undefined ? Promise.reject(c.invalid) : this.enqueue(add, c.batch)));
  }

  private enqueue(add: boolean, batch: CheckedKeys): Promise<number | Uint8Array> {
    const n = batch.count;
    if (n === 0) return Promise.resolve(add ? 0 : new Uint8Array(0));
    const co = this.calls!;
    return new Promise((resolve, reject) => {
      const call: BloomCall = { add, batch, resolve, reject };
      if (co.accepts(n)) co.add(call, n);
      else {
        // A big call is a batch of its own, after what is queued (call order decides answers).
        co.flush();
        co.begin();
        this.flush([call]);
      }
    });
  }

  // Coalescer flush: runs of same-kind calls, each one kernel batch, started in call order.
  private flush(calls: BloomCall[]): void {
    const co = this.calls!;
    let runs = 0;
    for (let i = 0; i < calls.length; i++) if (i === 0 || calls[i]!.add !== calls[i - 1]!.add) runs++;
    let left = runs;
    const runDone = (): void => {
      if (--left === 0) co.done();
    };
    for (let i = 0; i < calls.length; ) {
      const add = calls[i]!.add;
      let j = i;
      let n = 0;
      while (j < calls.length && calls[j]!.add === add) n += calls[j++]!.batch.count;
      this.run(calls, i, j, n, add, runDone);
      i = j;
    }
  }

  // Runs calls[from..to) (all adds or all checks, n keys) as one batch once it may: an add after
  // every earlier batch is done, a check after the last earlier add. Only batches that go to the
  // workers (or wait for one that did) are asynchronous; an inline batch with nothing to wait for
  // runs right here, so the usual small-call path never waits a tick.
  private run(calls: BloomCall[], from: number, to: number, n: number, add: boolean, done: () => void): void {
    const wait = add ? this.all : this.lastAdd;
    const inline = !this.pool.threaded || n <= this.inlineThreshold;
    if (wait === undefined && inline) {
      this.exec(calls, from, to, n, add);
      done();
      return;
    }
    this.pending++;
    if (add) this.addsPending++;
    const run = (): Promise<void> | undefined => this.exec(calls, from, to, n, add);
    const settled = (wait === undefined ? Promise.resolve(run()) : wait.then(run)).then(() => {
      done();
      if (add && --this.addsPending === 0) this.lastAdd = undefined;
      if (--this.pending === 0) {
        this.all = undefined;
        this.lastAdd = undefined;
      }
    });
    if (add) {
      // It waited for every earlier batch, so its end is the end of all of them.
      this.all = settled;
      this.lastAdd = settled;
    } else {
      const all = this.all;
      this.all = all === undefined ? settled : Promise.all([all, settled]).then(() => undefined);
    }
  }

  // One kernel batch for the calls; answers (or rejects) each caller. Never rejects itself.
  private exec(calls: BloomCall[], from: number, to: number, n: number, add: boolean): Promise<void> | undefined {
    const bloom = this.bloom;
    try {
      const batch = mergeBatches(calls, from, to, n);
      if (add && to - from === 1) {
        // One caller needs only its count: no flags, and its chunks may run side by side as today.
        const c = calls[from]!;
        const counted = this.pool.run(batch, bloomAddJob(bloom));
        return counted.then((changed) => c.resolve(changed), (err: unknown) => c.reject(err));
      }
      if (!this.pool.threaded || n <= this.inlineThreshold) {
        let out: Uint8Array;
        if (add) addFlagsChecked(bloom, batch, (out = new Uint8Array(n)));
        else out = containsChecked(bloom, batch);
        answerBloom(calls, from, to, add, out);
        return undefined;
      }
      const job = arrayJob(
        (b) => {
          if (!add) return containsChecked(bloom, b);
          const flags = new Uint8Array(b.count);
          addFlagsChecked(bloom, b, flags);
          return flags;
        },
        () => ({ op: { op: add ? 'bloomAddFlags' : 'bloomCheck' }, width: 1 }),
        (length) => new Uint8Array(length),
        (lane, count) => lane.views.out.subarray(0, count),
      );
      // Adds run chunk after chunk: each key's "changed" answer then sees every earlier key.
      return this.pool.run(batch, { ...job, ordered: add, utf16: true }).then(
        (out) => answerBloom(calls, from, to, add, out),
        (err: unknown) => rejectBloom(calls, from, to, err),
      );
    } catch (err) {
      rejectBloom(calls, from, to, err);
      return undefined;
    }
  }
}
