// DigestSet (a batch's repeats, the bucket analysis's distinct keys) answers like a Set of the digests; SeenCache (the seen-cache)
// is an LRU per set of four that never answers "seen" for a digest it was not given.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DigestSet } from '../src/hash/digest-set.js';
import { SeenCache } from '../src/dedup/cache.js';

/** Digest i of `ids`: four words derived from ids[i] (id 0 gives the all-zero digest). */
const digestsOf = (ids: readonly number[]): Uint32Array => {
  const d = new Uint32Array(ids.length * 4);
  ids.forEach((v, i) => {
    if (v !== 0) d.set([Math.imul(v, 0x9e3779b1) >>> 0, v, v ^ 0x5bd1e995, 7], i * 4);
  });
  return d;
};

/** n pseudo-random digests (four words each) from `seed`: the same ones on every run. */
const randomDigests = (n: number, seed: number): Uint32Array => {
  const d = new Uint32Array(4 * n);
  let x = seed;
  for (let i = 0; i < 4 * n; i++) d[i] = x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
  return d;
};

describe('DigestSet', () => {
  it('agrees with a Set (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 30_000 }), { minLength: 1, maxLength: 20_000 }), (ids) => {
        const d = digestsOf(ids);
        const s = new DigestSet(new Set(ids).size);
        const ref = new Set<number>();
        for (let i = 0; i < ids.length; i++) {
          const want = !ref.has(ids[i]!);
          ref.add(ids[i]!);
          expect(s.add(d, i << 2)).toBe(want);
        }
        expect(s.size).toBe(ref.size);
        for (let i = 0; i < ids.length; i++) expect(s.has(d, i << 2)).toBe(true);
        expect(s.has(digestsOf([30_001]), 0)).toBe(false);
      }),
      { numRuns: 30 },
    );
  });

  it('the all-zero digest is a member like any other, and clear() empties the set', () => {
    const d = new Uint32Array(4 * 6000);
    for (let i = 1; i < 6000; i++) d.set([i, 0, 0, i === 5 ? 0 : 9], i * 4); // digest 0 is all zero
    const s = new DigestSet(6000);
    expect(s.has(d, 0)).toBe(false);
    expect(s.add(d, 0)).toBe(true);
    expect(s.add(d, 0)).toBe(false);
    for (let i = 1; i < 6000; i++) expect(s.add(d, i << 2)).toBe(true);
    expect(s.has(d, 0)).toBe(true);
    expect(s.size).toBe(6000);
    s.clear();
    expect(s.has(d, 0)).toBe(false);
    expect(s.has(d, 5 << 2)).toBe(false);
    expect(s.add(d, 0)).toBe(true);
    expect(s.size).toBe(1);
  });

  it('grows past its capacity without losing a member, and reads digests inside wider records', () => {
    // records of 6 words, the digest first (as the analysis's spill records carry more after it)
    const n = 5000;
    const rec = new Uint32Array(6 * n);
    for (let i = 0; i < n; i++) rec.set([Math.imul(i + 1, 0x9e3779b1) >>> 0, i, 3, 5, 0xffffffff, i], i * 6);
    const s = new DigestSet(10);
    const cap0 = s.capacity;
    const bytes0 = s.byteLength;
    for (let i = 0; i < n; i++) {
      if (s.full) expect(s.grownBytes).toBe(2 * s.byteLength);
      expect(s.add(rec, i * 6)).toBe(true);
    }
    expect(s.capacity).toBeGreaterThan(cap0);
    expect(s.byteLength).toBeGreaterThan(bytes0);
    // load stays at most 3/4 of the cells (16 B each)
    expect(s.size).toBeLessThanOrEqual((s.byteLength / 16) * 0.75);
    for (let i = 0; i < n; i++) {
      expect(s.has(rec, i * 6)).toBe(true);
      expect(s.add(rec, i * 6)).toBe(false);
    }
    expect(s.size).toBe(n);
    const other = new Uint32Array([7, n + 1, 3, 5]);
    expect(s.has(other, 0)).toBe(false);
  });
});

describe('SeenCache', () => {
  it('with room for at most four is exactly an LRU of that many (property against a model)', () => {
    // max 1..4 makes one set of `max` ways: the whole cache is one LRU list
    const op = fc.record({ add: fc.boolean(), id: fc.integer({ min: 0, max: 9 }) });
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.array(op, { maxLength: 300 }), (max, ops) => {
        const c = new SeenCache(max);
        const d = digestsOf(ops.map((o) => o.id));
        let lru: number[] = []; // most recently used first, without the all-zero digest
        let zero = false;
        ops.forEach(({ add, id }, i) => {
          if (id === 0) {
            if (add) c.add(d, i);
            else expect(c.has(d, i)).toBe(zero);
            if (add) zero = true;
            return;
          }
          const at = lru.indexOf(id);
          if (add) {
            c.add(d, i);
            if (at >= 0) lru.splice(at, 1);
            lru = [id, ...lru].slice(0, max);
          } else {
            expect(c.has(d, i)).toBe(at >= 0);
            if (at >= 0) lru = [id, ...lru.filter((x) => x !== id)];
          }
          expect(c.size).toBe(lru.length + (zero ? 1 : 0));
        });
      }),
      { numRuns: 300 },
    );
  });

  it('never answers seen for a digest it was not given, keeps what it was given last, and stays within max (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 5, max: 400 }), fc.array(fc.integer({ min: 1, max: 2000 }), { maxLength: 3000 }), (max, ids) => {
        const c = new SeenCache(max);
        const d = digestsOf(ids);
        const given = new Set<number>();
        for (let i = 0; i < ids.length; i++) {
          expect(c.has(d, i)).toBe(c.has(d, i) && given.has(ids[i]!));
          c.add(d, i);
          given.add(ids[i]!);
          // the last three added are the three newest of any set they went to
          for (let j = Math.max(0, i - 2); j <= i; j++) expect(c.has(d, j)).toBe(true);
          expect(c.size).toBeLessThanOrEqual(max);
        }
        c.clear();
        expect(c.size).toBe(0);
        for (let i = 0; i < ids.length; i++) expect(c.has(d, i)).toBe(false);
      }),
      { numRuns: 100 },
    );
  });

  it('holds nearly all of the newest max keys of a long stream of new ones', () => {
    const max = 100_000;
    const c = new SeenCache(max);
    const n = 1_000_000;
    const d = randomDigests(n, 0x12345678);
    for (let i = 0; i < n; i++) c.add(d, i);
    expect(c.size).toBeLessThanOrEqual(max);
    let newest = 0;
    for (let i = n - max / 8; i < n; i++) if (c.has(d, i)) newest++;
    let older = 0;
    for (let i = 0; i < max; i++) if (c.has(d, i)) older++;
    // an entry outlives fewer than four later adds into its set (max / 4 sets): the newest
    // eighth of max are nearly all there (at most Poisson(0.5) later adds in their set: <= 3
    // for 99.8%), and the oldest keys of the stream are nearly all gone
    expect(newest / (max / 8)).toBeGreaterThan(0.99);
    expect(older).toBeLessThan(max / 100);
  });

  it('grows from a small table without misplacing what it holds, and keeps nearly every key of a stream shorter than max', () => {
    // max 2^20: the table grows four-fold from 64 sets up to 2^18 as it fills
    const c = new SeenCache(2 ** 20);
    const n = 200_000;
    const d = randomDigests(n, 0x9e3779b9);
    let probes = 0;
    let lost = 0;
    for (let i = 0; i < n; i++) {
      c.add(d, i);
      // probes across the stream so far: a growth that misplaced or dropped entries shows here
      if (i % 5000 === 4999) {
        for (let j = 0; j <= i; j += 97, probes++) if (!c.has(d, j)) lost++;
      }
    }
    let found = 0;
    for (let i = 0; i < n; i++) if (c.has(d, i)) found++;
    // only sets that met a fifth key while the table was at most an eighth full lost one, and
    // those at full size (200k keys in 2^18 sets)
    expect(found / n).toBeGreaterThan(0.997);
    expect(lost / probes).toBeLessThan(0.002);
    expect(c.size).toBe(found);
    for (let i = n - 10_000; i < n; i++) expect(c.has(d, i)).toBe(true);
  });

  it('answers the same when the next table is prefaulted between calls, through every growth (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20_000 }), fc.integer({ min: 5_000, max: 60_000 }), fc.nat(), (calls, n, seed) => {
        const plain = new SeenCache(2 ** 20);
        const ahead = new SeenCache(2 ** 20);
        const d = randomDigests(n, seed | 1);
        // a call every `per` keys, prefaulting for them, as the service does after each send
        const per = Math.max(1, Math.ceil(n / calls));
        for (let i = 0; i < n; i++) {
          if (i % per === 0) ahead.prefault(Math.min(per, n - i));
          plain.add(d, i);
          ahead.add(d, i);
        }
        expect(ahead.size).toBe(plain.size);
        for (let i = 0; i < n; i++) expect(ahead.has(d, i)).toBe(plain.has(d, i));
      }),
      { numRuns: 12 },
    );
  });

  it('addAll and warm change no answer: a batch added at once equals its keys added one at a time (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 1, max: 20_000 }), fc.nat(), fc.boolean(), fc.constantFrom(1, 3, 5, 2 ** 14), fc.boolean(),
        (batch, n, seed, repeats, max, zero) => {
        // max 1 and 3: one set of fewer than four ways; 2^14 grows from 64 sets to 4,096
        const one = new SeenCache(max);
        const all = new SeenCache(max);
        // with repeats, later batches hold keys of earlier ones (hits that age a way, not add one)
        const d = randomDigests(repeats ? Math.ceil(n / 2) : n, seed | 1);
        // the all-zero digest (a flag, not a way) among them
        if (zero) d.fill(0, 4 * (seed % (d.length >> 2)), 4 * (seed % (d.length >> 2)) + 4);
        const count = d.length >> 2;
        const idx = new Uint32Array(batch);
        for (let s = 0; s < n; s += batch) {
          const k = Math.min(batch, n - s);
          for (let j = 0; j < k; j++) idx[j] = (s + j * 7) % count;
          all.warm(d, idx, k, false);
          all.warm(d, undefined, Math.min(k, count), true);
          let differ = 0;
          for (let j = 0; j < k; j++) if (all.has(d, idx[j]!) !== one.has(d, idx[j]!)) differ++;
          expect(differ).toBe(0);
          for (let j = 0; j < k; j++) one.add(d, idx[j]!);
          all.addAll(d, idx, k);
          expect(all.size).toBe(one.size);
        }
        let differ = 0;
        for (let i = 0; i < count; i++) if (all.has(d, i) !== one.has(d, i)) differ++;
        expect(differ).toBe(0);
        },
      ),
      { numRuns: 40 },
    );
  });

  it('faults in the next table in step with its adds, not a page per call', () => {
    // 2^20 entries: 65,536 sets from 8,192 entries on, the full 262,144 from 32,768
    const c = new SeenCache(2 ** 20);
    const n = 40_000;
    const d = randomDigests(n, 12345);
    let dueHalfWay: boolean | undefined;
    let doneAt = -1;
    for (let i = 0; i < n; i++) {
      c.prefault(1); // as a one-key call does while it waits for its store
      if (c.size === 8192 + 12_288 && dueHalfWay === undefined) dueHalfWay = c.prefaultDue;
      if (doneAt < 0 && c.size > 8192 && c.size < 32_768 && !c.prefaultDue) doneAt = c.size;
      c.add(d, i);
    }
    // half way to the growth the 17 MiB table is not all in memory yet, and it is before the growth
    expect(dueHalfWay).toBe(true);
    expect(doneAt).toBeGreaterThan(8192 + 0.7 * 24_576);
    expect(doneAt).toBeLessThan(32_768);
  });

  it('makes its arrays once, at the first add, and grows inside them', () => {
    const c = new SeenCache(2 ** 20); // 64 sets at first, 262,144 once 32,768 entries are in
    // the arrays themselves: whether a growth made new ones shows only there (the process's
    // arrayBuffers count moves with whatever the collector frees meanwhile)
    const arrays = (): [Uint32Array | undefined, Uint32Array | undefined] => {
      const inner = c as unknown as { words?: Uint32Array; tags?: Uint32Array };
      return [inner.words, inner.tags];
    };
    const n = 60_000;
    const d = randomDigests(n, 777);
    c.add(d, 0);
    const [words, tags] = arrays();
    expect(words?.length).toBe(2 ** 18 * 16);
    expect(tags?.length).toBe(2 ** 18);
    for (let i = 1; i < n; i++) {
      if (i % 1000 === 0) c.prefault(1000);
      c.add(d, i);
    }
    // four growths, all inside the arrays made at the first add
    const [after, afterTags] = arrays();
    expect(after).toBe(words);
    expect(afterTags).toBe(tags);
    let found = 0;
    for (let i = 0; i < n; i++) if (c.has(d, i)) found++;
    expect(found / n).toBeGreaterThan(0.99);
  });

  it('keeps each set in least-recently-used order across a growth', () => {
    const c = new SeenCache(2 ** 16); // 64 sets at first, four times as many at each eighth full: 16,384 once 2,048 entries are in
    // g[0..4] share word 0, so they share a set at every table size; fillers never go to it
    const g = new Uint32Array(4 * 5);
    for (let i = 0; i < 5; i++) g.set([0, 2 * i + 3, 11 + i, 13], i * 4);
    for (let i = 0; i < 4; i++) c.add(g, i);
    expect(c.has(g, 0)).toBe(true); // g0 most recent: order g0 g3 g2 g1
    const fillers = new Uint32Array(4 * 3000);
    for (let i = 0; i < 3000; i++) fillers.set([(0x80000000 | Math.imul(i + 1, 0x9e3779b1)) >>> 0, i, 7, 9], i * 4);
    for (let i = 0; i < 3000; i++) c.add(fillers, i);
    c.add(g, 4); // a fifth in the set drops its least recently used: g1
    expect(c.has(g, 1)).toBe(false);
    for (const i of [0, 2, 3, 4]) expect(c.has(g, i)).toBe(true);
    for (let i = 0; i < 3000; i++) expect(c.has(fillers, i)).toBe(true);
  });

  it('keeps the all-zero digest from its first add until clear(), without a table', () => {
    const c = new SeenCache(8);
    const d = new Uint32Array(4 * 40);
    for (let i = 1; i < 40; i++) d.set([i * 0x01000000, 2 * i + 1, 7, 9], i * 4); // digest 0 is all zero
    expect(c.has(d, 0)).toBe(false);
    c.add(d, 0);
    expect(c.has(d, 0)).toBe(true);
    for (let i = 1; i < 40; i++) c.add(d, i);
    expect(c.has(d, 0)).toBe(true);
    expect(c.size).toBeLessThanOrEqual(9);
    c.clear();
    expect(c.has(d, 0)).toBe(false);
  });
});
