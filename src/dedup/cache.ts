// Seen-key cache: keys the store confirmed (or the journal holds) in the current window, so
// repeats are answered without Redis. Safe because "seen" never becomes "unseen" inside a window.
//
// Keys are the full 128-bit digests (exact: a 64-bit id would allow false duplicates), kept in
// open-addressing tables over typed arrays: no string or object per key, so no GC pressure on the
// hot path (JS strings + Set cost ~30% of firstSeen's CPU in profiles, lru-cache's list more).
// Eviction is generational, an LRU approximation: lookups hit `young` then `old`; a hit in `old`
// is copied to `young`; when `young` holds max/2 entries it becomes `old` and the previous `old`
// is wiped. Bounded to `max` entries; memory ~ 2 tables x 2 cells/entry x 16 B.

const nextPow2 = (n: number): number => 2 ** Math.ceil(Math.log2(Math.max(2, n)));

/**
 * Set of 128-bit digests: `d` is a Uint32Array of digests (4 words each), `i` a digest index.
 * One array of 4-word cells, an all-zero cell being empty (the all-zero digest itself is a flag
 * of its own): a probe reads one cache line. A separate "used" byte per cell, as this was, made
 * every add into a big table two cache misses instead of one.
 */
export class DigestSet {
  private words: Uint32Array;
  private mask: number;
  /** Whether the all-zero digest is a member (it cannot live in a cell: zero words mean empty). */
  private zero = false;
  /** Cells at full capacity. A `growable` table starts small and doubles up to it, so a fresh
   *  process (a restart) does not zero and fault in tens of MiB before its first answer. */
  private readonly maxCells: number;
  size = 0;

  constructor(readonly capacity: number, growable = false) {
    this.maxCells = nextPow2(capacity * 2);
    const cells = growable ? Math.min(this.maxCells, 4096) : this.maxCells;
    this.mask = cells - 1;
    this.words = new Uint32Array(cells * 4);
  }

  /** Doubles the table (load stays <= 1/2 until maxCells, where capacity keeps it there). */
  private grow(): void {
    const old = this.words;
    const cells = (this.mask + 1) * 2;
    this.words = new Uint32Array(cells * 4);
    this.mask = cells - 1;
    const words = this.words;
    for (let p = 0; p < old.length; p += 4) {
      const w0 = old[p]!;
      const w1 = old[p + 1]!;
      const w2 = old[p + 2]!;
      const w3 = old[p + 3]!;
      if ((w0 | w1 | w2 | w3) === 0) continue;
      // never in the new table yet: find() ends at the empty cell it goes to
      const q = (-1 - this.find(w0, w1, w2, w3)) << 2;
      words[q] = w0;
      words[q + 1] = w1;
      words[q + 2] = w2;
      words[q + 3] = w3;
    }
  }

  /** Cell of a non-zero digest (w0..w3): its index when present, else -1 - the empty cell that ends its probe. */
  private find(w0: number, w1: number, w2: number, w3: number): number {
    const words = this.words;
    let s = (w0 ^ w3) & this.mask;
    for (;;) {
      const p = s << 2;
      const a = words[p]!;
      const b = words[p + 1]!;
      const c = words[p + 2]!;
      const e = words[p + 3]!;
      if (a === w0 && b === w1 && c === w2 && e === w3) return s;
      if ((a | b | c | e) === 0) return -1 - s;
      s = (s + 1) & this.mask;
    }
  }

  has(d: Uint32Array, i: number): boolean {
    const o = i << 2;
    const w0 = d[o]!;
    const w1 = d[o + 1]!;
    const w2 = d[o + 2]!;
    const w3 = d[o + 3]!;
    if ((w0 | w1 | w2 | w3) === 0) return this.zero;
    return this.find(w0, w1, w2, w3) >= 0;
  }

  /** Adds digest i; false when it was already there. Caller keeps size <= capacity. */
  add(d: Uint32Array, i: number): boolean {
    const o = i << 2;
    const w0 = d[o]!;
    const w1 = d[o + 1]!;
    const w2 = d[o + 2]!;
    const w3 = d[o + 3]!;
    if ((w0 | w1 | w2 | w3) === 0) {
      if (this.zero) return false;
      this.zero = true;
      this.size++;
      return true;
    }
    if ((this.size + 1) * 2 > this.mask + 1 && this.mask + 1 < this.maxCells) this.grow();
    const f = this.find(w0, w1, w2, w3);
    if (f >= 0) return false;
    const p = (-1 - f) << 2;
    const words = this.words;
    words[p] = w0;
    words[p + 1] = w1;
    words[p + 2] = w2;
    words[p + 3] = w3;
    this.size++;
    return true;
  }

  /** Sets bit (word 1 & mask) of `bits` for every member (SeenCache's filter). */
  markInto(bits: Int32Array, mask: number): void {
    const w = this.words;
    for (let p = 0; p < w.length; p += 4) {
      const w1 = w[p + 1]!;
      if ((w[p]! | w1 | w[p + 2]! | w[p + 3]!) === 0) continue;
      const h = w1 & mask;
      bits[h >>> 5]! |= 1 << (h & 31);
    }
    if (this.zero) bits[0]! |= 1;
  }

  clear(): void {
    if (this.size === 0) return;
    this.words.fill(0);
    this.zero = false;
    this.size = 0;
  }
}

/** Most bits of SeenCache's filter (16 MiB): past it a bigger cache filters less, never wrongly. */
const FILTER_MAX_BITS = 2 ** 27;

export class SeenCache {
  private young: DigestSet | undefined;
  private old: DigestSet | undefined;
  private readonly half: number;
  /**
   * One bit per value of (digest word 1 & filterMask), set for every member of both tables: a
   * clear bit answers "not cached" from a table of 16 bits per entry (2 MiB at the default 1M
   * entries, mostly in cache) instead of a probe of each generation's table (tens of MiB, a cache
   * miss each): new keys, the usual case, then cost one probe (their add) instead of three.
   * Rebuilt from the surviving table when the generations turn; a set bit only means "look".
   */
  private filter: Int32Array | undefined;
  private readonly filterMask: number;

  constructor(readonly max: number) {
    this.half = Math.max(1, Math.floor(max / 2));
    this.filterMask = Math.min(FILTER_MAX_BITS, nextPow2(max * 16)) - 1;
  }

  has(d: Uint32Array, i: number): boolean {
    const f = this.filter;
    if (f === undefined) return false;
    const h = d[(i << 2) + 1]! & this.filterMask;
    if ((f[h >>> 5]! & (1 << (h & 31))) === 0) return false;
    if (this.young!.has(d, i)) return true;
    if (this.old !== undefined && this.old.has(d, i)) {
      this.add(d, i);
      return true;
    }
    return false;
  }

  add(d: Uint32Array, i: number): void {
    if (this.young === undefined) {
      this.young = new DigestSet(this.half, true);
      this.filter = new Int32Array((this.filterMask + 1) >>> 5 || 1);
    }
    if (this.young.size >= this.half) {
      // the first turn shows the cache fills: the second table is made at its full size rather
      // than grown there by doublings (each one rehashing every entry it holds)
      const recycled = this.old ?? new DigestSet(this.half);
      recycled.clear();
      this.old = this.young;
      this.young = recycled;
      this.filter!.fill(0);
      this.old.markInto(this.filter!, this.filterMask);
    }
    this.young.add(d, i);
    const h = d[(i << 2) + 1]! & this.filterMask;
    this.filter![h >>> 5]! |= 1 << (h & 31);
  }

  get size(): number {
    return (this.young?.size ?? 0) + (this.old?.size ?? 0);
  }

  clear(): void {
    this.young?.clear();
    this.old?.clear();
    this.filter?.fill(0);
  }
}
