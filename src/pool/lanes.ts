// Shared transfer lanes between the main thread and the workers. Each lane is a region of a shared
// WebAssembly.Memory laid out for the hash kernel: the main thread encodes keys once, straight into
// it, and a worker runs the kernel on an instance of the same Module over that very memory, so keys
// are never copied again and results land where the main thread reads them. Every worker holds
// every lane (handed over in workerData at start-up), so a task message is a few integers: no
// structured clone of strings, no per-task buffer transfer. The number of lanes bounds memory and
// in-flight work.
//
// Where the lanes live: in the gate's Bloom filter memory when there is one (a region grown for
// them after the bits), so a worker probes the bits straight from the lane with the filter's own
// kernel instance; without one, or when the filter memory has no room, one memory per lane.
//
// Lane layout (from the lane's base: KERNEL_RESERVED_BYTES in a memory of its own, where the
// kernel owns [0, KERNEL_RESERVED_BYTES); a 64 KiB page boundary in a filter memory):
//   offPtr     count+1 little-endian u32 key offsets (relative to bytesPtr)
//   outPtr     results: up to 16 bytes per key
//   bytesPtr   key bytes, bytesCap of them
import { NATIVE_UTF16_FROM, badKey, type Keys } from '../hash/keys.js';
import type { PackedKeys } from '../hash/index.js';
import { KERNEL_RESERVED_BYTES, WASM_PAGE, createKernelMemory } from '../hash/kernel.js';
import { SCRATCH_HEADROOM_BYTES } from '../bloom/sizing.js';

export interface LaneLayout {
  chunkKeys: number;
  bytesCap: number;
}

/**
 * A lane holds up to this many times chunkKeys keys: a large batch goes in fewer, larger tasks
 * (see KernelPool.run). Each task costs a round trip with a thread wake-up on each side, measured
 * at ~0.1 ms of CPU per task on a loaded 2-core box: a third of a pooled string check's cost at
 * 8192 keys per task.
 */
export const LANE_CHUNKS = 4;

/** Keys one lane holds. */
export const laneKeys = (layout: LaneLayout): number => layout.chunkKeys * LANE_CHUNKS;

/** Byte offsets of a lane's regions in its memory: the pointers the kernel exports take. */
export interface LanePointers {
  offPtr: number;
  outPtr: number;
  bytesPtr: number;
}

export interface LaneViews extends LanePointers {
  offsets: Uint32Array;
  out: Uint8Array;
  bytes: Uint8Array;
  packed: PackedKeys;
  /** The bytes region as code units: string keys of a UTF-16 chunk (offsets then count units). */
  units: Uint16Array;
}

export function lanePointers(layout: LaneLayout, base = KERNEL_RESERVED_BYTES): LanePointers {
  const offPtr = base;
  const outPtr = offPtr + align64((laneKeys(layout) + 1) * 4);
  const bytesPtr = outPtr + laneKeys(layout) * 16;
  return { offPtr, outPtr, bytesPtr };
}

/** Views over the lane at `base` of `memory`; workers build the same views from the same layout. */
export function laneViews(memory: WebAssembly.Memory, layout: LaneLayout, base = KERNEL_RESERVED_BYTES): LaneViews {
  const p = lanePointers(layout, base);
  const ab = memory.buffer;
  const offsets = new Uint32Array(ab, p.offPtr, laneKeys(layout) + 1);
  const out = new Uint8Array(ab, p.outPtr, laneKeys(layout) * 16);
  const bytes = new Uint8Array(ab, p.bytesPtr, layout.bytesCap);
  const units = new Uint16Array(ab, p.bytesPtr, layout.bytesCap >>> 1);
  return { ...p, offsets, out, bytes, packed: { bytes, offsets, count: 0 }, units };
}

/** Bytes one lane spans from its base. */
export const laneSpan = (layout: LaneLayout): number => lanePointers(layout, 0).bytesPtr + layout.bytesCap;

export const laneByteLength = (layout: LaneLayout): number => KERNEL_RESERVED_BYTES + laneSpan(layout);

/** A lane's own memory: fixed size (initial = maximum pages), so views over it never go stale. */
export function createLaneMemory(layout: LaneLayout): WebAssembly.Memory {
  const pages = Math.ceil(laneByteLength(layout) / WASM_PAGE);
  return createKernelMemory(pages, pages);
}

/** A Bloom filter memory the lanes may go in: its own data ends at byte `end` (after the bits). */
export interface LaneHost {
  memory: WebAssembly.Memory;
  end: number;
}

/**
 * The most of a filter memory's room past its bits that lanes and scratch regions may take before
 * lanes stop going there: half of what the filter keeps for threads' scratch regions (sizing.ts),
 * so threads attaching later still find theirs, however many gates opened on the same filter.
 */
export const HOSTED_LANES_MAX_BYTES = SCRATCH_HEADROOM_BYTES / 2;

/** Lane regions of closed pools, per host memory, for the next pool on the same filter. */
const spare = new WeakMap<WebAssembly.Memory, Array<{ at: number; bytes: number }>>();

/**
 * Room for `count` lanes in the host memory: a closed pool's region when one is large enough,
 * else grown, unless that would take the room in use past the bits over HOSTED_LANES_MAX_BYTES
 * or the memory cannot grow. Returns the lanes' bases (page-aligned) and the region, or undefined.
 */
function hostLanes(host: LaneHost, layout: LaneLayout, count: number): { bases: number[]; region: { at: number; bytes: number } } | undefined {
  const stride = Math.ceil(laneSpan(layout) / WASM_PAGE) * WASM_PAGE;
  const bytes = stride * count;
  const list = spare.get(host.memory);
  let region = list?.find((r) => r.bytes >= bytes);
  if (region !== undefined) list!.splice(list!.indexOf(region), 1);
  else {
    if (host.memory.buffer.byteLength - host.end + bytes > HOSTED_LANES_MAX_BYTES) return undefined;
    try {
      region = { at: host.memory.grow(bytes / WASM_PAGE) * WASM_PAGE, bytes };
    } catch {
      return undefined;
    }
  }
  const at = region.at;
  return { bases: Array.from({ length: count }, (_, i) => at + i * stride), region };
}

function align64(n: number): number {
  return (n + 63) & ~63;
}

type Utf8Buffer = Buffer & { utf8Write(s: string, offset: number, length?: number): number };

interface Lane {
  index: number;
  views: LaneViews;
  /** The bytes region as a Buffer (byte 2i is code unit i of views.units, as putUnits needs). */
  buf: Utf8Buffer;
}

/**
 * A fixed set of lanes with a FIFO of waiters: callers that find every lane busy wait their turn
 * (back-pressure), so memory stays at `lanes * laneByteLength` whatever the offered load.
 */
export class LanePool {
  /** Lane i is the region at bases[i] of memories[i] (every entry the same memory when hosted). */
  readonly memories: WebAssembly.Memory[];
  readonly bases: number[];
  /** True when the lanes live in the host memory passed in. */
  readonly hosted: boolean;
  private readonly free: Lane[] = [];
  private readonly waiters: Array<(lane: Lane) => void> = [];
  private region: { memory: WebAssembly.Memory; at: number; bytes: number } | undefined;

  /** `host`: a Bloom filter memory to grow room for the lanes in (see hostLanes). */
  constructor(
    readonly layout: LaneLayout,
    count: number,
    host?: LaneHost,
  ) {
    const hosted = host === undefined ? undefined : hostLanes(host, layout, count);
    this.hosted = hosted !== undefined;
    if (hosted !== undefined) this.region = { memory: host!.memory, ...hosted.region };
    this.memories = [];
    this.bases = [];
    for (let i = 0; i < count; i++) {
      const memory = hosted === undefined ? createLaneMemory(layout) : host!.memory;
      const base = hosted === undefined ? KERNEL_RESERVED_BYTES : hosted.bases[i]!;
      this.memories.push(memory);
      this.bases.push(base);
      const views = laneViews(memory, layout, base);
      this.free.push({ index: i, views, buf: Buffer.from(views.bytes.buffer, views.bytes.byteOffset, views.bytes.byteLength) as Utf8Buffer });
    }
  }

  get waiting(): number {
    return this.waiters.length;
  }

  get available(): number {
    return this.free.length;
  }

  acquire(): Promise<Lane> | Lane {
    const lane = this.free.pop();
    if (lane !== undefined) return lane;
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** A free lane, or undefined when every lane is busy or promised to a waiter. */
  tryAcquire(): Lane | undefined {
    return this.waiters.length === 0 ? this.free.pop() : undefined;
  }

  /**
   * Hands a hosted region back for the next pool on the same filter. Only once no worker can touch
   * the lanes any more (the pool's workers are gone); the lanes must not be used afterwards.
   */
  close(): void {
    const r = this.region;
    if (r === undefined) return;
    this.region = undefined;
    let list = spare.get(r.memory);
    if (list === undefined) spare.set(r.memory, (list = []));
    list.push({ at: r.at, bytes: r.bytes });
  }

  release(lane: Lane): void {
    const next = this.waiters.shift();
    if (next !== undefined) next(lane);
    else this.free.push(lane);
  }
}

export type { Lane };

/**
 * Encodes keys[from..) into the lane until it is full (`most` keys, at most laneKeys, or bytesCap
 * bytes). Returns the index after the last key written. A single key larger than the lane returns
 * `from` unchanged so the caller can take the inline path for it. With `utf16` (an array of
 * strings only, for a worker op that reads code units) the lane gets each string's UTF-16 code
 * units and offsets in code units: a copy, where UTF-8 would cost a native call per CJK key on
 * this (the calling) thread; the worker's kernel transcodes while it hashes.
 */
export function fillLane(lane: Lane, keys: Keys, from: number, total: number, utf16 = false, most = lane.views.offsets.length - 1): number {
  const { offsets, bytes } = lane.views;
  const cap = bytes.length;
  const max = Math.min(total, from + Math.min(most, lane.views.offsets.length - 1));
  let p = 0;
  let i = from;
  offsets[0] = 0;
  if (utf16) {
    const list = keys as ReadonlyArray<string>;
    const units = lane.views.units;
    const capUnits = units.length;
    const buf = lane.buf as Utf8Buffer & { ucs2Write(s: string, offset: number): number };
    for (; i < max; i++) {
      const k = list[i]!;
      const len = k.length;
      if (p + len > capUnits) break;
      // putUnits, inlined: this loop is the calling thread's share of a pooled string batch.
      if (len > NATIVE_UTF16_FROM) p += buf.ucs2Write(k, p << 1) >>> 1;
      else {
        let j = 0;
        for (; j + 4 <= len; j += 4, p += 4) {
          units[p] = k.charCodeAt(j);
          units[p + 1] = k.charCodeAt(j + 1);
          units[p + 2] = k.charCodeAt(j + 2);
          units[p + 3] = k.charCodeAt(j + 3);
        }
        for (; j < len; j++) units[p++] = k.charCodeAt(j);
      }
      offsets[i - from + 1] = p;
    }
  } else if (Array.isArray(keys)) {
    const list = keys as ReadonlyArray<string | Uint8Array>;
    for (; i < max; i++) {
      const k = list[i];
      if (typeof k === 'string') {
        // 3 bytes per UTF-16 unit is the worst case; only measure exactly near the end.
        if (p + k.length * 3 > cap && p + Buffer.byteLength(k) > cap) break;
        p += lane.buf.utf8Write(k, p);
      } else if (k instanceof Uint8Array) {
        if (p + k.length > cap) break;
        bytes.set(k, p);
        p += k.length;
      } else {
        throw badKey('keys', i, k);
      }
      offsets[i - from + 1] = p;
    }
  } else {
    const pk = keys as PackedKeys;
    const base = pk.offsets[from]!;
    for (; i < max; i++) {
      const end = pk.offsets[i + 1]! - base;
      if (end > cap) break;
      offsets[i - from + 1] = end;
    }
    const endByte = pk.offsets[i]!;
    bytes.set(pk.bytes.subarray(base, endByte), 0);
  }
  lane.views.packed.count = i - from;
  return i;
}
