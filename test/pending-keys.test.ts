// The pending-key tracker: a key claimed by a live batch is reported to a later batch with the
// claiming batch and position, is free again once that batch ends, and survives the table's
// rebuilds; against a model of live claims, over random batches.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { PendingKeys, type PendingBatch } from '../src/dedup/pending.js';

const digest = (k: number): Uint32Array => Uint32Array.from([k * 2654435761 >>> 0, k, ~k >>> 0, (k * 40503) >>> 0]);

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
          const owner = new Map<number, { b: PendingBatch; pos: number }>();
          for (const o of ops) {
            if (o.op === 'begin') {
              const b = t.begin();
              const mine: number[] = [];
              for (const k of o.keys) {
                const held = t.claim(digest(k), 0, b, mine.length);
                const want = owner.get(k);
                if (want === undefined || want.b === b) {
                  expect(held).toBeUndefined();
                  if (want === undefined) {
                    owner.set(k, { b, pos: mine.length });
                    mine.push(k);
                  }
                } else {
                  expect(held).toEqual([want.b, want.pos]);
                }
              }
              live.push({ b, keys: mine });
            } else if (live.length > 0) {
              const [gone] = live.splice(o.which % live.length, 1);
              for (const k of gone!.keys) owner.delete(k);
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
