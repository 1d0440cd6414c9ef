// Several threads add into ONE filter through BloomFilter.fromShared: no bit may be lost.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import fc from 'fast-check';
import { Worker } from 'node:worker_threads';
import { existsSync, statSync, readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BloomFilter, type BloomSharedDescriptor } from '../src/bloom/index.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const WORKER = join(ROOT, 'test/bloom-worker.mjs');

/** Workers run built JS: rebuild dist/ when src/bloom is newer (tsc emits even if others' files have errors). */
function ensureBuilt(): void {
  const out = join(ROOT, 'dist/src/bloom/index.js');
  const srcDir = join(ROOT, 'src/bloom');
  const newest = Math.max(...readdirSync(srcDir).map((f) => statSync(join(srcDir, f)).mtimeMs));
  if (existsSync(out) && statSync(out).mtimeMs >= newest) return;
  spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', ROOT], { stdio: 'ignore' });
  if (!existsSync(out)) throw new Error('dist/src/bloom/index.js missing after tsc: workers cannot start');
}

let workers: Worker[] = [];

function task(w: Worker, descriptor: BloomSharedDescriptor, keys: Array<string | Uint8Array>) {
  return new Promise<{ changed: number; engine: string }>((res, rej) => {
    const onMsg = (m: { ok: boolean; changed: number; engine: string; error?: string }) => {
      w.off('error', rej);
      if (m.ok) res(m);
      else rej(new Error(m.error));
    };
    w.once('message', onMsg);
    w.once('error', rej);
    w.postMessage({ descriptor, keys });
  });
}

beforeAll(() => {
  ensureBuilt();
  workers = [0, 1, 2].map(() => new Worker(WORKER));
}, 120_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.terminate()));
});

describe('concurrent adds into one shared filter', () => {
  it('3 workers x 60k keys (overlapping ranges): bits equal a single-threaded build, every key found', async () => {
    const f = BloomFilter.create({ expectedItems: 150_000, fpp: 0.01 });
    const d = f.toShared();
    const keys = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `user:${from + i}:张`);
    const ranges: Array<[number, number]> = [[0, 60_000], [40_000, 100_000], [80_000, 140_000]];
    const results = await Promise.all(ranges.map(([a, b], i) => task(workers[i]!, d, keys(a, b))));
    expect(results.every((r) => r.engine === 'wasm')).toBe(true);
    const all = keys(0, 140_000);
    expect(f.mightContainAll(all).every((v) => v === 1)).toBe(true);
    const ref = BloomFilter.create({ expectedItems: 150_000, fpp: 0.01 });
    ref.addAll(all);
    expect(Buffer.from(f.bitsView()).equals(Buffer.from(ref.bitsView()))).toBe(true);
    // The shared O(1) bit counter stayed exact although 3 threads raced on the same words.
    expect(f.bitCount()).toBe(f.countBits());
    expect(f.bitCount()).toBe(ref.bitCount());
    // Overlaps are real: the three reported change counts exceed what the union needed.
    const sum = results.reduce((a, r) => a + r.changed, 0);
    expect(sum).toBeGreaterThanOrEqual(ref.approximateElementCount() * 0.9);
    // Re-sending the descriptor many times reuses each worker's scratch lease: no growth.
    const before = f.memory.buffer.byteLength;
    for (let r = 0; r < 20; r++) await Promise.all(workers.map((w) => task(w, d, ['again'])));
    expect(f.memory.buffer.byteLength).toBe(before);
    // 1 main + 3 worker leases of scratch beyond the bits.
    expect(before).toBeLessThanOrEqual(Math.ceil((f.bitsOffset + f.byteLength) / 65536 + 4 * 6) * 65536);
    // A fresh attach in this thread sees the same bits.
    expect(BloomFilter.fromShared(d).mightContainAll(all).every((v) => v === 1)).toBe(true);
  }, 120_000);

  it('no false negatives under concurrent adds (fast-check)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.string({ maxLength: 24 }), fc.uint8Array({ maxLength: 40 })), { minLength: 1, maxLength: 3000 }),
        fc.constantFrom(0.1, 0.01, 0.001),
        async (keys, fpp) => {
          const f = BloomFilter.create({ expectedItems: Math.max(1, keys.length), fpp });
          const parts: Array<Array<string | Uint8Array>> = [[], [], []];
          keys.forEach((k, i) => parts[i % 3]!.push(k));
          await Promise.all(parts.map((p, i) => task(workers[i]!, f.toShared(), p)));
          expect(f.mightContainAll(keys).every((v) => v === 1)).toBe(true);
          const ref = BloomFilter.create({ expectedItems: Math.max(1, keys.length), fpp });
          ref.addAll(keys);
          expect(Buffer.from(f.bitsView()).equals(Buffer.from(ref.bitsView()))).toBe(true);
          expect(f.bitCount()).toBe(f.countBits());
        },
      ),
      { numRuns: 25 },
    );
  }, 120_000);
});
