// Rows per bucket for the load summary, stored group by group (the batcher's bucket groups).
// The batcher counts a buffer's rows as the buffer leaves, and a buffer holds one group, so with
// a group's counters side by side those rows count into one small range: at 4,194,304 buckets a
// counter array in bucket order is 32 MiB incremented at random, a cache and TLB miss per row.

export interface BucketRowStats {
  min: number;
  max: number;
  mean: number;
}

export class BucketCounts {
  /** Counters at `slot(bucket)`; a slot past the last bucket of its group stays unused. */
  readonly counts: Float64Array;
  /** Slots per group: ceil(buckets / groups). */
  readonly perGroup: number;

  constructor(
    readonly buckets: number,
    /** Group of bucket b is b % groups, as in the batcher. */
    readonly groups: number,
  ) {
    this.perGroup = Math.ceil(buckets / groups);
    this.counts = new Float64Array(this.perGroup * groups);
  }

  /** Slot of bucket `b`, whose group is `g` = b % groups. */
  slot(b: number, g: number): number {
    return g * this.perGroup + Math.floor(b / this.groups);
  }

  /** Counts one row of bucket `b`. */
  add(b: number): void {
    this.counts[this.slot(b, b % this.groups)]!++;
  }

  /** Adds counts held in bucket order (a dry-run worker's, over the regions it ran). */
  addInBucketOrder(rows: ArrayLike<number>): void {
    const { counts, perGroup, groups } = this;
    for (let g = 0; g < groups; g++) {
      const base = g * perGroup;
      for (let j = 0, b = g; b < this.buckets; j++, b += groups) counts[base + j]! += rows[b]!;
    }
  }

  /** Adds the region's rows to their buckets' counts (rows with window -1 were rejected); returns
   *  how many it counted. */
  addRows(buckets: Uint32Array, n: number, win: Int32Array | null): number {
    let accepted = 0;
    for (let i = 0; i < n; i++) {
      if (win !== null && win[i]! < 0) continue;
      this.add(buckets[i]!);
      accepted++;
    }
    return accepted;
  }

  /** Rows in bucket `b`. */
  get(b: number): number {
    return this.counts[this.slot(b, b % this.groups)]!;
  }

  stats(): BucketRowStats {
    const { counts, perGroup, groups, buckets } = this;
    let min = Infinity;
    let max = 0;
    let sum = 0;
    for (let g = 0; g < groups; g++) {
      const base = g * perGroup;
      for (let j = 0, b = g; b < buckets; j++, b += groups) {
        const v = counts[base + j]!;
        if (v < min) min = v;
        if (v > max) max = v;
        sum += v;
      }
    }
    return { min: sum === 0 ? 0 : min, max, mean: sum / buckets };
  }
}
