// Shared transfer lanes between the main thread and the workers. Keys are encoded once, on the
// main thread, straight into a SharedArrayBuffer every worker already holds (handed over in
// workerData at start-up), so a task message is a few integers: no structured clone of strings,
// no per-task buffer transfer. The number of lanes bounds memory and in-flight work.
//
// Lane layout (one SharedArrayBuffer per lane):
//   [0, offsetsBytes)             count+1 little-endian u32 key offsets (relative to bytes)
//   [offsetsBytes, +outBytes)     results: up to 16 bytes per key
//   [.., +bytesCap)               key bytes
import { badKey, type Keys } from '../hash/keys.js';
import type { PackedKeys } from '../hash/index.js';

export interface LaneLayout {
  chunkKeys: number;
  bytesCap: number;
}

export interface LaneViews {
  offsets: Uint32Array;
  out: Uint8Array;
  bytes: Uint8Array;
  packed: PackedKeys;
}

/** Views over one lane; workers build the same views from the same layout. */
export function laneViews(sab: SharedArrayBuffer, layout: LaneLayout): LaneViews {
  const offsetsBytes = align64((layout.chunkKeys + 1) * 4);
  const outBytes = layout.chunkKeys * 16;
  const offsets = new Uint32Array(sab, 0, layout.chunkKeys + 1);
  const out = new Uint8Array(sab, offsetsBytes, outBytes);
  const bytes = new Uint8Array(sab, offsetsBytes + outBytes, layout.bytesCap);
  return { offsets, out, bytes, packed: { bytes, offsets, count: 0 } };
}

export const laneByteLength = (layout: LaneLayout): number =>
  align64((layout.chunkKeys + 1) * 4) + layout.chunkKeys * 16 + layout.bytesCap;

function align64(n: number): number {
  return (n + 63) & ~63;
}

type Utf8Buffer = Buffer & { utf8Write(s: string, offset: number, length?: number): number };

interface Lane {
  index: number;
  views: LaneViews;
  buf: Utf8Buffer;
}

/**
 * A fixed set of lanes with a FIFO of waiters: callers that find every lane busy wait their turn
 * (back-pressure), so memory stays at `lanes * laneByteLength` whatever the offered load.
 */
export class LanePool {
  readonly buffers: SharedArrayBuffer[];
  private readonly free: Lane[] = [];
  private readonly waiters: Array<(lane: Lane) => void> = [];

  constructor(
    readonly layout: LaneLayout,
    count: number,
  ) {
    this.buffers = [];
    for (let i = 0; i < count; i++) {
      const sab = new SharedArrayBuffer(laneByteLength(layout));
      this.buffers.push(sab);
      const views = laneViews(sab, layout);
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

  release(lane: Lane): void {
    const next = this.waiters.shift();
    if (next !== undefined) next(lane);
    else this.free.push(lane);
  }
}

export type { Lane };

/**
 * Encodes keys[from..) into the lane until it is full (chunkKeys keys or bytesCap bytes).
 * Returns the index after the last key written. A single key larger than the lane returns
 * `from` unchanged so the caller can take the inline path for it.
 */
export function fillLane(lane: Lane, keys: Keys, from: number, total: number): number {
  const { offsets, bytes } = lane.views;
  const cap = bytes.length;
  const max = Math.min(total, from + lane.views.offsets.length - 1);
  let p = 0;
  let i = from;
  offsets[0] = 0;
  if (Array.isArray(keys)) {
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
