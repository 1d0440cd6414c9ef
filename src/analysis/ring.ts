// A classic consistent-hash ring (the usual alternative to jump hash): every bucket owns `vnodes` points on a
// 32-bit circle, a key belongs to the first point clockwise from its own position.
import { murmur3_32 } from '../hash/index.js';

/** Most points one ring may hold (8 B each): the analysis refuses bigger rings rather than run out of memory. */
export const MAX_RING_POINTS = 1 << 23;

export class HashRing {
  readonly points: Uint32Array;
  readonly owners: Uint32Array;

  /**
   * The ring of `buckets` buckets. Bucket b's points depend only on b, so the ring of any k <= buckets
   * buckets is this ring's points with owner < k: one ring answers for every smaller bucket count
   * (lookup's `k`) without building each.
   */
  constructor(readonly buckets: number, readonly vnodes = 160) {
    const n = buckets * vnodes;
    if (n > MAX_RING_POINTS) throw new RangeError(`vnodes: a ring of ${buckets} buckets x ${vnodes} virtual nodes exceeds ${MAX_RING_POINTS} points`);
    // points in index order (index = bucket * vnodes + v), then a stable LSD radix sort by point, so
    // equal points stay in index order (the tie-break that makes lookups deterministic)
    let pts = new Uint32Array(n);
    for (let b = 0; b < buckets; b++) for (let v = 0; v < vnodes; v++) pts[b * vnodes + v] = murmur3_32(`bucket-${b}#${v}`) >>> 0;
    let idx = new Uint32Array(n);
    for (let i = 0; i < n; i++) idx[i] = i;
    let pts2 = new Uint32Array(n);
    let idx2 = new Uint32Array(n);
    const cnt = new Uint32Array(65537);
    for (const shift of [0, 16]) {
      cnt.fill(0);
      for (let i = 0; i < n; i++) cnt[((pts[i]! >>> shift) & 0xffff) + 1]!++;
      for (let d = 0; d < 65536; d++) cnt[d + 1]! += cnt[d]!;
      for (let i = 0; i < n; i++) {
        const j = cnt[(pts[i]! >>> shift) & 0xffff]!++;
        pts2[j] = pts[i]!;
        idx2[j] = idx[i]!;
      }
      [pts, pts2] = [pts2, pts];
      [idx, idx2] = [idx2, idx];
    }
    this.points = pts;
    for (let i = 0; i < n; i++) idx[i] = Math.floor(idx[i]! / vnodes);
    this.owners = idx;
  }

  /** Owner of a 32-bit key position on the ring of the first `k` buckets (default: all of them). */
  lookup(pos: number, k = this.buckets): number {
    const pts = this.points;
    const own = this.owners;
    const n = pts.length;
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (pts[mid]! < pos) lo = mid + 1;
      else hi = mid;
    }
    // skip the points of buckets >= k; at most n steps, in practice about buckets / k
    for (let s = 0; s < n; s++) {
      const i = lo + s < n ? lo + s : lo + s - n;
      if (own[i]! < k) return own[i]!;
    }
    throw new RangeError(`lookup: k must be in [1, ${this.buckets}], got ${k}`);
  }
}
