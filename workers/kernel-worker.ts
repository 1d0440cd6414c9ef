// Piscina worker: runs hash and Bloom batches over keys the main thread already encoded into a
// shared lane. The WASM Module is compiled once per worker (src/hash caches it); the Bloom filter
// bits are the very memory the main thread and every other worker use.
import { workerData } from 'node:worker_threads';
import { hashBatch, bucketsOf, digestSize } from '../src/hash/index.js';
import { BloomFilter } from '../src/bloom/index.js';
import { addFlagsChecked } from '../src/bloom/bloom-filter.js';
import { checkKeys } from '../src/hash/keys.js';
import { laneViews, type LaneViews } from '../src/pool/lanes.js';
import type { KernelTask, KernelWorkerData } from '../src/pool/messages.js';

const data = workerData as KernelWorkerData;
const views: LaneViews[] = data.lanes.map((sab) => laneViews(sab, data.layout));
const bloom = data.bloom === undefined ? undefined : BloomFilter.fromShared(data.bloom);

function packed(lane: number, count: number) {
  const v = views[lane]!;
  v.packed.count = count;
  return v;
}

export default function run(task: KernelTask): number {
  switch (task.op) {
    case 'hash': {
      const v = packed(task.lane, task.count);
      hashBatch(v.packed, { algorithm: task.algorithm, seed: task.seed, out: v.out.subarray(0, task.count * digestSize(task.algorithm)) });
      return task.count;
    }
    case 'buckets': {
      const v = packed(task.lane, task.count);
      bucketsOf(v.packed, task.buckets, new Uint32Array(v.out.buffer, v.out.byteOffset, task.count));
      return task.count;
    }
    case 'bloomAdd': {
      if (bloom === undefined) throw new Error('no Bloom filter configured');
      return bloom.addAll(packed(task.lane, task.count).packed);
    }
    case 'bloomAddFlags': {
      if (bloom === undefined) throw new Error('no Bloom filter configured');
      const v = packed(task.lane, task.count);
      return addFlagsChecked(bloom, checkKeys(v.packed), v.out.subarray(0, task.count));
    }
    case 'bloomCheck': {
      if (bloom === undefined) throw new Error('no Bloom filter configured');
      const v = packed(task.lane, task.count);
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
