// Deletion by periodic rebuild (seed doc 004): build a fresh filter from the source of truth in
// the background, then swap it in with one reference assignment. Readers hold either the old
// or the new filter, never a half-built one. Adds that arrive during a rebuild go to both, so
// a key added mid-rebuild is still present after the swap.
import { ErrorCodes, HashGateError, invalidType } from '../errors.js';
import { BloomFilter, type BloomFilterOptions } from './bloom-filter.js';
import { isPacked, type Key, type KeyBatch } from './keys.js';
import type { PackedKeys } from '../hash/index.js';

export const REBUILD_DEFAULTS = {
  /** Keys buffered before one addAll into the new filter. */
  batchKeys: 8192,
  /** Yield to the event loop (setImmediate) after this many keys, so readers keep running. */
  yieldEveryKeys: 65536,
} as const;

export type RebuildSource = AsyncIterable<Key | ReadonlyArray<Key> | PackedKeys> | Iterable<Key | ReadonlyArray<Key> | PackedKeys>;

export interface RebuildOptions extends Partial<BloomFilterOptions> {
  signal?: AbortSignal;
  /** Called with the new filter right after the swap (e.g. to post its descriptor to workers). */
  onSwap?: (next: BloomFilter, previous: BloomFilter) => void;
}

const tick = () => new Promise<void>((r) => setImmediate(r));

/** Builds a new filter from `source` (keys, arrays of keys or PackedKeys; sync or async). */
export async function buildBloom(source: RebuildSource, options: BloomFilterOptions & { signal?: AbortSignal }, tee?: (f: BloomFilter) => void): Promise<BloomFilter> {
  if (source === null || typeof source !== 'object' || (!(Symbol.asyncIterator in source) && !(Symbol.iterator in source))) {
    throw invalidType('source', 'an (async) iterable of keys, key arrays or PackedKeys', source);
  }
  // only the filter's own options: rebuild options (signal, onSwap, ...) are not filter options
  const { expectedItems, fpp, seed, engine } = options;
  const f = BloomFilter.create({ expectedItems, fpp, ...(seed === undefined ? {} : { seed }), ...(engine === undefined ? {} : { engine }) });
  tee?.(f);
  const buf: Key[] = [];
  let sinceYield = 0;
  const flush = () => {
    if (buf.length > 0) f.addAll(buf);
    buf.length = 0;
  };
  for await (const item of source as AsyncIterable<unknown>) {
    options.signal?.throwIfAborted();
    if (typeof item === 'string' || item instanceof Uint8Array) {
      buf.push(item);
      sinceYield++;
      if (buf.length >= REBUILD_DEFAULTS.batchKeys) flush();
    } else if (Array.isArray(item) || isPacked(item)) {
      flush();
      f.addAll(item as KeyBatch);
      sinceYield += Array.isArray(item) ? item.length : (item as PackedKeys).count;
    } else {
      throw invalidType('source item', 'a key, an array of keys or PackedKeys', item);
    }
    if (sinceYield >= REBUILD_DEFAULTS.yieldEveryKeys) {
      sinceYield = 0;
      await tick();
    }
  }
  flush();
  return f;
}

/** A Bloom filter reference that can be rebuilt and swapped without readers noticing. */
export class SwappableBloom {
  #current: BloomFilter;
  #pending: BloomFilter | undefined;
  #rebuilding: Promise<BloomFilter> | undefined;
  /** Bumped on every swap; workers compare it to know when to re-attach. */
  generation = 0;

  constructor(initial: BloomFilter) {
    if (!(initial instanceof BloomFilter)) throw invalidType('initial', 'a BloomFilter', initial);
    this.#current = initial;
  }

  get current(): BloomFilter {
    return this.#current;
  }

  get rebuilding(): boolean {
    return this.#rebuilding !== undefined;
  }

  mightContain(key: Key): boolean {
    return this.#current.mightContain(key);
  }

  mightContainAll(keys: KeyBatch): Uint8Array {
    return this.#current.mightContainAll(keys);
  }

  add(key: Key): boolean {
    this.#pending?.add(key);
    return this.#current.add(key);
  }

  addAll(keys: KeyBatch): number {
    this.#pending?.addAll(keys);
    return this.#current.addAll(keys);
  }

  /**
   * Builds a new filter sized by `options` from `source`, then swaps it in. Resolves with the
   * previous filter; on error or abort the current filter stays in place.
   * One rebuild at a time: a second call while one runs rejects with HG_ERR_INVALID_ARG.
   */
  rebuild(source: RebuildSource, options: RebuildOptions & BloomFilterOptions): Promise<BloomFilter> {
    if (this.#rebuilding !== undefined) {
      return Promise.reject(new HashGateError(ErrorCodes.INVALID_ARG, 'rebuild: a rebuild is already running'));
    }
    const run = (async () => {
      try {
        const next = await buildBloom(source, options, (f) => {
          this.#pending = f;
        });
        const previous = this.#current;
        this.#current = next;
        this.generation++;
        options.onSwap?.(next, previous);
        return previous;
      } finally {
        this.#pending = undefined;
        this.#rebuilding = undefined;
      }
    })();
    this.#rebuilding = run;
    return run;
  }
}

/** rebuild(target, source, options): the helper form of target.rebuild(source, options). */
export function rebuild(target: SwappableBloom, source: RebuildSource, options: RebuildOptions & BloomFilterOptions): Promise<BloomFilter> {
  if (!(target instanceof SwappableBloom)) return Promise.reject(invalidType('target', 'a SwappableBloom', target));
  return target.rebuild(source, options);
}
