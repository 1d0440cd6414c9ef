// Keys whose load below the local tier is in flight, per table: the load carrying each and the
// key's place in it, so a lookup of a key already being loaded follows that load.
//
// Hand-written instead of a Map<string, { load, index }>, because it measured faster: every missed
// key is claimed before its load and released after it, and with tens of thousands of keys in
// flight (a big batch, or a thousand callers of a hundred keys) the Map rehashed as it grew and
// shrank with every wave of loads and left an object per key behind; with a few thousand keys in
// flight both cost the same (measured with keys claimed and released in waves of 40k, 2,560 and
// 100, and with lookups of Redis hits from 256 and 1,024 callers).
import { getRandomValues } from 'node:crypto';

/** Smallest table (slots): 24 KiB, the claims of a 500-key lookup without growing. */
const MIN_SLOTS = 1024;
/**
 * How much a full table grows at once. Each growth allocates and first touches a new table, which
 * costs more than the rehash itself; four-fold takes half the growths of doubling.
 */
const GROWTH = 4;

/** Seeds the key hash per process, so nobody can choose keys that all land on one probe chain. */
const SEED = getRandomValues(new Uint32Array(1))[0]!;

/** Seeded hash of a key's UTF-16 code units (multiply-xorshift per unit, murmur3's finalizer). */
export function keyHash(key: string): number {
  let h = SEED;
  for (let i = 0; i < key.length; i++) {
    h = Math.imul(h ^ key.charCodeAt(i), 0x5bd1e995);
    h ^= h >>> 15;
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Open addressing with linear probing and backward-shift deletion (no tombstones), load <= 1/2.
 * A key is named with its hash (keyHash), which the caller computes once for the claim and the
 * release. `L` is the load a claim points to.
 */
export class InFlightKeys<L> {
  #keys: Array<string | undefined>;
  #hashes: Uint32Array;
  #loads: Array<L | undefined>;
  #index: Uint32Array;
  #mask: number;
  #size = 0;
  /** Most keys claimed at once since the table last emptied. */
  #peak = 0;

  constructor() {
    this.#keys = new Array<string | undefined>(MIN_SLOTS).fill(undefined);
    this.#hashes = new Uint32Array(MIN_SLOTS);
    this.#loads = new Array<L | undefined>(MIN_SLOTS).fill(undefined);
    this.#index = new Uint32Array(MIN_SLOTS);
    this.#mask = MIN_SLOTS - 1;
  }

  /** Keys claimed. */
  get size(): number {
    return this.#size;
  }

  /** Slots of the table (twice the most keys it holds without growing). */
  get slots(): number {
    return this.#mask + 1;
  }

  /** The slot of `key` (hash `h`), or -1 when nobody loads it. */
  find(key: string, h: number): number {
    const keys = this.#keys;
    const hashes = this.#hashes;
    const mask = this.#mask;
    for (let p = h & mask; ; p = (p + 1) & mask) {
      const k = keys[p];
      if (k === undefined) return -1;
      if (hashes[p] === h && k === key) return p;
    }
  }

  /** The load of the claim in slot `p` (from find). */
  loadAt(p: number): L {
    return this.#loads[p]!;
  }

  /** The key's index in that load. */
  indexAt(p: number): number {
    return this.#index[p]!;
  }

  /** Claims `key`, which nobody loads (find gave -1), for `load`, where it is key `index`. */
  add(key: string, h: number, load: L, index: number): void {
    if ((this.#size + 1) * 2 > this.#mask + 1) this.#resize((this.#mask + 1) * GROWTH);
    this.#put(key, h, load, index);
    if (++this.#size > this.#peak) this.#peak = this.#size;
  }

  /** Releases the claim of `key`; false when it held none. */
  delete(key: string, h: number): boolean {
    let hole = this.find(key, h);
    if (hole < 0) return false;
    const keys = this.#keys;
    const hashes = this.#hashes;
    const loads = this.#loads;
    const index = this.#index;
    const mask = this.#mask;
    // pull back every later key of the run whose home slot does not lie after the hole, so no
    // probe chain is cut
    for (let q = (hole + 1) & mask; keys[q] !== undefined; q = (q + 1) & mask) {
      const home = hashes[q]! & mask;
      if (((q - home) & mask) < ((q - hole) & mask)) continue;
      keys[hole] = keys[q];
      hashes[hole] = hashes[q]!;
      loads[hole] = loads[q];
      index[hole] = index[q]!;
      hole = q;
    }
    keys[hole] = undefined;
    loads[hole] = undefined;
    if (--this.#size === 0) this.#emptied();
    return true;
  }

  /**
   * Keeps the size the last wave of claims needed (waves of the same size then grow nothing), but
   * gives back the memory of a burst once a wave needs far less.
   */
  #emptied(): void {
    let want = MIN_SLOTS;
    while (want < 2 * this.#peak) want *= GROWTH;
    this.#peak = 0;
    if (this.#mask + 1 > 4 * want) this.#resize(want);
  }

  #put(key: string, h: number, load: L, index: number): void {
    const keys = this.#keys;
    const mask = this.#mask;
    let p = h & mask;
    while (keys[p] !== undefined) p = (p + 1) & mask;
    keys[p] = key;
    this.#hashes[p] = h;
    this.#loads[p] = load;
    this.#index[p] = index;
  }

  #resize(slots: number): void {
    const keys = this.#keys;
    const hashes = this.#hashes;
    const loads = this.#loads;
    const index = this.#index;
    this.#keys = new Array<string | undefined>(slots).fill(undefined);
    this.#hashes = new Uint32Array(slots);
    this.#loads = new Array<L | undefined>(slots).fill(undefined);
    this.#index = new Uint32Array(slots);
    this.#mask = slots - 1;
    for (let p = 0; p < keys.length; p++) {
      const k = keys[p];
      if (k !== undefined) this.#put(k, hashes[p]!, loads[p]!, index[p]!);
    }
  }
}
