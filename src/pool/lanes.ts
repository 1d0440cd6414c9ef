// Shared transfer lanes between the main thread and the workers. Each lane is a shared
// WebAssembly.Memory laid out for the hash kernel: the main thread encodes keys once, straight into
// it, and a worker runs the kernel on an instance of the same Module over that very memory, so keys
// are never copied again and results land where the main thread reads them. Every worker holds
// every lane (handed over in workerData at start-up), so a task message is a few integers: no
// structured clone of strings, no per-task buffer transfer. The number of lanes bounds memory and
// in-flight work.
//
// Lane layout (one fixed-size shared memory per lane; the kernel owns [0, KERNEL_RESERVED_BYTES)):
//   offPtr     count+1 little-endian u32 key offsets (relative to bytesPtr)
//   outPtr     results: up to 16 bytes per key
//   bytesPtr   key bytes, bytesCap of them
import { NATIVE_UTF16_FROM, badKey, type Keys } from '../hash/keys.js';
import type { PackedKeys } from '../hash/index.js';
import { KERNEL_RESERVED_BYTES, WASM_PAGE, createKernelMemory } from '../hash/kernel.js';

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

export function lanePointers(layout: LaneLayout): LanePointers {
  const offPtr = KERNEL_RESERVED_BYTES;
  const outPtr = offPtr + align64((laneKeys(layout) + 1) * 4);
  const bytesPtr = outPtr + laneKeys(layout) * 16;
  return { offPtr, outPtr, bytesPtr };
}

/** Views over one lane's memory; workers build the same views from the same layout. */
export function laneViews(memory: WebAssembly.Memory, layout: LaneLayout): LaneViews {
  const p = lanePointers(layout);
  const ab = memory.buffer;
  const offsets = new Uint32Array(ab, p.offPtr, laneKeys(layout) + 1);
  const out = new Uint8Array(ab, p.outPtr, laneKeys(layout) * 16);
  const bytes = new Uint8Array(ab, p.bytesPtr, layout.bytesCap);
  const units = new Uint16Array(ab, p.bytesPtr, layout.bytesCap >>> 1);
  return { ...p, offsets, out, bytes, packed: { bytes, offsets, count: 0 }, units };
}

export const laneByteLength = (layout: LaneLayout): number => lanePointers(layout).bytesPtr + layout.bytesCap;

/** A lane's memory: fixed size (initial = maximum pages), so views over it never go stale. */
export function createLaneMemory(layout: LaneLayout): WebAssembly.Memory {
  const pages = Math.ceil(laneByteLength(layout) / WASM_PAGE);
  return createKernelMemory(pages, pages);
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
  readonly memories: WebAssembly.Memory[];
  private readonly free: Lane[] = [];
  private readonly waiters: Array<(lane: Lane) => void> = [];

  constructor(
    readonly layout: LaneLayout,
    count: number,
  ) {
    this.memories = [];
    for (let i = 0; i < count; i++) {
      const memory = createLaneMemory(layout);
      this.memories.push(memory);
      const views = laneViews(memory, layout);
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
