// Sorted member blocks of the compact LMDB layout: block ids, the sort and binary search over a
// block's 8-byte members, and the merge that adds members to a block. Hand-written because lmdb-js
// lookups and puts per member cost more than a read and a merge per block (measured; see
// lmdb-store.ts).
import type { Database } from 'lmdb';

/**
 * Block bits for a window of `buckets` compact buckets: 1 (two blocks per bucket, ~128 members
 * or ~1 KiB each at the sizing of 256 keys per bucket, inline in LMDB's leaf pages up to twice
 * that), more for small bucket counts so any window spreads over >= 4096 blocks, and never more
 * than a uint32 block id allows. Measured on the bench host (500k keys, 2048 buckets): blocks of
 * a whole bucket, a half and a quarter checked 2.05M, 1.8M and 1.7M seen keys/s and added
 * 0.53M, 0.51M and 0.46M keys/s; 32 members per block fell to 1.15M and 0.36M (a merge and a put
 * per touched block, so fewer, larger blocks win until they leave the leaf pages).
 */
export function blockBitsFor(buckets: number): number {
  const lb = Math.ceil(Math.log2(Math.max(1, buckets)));
  return Math.max(0, Math.min(32 - lb, Math.max(1, 12 - lb)));
}

/** Block id of a member (its first 4 bytes as big-endian `hi`) in `bucket`. */
export const blockOf = (bucket: number, hi: number, bits: number): number => (bits === 0 ? bucket : bucket * 2 ** bits + (hi >>> (32 - bits)));

/**
 * Sorts ord[from, to) by (hi, lo, index): members of one bucket in block order, equal members
 * adjacent with the earliest first (it is the one answered 1).
 */
export function sortMembers(ord: Uint32Array, from: number, to: number, hi: Uint32Array, lo: Uint32Array): void {
  const before = (a: number, b: number): boolean => hi[a]! < hi[b]! || (hi[a] === hi[b] && (lo[a]! < lo[b]! || (lo[a] === lo[b] && a < b)));
  if (to - from <= 24) {
    for (let i = from + 1; i < to; i++) {
      const x = ord[i]!;
      let j = i;
      while (j > from && before(x, ord[j - 1]!)) {
        ord[j] = ord[j - 1]!;
        j--;
      }
      ord[j] = x;
    }
    return;
  }
  ord.subarray(from, to).sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
}

/** Binary search of (hi, lo) among the 8-byte members at dv[off, off + len). */
export function blockHas(dv: DataView, off: number, len: number, hi: number, lo: number): boolean {
  let a = 0;
  let b = (len >>> 3) - 1;
  while (a <= b) {
    const m = (a + b) >>> 1;
    const o = off + m * 8;
    const h = dv.getUint32(o);
    if (h < hi) a = m + 1;
    else if (h > hi) b = m - 1;
    else {
      const l = dv.getUint32(o + 4);
      if (l < lo) a = m + 1;
      else if (l > lo) b = m - 1;
      else return true;
    }
  }
  return false;
}

/** Reused DataView over the buffer lmdb-js returns values in (a new one only when that buffer changes). */
export class ValueView {
  private buf: ArrayBufferLike | undefined;
  private view: DataView | undefined;
  of(v: Uint8Array): DataView {
    if (v.buffer !== this.buf) {
      this.buf = v.buffer;
      this.view = new DataView(v.buffer);
    }
    return this.view!;
  }
}

/** Merges new members into blocks inside a write transaction; owns the reused output buffer. */
export class BlockMerger {
  /** Output of a merge, reused: a put inside a write transaction copies its value. */
  private out = Buffer.alloc(4096);
  private readonly view = new ValueView();
  private readonly outView = new ValueView();

  /**
   * Inside a write transaction: adds members ord[from, to) of one bucket (sorted by sortMembers)
   * to their blocks. answers[e] = 1 for a member that was new, 0 otherwise. Returns the count of new.
   * hi/lo/ord belong to the call (a transaction callback runs after other calls may have started).
   */
  add(
    db: Database<Buffer, number>, bucket: number, bits: number, hi: Uint32Array, lo: Uint32Array, ord: Uint32Array, from: number, to: number, answers: Uint8Array,
  ): number {
    let added = 0;
    let i = from;
    while (i < to) {
      const block = blockOf(bucket, hi[ord[i]!]!, bits);
      let end = i + 1;
      while (end < to && blockOf(bucket, hi[ord[end]!]!, bits) === block) end++;
      const cur = db.getBinaryFast(block);
      const curLen = cur === undefined ? 0 : cur.length;
      const need = curLen + (end - i) * 8;
      if (this.out.length < need) this.out = Buffer.alloc(Math.max(need, this.out.length * 2));
      const out = this.out;
      const odv = this.outView.of(out);
      const ob = out.byteOffset;
      const cdv = cur === undefined ? undefined : this.view.of(cur);
      const cb = cur === undefined ? 0 : cur.byteOffset;
      let p = 0; // read position in cur
      let w = 0; // write position in out
      let newInBlock = 0;
      let prevE = -1;
      for (let k = i; k < end; k++) {
        const e = ord[k]!;
        const h = hi[e]!;
        const l = lo[e]!;
        if (prevE >= 0 && hi[prevE] === h && lo[prevE] === l) {
          answers[e] = 0; // repeated in the batch: the earlier one was decided
          continue;
        }
        prevE = e;
        // copy the stored members below (h, l)
        const p0 = p;
        while (p < curLen) {
          const sh = cdv!.getUint32(cb + p);
          if (sh > h || (sh === h && cdv!.getUint32(cb + p + 4) >= l)) break;
          p += 8;
        }
        if (p > p0) {
          out.set(cur!.subarray(p0, p), w);
          w += p - p0;
        }
        if (p < curLen && cdv!.getUint32(cb + p) === h && cdv!.getUint32(cb + p + 4) === l) {
          answers[e] = 0;
          continue;
        }
        odv.setUint32(ob + w, h);
        odv.setUint32(ob + w + 4, l);
        w += 8;
        answers[e] = 1;
        newInBlock++;
      }
      if (newInBlock > 0) {
        if (p < curLen) {
          out.set(cur!.subarray(p, curLen), w);
          w += curLen - p;
        }
        db.putSync(block, out.subarray(0, w));
        added += newInBlock;
      }
      i = end;
    }
    return added;
  }

}
