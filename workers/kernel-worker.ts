// Piscina worker: runs hash and Bloom batches over keys the main thread already encoded into a
// shared lane. Each lane is a region of a kernel memory: hashing runs on an instance of the one
// compiled Module (src/hash caches it) over that memory, reading keys and writing results in
// place. The Bloom filter bits are the very memory the main thread and every other worker use;
// when the lanes live in it too, Bloom ops probe the bits straight from the lane.
import { threadId, workerData } from 'node:worker_threads';
import { instantiateKernel, type KernelExports } from '../src/hash/kernel.js';
import {
  BloomFilter,
  addFlagsChecked,
  addFlagsInMemory,
  addFlagsUnits,
  addInMemory,
  addUnits,
  containsInMemory,
  containsUnits,
  takesKeysIn,
  type KeysInMemory,
  type PackedUnits,
} from '../src/bloom/bloom-filter.js';
import { checkKeys } from '../src/hash/keys.js';
import { laneViews, type LaneViews } from '../src/pool/lanes.js';
import type { KernelTask, KernelWorkerData } from '../src/pool/messages.js';

const data = workerData as KernelWorkerData;
const views: LaneViews[] = data.lanes.map((memory, i) => laneViews(memory, data.layout, data.laneBases[i]));
// One instance per lane memory (lanes hosted in the filter memory share one), made on the first
// hash task: a worker that only runs Bloom ops pays nothing for it.
const kernels = new Map<WebAssembly.Memory, KernelExports>();
const bloom = data.bloom === undefined ? undefined : BloomFilter.fromShared(data.bloom);
// Per lane: its keys by address when the lane lives in the filter memory (the kernel then probes
// them in place), else undefined (Bloom ops copy the keys into this thread's scratch first).
const inMemory: Array<KeysInMemory | undefined> = views.map((v, i) =>
  bloom !== undefined && takesKeysIn(bloom, data.lanes[i]!) ? { bytes: v.bytesPtr, offsets: v.offPtr, count: 0, utf16: false, out: v.outPtr } : undefined,
);

function kernelOf(lane: number): KernelExports {
  const memory = data.lanes[lane]!;
  let k = kernels.get(memory);
  if (k === undefined) kernels.set(memory, (k = instantiateKernel(memory)));
  return k;
}

/** Lane `lane`'s keys by address for an in-place Bloom op, or undefined. */
function keysIn(lane: number, count: number, utf16: boolean | undefined): KeysInMemory | undefined {
  const k = inMemory[lane];
  if (k === undefined) return undefined;
  k.count = count;
  k.utf16 = utf16 === true;
  return k;
}

function packed(lane: number, count: number) {
  const v = views[lane]!;
  v.packed.count = count;
  return v;
}

// A lane's string keys as code units (tasks with utf16: true), one object per lane.
const unitViews: PackedUnits[] = views.map((v) => ({ units: v.units, offsets: v.offsets, count: 0 }));

function units(lane: number, count: number): PackedUnits {
  const u = unitViews[lane]!;
  u.count = count;
  return u;
}

export default function run(task: KernelTask): number {
  switch (task.op) {
    case 'hash': {
      const k = kernelOf(task.lane);
      const { bytesPtr: b, offPtr: o, outPtr: out } = views[task.lane]!;
      const n = task.count;
      // The seed is a uint32 (the gate checked it); XXH64's high seed half is 0, as hashBatch's.
      if (task.algorithm === 'murmur3_128') k.mm128Batch(b, o, n, task.seed, out);
      else if (task.algorithm === 'murmur3_32') k.mm32Batch(b, o, n, task.seed, out);
      else k.xxh64Batch(b, o, n, task.seed, 0, out);
      return n;
    }
    case 'buckets': {
      const { bytesPtr, offPtr, outPtr } = views[task.lane]!;
      kernelOf(task.lane).mm128BucketBatch(bytesPtr, offPtr, task.count, 0, task.buckets, outPtr);
      return task.count;
    }
    case 'bloomAdd': {
      if (bloom === undefined) throw new Error('no Bloom filter configured');
      const at = keysIn(task.lane, task.count, task.utf16);
      if (at !== undefined) return addInMemory(bloom, at);
      if (task.utf16 === true) return addUnits(bloom, units(task.lane, task.count));
      return bloom.addAll(packed(task.lane, task.count).packed);
    }
    case 'bloomAddFlags': {
      if (bloom === undefined) throw new Error('no Bloom filter configured');
      const v = packed(task.lane, task.count);
      const flags = v.out.subarray(0, task.count);
      const at = keysIn(task.lane, task.count, task.utf16);
      if (at !== undefined) {
        addFlagsInMemory(bloom, at);
        let changed = 0;
        for (let i = 0; i < flags.length; i++) changed += flags[i]!;
        return changed;
      }
      if (task.utf16 === true) return addFlagsUnits(bloom, units(task.lane, task.count), flags);
      return addFlagsChecked(bloom, checkKeys(v.packed), flags);
    }
    case 'bloomCheck': {
      if (bloom === undefined) throw new Error('no Bloom filter configured');
      const at = keysIn(task.lane, task.count, task.utf16);
      if (at !== undefined) {
        containsInMemory(bloom, at);
        return task.count;
      }
      const v = packed(task.lane, task.count);
      if (task.utf16 === true) containsUnits(bloom, units(task.lane, task.count), v.out.subarray(0, task.count));
      else bloom.mightContainAll(v.packed, v.out.subarray(0, task.count));
      return task.count;
    }
    case 'ready':
      return threadId;
    case 'throw':
      if (data.testHooks === true) throw new Error('worker test hook: throw');
      break;
    case 'exit':
      if (data.testHooks === true) process.exit(3);
      break;
  }
  throw new Error(`unknown task op ${(task as { op: string }).op}`);
}
