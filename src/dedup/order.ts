// Positions of a batch ordered by bucket (stable): the dedup service groups a batch's keys by
// bucket with it before they go to the store.
import { orderByBucket } from './layout.js';

/**
 * orderByBucket's answer, by a least-significant-digit radix sort over the bytes the largest
 * bucket needs (two passes of 256 counters for up to 65_536 buckets) when that beats the
 * layout's own choice: a batch of a few thousand keys over tens of thousands of buckets fell to
 * a comparison sort there (n log n), this is linear. Radix passes are stable, so the order is the
 * same: by bucket, then by position.
 */
export function bucketOrder(buckets: Uint32Array, n: number): Uint32Array {
  if (n <= 32) return orderByBucket(buckets, n);
  let maxB = 0;
  for (let i = 0; i < n; i++) if (buckets[i]! > maxB) maxB = buckets[i]!;
  // counting sort in orderByBucket when its table is small next to the batch; radix otherwise
  if (maxB <= 4 * n && maxB < 2 ** 20) return orderByBucket(buckets, n);
  let order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  let tmp = new Uint32Array(n);
  const count = new Uint32Array(256);
  for (let shift = 0; shift < 32 && maxB >>> shift > 0; shift += 8) {
    count.fill(0);
    for (let i = 0; i < n; i++) count[(buckets[order[i]!]! >>> shift) & 255]!++;
    let sum = 0;
    for (let d = 0; d < 256; d++) {
      const c = count[d]!;
      count[d] = sum;
      sum += c;
    }
    for (let i = 0; i < n; i++) {
      const o = order[i]!;
      tmp[count[(buckets[o]! >>> shift) & 255]!++] = o;
    }
    const t = order;
    order = tmp;
    tmp = t;
  }
  return order;
}
