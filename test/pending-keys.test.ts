// The pending-key tracker: a key claimed by a live batch is reported to a later batch with the
// claiming batch and position and taken over by it, is free again once its last holder ends, and
// survives the table's compactions and resizes; against a model of live claims, over random
// batches. Every wait is for an older batch. Its table follows the keys in flight, not the keys
// ever claimed.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { PendingKeys, type PendingBatch } from '../src/dedup/pending.js';

const digest = (k: number): Uint32Array => Uint32Array.from([k * 2654435761 >>> 0, k, ~k >>> 0, (k * 40503) >>> 0]);

type Owner = Map<number, { b: PendingBatch; pos: number }>;

/** A call: its batches pass it to begin(), and never share a key (the service's in-batch set). */
interface Call {
  used: Set<number>;
}

/**
 * Begins a batch of `call` (undefined: a call of one batch) on the distinct keys of `keys` that
 * its call has not had yet, as the service does: deferred when the tracker allows, else claimed one
 * by one, a held key taken over at a position of its own (as the service does, counting down from
 * 1000 here). Checks every claim against the model `owner` (key -> live batch and position), which
 * it updates; returns the batch, the keys it holds and whether they were deferred.
 */
const beginLike = (t: PendingKeys, owner: Owner, keys: readonly number[], call?: Call): { b: PendingBatch; keys: number[]; deferred: boolean } => {
  const b = t.begin(call);
  const fresh = [...new Set(keys)].filter((k) => call === undefined || !call.used.has(k));
  for (const k of fresh) call?.used.add(k);
  const d = new Uint32Array(fresh.length * 4);
  fresh.forEach((k, i) => d.set(digest(k), i * 4));
  const mine: number[] = [];
  if (t.deferClaims(b, d, Uint32Array.from(fresh.keys()), fresh.length)) {
    // only while no batch of another call is live: no key of these can be held
    for (const k of fresh) {
      expect(owner.get(k)).toBeUndefined();
      owner.set(k, { b, pos: mine.length });
      mine.push(k);
    }
    return { b, keys: mine, deferred: true };
  }
  const taken: number[] = [];
  fresh.forEach((k, i) => {
    const slot = 1000 - taken.length;
    const held = t.claim(d, i, b, mine.length, slot);
    const want = owner.get(k);
    if (want === undefined) {
      expect(held).toBeUndefined();
      owner.set(k, { b, pos: mine.length });
      mine.push(k);
    } else {
      expect(held).toEqual([want.b, want.pos]);
      // waits form no cycle: the owner is older
      expect(held![0].seq).toBeLessThan(b.seq);
      owner.set(k, { b, pos: slot });
      taken.push(k);
    }
  });
  // a key the batch holds already is its own: claimed again, it is neither reported nor moved
  for (const k of [...mine, ...taken]) expect(t.claim(digest(k), 0, b, 9999, 9999)).toBeUndefined();
  return { b, keys: [...mine, ...taken], deferred: false };
};

describe('PendingKeys', () => {
  it('claims like a model of live batches, whatever the order batches end in', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(
          fc.record({ op: fc.constant('begin' as const), keys: fc.array(fc.nat(400), { maxLength: 60 }) }),
          fc.record({ op: fc.constant('end' as const), which: fc.nat() }),
        ), { maxLength: 120 }),
        (ops) => {
          const t = new PendingKeys(64);
          const live: Array<{ b: PendingBatch; keys: number[] }> = [];
          const owner: Owner = new Map();
          for (const o of ops) {
            if (o.op === 'begin') {
              live.push(beginLike(t, owner, o.keys));
            } else if (live.length > 0) {
              const [gone] = live.splice(o.which % live.length, 1);
              for (const k of gone!.keys) if (owner.get(k)?.b === gone!.b) owner.delete(k);
              t.end(gone!.b, new Uint8Array(gone!.keys.length).fill(1));
              expect(gone!.b.answered).toBeDefined();
            }
          }
          expect(t.liveBatches).toBe(live.length);
        },
      ),
      { numRuns: 300, seed: 23 },
    );
  });

  it('defers the claims of batches of one call and claims them once another call begins, like the model (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(
          fc.record({ op: fc.constant('begin' as const), call: fc.option(fc.nat(2), { nil: undefined }), keys: fc.array(fc.nat(300), { maxLength: 40 }) }),
          fc.record({ op: fc.constant('end' as const), which: fc.nat() }),
        ), { maxLength: 150 }),
        (ops) => {
          const t = new PendingKeys(64);
          const calls: Call[] = [{ used: new Set() }, { used: new Set() }, { used: new Set() }];
          const live: Array<{ b: PendingBatch; keys: number[]; call: Call | undefined }> = [];
          const owner: Owner = new Map();
          // whether batches of more than one call were live at once since the tracker was last idle
          let mixed = false;
          for (const o of ops) {
            if (o.op === 'begin') {
              const call = o.call === undefined ? undefined : calls[o.call];
              if (live.length === 0) mixed = false;
              else if (live.some((l) => l.call === undefined || l.call !== call)) mixed = true;
              const got = beginLike(t, owner, o.keys, call);
              // deferred exactly while every batch since the last idle moment was of its call
              expect(got.deferred).toBe(!mixed);
              live.push({ ...got, call });
            } else if (live.length > 0) {
              const [gone] = live.splice(o.which % live.length, 1);
              for (const k of gone!.keys) if (owner.get(k)?.b === gone!.b) owner.delete(k);
              t.end(gone!.b, new Uint8Array(gone!.keys.length).fill(1));
            }
          }
          expect(t.liveBatches).toBe(live.length);
        },
      ),
      { numRuns: 400, seed: 5 },
    );
  });

  it('sequential calls defer every batch, and a call that overlaps one finds its keys', () => {
    const t = new PendingKeys(64);
    const one = (k: number): Uint32Array => digest(k);
    for (let n = 0; n < 1000; n++) {
      const call = {};
      const a = t.begin(call);
      const b = t.begin(call);
      expect(t.deferClaims(a, one(n), Uint32Array.of(0), 1)).toBe(true);
      expect(t.deferClaims(b, one(n + 5000), Uint32Array.of(0), 1)).toBe(true);
      t.end(a, Uint8Array.of(1));
      t.end(b, Uint8Array.of(1));
    }
    expect(t.tableCells).toBe(64);
    const first = t.begin({});
    expect(t.deferClaims(first, Uint32Array.from([...digest(1), ...digest(2)]), Uint32Array.of(1, 0), 2)).toBe(true);
    const other = t.begin({});
    expect(t.deferClaims(other, digest(2), Uint32Array.of(0), 1)).toBe(false);
    // digest 2 was the deferred batch's position 0, digest 1 its position 1
    expect(t.claim(digest(2), 0, other, 0)).toEqual([first, 0]);
    expect(t.claim(digest(1), 0, other, 0)).toEqual([first, 1]);
    expect(t.claim(digest(3), 0, other, 0)).toBeUndefined();
    t.end(first, Uint8Array.of(1, 1));
    expect(t.claim(digest(2), 0, other, 0)).toBeUndefined();
  });

  it('claims like the model while batches always overlap, through many compactions in place (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.array(fc.nat(1999), { maxLength: 40 }), { minLength: 50, maxLength: 400 }), fc.integer({ min: 1, max: 6 }), (batches, overlap) => {
        const t = new PendingKeys(64);
        const live: Array<{ b: PendingBatch; keys: number[] }> = [];
        const owner: Owner = new Map();
        for (const keys of batches) {
          live.push(beginLike(t, owner, keys));
          // the oldest ends once `overlap` batches are live: one always is
          if (live.length > overlap) {
            const gone = live.shift()!;
            for (const k of gone.keys) if (owner.get(k)?.b === gone.b) owner.delete(k);
            t.end(gone.b, new Uint8Array(gone.keys.length));
          }
        }
        // never bigger than four cells per key that can be live (six batches of 40), as a power of two
        expect(t.tableCells).toBeLessThanOrEqual(2 ** Math.ceil(Math.log2(4 * (6 * 40 + 1))));
      }),
      { numRuns: 150, seed: 7 },
    );
  });

  it('keeps its table at the size of the keys in flight over a million claims of always-overlapping batches', () => {
    const t = new PendingKeys(64);
    const d = new Uint32Array(4);
    let prev = t.begin();
    let k = 0;
    let most = 0;
    let held = 0;
    for (let n = 0; n < 10_000; n++) {
      const cur = t.begin();
      for (let i = 0; i < 100; i++) {
        k++;
        d[0] = Math.imul(k, 0x9e3779b1) >>> 0;
        d[1] = k;
        d[2] = Math.imul(k, 0x85ebca6b) >>> 0;
        d[3] = 7;
        if (t.claim(d, 0, cur, i) !== undefined) held++;
      }
      t.end(prev, new Uint8Array(100).fill(1));
      prev = cur;
      most = Math.max(most, t.tableCells);
    }
    expect(held).toBe(0); // every key is new
    // 200 keys in flight at most: a table of 1,024 cells holds them at load 1/4
    expect(most).toBe(1024);
  });

  it('a compaction keeps probe runs that wrap around the table\'s end whole', () => {
    // a digest whose home cell is `home` (the home is word 0 xor word 2 in a 64-cell table)
    const at = (home: number, id: number): Uint32Array => Uint32Array.from([home, id, 0, 0]);
    const t = new PendingKeys(64);
    const dead = t.begin();
    expect(t.claim(at(62, 1), 0, dead, 0)).toBeUndefined(); // cell 62
    const a = t.begin();
    // cells 63, 0 and 1: a run from cell 62 that wraps
    expect(t.claim(at(62, 2), 0, a, 0)).toBeUndefined();
    expect(t.claim(at(62, 3), 0, a, 1)).toBeUndefined();
    expect(t.claim(at(63, 4), 0, a, 2)).toBeUndefined();
    t.end(dead, new Uint8Array(1));
    // short-lived batches elsewhere fill half the table with dead cells: the next claim compacts
    for (let i = 0; i < 40; i++) {
      const b = t.begin();
      expect(t.claim(at(10 + (i % 20), 100 + i), 0, b, 0)).toBeUndefined();
      t.end(b, new Uint8Array(1));
    }
    expect(t.tableCells).toBe(64);
    const later = t.begin();
    expect(t.claim(at(62, 2), 0, later, 0)).toEqual([a, 0]);
    expect(t.claim(at(62, 3), 0, later, 0)).toEqual([a, 1]);
    expect(t.claim(at(63, 4), 0, later, 0)).toEqual([a, 2]);
  });

  it('a batch waiting for a key holds it: a newer batch waits for the waiter, even once the first holder ended', () => {
    const t = new PendingKeys();
    const first = t.begin();
    expect(t.claim(digest(1), 0, first, 0)).toBeUndefined();
    const older = t.begin();
    expect(t.claim(digest(2), 0, older, 0, 1)).toBeUndefined();
    expect(t.claim(digest(1), 0, older, 1, 1)).toEqual([first, 0]);
    t.end(first, Uint8Array.of(1));
    // the older batch still waits to answer key 1 (or send it): the newer one must not take it,
    // or the older one would wait for the newer one's key 1 while the newer waits for its key 2
    const newer = t.begin();
    expect(t.claim(digest(1), 0, newer, 0, 1)).toEqual([older, 1]);
    expect(t.claim(digest(2), 0, newer, 1, 0)).toEqual([older, 0]);
    // without a position to take it at, a lookup leaves the key where it is
    const probe = t.begin();
    expect(t.claim(digest(1), 0, probe, 0)).toEqual([newer, 1]);
    expect(t.claim(digest(1), 0, probe, 0)).toEqual([newer, 1]);
    t.end(probe, Uint8Array.of(0));
    t.end(older, Uint8Array.of(1, 1));
    t.end(newer, Uint8Array.of(1, 1));
    expect(t.claim(digest(1), 0, t.begin(), 0)).toBeUndefined();
  });

  it('a waiter learns which of the earlier batch\'s keys got an answer', async () => {
    const t = new PendingKeys();
    const a = t.begin();
    expect(t.claim(digest(1), 0, a, 0)).toBeUndefined();
    expect(t.claim(digest(2), 0, a, 1)).toBeUndefined();
    const b = t.begin();
    const held = t.claim(digest(2), 0, b, 0)!;
    expect(held[0]).toBe(a);
    t.end(a, Uint8Array.from([1, 0]));
    await held[0].done;
    expect(held[0].answered![held[1]]).toBe(0);
    // free once its batch ended
    expect(t.claim(digest(2), 0, b, 0)).toBeUndefined();
  });
});
