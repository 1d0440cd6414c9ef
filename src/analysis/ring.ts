// A classic consistent-hash ring (the usual alternative to jump hash): every bucket owns `vnodes` points on a
// 32-bit circle, a key belongs to the first point clockwise from its own position.
import { murmur3_32 } from '../hash/index.js';

export class HashRing {
  readonly points: Uint32Array;
  readonly owners: Uint32Array;

  constructor(readonly buckets: number, readonly vnodes = 160) {
    const n = buckets * vnodes;
    const pts = new Uint32Array(n);
    for (let b = 0; b < buckets; b++) for (let v = 0; v < vnodes; v++) pts[b * vnodes + v] = murmur3_32(`bucket-${b}#${v}`) >>> 0;
    const order = new Uint32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    order.sort((x, y) => pts[x]! - pts[y]! || x - y);
    this.points = new Uint32Array(n);
    this.owners = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      const k = order[i]!;
      this.points[i] = pts[k]!;
      this.owners[i] = Math.floor(k / vnodes);
    }
  }

  /** Owner of a 32-bit key position. */
  lookup(pos: number): number {
    const pts = this.points;
    let lo = 0;
    let hi = pts.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (pts[mid]! < pos) lo = mid + 1;
      else hi = mid;
    }
    return this.owners[lo === pts.length ? 0 : lo]!;
  }
}
