// Seen-key cache: keys the store confirmed (or the journal holds) in the current window, so
// repeats are answered without Redis. Safe because "seen" never becomes "unseen" inside a window.
//
// Keys are the full 128-bit digests (exact: a 64-bit id would allow false duplicates), kept in
// one typed array: no string or object per key, so no GC pressure on the hot path (JS strings +
// Set cost ~30% of firstSeen's CPU in profiles, lru-cache's list more). Bounded to `max` entries
// at 17 B each: the digest and a tag byte.

/** Entries per set: four 16-byte digests fill one 64-byte cache line. */
const WAYS = 4;

/**
 * Sets of a new table. It grows GROWTH-fold (up to its full size) when an eighth full, so a fresh
 * process touches memory as it caches keys rather than faulting in the whole table at random; at
 * an eighth, a set meets a fifth key (and drops its oldest) about once in 6,000 sets.
 */
const FIRST_SETS = 4096;
/**
 * How much a table grows at a time. Every step allocates a table and faults it in: doubling
 * touched twice the final size in all; eight-fold jumped a few thousand keys straight to the full
 * table. Four-fold took the fewest page faults and the least time for streams of 20k to 1M new
 * keys.
 */
const GROWTH = 4;

/** A way's tag: 7 bits of digest word 1, odd so that an empty way's tag byte (0) never matches. */
const tagOf = (w1: number): number => (w1 & 0xfe) | 1;

/**
 * Set-associative LRU over 128-bit digests, as a CPU cache is. A digest's set is one 64-byte line
 * of four 4-word ways, most recently used first, plus one tag word (a byte per way) in an array a
 * sixteenth the size. A lookup of a new key, the usual case, is answered by the tag word (a full
 * set's tags match a new key's about 1 time in 32; the tag array of a 1M-entry cache is 1 MiB,
 * mostly in the CPU's cache) while the read of its line goes on, so the add that follows writes
 * a line already fetched. The table starts small and grows four-fold in one sequential pass (set
 * s splits into sets 4s to 4s + 3) up to its size. A full set evicts its least recently used way;
 * a hit moves its way to the front. An all-zero way is empty (the all-zero digest is a flag of
 * its own).
 */
export class SeenCache {
  private words: Uint32Array | undefined;
  /** Tag byte k of word s: the tag of way k of set s (0: empty). */
  private tags: Uint32Array | undefined;
  private sets: number;
  private readonly maxSets: number;
  private readonly ways: number;
  /** Whether the all-zero digest is cached (it cannot live in a way: zero words mean empty). */
  private zero = false;
  size = 0;

  /** Holds at most `max` digests (and the all-zero one); `max` >= 1. */
  constructor(readonly max: number) {
    this.ways = Math.max(1, Math.min(WAYS, max));
    this.maxSets = Math.max(1, Math.floor(max / this.ways));
    this.sets = Math.min(this.maxSets, FIRST_SETS);
  }

  /** Set of a digest whose word 0 is w0: multiply-shift over 26 bits of it (exact in a double up
   *  to 2^26 sets), so any set count is filled evenly. */
  private setOf(w0: number): number {
    return Math.floor(((w0 >>> 6) * this.sets) / 67108864);
  }

  /** Byte mask of the ways of `tagWord` whose tag is `tag` (0x80 in each matching byte). */
  private static matches(tagWord: number, tag: number): number {
    const x = tagWord ^ Math.imul(tag, 0x01010101);
    return (x - 0x01010101) & ~x & 0x80808080;
  }

  has(d: Uint32Array, i: number): boolean {
    const o = i << 2;
    const w0 = d[o]!;
    const w1 = d[o + 1]!;
    const w2 = d[o + 2]!;
    const w3 = d[o + 3]!;
    if ((w0 | w1 | w2 | w3) === 0) return this.zero;
    const tags = this.tags;
    if (tags === undefined) return false;
    const set = this.setOf(w0);
    const tag = tagOf(w1);
    const tagWord = tags[set]!;
    const words = this.words!;
    const base = set << 4;
    // The set's line is read here even when no tag matches, and the answer waits on it only
    // through a branch the CPU predicts: the reads of a batch's lookups overlap one another, and
    // the add that follows a miss finds the line in the CPU's cache instead of waiting for it.
    if (SeenCache.matches(tagWord, tag) === 0 && words[base] !== w0) return false;
    const k = this.wayOf(words, base, w0, w1, w2, w3);
    if (k < 0) return false;
    if (k > 0) this.toFront(words, tags, set, k, tagWord, tag, w0, w1, w2, w3);
    return true;
  }

  /** The way of the set at `base` holding digest (w0..w3), or -1. */
  private wayOf(words: Uint32Array, base: number, w0: number, w1: number, w2: number, w3: number): number {
    for (let k = 0; k < this.ways; k++) {
      const p = base + (k << 2);
      if (words[p] === w0 && words[p + 1] === w1 && words[p + 2] === w2 && words[p + 3] === w3) return k;
    }
    return -1;
  }

  add(d: Uint32Array, i: number): void {
    const o = i << 2;
    const w0 = d[o]!;
    const w1 = d[o + 1]!;
    const w2 = d[o + 2]!;
    const w3 = d[o + 3]!;
    if ((w0 | w1 | w2 | w3) === 0) {
      if (!this.zero) this.size++;
      this.zero = true;
      return;
    }
    // made at the first add: a gate that never writes keeps no table
    const words = (this.words ??= new Uint32Array(this.sets * WAYS * 4));
    const tags = (this.tags ??= new Uint32Array(this.sets));
    const set = this.setOf(w0);
    const tag = tagOf(w1);
    const tagWord = tags[set]!;
    const base = set << 4;
    // only a way whose tag matches can hold the digest already
    let k = SeenCache.matches(tagWord, tag) !== 0 ? this.wayOf(words, base, w0, w1, w2, w3) : -1;
    if (k < 0) {
      if (this.size * 8 >= this.sets * this.ways && this.sets < this.maxSets) {
        // an eighth full and not at its size yet: grown before it takes more
        this.grow();
        this.add(d, i);
        return;
      }
      // new: it goes in front, over the last way (empty ways are always the last ones)
      k = this.ways - 1;
      if (((tagWord >>> (k << 3)) & 0xff) === 0) this.size++;
    }
    this.toFront(words, tags, set, k, tagWord, tag, w0, w1, w2, w3);
  }

  /**
   * Grows the sets GROWTH-fold (up to maxSets) and moves every entry to its set in the new table,
   * least recently used first so each set keeps its order. A step by a whole factor r sends the
   * ways of set s to sets r s .. r s + r - 1; only the last step to maxSets, when maxSets is not a
   * whole multiple of the sets before, can find a new set full, and then drops that set's oldest
   * way.
   */
  private grow(): void {
    const oldWords = this.words!;
    const oldTags = this.tags!;
    const oldSets = this.sets;
    this.sets = Math.min(this.maxSets, oldSets * GROWTH);
    const words = (this.words = new Uint32Array(this.sets * WAYS * 4));
    const tags = (this.tags = new Uint32Array(this.sets));
    const last = this.ways - 1;
    for (let s = 0; s < oldSets; s++) {
      const oldTagWord = oldTags[s]!;
      for (let k = last; k >= 0; k--) {
        const tag = (oldTagWord >>> (k << 3)) & 0xff;
        if (tag === 0) continue;
        const p = (s << 4) + (k << 2);
        const w0 = oldWords[p]!;
        const set = this.setOf(w0);
        const tagWord = tags[set]!;
        if (((tagWord >>> (last << 3)) & 0xff) !== 0) this.size--;
        this.toFront(words, tags, set, last, tagWord, tag, w0, oldWords[p + 1]!, oldWords[p + 2]!, oldWords[p + 3]!);
      }
    }
  }

  /** Moves ways 0..k-1 of `set` one down over way k and writes the digest (and its tag) to way 0. */
  private toFront(words: Uint32Array, tags: Uint32Array, set: number, k: number, tagWord: number, tag: number, w0: number, w1: number, w2: number, w3: number): void {
    const base = set << 4;
    // at most 12 words: a loop beats copyWithin's call for so few
    for (let q = base + (k << 2) - 1; q >= base; q--) words[q + 4] = words[q]!;
    words[base] = w0;
    words[base + 1] = w1;
    words[base + 2] = w2;
    words[base + 3] = w3;
    // tag bytes 0..k-1 one up over byte k, the new tag in byte 0; the bytes above k stay
    const above = k === WAYS - 1 ? 0 : tagWord & (-1 << ((k + 1) << 3));
    const below = (tagWord & ((1 << (k << 3)) - 1)) << 8;
    tags[set] = above | below | tag;
  }

  clear(): void {
    if (this.size === 0) return;
    this.words?.fill(0);
    this.tags?.fill(0);
    this.zero = false;
    this.size = 0;
  }
}
