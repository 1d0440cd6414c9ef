// Piscina worker: runs hash and Bloom batches over keys the main thread already encoded into a
// shared slot. The WASM Module is compiled once per worker (src/hash caches it); the Bloom filter
// bits are the very memory the main thread and every other worker use.
import { workerData } from 'node:worker_threads';
import { hashBatch, bucketsOf, type HashAlgorithm } from '../src/hash/index.js';
import { BloomFilter, type BloomSharedDescriptor } from '../src/bloom/index.js';
import { slotViews, type SlotLayout, type SlotViews } from '../src/pool/slots.js';

export interface KernelWorkerData {
  slots: SharedArrayBuffer[];
  layout: SlotLayout;
  bloom?: BloomSharedDescriptor;
  /** Lets tests make a worker throw or die on purpose; never set in production. */
  testHooks?: boolean;
}

export type KernelTask =
  | { op: 'hash'; slot: number; count: number; algorithm: HashAlgorithm; seed: number }
  | { op: 'buckets'; slot: number; count: number; buckets: number }
  | { op: 'bloomAdd'; slot: number; count: number }
  | { op: 'bloomCheck'; slot: number; count: number }
  | { op: 'throw' | 'exit' };

const data = workerData as KernelWorkerData;
const views: SlotViews[] = data.slots.map((sab) => slotViews(sab, data.layout));
const bloom = data.bloom === undefined ? undefined : BloomFilter.fromShared(data.bloom);

function packed(slot: number, count: number) {
  const v = views[slot]!;
  v.packed.count = count;
  return v;
}

export default function run(task: KernelTask): number {
  switch (task.op) {
    case 'hash': {
      const v = packed(task.slot, task.count);
      const size = task.algorithm === 'murmur3_128' ? 16 : task.algorithm === 'xxh64' ? 8 : 4;
      hashBatch(v.packed, { algorithm: task.algorithm, seed: task.seed, out: v.out.subarray(0, task.count * size) });
      return task.count;
    }
    case 'buckets': {
      const v = packed(task.slot, task.count);
      bucketsOf(v.packed, task.buckets, new Uint32Array(v.out.buffer, v.out.byteOffset, task.count));
      return task.count;
    }
    case 'bloomAdd': {
      if (bloom === undefined) throw new Error('no Bloom filter configured');
      return bloom.addAll(packed(task.slot, task.count).packed);
    }
    case 'bloomCheck': {
      if (bloom === undefined) throw new Error('no Bloom filter configured');
      const v = packed(task.slot, task.count);
      bloom.mightContainAll(v.packed, v.out.subarray(0, task.count));
      return task.count;
    }
    case 'throw':
      if (data.testHooks === true) throw new Error('worker test hook: throw');
      break;
    case 'exit':
      if (data.testHooks === true) process.exit(3);
      break;
  }
  throw new Error(`unknown task op ${(task as { op: string }).op}`);
}
