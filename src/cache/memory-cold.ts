// In-process cold store: the embedded default when no HBase is configured, and the store the unit
// tests of the tier logic run against. Bounded: past maxEntries the oldest insert is dropped.
import { checkInt } from '../errors.js';
import type { ColdCell, ColdEntry, ColdStore } from './types.js';

export const MEMORY_COLD_DEFAULTS = { maxEntries: 1_000_000 } as const;

export class MemoryColdStore implements ColdStore {
  readonly kind = 'memory';
  readonly #tables = new Map<string, Map<string, ColdCell>>();
  readonly #maxEntries: number;
  #size = 0;
  /** Calls and keys served, so tests can assert how often the cold tier was reached. */
  readonly counters = { mgetCalls: 0, keysRead: 0, mputCalls: 0, keysWritten: 0 };

  constructor(opts: { maxEntries?: number } = {}) {
    this.#maxEntries = checkInt('cold.maxEntries', opts.maxEntries ?? MEMORY_COLD_DEFAULTS.maxEntries, 1);
  }

  async mget(table: string, keys: readonly string[]): Promise<(ColdCell | undefined)[]> {
    this.counters.mgetCalls++;
    this.counters.keysRead += keys.length;
    const t = this.#tables.get(table);
    return keys.map((k) => t?.get(k));
  }

  async mput(table: string, entries: readonly ColdEntry[]): Promise<void> {
    this.counters.mputCalls++;
    this.counters.keysWritten += entries.length;
    let t = this.#tables.get(table);
    if (!t) this.#tables.set(table, (t = new Map()));
    for (const e of entries) {
      if (!t.has(e.key)) this.#size++;
      else t.delete(e.key); // re-insert so eviction order follows the latest write
      t.set(e.key, { value: e.value, ts: e.ts });
      if (this.#size > this.#maxEntries) this.#evictOne();
    }
  }

  get size(): number {
    return this.#size;
  }

  #evictOne(): void {
    for (const t of this.#tables.values()) {
      const first = t.keys().next();
      if (!first.done) {
        t.delete(first.value);
        this.#size--;
        return;
      }
    }
  }
}
