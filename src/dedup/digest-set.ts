// A batch's set of 128-bit digests: finds the keys that repeat inside one firstSeen batch.

const nextPow2 = (n: number): number => 2 ** Math.ceil(Math.log2(Math.max(2, n)));

/**
 * Set of up to `capacity` 128-bit digests: `d` is a Uint32Array of digests (4 words each), `i` a
 * digest index. One array of 4-word cells at load <= 1/2, an all-zero cell being empty (the
 * all-zero digest itself is a flag of its own), linear probing: a probe reads one cache line.
 */
export class DigestSet {
  private readonly words: Uint32Array;
  private readonly mask: number;
  /** Whether the all-zero digest is a member (it cannot live in a cell: zero words mean empty). */
  private zero = false;
  size = 0;

  constructor(readonly capacity: number) {
    const cells = nextPow2(capacity * 2);
    this.mask = cells - 1;
    this.words = new Uint32Array(cells * 4);
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

  /** Adds digest i; false when it was already there. The caller keeps size <= capacity. */
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

  clear(): void {
    if (this.size === 0) return;
    this.words.fill(0);
    this.zero = false;
    this.size = 0;
  }
}
