// Shared input/output slots between the main thread and the workers. Keys are encoded once, on
// the main thread, straight into a SharedArrayBuffer every worker already holds (handed over in
// workerData at start-up), so a task message is a few integers: no structured clone of strings,
// no per-task buffer transfer. The number of slots bounds memory and in-flight work.
//
// Slot layout (one SharedArrayBuffer per slot):
//   [0, offsetsBytes)             count+1 little-endian u32 key offsets (relative to bytes)
//   [offsetsBytes, +outBytes)     results: up to 16 bytes per key
//   [.., +bytesCap)               key bytes
import { badKey } from '../hash/keys.js';
import type { PackedKeys } from '../hash/index.js';

export interface SlotLayout {
  chunkKeys: number;
  bytesCap: number;
}

export interface SlotViews {
  offsets: Uint32Array;
  out: Uint8Array;
  bytes: Uint8Array;
  packed: PackedKeys;
}

/** Views over one slot; workers build the same views from the same layout. */
export function slotViews(sab: SharedArrayBuffer, layout: SlotLayout): SlotViews {
  const offsetsBytes = align64((layout.chunkKeys + 1) * 4);
  const outBytes = layout.chunkKeys * 16;
  const offsets = new Uint32Array(sab, 0, layout.chunkKeys + 1);
  const out = new Uint8Array(sab, offsetsBytes, outBytes);
  const bytes = new Uint8Array(sab, offsetsBytes + outBytes, layout.bytesCap);
  return { offsets, out, bytes, packed: { bytes, offsets, count: 0 } };
}

export const slotByteLength = (layout: SlotLayout): number =>
  align64((layout.chunkKeys + 1) * 4) + layout.chunkKeys * 16 + layout.bytesCap;

function align64(n: number): number {
  return (n + 63) & ~63;
}

type Utf8Buffer = Buffer & { utf8Write(s: string, offset: number, length?: number): number };

export type KeyInput = ReadonlyArray<string | Uint8Array> | PackedKeys;

interface Slot {
  index: number;
  views: SlotViews;
  buf: Utf8Buffer;
}

/**
 * A fixed set of slots with a FIFO of waiters: callers that find every slot busy wait their turn
 * (back-pressure), so memory stays at `slots * slotByteLength` whatever the offered load.
 */
export class SlotPool {
  readonly buffers: SharedArrayBuffer[];
  private readonly free: Slot[] = [];
  private readonly waiters: Array<(s: Slot) => void> = [];

  constructor(
    readonly layout: SlotLayout,
    count: number,
  ) {
    this.buffers = [];
    for (let i = 0; i < count; i++) {
      const sab = new SharedArrayBuffer(slotByteLength(layout));
      this.buffers.push(sab);
      const views = slotViews(sab, layout);
      this.free.push({ index: i, views, buf: Buffer.from(views.bytes.buffer, views.bytes.byteOffset, views.bytes.byteLength) as Utf8Buffer });
    }
  }

  get waiting(): number {
    return this.waiters.length;
  }

  get available(): number {
    return this.free.length;
  }

  acquire(): Promise<Slot> | Slot {
    const s = this.free.pop();
    if (s !== undefined) return s;
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  release(slot: Slot): void {
    const next = this.waiters.shift();
    if (next !== undefined) next(slot);
    else this.free.push(slot);
  }
}

export type { Slot };

/**
 * Encodes keys[from..) into the slot until it is full (chunkKeys keys or bytesCap bytes).
 * Returns the index after the last key written. A single key larger than the slot returns
 * `from` unchanged so the caller can take the inline path for it.
 */
export function fillSlot(slot: Slot, keys: KeyInput, from: number, total: number): number {
  const { offsets, bytes } = slot.views;
  const cap = bytes.length;
  const max = Math.min(total, from + slot.views.offsets.length - 1);
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
        p += slot.buf.utf8Write(k, p);
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
  slot.views.packed.count = i - from;
  return i;
}
