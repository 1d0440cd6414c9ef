// Seen-key cache: keys the store confirmed (or the journal holds) in the current window, so
// repeats are answered without Redis. Safe because "seen" never becomes "unseen" inside a window.
//
// Keys are the full 128-bit digests (exact: a 64-bit id would allow false duplicates), kept in
// one typed array: no string or object per key, so no GC pressure on the hot path (JS strings +
// Set cost ~30% of firstSeen's CPU in profiles, lru-cache's list more). Bounded to `max` entries
// at 17 B each: the digest and a byte of tag and age. The arrays are made at that full size at
// the first add and used from their start as the table grows: the pages past the part in use are
// untouched (the OS maps them at their first write), and a growth writes into the same memory
// instead of a new table of four times the size (where the allocator maps each new table fresh,
// the tables a growth left behind were a quarter of the pages a cache faulted in, and a fault
// is the costliest part of an add).

/** Entries per set: four 16-byte digests fill one 64-byte cache line. */
const WAYS = 4;

/**
 * Sets of a new table. It grows GROWTH-fold (up to its full size) when an eighth full, so a fresh
 * process touches memory as it caches keys rather than faulting in the whole table at random; at
 * an eighth, a set meets a fifth key (and drops its oldest) about once in 6,000 sets.
 *
 * Small, so that the first growths come within the first few hundred adds, while a fresh process
 * still runs this code unoptimized: add's call to grow, grow's loop and its end, and prefault's
 * switch to the next table have then run before the compiler optimizes them. A table of 4,096
 * sets first grows at its 2,048th add, after add and prefault are optimized: that growth sent
 * both back to the interpreter, to be compiled again, and grow with them.
 */
const FIRST_SETS = 64;
/**
 * How much a table grows at a time. Every step allocates a table and faults it in: doubling
 * touched twice the final size in all; eight-fold jumped a few thousand keys straight to the full
 * table. Four-fold took the fewest page faults and the least time for streams of 20k to 1M new
 * keys.
 */
const GROWTH = 4;

/** Words of a 4 KiB page: the prefault touches one word per page of the part the next growth adds. */
const PAGE_WORDS = 1024;
const PAGE_SHARE = 1 / PAGE_WORDS;

/**
 * Share of the adds between two growths by which the part the next growth adds is all faulted
 * in: the rest is slack for calls that add more than they announced. Paced by adds, not by calls,
 * so a process that stops short of a growth faults in only its share of memory it never uses
 * (one page per one-key call faulted a 17 MiB table in by a third of the way there).
 */
const PREFAULT_LEAD = 0.75;

/**
 * A way's tag: 1..63 from digest word 1 (an empty way's byte is 0, so it never matches). The top
 * two bits of a way's byte are its age.
 */
const tagOf = (w1: number): number => (((w1 & 0xffff) * 63) >>> 16) + 1;

/**
 * Set of a digest whose word 0 is w0 in a table of `sets` sets: multiply-shift over 26 bits of it
 * (exact in a double up to 2^26 sets), so any set count is filled evenly.
 */
const setIn = (w0: number, sets: number): number => Math.floor(((w0 >>> 6) * sets) / 67108864);

/**
 * Set-associative LRU over 128-bit digests, as a CPU cache is. A digest's set is one 64-byte line
 * of four 4-word ways plus one word in an array a sixteenth the size: a byte per way, its tag in
 * the low six bits and its age (0 = most recently used) in the top two. A lookup of a new key, the
 * usual case, is answered by that word (a full set's tags match a new key's about 1 time in 16;
 * the array of a 1M-entry cache is 1 MiB); only a matching way's digest is read. An add reads the
 * same word and writes the line. A batch's lookups and adds go through warm() first (addAll), so
 * their words and lines are read many at a time, not each on its own turn.
 * The table starts small and grows four-fold in one pass from its last set down to its first, in
 * place (set s splits into sets 4s to 4s + 3, none of them below s) up to its size. A full set
 * evicts its oldest way; a hit makes its way the youngest. An empty way has tag byte 0 (the
 * all-zero digest is a flag of its own).
 *
 * The memory a growth moves into is faulted in ahead by prefault(), a few pages at a time while a
 * call waits for its store, in step with the adds made toward that growth: first touching memory
 * costs far more than moving the entries into it, and done inside the growth it stalled one call
 * for the whole new part (tens of ms for the last step).
 */
export class SeenCache {
  /** The ways of every set up to maxSets (sets in use: the first `sets`), made at the first add. */
  private words: Uint32Array | undefined;
  /** Byte k of word s: way k of set s, age << 6 | tag (0: empty). As long as words, in sets. */
  private tags: Uint32Array | undefined;
  private sets: number;
  private readonly maxSets: number;
  private readonly ways: number;
  /** Whether the all-zero digest is cached (it cannot live in a way: zero words mean empty). */
  private zero = false;
  /** One set's ways, read out before a growth writes over the set (see grow). */
  private readonly moving = new Uint32Array(WAYS * 4);
  /**
   * Pages touched so far of the words the next growth adds (with them, the pages of its tag words
   * at a sixteenth the rate).
   */
  private touched = 0;
  /** False once the table is at its full size or the part the next growth adds is all faulted in. */
  private due = true;
  /** Entries when the table last grew (0 before): where the prefault's pacing starts. */
  private grownAt = 0;
  size = 0;
  /** A bound of size * 8 that a full table never reaches (see addAll). */
  private readonly fullRoom: number;

  /** Holds at most `max` digests (and the all-zero one); `max` >= 1. */
  constructor(readonly max: number) {
    this.ways = Math.max(1, Math.min(WAYS, max));
    this.maxSets = Math.max(1, Math.floor(max / this.ways));
    this.sets = Math.min(this.maxSets, FIRST_SETS);
    this.fullRoom = (this.maxSets * this.ways + 2) * 8;
  }

  /** Set of a digest whose word 0 is w0 (see setIn). */
  private setOf(w0: number): number {
    return setIn(w0, this.sets);
  }

  /**
   * Byte mask of the ways of set `set` whose tag may be `tag` (0x80 in each; a byte above a match
   * can show too). The tag word is read here, not passed in: a word of 2^31 or more (way 3 of age
   * 2 or 3, rare until the cache has been in use a while) is no small integer once passed, and the
   * first one sent compiled callers back to the interpreter. Read from the array, it is a 32-bit
   * word to the compiler.
   */
  private static matches(tags: Uint32Array, set: number, tag: number): number {
    const tagWord = tags[set]!;
    const x = (tagWord & 0x3f3f3f3f) ^ Math.imul(tag, 0x01010101);
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
    return this.hit(this.words!, tags, this.setOf(w0), tagOf(w1), w0, w1, w2, w3);
  }

  /**
   * Whether set `set` holds digest (w0..w3), whose tag is `tag`; a hit becomes the set's youngest
   * way. Only a way whose tag matches can hold it.
   */
  private hit(words: Uint32Array, tags: Uint32Array, set: number, tag: number, w0: number, w1: number, w2: number, w3: number): boolean {
    const m = SeenCache.matches(tags, set, tag);
    if (m === 0) return false;
    const k = this.wayOf(words, set << 4, m, w0, w1, w2, w3);
    if (k < 0) return false;
    this.age(tags, set, k);
    return true;
  }

  /**
   * The way of the set at `base` among the candidates of mask `m` holding digest (w0..w3), or -1.
   * The four words are compared at once, not one after another: a candidate whose first word
   * differs (the usual false tag match) then runs the same code as a hit, so the first hit, long
   * after this path was compiled, does not meet code that never ran and force a recompile.
   */
  private wayOf(words: Uint32Array, base: number, m: number, w0: number, w1: number, w2: number, w3: number): number {
    for (let k = 0; k < this.ways; k++) {
      if ((m & (0x80 << (k << 3))) === 0) continue;
      const p = base + (k << 2);
      if (((words[p]! ^ w0) | (words[p + 1]! ^ w1) | (words[p + 2]! ^ w2) | (words[p + 3]! ^ w3)) === 0) return k;
    }
    return -1;
  }

  /** Makes way k of set `set` the youngest: the ways younger than it age by one. Reads the tag word itself (see matches). */
  private age(tags: Uint32Array, set: number, k: number): void {
    const tagWord = tags[set]!;
    const age = (tagWord >>> ((k << 3) + 6)) & 3;
    if (age === 0) return;
    let inc = 0;
    for (let j = 0; j < this.ways; j++) {
      const b = (tagWord >>> (j << 3)) & 0xff;
      if (b !== 0 && b >>> 6 < age) inc |= 0x40 << (j << 3);
    }
    tags[set] = (tagWord + inc) & ~(0xc0 << (k << 3));
  }

  /**
   * Adds digests d[idx[j]] for j < n, after warm() read the lines they write: what add() of each
   * does, with the table's arrays and size in locals between growths (add() takes the all-zero
   * digest, a growth, and a table not made yet or of fewer than four ways).
   */
  addAll(d: Uint32Array, idx: Uint32Array, n: number): void {
    this.warm(d, idx, n, true);
    let j = 0;
    while (j < n) {
      const words = this.words;
      const tags = this.tags;
      if (words !== undefined && tags !== undefined && this.ways === WAYS) {
        const sets = this.sets;
        // add() grows the table before an add that misses once size * 8 reaches this; at full
        // size, a bound size * 8 never reaches. Both read before the choice, and that one a
        // small integer: Infinity, or a read or sum made only in the branch a table takes once
        // it is full (long after this loop was compiled), sent the loop back to the interpreter.
        const full = this.fullRoom;
        const room = sets < this.maxSets ? sets * WAYS : full;
        let size = this.size;
        for (; j < n && size * 8 < room; j++) {
          const o = idx[j]! << 2;
          const w0 = d[o]!;
          const w1 = d[o + 1]!;
          const w2 = d[o + 2]!;
          const w3 = d[o + 3]!;
          if ((w0 | w1 | w2 | w3) === 0) break;
          const set = setIn(w0, sets);
          const tag = tagOf(w1);
          if (!this.hit(words, tags, set, tag, w0, w1, w2, w3) && !SeenCache.put4(words, tags, set, tag, w0, w1, w2, w3)) size++;
        }
        this.size = size;
      }
      if (j < n) this.add(d, idx[j++]!);
    }
  }

  /**
   * Reads the tag word of the set of each digest d[idx[j]] (j < n; digest j itself without idx),
   * and with `lines` the first word of that set's line too: a pass made before a batch's lookups
   * (tag words) or adds (the lines they write). A random word of a table of megabytes is rarely
   * in the CPU's caches. One lookup or add after another, each waited for its own read before the
   * next could start; the digests of a batch are independent, so this short loop has many of
   * those reads in flight at once, and the lookups and adds after it find their words cached.
   * The words read are folded into a field, so the compiler keeps the reads.
   */
  warm(d: Uint32Array, idx: Uint32Array | undefined, n: number, lines: boolean): void {
    const tags = this.tags;
    const words = this.words;
    if (tags === undefined || words === undefined) return;
    // one loop per case, the set count in a local: with both choices made per digest and the
    // count read through `this`, the same reads took a fifth longer
    const sets = this.sets;
    let acc = 0;
    if (idx === undefined) {
      if (lines) {
        for (let j = 0; j < n; j++) {
          const set = setIn(d[j << 2]!, sets);
          acc ^= tags[set]! ^ words[set << 4]!;
        }
      } else for (let j = 0; j < n; j++) acc ^= tags[setIn(d[j << 2]!, sets)]!;
    } else if (lines) {
      for (let j = 0; j < n; j++) {
        const set = setIn(d[idx[j]! << 2]!, sets);
        acc ^= tags[set]! ^ words[set << 4]!;
      }
    } else for (let j = 0; j < n; j++) acc ^= tags[setIn(d[idx[j]! << 2]!, sets)]!;
    this.warmed = acc & 1;
  }
  /** The fold of warm()'s last reads: a store the compiler must keep, and with it the reads. */
  warmed = 0;

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
    const words = (this.words ??= new Uint32Array(this.maxSets * WAYS * 4));
    const tags = (this.tags ??= new Uint32Array(this.maxSets));
    const set = this.setOf(w0);
    const tag = tagOf(w1);
    if (this.hit(words, tags, set, tag, w0, w1, w2, w3)) return;
    if (this.size * 8 >= this.sets * this.ways && this.sets < this.maxSets) {
      // an eighth full and not at its size yet: grown before it takes more
      this.grow();
      this.add(d, i);
      return;
    }
    if (!this.put(words, tags, set, tag, w0, w1, w2, w3)) this.size++;
  }

  /**
   * Writes a digest to an empty way of `set`, or over its oldest, as the youngest way; true when
   * it replaced an entry. The other ways age by one.
   */
  private put(words: Uint32Array, tags: Uint32Array, set: number, tag: number, w0: number, w1: number, w2: number, w3: number): boolean {
    if (this.ways === WAYS) return SeenCache.put4(words, tags, set, tag, w0, w1, w2, w3);
    const tagWord = tags[set]!;
    const last = this.ways - 1;
    let v = -1;
    let oldest = 0;
    let inc = 0;
    for (let j = 0; j <= last; j++) {
      const b = (tagWord >>> (j << 3)) & 0xff;
      if (b === 0) {
        if (v < 0) v = j;
        continue;
      }
      if (b >>> 6 === last) oldest = j;
      inc |= 0x40 << (j << 3);
    }
    const evicts = v < 0;
    if (evicts) v = oldest;
    const sh = v << 3;
    // the way written is the youngest; every other way ages (none is older than last - 1 here)
    tags[set] = ((tagWord + (inc & ~(0xff << sh))) & ~(0xff << sh)) | (tag << sh);
    const p = (set << 4) + (v << 2);
    words[p] = w0;
    words[p + 1] = w1;
    words[p + 2] = w2;
    words[p + 3] = w3;
    return evicts;
  }

  /**
   * put() for a set of four ways, without a branch on the ways' bytes: a loop over them
   * mispredicted on most adds (which ways are empty is random), about half of an add's time.
   * Bit tricks over the tag word's four bytes: the lowest empty way, else the way of age 3 (the
   * oldest of four), and every used way aged by one.
   */
  private static put4(words: Uint32Array, tags: Uint32Array, set: number, tag: number, w0: number, w1: number, w2: number, w3: number): boolean {
    // Read here, not passed in (as in matches): a word of 2^31 or more is no small integer once
    // passed, and the first one met a compiled put4 that expected one and sent it back to the
    // interpreter. Read from the array, it is a 32-bit word to the compiler.
    const tagWord = tags[set]!;
    // 0x80 in each empty byte (exact for the lowest one, which is the one taken)
    const empty = (tagWord - 0x01010101) & ~tagWord & 0x80808080;
    // 0x80 in the byte whose age bits are both set
    const oldest = tagWord & (tagWord << 1) & 0x80808080;
    const pick = empty !== 0 ? empty : oldest;
    const sh = (31 - Math.clz32(pick & -pick)) & 24;
    // 0x40 in each used byte: its age goes up by one
    const inc = ((((tagWord & 0x7f7f7f7f) + 0x7f7f7f7f) | tagWord) & 0x80808080) >>> 1;
    tags[set] = ((tagWord + (inc & ~(0xff << sh))) & ~(0xff << sh)) | (tag << sh);
    const p = (set << 4) + (sh >>> 1);
    words[p] = w0;
    words[p + 1] = w1;
    words[p + 2] = w2;
    words[p + 3] = w3;
    return empty === 0;
  }

  /**
   * Grows the sets GROWTH-fold (up to maxSets) and moves every entry to its set in the grown table,
   * oldest first so each set keeps its order. Set s sends its ways to sets s r .. (s + 1) r (r, the
   * factor, at least 1), which are s or above: going from the last set down, a set's new home is
   * either past the old table (empty) or a set this pass has already emptied, and the one set
   * that can be its own new home (set 0, or a low set at a fractional last step) is read out
   * before it is emptied. Only the last step to maxSets, when maxSets is not a whole multiple of
   * the sets before, can find a new set full (two old sets share it), and then drops that set's
   * oldest way.
   */
  private grow(): void {
    const words = this.words!;
    const tags = this.tags!;
    const oldSets = this.sets;
    this.sets = Math.min(this.maxSets, oldSets * GROWTH);
    this.touched = 0;
    this.due = this.sets < this.maxSets;
    const moving = this.moving;
    for (let s = oldSets - 1; s >= 0; s--) {
      const oldTagWord = tags[s]!;
      if (oldTagWord === 0) continue;
      const base = s << 4;
      for (let w = 0; w < 16; w++) moving[w] = words[base + w]!;
      tags[s] = 0;
      for (let age = this.ways - 1; age >= 0; age--) {
        for (let k = 0; k < this.ways; k++) {
          const b = (oldTagWord >>> (k << 3)) & 0xff;
          if (b === 0 || b >>> 6 !== age) continue;
          const p = k << 2;
          const w0 = moving[p]!;
          if (this.put(words, tags, this.setOf(w0), b & 0x3f, w0, moving[p + 1]!, moving[p + 2]!, moving[p + 3]!)) this.size--;
        }
      }
    }
    this.grownAt = this.size;
  }

  /**
   * Faults in pages of the part of the table the next growth adds: the share of its pages that the
   * entries so far plus `keys`, the keys a call may add, make of PREFAULT_LEAD of the adds between
   * the last growth and the next, so that part is in memory by then. Meant for while a call waits
   * for its store.
   */
  prefault(keys: number): void {
    const words = this.words;
    const tags = this.tags;
    if (words === undefined || tags === undefined) return;
    if (this.sets >= this.maxSets) {
      this.due = false;
      return;
    }
    const sets = Math.min(this.maxSets, this.sets * GROWTH);
    // the added part: sets from..sets-1
    const from = this.sets;
    const wordsFrom = from * WAYS * 4;
    // Products with fractions, not one integer over another: the optimizer takes such a quotient
    // for an integer division when the sizes so far divided evenly, and compiled this again when
    // the last growth step (to a size the cache's byte limit sets) first left a remainder.
    const pages = Math.ceil((sets - from) * WAYS * 4 * PAGE_SHARE);
    const span = Math.max(1, (Math.ceil(this.sets * this.ways * 0.125) - this.grownAt) * PREFAULT_LEAD);
    const perAdd = pages / span;
    const end = Math.max(this.touched, Math.min(pages, Math.ceil(perAdd * (this.size + keys - this.grownAt))));
    // Page q of the added words and page q / 16 of the added tag words (a sixteenth the size) in
    // one step, so the loop runs the same code from its first call: the words' pages and then the
    // tags' met the second branch only near the end of a growth, long after this was optimized.
    // Both writes are zeros into sets not in use yet (q / 16 pages of tag words lie inside the
    // added part while q pages of words do).
    for (let q = this.touched; q < end; q++) {
      words[wordsFrom + q * PAGE_WORDS] = 0;
      tags[from + (q >>> 4) * PAGE_WORDS] = 0;
    }
    this.touched = end;
    this.due = end < pages;
  }

  /** Whether prefault() has pages left to touch (callers skip scheduling it otherwise). */
  get prefaultDue(): boolean {
    return this.due;
  }

  clear(): void {
    if (this.size === 0) return;
    // the sets in use: past them nothing but prefault's zeros was written
    this.words?.fill(0, 0, this.sets * WAYS * 4);
    this.tags?.fill(0, 0, this.sets);
    this.zero = false;
    this.size = 0;
    this.grownAt = 0;
  }
}
