// A batch larger than every lane: while all lanes are busy the calling thread answers slices of
// it itself, between the lanes the workers answer. Answers must not depend on who answered a key.
import { describe, expect, it } from 'vitest';
import { HashGate, bucketsOf, hashBatch, packKeys } from 'hashgate';
import { BloomFilter } from 'hashgate/bloom';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

// One lane: right after its first task is sent, the lane is busy (it frees only on an event-loop
// turn), so the calling thread takes the next slice; later slices go either way.
const ONE_LANE = { threads: 1, lanes: 1, inlineThreshold: 0, chunkKeys: 256 } as const;

const keys = Array.from({ length: 20_000 }, (_, i) => (i % 13 === 0 ? `😀${i}\ud800` : `张伟${110101199003074518 + i}`));
const asked = keys.map((k, i) => (i % 3 === 0 ? `${k}#` : k));

describe('pool: the calling thread answers a share of a large batch', () => {
  it('bloomCheck of strings and of packed keys equals the filter answering alone', async () => {
    const gate = await HashGate.open({ ...ONE_LANE, bloom: { expectedItems: 30_000, fpp: 0.001 } });
    try {
      const ref = BloomFilter.create({ expectedItems: 30_000, fpp: 0.001 });
      expect(await gate.bloomAdd(keys)).toBe(ref.addAll(keys));
      expect(hex(gate.bloom!.bitsView())).toBe(hex(ref.bitsView()));
      const want = ref.mightContainAll(asked);
      expect(hex(await gate.bloomCheck(asked))).toBe(hex(want));
      expect(hex(await gate.bloomCheck(packKeys(asked)))).toBe(hex(want));
      // two large checks at once share the one lane and this thread
      const [a, b] = await Promise.all([gate.bloomCheck(asked), gate.bloomCheck(keys)]);
      expect(hex(a)).toBe(hex(want));
      expect(hex(b)).toBe(hex(ref.mightContainAll(keys)));
      expect(gate.stats().pool!.tasks).toBeGreaterThan(0);
      expect(gate.stats().pool!.failedTasks).toBe(0);
    } finally {
      await gate.close();
    }
  });

  it('hashBatch and bucket answers equal the inline ones, key for key', async () => {
    const gate = await HashGate.open(ONE_LANE);
    try {
      expect(hex(await gate.hashBatch(asked))).toBe(hex(hashBatch(asked)));
      expect(hex(await gate.hashBatch(asked, { algorithm: 'murmur3_32', seed: 7 }))).toBe(hex(hashBatch(asked, { algorithm: 'murmur3_32', seed: 7 })));
      expect(Array.from(await gate.bucketsOf(asked, 1000))).toEqual(Array.from(bucketsOf(asked, 1000)));
    } finally {
      await gate.close();
    }
  });
});
