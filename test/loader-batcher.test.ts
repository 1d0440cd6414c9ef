// The loader's batcher: every accepted row of a region lands once in the buffer of its (window,
// bucket group), whatever order it appends them in and wherever a full buffer stops it; rows
// rejected for their window land nowhere; and the rows per bucket the summary reports equal a
// plain count, for buffers sent, buffers still held and counts added in bucket order.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Batcher } from '../src/loader/batcher.js';
import { BucketCounts } from '../src/loader/bucket-counts.js';
import { BufferPool, type BatchBuffer } from '../src/loader/buffers.js';

interface Row {
  key: number;
  bucket: number;
  window: number;
}

/** One region of `rows`: key i is the 4 bytes of its number, its line the decimal text. */
function region(rows: Row[], segment: number) {
  const n = rows.length;
  const keys = new Uint8Array(n * 4);
  const dv = new DataView(keys.buffer);
  const keyOffsets = new Uint32Array(n + 1);
  const text = rows.map((r) => String(r.key)).join('');
  const lines = new TextEncoder().encode(text);
  const rowStart = new Uint32Array(n);
  const rowEnd = new Uint32Array(n);
  let p = 0;
  rows.forEach((r, i) => {
    dv.setUint32(i * 4, r.key, true);
    keyOffsets[i + 1] = (i + 1) * 4;
    rowStart[i] = p;
    p += String(r.key).length;
    rowEnd[i] = p;
  });
  const buckets = Uint32Array.from(rows, (r) => r.bucket);
  const windows = rows.some((r) => r.window !== 0) ? Int32Array.from(rows, (r) => r.window) : null;
  return { keys, keyOffsets, buckets, lines, rowStart, rowEnd, windows, segment };
}

/** What a buffer holds: [window, bucket, key, line, segment] per row. */
function contents(b: Batcher, buf: BatchBuffer): string[] {
  const w = b.windowOf(buf);
  const out: string[] = [];
  const dv = new DataView(buf.keys.buffer, buf.keys.byteOffset, buf.keys.length);
  for (let i = 0; i < buf.count; i++) {
    expect(buf.keyOffs[i + 1]! - buf.keyOffs[i]!).toBe(4);
    const key = dv.getUint32(buf.keyOffs[i]!, true);
    const line = buf.lines.subarray(buf.lineOffs[i]!, buf.lineOffs[i + 1]!).toString();
    expect(buf.bkts[i]! % b.groups).toBe(buf.cell % b.groups);
    out.push(`${w}/${buf.bkts[i]}/${key}/${line}/${buf.segs[i]}`);
  }
  return out;
}

const rowArb = (buckets: number, windows: number) =>
  fc.record({ key: fc.nat(), bucket: fc.nat({ max: buckets - 1 }), window: fc.integer({ min: -1, max: windows - 1 }) });

describe('Batcher', () => {
  it('appends every accepted row once to its window and bucket group, sending full buffers and counting their buckets', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5000 }).chain((buckets) =>
          fc.record({
            buckets: fc.constant(buckets),
            // few groups append in input order, many (from 512) group by group
            groups: fc.oneof(fc.integer({ min: 1, max: Math.min(buckets, 64) }), fc.integer({ min: Math.min(buckets, 500), max: Math.min(buckets, 1100) })),
            batch: fc.oneof(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 4, max: 40 })),
            windows: fc.integer({ min: 1, max: 3 }),
          }).chain((c) => fc.record({ c: fc.constant(c), regions: fc.array(fc.array(rowArb(c.buckets, c.windows), { maxLength: 1500, size: 'max' }), { minLength: 1, maxLength: 4 }) })),
        ),
        ({ c, regions }) => {
          const counts = new BucketCounts(c.buckets, c.groups);
          const b = new Batcher(new BufferPool(c.batch, 8, 4), c.groups, false, counts, c.windows);
          const sent: string[] = [];
          const expected: string[] = [];
          const naive = new Float64Array(c.buckets);
          regions.forEach((rows, seg) => {
            const accepted = rows.filter((r) => r.window >= 0);
            for (const r of accepted) {
              expected.push(`${r.window}/${r.bucket}/${r.key}/${r.key}/${seg}`);
              naive[r.bucket]!++;
            }
            const positions = b.setRegion(region(rows, seg), rows.length);
            expect(positions).toBe(accepted.length);
            for (let i = 0; i < positions; ) {
              i = b.run(i);
              const full = b.full;
              if (full) {
                expect(full.count).toBe(c.batch);
                sent.push(...contents(b, full));
                b.detach(full);
                b.recycle(full);
              }
            }
            expect(b.accepted).toBe(accepted.length);
          });
          // what the batcher still holds is never full, and counts once a stopped load asks
          const held = [...b.active];
          for (const buf of held) {
            expect(buf.count).toBeLessThan(c.batch);
            sent.push(...contents(b, buf));
          }
          b.countHeld();
          b.countHeld();
          expect(sent.sort()).toEqual(expected.sort());
          const byBucket = (): number[] => Array.from({ length: c.buckets }, (_, k) => counts.get(k));
          expect(byBucket()).toEqual([...naive]);
          // and a held buffer sent later adds nothing more
          for (const buf of held) b.detach(buf);
          expect(byBucket()).toEqual([...naive]);
          expect(b.buffered).toBe(0);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('appends a region group by group when there are many groups, and in input order when few', () => {
    const fills = (groups: number, buckets: number[]): number[] => {
      const rows = buckets.map((bucket, key) => ({ key, bucket, window: 0 }));
      const b = new Batcher(new BufferPool(2, 8, 4), groups, false, new BucketCounts(groups * 2, groups), 1);
      const n = b.setRegion(region(rows, 0), rows.length);
      const filled: number[] = [];
      for (let i = 0; i < n; ) {
        i = b.run(i);
        if (b.full) {
          filled.push(b.full.cell);
          b.detach(b.full);
        }
      }
      return filled;
    };
    // the last group's two rows come first in the input
    expect(fills(1024, [1023, 2047, 0, 1024])).toEqual([0, 1023]);
    expect(fills(4, [3, 7, 0, 4])).toEqual([3, 0]);
  });
});

describe('BucketCounts', () => {
  it('counts, adds in bucket order and reports min, max and mean as a plain array would', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3000 }).chain((buckets) =>
          fc.record({
            buckets: fc.constant(buckets),
            groups: fc.integer({ min: 1, max: buckets }),
            rows: fc.array(fc.nat({ max: buckets - 1 }), { maxLength: 2000 }),
            more: fc.array(fc.nat({ max: 5 }), { minLength: buckets, maxLength: buckets }),
          }),
        ),
        ({ buckets, groups, rows, more }) => {
          const c = new BucketCounts(buckets, groups);
          const naive = new Float64Array(buckets);
          expect(c.addRows(Uint32Array.from(rows), rows.length, null)).toBe(rows.length);
          for (const r of rows) naive[r]!++;
          c.addInBucketOrder(Uint32Array.from(more));
          more.forEach((v, b) => (naive[b]! += v));
          expect(Array.from({ length: buckets }, (_, b) => c.get(b))).toEqual([...naive]);
          const sum = naive.reduce((a, v) => a + v, 0);
          expect(c.stats()).toEqual({ min: sum === 0 ? 0 : Math.min(...naive), max: Math.max(...naive), mean: sum / buckets });
        },
      ),
      { numRuns: 200 },
    );
  });

  it('skips rows rejected for their window', () => {
    const c = new BucketCounts(10, 3);
    expect(c.addRows(Uint32Array.from([1, 2, 2, 9]), 4, Int32Array.from([0, -1, 1, -2]))).toBe(2);
    expect([c.get(1), c.get(2), c.get(9)]).toEqual([1, 1, 0]);
  });
});
