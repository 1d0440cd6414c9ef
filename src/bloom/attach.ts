// Per-thread attachment to a filter's shared memory: the wasm instance and a private scratch
// region for staging keys. Every postMessage of a descriptor yields a NEW WebAssembly.Memory
// object over the same backing store, so identity cannot be the cache key; a random id in the
// memory's header is. Scratch regions are claimed in a lease table in that header, keyed by
// threadId: a thread that re-attaches (any number of times) gets its own region back instead
// of growing the memory again.
//
// Header layout at KERNEL_RESERVED_BYTES (Int32, little-endian):
//   [0] magic 'HGBL'  [1] layout version  [2..3] random id
//   [16 .. 16+LEASES)        holder of lease i: threadId + 1, or 0 if free
//   [16+LEASES .. 16+2*LEASES) first page of lease i's scratch region, 0 until grown
import { threadId } from 'node:worker_threads';
import { randomInt } from 'node:crypto';
import { ErrorCodes, HashGateError } from '../errors.js';
import { UTF16_TMP_BYTES, kernelFor, type BloomKernel } from './kernel.js';
import { KERNEL_RESERVED_BYTES } from '../hash/kernel.js';

const PAGE = 65536;
const MAGIC = 0x4c424748; // 'HGBL'
/** Scratch leases per filter memory: at most this many threads attach at once. */
export const LEASES = 256;
const OWNER = 16;
const REGION = OWNER + LEASES;
export const SCRATCH_PAGES = 6;
export const BATCH_KEYS = 4096;
/** Attachments cached per thread; evicted ones just re-find their lease. */
const CACHE_SIZE = 8;


export interface Scratch {
  u8: Uint8Array;
  /** Same bytes as a Buffer, for the native UTF-8 and UTF-16 writers. */
  buf: Buffer;
  /** The same memory as u16 code units (keysPtr is even: UTF-16 keys start at keysPtr >>> 1). */
  u16: Uint16Array;
  offsetsPtr: number;
  offsets: Uint32Array;
  outPtr: number;
  keysPtr: number;
  keysCap: number;
  /** This thread's UTF16_TMP_BYTES for the kernel's UTF-16 exports, right after the keys region. */
  tmp16Ptr: number;
}

export interface Attachment {
  id: string;
  memory: WebAssembly.Memory;
  kernel: BloomKernel | null;
  /** Index of this thread's scratch lease in the memory's header. */
  lease: number;
  scratch: Scratch;
}

const cache = new Map<string, Attachment>();

function header(memory: WebAssembly.Memory): Int32Array {
  return new Int32Array(memory.buffer, KERNEL_RESERVED_BYTES, 16 + 2 * LEASES);
}

/** Stamps a fresh memory with magic and a random id (creator thread only, before sharing). */
export function initHeader(memory: WebAssembly.Memory): string {
  const h = header(memory);
  h[0] = MAGIC;
  h[1] = 1;
  h[2] = randomInt(0x7fffffff);
  h[3] = randomInt(0x7fffffff);
  return `${h[2]!.toString(36)}-${h[3]!.toString(36)}`;
}

export function memoryId(memory: WebAssembly.Memory): string | undefined {
  const h = header(memory);
  if (Atomics.load(h, 0) !== MAGIC || Atomics.load(h, 1) !== 1) return undefined;
  return `${h[2]!.toString(36)}-${h[3]!.toString(36)}`;
}

export function attach(memory: WebAssembly.Memory, useKernel: boolean): Attachment {
  const id = memoryId(memory);
  if (id === undefined) {
    throw new HashGateError(ErrorCodes.INVALID_ARG, 'bloom: memory does not hold a hashgate Bloom filter header');
  }
  const key = `${id}/${useKernel ? 'w' : 'j'}`;
  const hit = cache.get(key);
  if (hit !== undefined) {
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  // Before taking a lease: a kernel that cannot load (HG_ERR_WASM) must not hold one.
  const kernel = useKernel ? kernelFor(memory) : null;
  const h = header(memory);
  const me = threadId + 1;
  let lease = -1;
  for (let i = 0; i < LEASES && lease < 0; i++) if (Atomics.load(h, OWNER + i) === me) lease = i;
  for (let i = 0; i < LEASES && lease < 0; i++) if (Atomics.compareExchange(h, OWNER + i, 0, me) === 0) lease = i;
  if (lease < 0) {
    throw new HashGateError(ErrorCodes.CAPACITY, `bloom: all ${LEASES} scratch leases of this filter are taken`, { details: { leases: LEASES } });
  }
  let page = Atomics.load(h, REGION + lease);
  if (page === 0) {
    try {
      page = memory.grow(SCRATCH_PAGES);
    } catch (cause) {
      Atomics.store(h, OWNER + lease, 0);
      throw new HashGateError(ErrorCodes.CAPACITY, 'bloom: no room left in the shared memory for another thread scratch region', { cause });
    }
    Atomics.store(h, REGION + lease, page);
  }
  const base = page * PAGE;
  const offsetsPtr = base;
  const outPtr = offsetsPtr + (BATCH_KEYS + 1) * 4;
  const keysPtr = outPtr + BATCH_KEYS;
  const a: Attachment = {
    id,
    memory,
    kernel,
    lease,
    scratch: {
      u8: new Uint8Array(memory.buffer),
      buf: Buffer.from(memory.buffer as ArrayBuffer),
      u16: new Uint16Array(memory.buffer, 0, memory.buffer.byteLength >>> 1),
      offsetsPtr,
      offsets: new Uint32Array(memory.buffer, offsetsPtr, BATCH_KEYS + 1),
      outPtr,
      keysPtr,
      keysCap: base + SCRATCH_PAGES * PAGE - UTF16_TMP_BYTES - keysPtr,
      tmp16Ptr: base + SCRATCH_PAGES * PAGE - UTF16_TMP_BYTES,
    },
  };
  cache.set(key, a);
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value as string);
  return a;
}

/** Gives this thread's lease back (its region is kept for the next thread that claims it). */
export function detach(memory: WebAssembly.Memory): void {
  const id = memoryId(memory);
  if (id === undefined) return;
  cache.delete(`${id}/w`);
  cache.delete(`${id}/j`);
  const h = header(memory);
  const me = threadId + 1;
  for (let i = 0; i < LEASES; i++) Atomics.compareExchange(h, OWNER + i, me, 0);
}
