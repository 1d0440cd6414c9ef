// Gates shared by a fleet: the small async batch interface the fingerprint index and the ID
// registry accept for a Bloom filter that other processes see too (a Redis-held filter, or the
// bus-replicated one below), so a value added on one instance is not "definitely absent" on another.
import { invalidType } from '../errors.js';
import type { BloomFilter } from './bloom-filter.js';
import type { BusListener, InvalidationBus } from '../cache/bus.js';

export interface SharedGate {
  /** Adds keys where every instance reads them; resolves once they are visible there. */
  addAll(keys: readonly string[]): Promise<unknown>;
  /** One byte per key, in order: 1 = might contain, 0 = definitely never added. */
  containsAll(keys: readonly string[]): Promise<Uint8Array>;
  /**
   * Optional: add keys read back from the source of truth (a rebuild) without propagating them;
   * every instance rebuilds its own copy. Gates held in one shared place simply omit it.
   */
  loadAll?(keys: readonly string[]): Promise<unknown>;
}

export const isSharedGate = (g: unknown): g is SharedGate =>
  g !== null && typeof g === 'object' && typeof (g as SharedGate).addAll === 'function' && typeof (g as SharedGate).containsAll === 'function';

export interface ReplicatedGateOptions {
  /** This process's copy. */
  filter: BloomFilter;
  bus: InvalidationBus;
  /** Gates with the same name (and bus channel) replicate each other. */
  name: string;
  /**
   * Called when the bus re-subscribed after an outage: adds may have been missed, so reload the
   * filter from storage (e.g. `() => index.rebuildGate()` or `() => registry.rebuildGate()`). Errors are swallowed; the filter keeps
   * what it has.
   */
  onResync?: () => Promise<unknown> | void;
}

/**
 * A local Bloom filter kept in step across instances by the invalidation bus: addAll() adds here
 * and publishes the keys, peers add them on receipt (within the bus delay, measured by bench/bus).
 * Checks cost no round trip. A peer that was disconnected re-subscribes and runs onResync.
 * Messages carry the raw keys (peers must hash them with their own filter).
 */
export class ReplicatedGate implements SharedGate {
  readonly filter: BloomFilter;
  readonly #bus: InvalidationBus;
  readonly #topic: string;
  readonly #listener: BusListener;
  readonly #off: () => void;
  resyncs = 0;

  constructor(opts: ReplicatedGateOptions) {
    if (opts === null || typeof opts !== 'object') throw invalidType('options', 'an object', opts);
    if (typeof opts.filter?.addAll !== 'function') throw invalidType('options.filter', 'a BloomFilter', opts.filter);
    if (typeof opts.bus?.publish !== 'function') throw invalidType('options.bus', 'an InvalidationBus', opts.bus);
    if (typeof opts.name !== 'string' || opts.name.length === 0) throw invalidType('options.name', 'a non-empty string', opts.name);
    if (opts.onResync !== undefined && typeof opts.onResync !== 'function') throw invalidType('options.onResync', 'a function', opts.onResync);
    this.filter = opts.filter;
    this.#bus = opts.bus;
    // a topic no cache table can have (table names are [A-Za-z0-9_.-])
    this.#topic = `gate:${opts.name}`;
    const onResync = opts.onResync;
    this.#listener = {
      keys: (t, k) => {
        if (t === this.#topic) this.filter.addAll(k as string[]);
      },
      resync: () => {
        this.resyncs++;
        if (onResync) Promise.resolve().then(onResync).catch(() => undefined);
      },
    };
    this.#off = this.#bus.subscribe(this.#listener);
  }

  async addAll(keys: readonly string[]): Promise<number> {
    const n = this.filter.addAll(keys as string[]);
    this.#bus.publish(this.#topic, keys, this.#listener);
    return n;
  }

  async containsAll(keys: readonly string[]): Promise<Uint8Array> {
    return this.filter.mightContainAll(keys as string[], new Uint8Array(keys.length));
  }

  async loadAll(keys: readonly string[]): Promise<number> {
    return this.filter.addAll(keys as string[]);
  }

  /** Stops listening (the bus belongs to the caller). */
  close(): void {
    this.#off();
  }
}
