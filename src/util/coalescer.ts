// Merges concurrent small calls into one store batch: the one coalescer every call site uses.
//
// Why: a service makes hundreds of one-key calls at once; each paying its own store round trip,
// hashing setup and result plumbing is what made the small-call path 10x slower than a batch.
// Items queue in call order and are handed to `flush` together:
//   - when the store is idle (nothing queued, nothing in flight) and maxDelayMs is 0, the queue
//     is flushed from a microtask: a lone sequential call pays no added wait (no event-loop turn),
//     yet every caller woken by the same reply joins it. Flushing the first caller at once, as
//     this did before, split a closed loop of callers for good: the first one woken after the
//     store went idle became a one-key batch of its own every round (at 256 one-key callers a
//     third of all batches carried one key, each costing a write and a reply like a full one);
//   - otherwise items wait for the end of the current event-loop turn (setImmediate: every I/O
//     callback and microtask of this turn can still join) or maxDelayMs, whichever is set;
//   - a queue reaching maxKeys is flushed immediately (bounded batch, bounded memory).
// Flushes start in call order, so a store that applies batches in the order it receives them
// answers exactly as if the calls had run one after another.
import { ErrorCodes, HashGateTypeError, checkInt, invalidType } from '../errors.js';

export interface CoalesceOptions {
  /**
   * Most keys merged into one batch. Default 128: a merged Redis script then blocks Redis for a
   * few hundred microseconds at most (other clients of the same Redis keep their latency), and
   * a burst larger than that goes out in several batches, so Redis works on the first while the
   * next is still being collected. Raise it (e.g. 1024) when Redis is remote and round trips,
   * not Redis CPU, are the limit; lower it when other clients' p99 on that Redis matters more.
   * A call with at least this many keys is never merged: it is a batch on its own.
   */
  maxKeys?: number;
  /**
   * Extra time a call may wait for others to join its batch. Default 0: merge only what arrives
   * in the same event-loop turn, no added latency. A few ms helps when calls trickle in slower
   * than the store answers (e.g. a distant Redis) and latency matters less than round trips.
   */
  maxDelayMs?: number;
}

export interface ResolvedCoalesce {
  maxKeys: number;
  maxDelayMs: number;
}

export const COALESCE_DEFAULTS: Readonly<ResolvedCoalesce> = Object.freeze({ maxKeys: 128, maxDelayMs: 0 });

const KNOWN = new Set(['maxKeys', 'maxDelayMs']);
const RESOLVED = Promise.resolve();

/** Validates `coalesce: { maxKeys, maxDelayMs } | false`; false (or maxKeys 1) disables merging. */
export function parseCoalesceOptions(v: unknown, name = 'coalesce'): ResolvedCoalesce | false {
  if (v === undefined) return { ...COALESCE_DEFAULTS };
  if (v === false) return false;
  if (v === null || typeof v !== 'object') throw invalidType(name, 'false or { maxKeys, maxDelayMs }', v);
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!KNOWN.has(k)) throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `${name}.${k} is not a coalesce option`, { name: `${name}.${k}` });
  }
  return {
    maxKeys: checkInt(`${name}.maxKeys`, o.maxKeys ?? COALESCE_DEFAULTS.maxKeys, 1, 10_000_000),
    maxDelayMs: checkInt(`${name}.maxDelayMs`, o.maxDelayMs ?? COALESCE_DEFAULTS.maxDelayMs, 0, 60_000),
  };
}

/**
 * Queue of items (calls) flushed in batches. `flush(items)` must start the store work for all of
 * them synchronously (before its first await) so batches reach the store in order, and must call
 * `done()` exactly once when that work has finished (success or failure), which lets the next
 * lone call skip the wait.
 */
export class Coalescer<T> {
  private items: T[] = [];
  private keys = 0;
  private inflight = 0;
  private scheduled: NodeJS.Immediate | NodeJS.Timeout | undefined;
  /** A microtask flush is queued (an idle store's first call); it cannot be cancelled, only skipped. */
  private micro = false;
  private readonly run = (): void => {
    this.scheduled = undefined;
    this.flush();
  };
  private readonly runMicro = (): void => {
    this.micro = false;
    if (this.scheduled === undefined) this.flush();
  };
  private idleWaiters: Array<() => void> | undefined;
  readonly done = (): void => {
    if (--this.inflight === 0 && this.idleWaiters !== undefined) {
      const w = this.idleWaiters;
      this.idleWaiters = undefined;
      for (const f of w) f();
    }
  };

  constructor(
    private readonly opts: ResolvedCoalesce,
    private readonly onFlush: (items: T[], keys: number) => void,
  ) {}

  /** Queued keys not yet flushed. */
  get pendingKeys(): number {
    return this.keys;
  }

  /** Batches flushed and not yet done. */
  get inFlight(): number {
    return this.inflight;
  }

  /** Whether a call of `keys` keys would be merged (false: run it alone, after flush()). */
  accepts(keys: number): boolean {
    return keys < this.opts.maxKeys;
  }

  add(item: T, keys: number): void {
    if (this.keys + keys > this.opts.maxKeys) this.flush();
    this.items.push(item);
    this.keys += keys;
    if (this.keys >= this.opts.maxKeys) {
      this.flush();
      return;
    }
    if (this.scheduled !== undefined || this.micro) return;
    if (this.opts.maxDelayMs > 0) this.scheduled = setTimeout(this.run, this.opts.maxDelayMs);
    else if (this.inflight === 0) {
      this.micro = true;
      // a promise reaction, not queueMicrotask: Node wraps every queueMicrotask callback in an
      // AsyncResource of its own, which measured as a fifth of a lone call's JS time
      RESOLVED.then(this.runMicro);
    } else this.scheduled = setImmediate(this.run);
  }

  /** Hands every queued item to onFlush now (no-op when empty). */
  flush(): void {
    if (this.scheduled !== undefined) {
      if (this.opts.maxDelayMs > 0) clearTimeout(this.scheduled as NodeJS.Timeout);
      else clearImmediate(this.scheduled as NodeJS.Immediate);
      this.scheduled = undefined;
    }
    if (this.items.length === 0) return;
    const items = this.items;
    const keys = this.keys;
    this.items = [];
    this.keys = 0;
    this.inflight++;
    this.onFlush(items, keys);
  }

  /** Flushes what is queued and resolves once no batch is in flight (for close()). */
  drain(): Promise<void> {
    this.flush();
    if (this.inflight === 0) return Promise.resolve();
    return new Promise((resolve) => (this.idleWaiters ??= []).push(resolve));
  }

  /** Marks one batch that did not go through flush() (a big call run alone) as in flight. */
  begin(): void {
    this.inflight++;
  }
}
