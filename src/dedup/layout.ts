// Where a key lives in Redis. Shared by DedupService.firstSeen and the bulk loader, so
// both write exactly the same keys and members.
//
// Digests: every key is hashed once per batch with murmur3_128 (hashBatch), or, in the compact
// layout with a `secret`, with HMAC-SHA-256(secret, key) truncated to its first 16 bytes.
//
// Layout 'sets' (raw keys, readable/writable by a Java service with SISMEMBER/SADD):
//   key    `${prefix}:${window}:${bucket}`, bucket = bucketOf(key, buckets)
//          = (digest bytes 0..7 as unsigned 64-bit little endian) mod buckets (Guava asLong),
//   member the raw key bytes (UTF-8 of a string key). SADD / SISMEMBER semantics.
//
// Layout 'compact' (default; raw keys never reach Redis):
//   table  `${prefix}:${window}:c{${table}}...`, table = (digest bytes 8..15 as unsigned 64-bit
//          LE) mod buckets; each table is cut into sub-buckets that split as the window fills
//          (growth.ts: key names, placement, splits), so no sub-bucket leaves the intset encoding.
//          With no sizing options a window starts at 1024 tables. `expectedKeys` picks a larger
//          start, buckets = nextPow2(expectedKeys / 153): 153 is where a table starts to split,
//          so a window holds its expected keys without one split.
//   member digest bytes 0..7 as a signed 64-bit integer in decimal ("-4242..."). Redis stores a
//          set whose members are all integers as an intset: 8 bytes per member, binary-searched,
//          kept while the set has <= set-max-intset-entries (512 by default) members.
//   Collisions: two different keys collide only if all 64 + log2(buckets) bits match (the
//          sub-bucket is chosen by bits of the member itself, so it adds none). Expected
//          colliding pairs ~ n^2 / 2^(65 + log2(buckets)):
//            n = 1e9,  buckets = 2^23 (expectedKeys 1e9):  1e18 / 2^88 ~ 3.2e-9
//            n = 1e10, buckets = 2^26:                       1e20 / 2^91 ~ 4.0e-8
//            with the default 1024 buckets: 1e9 -> 2.6e-5, 1e10 -> 2.6e-3
//          (a collision would answer a new key as a duplicate; the probabilities above are per
//          window, i.e. per year).
//
// Bucket counts are fixed per window: the first writer records them in the hash
// `${prefix}:${window}:meta` (field `${layout}.buckets`, HSETNX; a compact window also carries
// `compact.layout` 2, the naming of growth.ts) and every later writer uses the recorded value, so
// changing `buckets` in the config takes effect at the next window (year) and cannot silently
// split a window's keys over two bucketings. Compact tables then grow on their own.
//
// Other keys: the window count writers report, `${prefix}:${window}:c:count` (compact) /
// `${prefix}:${window}:count` (sets): stats().approximate, and the clock of compact splits.
import { createHmac } from 'node:crypto';
import { hashBatch, type PackedKeys } from '../hash/index.js';
import type { Keys } from '../hash/keys.js';
import { int64Decimal } from '../redis/int64.js';
import type { Member } from '../redis/resp.js';
import type { Layout } from './options.js';

export type { Member };

export interface LayoutSpec {
  layout: Layout;
  prefix: string;
  buckets: number;
  /** Compact layout only. */
  secret?: Uint8Array | undefined;
}

/** 'sets': the bucket's key; 'compact': the key prefix of the bucket's table (growth.ts names its sub-buckets). */
export const bucketKey = (spec: Pick<LayoutSpec, 'layout' | 'prefix'>, window: string, bucket: number): string =>
  spec.layout === 'sets' ? `${spec.prefix}:${window}:${bucket}` : `${spec.prefix}:${window}:c{${bucket}}`;
export const metaKey = (prefix: string, window: string): string => `${prefix}:${window}:meta`;
export const metaField = (layout: Layout): string => `${layout}.buckets`;
/** Glob matching every key of a window (both layouts, counts and meta), glob characters escaped. */
export const windowPattern = (prefix: string, window: string): string => `${prefix.replace(/[*?[\]\\]/g, '\\$&')}:${window}:*`;

/** 16-byte digest per key, back to back. */
export function digestKeys(keys: Keys, secret?: Uint8Array): Uint8Array {
  if (secret === undefined) return hashBatch(keys);
  const n = Array.isArray(keys) ? keys.length : (keys as PackedKeys).count;
  const out = new Uint8Array(n * 16);
  const packed = Array.isArray(keys) ? undefined : (keys as PackedKeys);
  for (let i = 0; i < n; i++) {
    const k = packed ? packed.bytes.subarray(packed.offsets[i], packed.offsets[i + 1]) : (keys as ReadonlyArray<string | Uint8Array>)[i]!;
    const h = createHmac('sha256', secret).update(k).digest();
    out.set(h.subarray(0, 16), i * 16);
  }
  return out;
}

const TWO32 = 4294967296;

/**
 * Bucket of every digest. 'sets': digest bytes 0..7 (so it equals bucketOf(key, buckets));
 * 'compact': bytes 8..15. Exact integer arithmetic without BigInt up to 2^21 buckets. `view`: a
 * DataView of `digests` the caller has already.
 */
export function bucketsOfDigests(digests: Uint8Array, layout: Layout, buckets: number, out?: Uint32Array, view?: DataView): Uint32Array {
  const n = digests.length >>> 4;
  const res = out ?? new Uint32Array(n);
  const dv = view ?? new DataView(digests.buffer, digests.byteOffset, digests.byteLength);
  const base = layout === 'sets' ? 0 : 8;
  if (buckets <= 2 ** 31 && (buckets & (buckets - 1)) === 0) {
    // A power of two (the default and every count expectedKeys picks) divides 2^32, so the low
    // word alone decides: a mask instead of three float modulos (about 15x faster per key).
    const mask = buckets - 1;
    for (let i = 0; i < n; i++) res[i] = dv.getUint32((i << 4) + base, true) & mask;
  } else if (buckets <= 2 ** 21) {
    const m = TWO32 % buckets;
    for (let i = 0; i < n; i++) {
      const o = (i << 4) + base;
      const lo = dv.getUint32(o, true);
      const hi = dv.getUint32(o + 4, true);
      res[i] = (((hi % buckets) * m) % buckets + (lo % buckets)) % buckets;
    }
  } else {
    const b = BigInt(buckets);
    for (let i = 0; i < n; i++) res[i] = Number(dv.getBigUint64((i << 4) + base, true) % b);
  }
  return res;
}

/** Compact member of digest i: bytes 0..7 as a signed 64-bit decimal (canonical, intset-able). */
export function compactMember(digests: Uint8Array, i: number, dv = new DataView(digests.buffer, digests.byteOffset, digests.byteLength)): string {
  return int64Decimal(dv, i << 4);
}

/** Member of key i in the 'sets' layout: the raw key (string as is, bytes as a Buffer view). */
export function setsMember(keys: Keys, i: number): Member {
  if (Array.isArray(keys)) {
    const k = (keys as ReadonlyArray<string | Uint8Array>)[i]!;
    return typeof k === 'string' ? k : Buffer.from(k.buffer, k.byteOffset, k.byteLength);
  }
  const p = keys as PackedKeys;
  const s = p.offsets[i]!;
  return Buffer.from(p.bytes.buffer, p.bytes.byteOffset + s, p.offsets[i + 1]! - s);
}

/**
 * Positions 0..n-1 of `buckets` (or of the subset `idx`) ordered by bucket, stable. Sorting one
 * Float64Array of bucket * 2^22 + position avoids a comparator call per key.
 */
export function orderByBucket(buckets: Uint32Array, n = buckets.length): Uint32Array {
  const order = new Uint32Array(n);
  if (n <= 32) {
    // Small batches (the service pattern): insertion sort, no table sized by the bucket count.
    for (let i = 0; i < n; i++) {
      const b = buckets[i]!;
      let j = i;
      while (j > 0 && buckets[order[j - 1]!]! > b) {
        order[j] = order[j - 1]!;
        j--;
      }
      order[j] = i;
    }
    return order;
  }
  let maxB = 0;
  for (let i = 0; i < n; i++) if (buckets[i]! > maxB) maxB = buckets[i]!;
  // Counting sort only while its table is at most a few times the batch: a table scan sized by
  // the bucket count on a small batch would cost more than sorting.
  if (maxB < 2 ** 20 && maxB <= 4 * n) {
    // Counting sort: O(n + buckets), stable.
    const start = new Uint32Array(maxB + 2);
    for (let i = 0; i < n; i++) start[buckets[i]! + 1]!++;
    for (let b = 1; b <= maxB + 1; b++) start[b]! += start[b - 1]!;
    for (let i = 0; i < n; i++) order[start[buckets[i]!]!++] = i;
  } else if (n <= 4_000_000 && maxB < 2 ** 31) {
    const k = new Float64Array(n);
    for (let i = 0; i < n; i++) k[i] = buckets[i]! * 4194304 + i;
    k.sort();
    for (let i = 0; i < n; i++) order[i] = k[i]! % 4194304;
  } else {
    for (let i = 0; i < n; i++) order[i] = i;
    order.sort((a, b) => buckets[a]! - buckets[b]! || a - b);
  }
  return order;
}
