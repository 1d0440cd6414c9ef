// The one exact set of 128-bit digests: a firstSeen batch's repeats and the bucket analysis's
// distinct keys.

const MIN_CELLS = 64;

/**
 * Open-addressing set of 128-bit digests in one typed array: a cell is four Uint32 words (16 B, so a
 * probe rarely leaves its cache line), linear probing, load kept <= 3/4. Digests are murmur3_128
 * output, so their words are already uniform: no hash function of its own. An all-zero cell is
 * empty, and the all-zero digest itself is a flag, so it still counts exactly. No object per key.
 *
 * A digest is named by the offset of its first word in a Uint32Array (`d[o..o+4)`), so callers
 * pass digests where they already lie, in arrays of digests or of wider records.
 */
export class DigestSet {
  private words: Uint32Array;
  private mask: number;
  /** Whether the all-zero digest is a member (it cannot live in a cell: zero words mean empty). */
  private zero = false;
  /** Digests it holds without growing. */
  capacity: number;
  size = 0;

  /** Room for `capacity` digests before it grows (it grows by doubling). */
  constructor(capacity: number) {
    let cells = MIN_CELLS;
    while (cells * 0.75 < capacity) cells *= 2;
    this.mask = cells - 1;
    this.capacity = cells * 0.75;
    this.words = new Uint32Array(cells * 4);
  }

  /** Bytes of its table. */
  get byteLength(): number {
    return this.words.byteLength;
  }

  /** Whether one more digest would make it grow. */
  get full(): boolean {
    return this.size >= this.capacity;
  }

  /** Bytes of its table after the next growth. */
  get grownBytes(): number {
    return this.words.byteLength * 2;
  }

  /** Cell of a non-zero digest (w0..w3): its index when present, else -1 - the empty cell that ends its probe. */
  private find(w0: number, w1: number, w2: number, w3: number): number {
    const words = this.words;
    const mask = this.mask;
    let s = (w0 ^ w3) & mask;
    for (;;) {
      const p = s << 2;
      const a = words[p]!;
      const b = words[p + 1]!;
      const c = words[p + 2]!;
      const e = words[p + 3]!;
      if (a === w0 && b === w1 && c === w2 && e === w3) return s;
      if ((a | b | c | e) === 0) return -1 - s;
      s = (s + 1) & mask;
    }
  }

  /** Whether the digest at d[o..o+4) is a member. */
  has(d: Uint32Array, o: number): boolean {
    const w0 = d[o]!;
    const w1 = d[o + 1]!;
    const w2 = d[o + 2]!;
    const w3 = d[o + 3]!;
    if ((w0 | w1 | w2 | w3) === 0) return this.zero;
    return this.find(w0, w1, w2, w3) >= 0;
  }

  /** Adds the digest at d[o..o+4); false when it was already there. */
  add(d: Uint32Array, o: number): boolean {
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
    let f = this.find(w0, w1, w2, w3);
    if (f >= 0) return false;
    if (this.size >= this.capacity) {
      this.grow();
      f = this.find(w0, w1, w2, w3);
    }
    this.put(-1 - f, w0, w1, w2, w3);
    this.size++;
    return true;
  }

  private put(s: number, w0: number, w1: number, w2: number, w3: number): void {
    const p = s << 2;
    const words = this.words;
    words[p] = w0;
    words[p + 1] = w1;
    words[p + 2] = w2;
    words[p + 3] = w3;
  }

  private grow(): void {
    const old = this.words;
    const cells = (this.mask + 1) * 2;
    this.words = new Uint32Array(cells * 4);
    this.mask = cells - 1;
    this.capacity = cells * 0.75;
    for (let p = 0; p < old.length; p += 4) {
      const w0 = old[p]!;
      const w1 = old[p + 1]!;
      const w2 = old[p + 2]!;
      const w3 = old[p + 3]!;
      if ((w0 | w1 | w2 | w3) !== 0) this.put(-1 - this.find(w0, w1, w2, w3), w0, w1, w2, w3);
    }
  }

  /** Empties it, keeping its table. */
  clear(): void {
    if (this.size === 0) return;
    this.words.fill(0);
    this.zero = false;
    this.size = 0;
  }
}
