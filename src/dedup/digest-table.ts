// An open-addressing set of (64-bit member, bucket) pairs in one Uint32Array: the embedded
// store's compact layout. No object or string per key, so a year of keys costs ~24 B each at
// worst (12 B per cell, load factor kept in (1/4, 1/2]) and adds nothing for the GC to trace.

const CELL_WORDS = 3;
const MIN_CAPACITY = 1024;

export class DigestTable {
  private cells: Uint32Array;
  private mask: number;
  size = 0;

  constructor(capacity = MIN_CAPACITY) {
    let cap = MIN_CAPACITY;
    while (cap < capacity) cap *= 2;
    this.cells = new Uint32Array(cap * CELL_WORDS);
    this.mask = cap - 1;
  }

  get capacity(): number {
    return this.mask + 1;
  }

  /**
   * Adds (lo, hi, bucket); true when it was not there. Members are digest bits, so `lo` is
   * already uniform and serves as the hash. Bucket is stored +1 so 0 marks an empty cell.
   */
  add(lo: number, hi: number, bucket: number): boolean {
    if ((this.size + 1) * 2 > this.mask + 1) this.grow();
    const s = this.cells;
    const tag = (bucket + 1) >>> 0;
    let i = (lo ^ Math.imul(bucket, 0x9e3779b1)) & this.mask;
    for (;;) {
      const o = i * CELL_WORDS;
      const t = s[o + 2]!;
      if (t === 0) {
        s[o] = lo;
        s[o + 1] = hi;
        s[o + 2] = tag;
        this.size++;
        return true;
      }
      if (t === tag && s[o] === lo >>> 0 && s[o + 1] === hi >>> 0) return false;
      i = (i + 1) & this.mask;
    }
  }

  private grow(): void {
    const old = this.cells;
    const cap = (this.mask + 1) * 2;
    this.cells = new Uint32Array(cap * CELL_WORDS);
    this.mask = cap - 1;
    this.size = 0;
    for (let o = 0; o < old.length; o += CELL_WORDS) {
      const t = old[o + 2]!;
      if (t !== 0) this.add(old[o]!, old[o + 1]!, t - 1);
    }
  }
}
