// Where the worker lanes live: in the gate's Bloom filter memory (workers probe the bits straight
// from a lane), or, without room there, in memories of their own. Answers must not depend on it.
import { describe, expect, it } from 'vitest';
// The lane pool is reached through the gate module's internal helper, which the package does not export.
import { HashGate, gatePool } from '../src/gate.js';
import { hashBatch, packKeys } from '../src/hash/index.js';
import { BloomFilter } from '../src/bloom/index.js';
import { HOSTED_LANES_MAX_BYTES, type LanePool } from '../src/pool/lanes.js';
import { SCRATCH_PAGES } from '../src/bloom/attach.js';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const lanesOf = (gate: HashGate): LanePool => gatePool(gate)!['lanes'] as unknown as LanePool;

const keys = Array.from({ length: 12_000 }, (_, i) => (i % 17 === 0 ? `😀\udc00${i}` : `王芳${110101199003074518 + i}`));
const asked = keys.map((k, i) => (i % 2 === 0 ? `${k}!` : k));
const bytes = new TextEncoder();

/** Adds, merged adds, checks and hashes through `gate`, each against a filter answering alone. */
async function sameAnswers(gate: HashGate, expectedItems: number): Promise<void> {
  const ref = BloomFilter.create({ expectedItems, fpp: 0.001 });
  expect(await gate.bloomAdd(keys)).toBe(ref.addAll(keys));
  const packed = packKeys(asked.slice(0, 6000).map((k) => bytes.encode(`${k}~`)));
  expect(await gate.bloomAdd(packed)).toBe(ref.addAll(packed));
  // merged calls: the workers write a changed flag per key
  const more = asked.map((k) => `${k}+`);
  const [a, b] = await Promise.all([gate.bloomAdd(more.slice(0, 6000)), gate.bloomAdd(more.slice(6000))]);
  expect(a + b).toBe(ref.addAll(more));
  expect(hex(gate.bloom!.bitsView())).toBe(hex(ref.bitsView()));
  expect(gate.bloom!.bitCount()).toBe(ref.bitCount());
  expect(hex(await gate.bloomCheck(asked))).toBe(hex(ref.mightContainAll(asked)));
  expect(hex(await gate.bloomCheck(packKeys(asked)))).toBe(hex(ref.mightContainAll(asked)));
  expect(hex(await gate.hashBatch(asked))).toBe(hex(hashBatch(asked)));
}

describe('pool lanes', () => {
  it('go in the Bloom filter memory of a gate that has one; answers are unchanged', async () => {
    const gate = await HashGate.open({ threads: 2, inlineThreshold: 0, chunkKeys: 512, bloom: { expectedItems: 40_000, fpp: 0.001 } });
    try {
      const lanes = lanesOf(gate);
      expect(lanes.hosted).toBe(true);
      expect(lanes.memories.every((m) => m === gate.bloom!.memory)).toBe(true);
      await sameAnswers(gate, 40_000);
      expect(gate.stats().pool!.failedTasks).toBe(0);
    } finally {
      await gate.close();
    }
  });

  it('have memories of their own when the filter memory would give them too much room', async () => {
    const chunkBytes = Math.ceil(HOSTED_LANES_MAX_BYTES / 2);
    const gate = await HashGate.open({ threads: 1, lanes: 3, inlineThreshold: 0, chunkKeys: 512, chunkBytes, bloom: { expectedItems: 40_000, fpp: 0.001 } });
    try {
      const lanes = lanesOf(gate);
      expect(lanes.hosted).toBe(false);
      expect(lanes.memories.some((m) => m === gate.bloom!.memory)).toBe(false);
      await sameAnswers(gate, 40_000);
    } finally {
      await gate.close();
    }
  });

  it('gates opened one after another on one filter reuse the region a closed one hosted', async () => {
    const filter = BloomFilter.create({ expectedItems: 40_000, fpp: 0.001 });
    const open = () => HashGate.open({ threads: 1, inlineThreshold: 0, chunkKeys: 512, bloom: filter });
    const first = await open();
    expect(lanesOf(first).hosted).toBe(true);
    await first.bloomCheck(asked); // the worker attaches (its scratch lease) before we measure
    await first.close();
    const size = filter.memory.buffer.byteLength;
    for (let i = 0; i < 4; i++) {
      const gate = await open();
      try {
        expect(lanesOf(gate).hosted).toBe(true);
        expect(Array.from(await gate.bloomCheck(asked))).toEqual(Array.from(filter.mightContainAll(asked)));
      } finally {
        await gate.close();
      }
    }
    // Only each new worker's scratch lease was added: no lane region after the first.
    expect(filter.memory.buffer.byteLength - size).toBeLessThanOrEqual(4 * SCRATCH_PAGES * 65536);
  });
});
