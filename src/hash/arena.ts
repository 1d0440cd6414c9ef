// One thread's working area in a kernel memory: where keys are encoded, offsets written and
// digests collected. Layout from `base` (default: right after the kernel's reserved page):
//
//   base            scratch   64 B   single-key digest
//   base + 64       offsets   (chunkKeys + 1) * 4 B, little-endian u32
//   ...             out       chunkKeys * 16 B
//   ...             bytes     the rest, up to `end` (or the memory's end, growing on demand)
//
// Batches are cut into chunks of at most chunkKeys keys whose bytes fit the bytes region; a key
// that alone does not fit grows the memory, up to maxBytes (typed-array views are rebuilt after
// every growth and whenever another thread has grown the shared memory); a key beyond maxBytes is
// hashed in a throw-away memory. Nothing is allocated per key.
import { ErrorCodes, HashGateError, checkInt, invalidType, outOfRange } from '../errors.js';
import { KERNEL_MAX_PAGES, KERNEL_RESERVED_BYTES, WASM_PAGE, createKernelMemory, instantiateKernel } from './kernel.js';
import type { KernelExports } from './kernel.js';
import type { PackedKeys } from './packed.js';
import { checkKeys, encodeUtf8, putUnits, type CheckedKeys, type Key, type Keys } from './keys.js';

export const ARENA_DEFAULTS = {
  chunkKeys: 8192,
  /** Initial pages of a memory the arena creates itself (4 MiB). */
  initialPages: 64,
  /**
   * The bytes region grows on demand up to this; a single key larger than that is hashed in a
   * throw-away memory instead, so one huge key never pins gigabytes of shared memory for good.
   */
  maxBytes: 64 * 1024 * 1024,
} as const;

/**
 * Which kernel batch routine to run (KIND_SIZE: output bytes per key). `param` is the bucket
 * count for Bucket/Jump; Xxh64 takes the seed's low 32 bits as `seed` and the high 32 as `param`.
 */
export const BatchKind = { Murmur128: 0, Murmur32: 1, Murmur86_128: 2, Bucket: 3, Jump: 4, Xxh64: 5 } as const;
export type BatchKind = (typeof BatchKind)[keyof typeof BatchKind];
const KIND_SIZE = [16, 4, 16, 4, 4, 8] as const;


interface Utf8Writer {
  // Node's Buffer fast path: encodes straight into the (shared) memory, no intermediate copy.
  utf8Write(s: string, offset: number, length?: number): number;
}

export interface HashArenaOptions {
  /** Shared kernel memory; default: a new one owned by this arena. */
  memory?: WebAssembly.Memory;
  /** First byte of this arena's region (>= 65536). */
  base?: number;
  /** End of this arena's region (exclusive): the arena never touches memory past it. */
  end?: number;
  chunkKeys?: number;
  /** Largest bytes region this arena grows to (default ARENA_DEFAULTS.maxBytes). */
  maxBytes?: number;
}

export class HashArena {
  readonly memory: WebAssembly.Memory;
  readonly kernel: KernelExports;
  readonly chunkKeys: number;
  readonly maxBytes: number;
  private readonly fixedEnd: number | undefined;
  private readonly scratch: number;
  private readonly offPtr: number;
  private readonly outPtr: number;
  private readonly bytesPtr: number;
  private bytesEnd = 0;
  private u8!: Uint8Array;
  private u32!: Uint32Array;
  private u16!: Uint16Array;
  private buf!: Buffer & Utf8Writer;
  /** Bytes of the kernel's UTF-16 scratch (its UTF16_TMP_BYTES), at the start of the bytes region for the *16 batches. */
  private readonly tmp16Bytes: number;

  constructor(options: HashArenaOptions = {}) {
    this.chunkKeys = checkInt('chunkKeys', options.chunkKeys ?? ARENA_DEFAULTS.chunkKeys, 1, 1 << 20);
    this.maxBytes = checkInt('maxBytes', options.maxBytes ?? ARENA_DEFAULTS.maxBytes, 1024);
    const base = checkInt('base', options.base ?? KERNEL_RESERVED_BYTES, KERNEL_RESERVED_BYTES, 0xffff_0000);
    if (base % 64 !== 0) throw outOfRange('base', 'a multiple of 64', base);
    this.memory = options.memory ?? createKernelMemory(ARENA_DEFAULTS.initialPages);
    if (!(this.memory.buffer instanceof SharedArrayBuffer)) throw invalidType('memory', 'a shared WebAssembly.Memory', this.memory);
    this.kernel = instantiateKernel(this.memory);
    this.tmp16Bytes = align64(Number((this.kernel.UTF16_TMP_BYTES as WebAssembly.Global).value));
    this.scratch = base;
    this.offPtr = base + 64;
    this.outPtr = this.offPtr + align64((this.chunkKeys + 1) * 4);
    this.bytesPtr = this.outPtr + this.chunkKeys * 16;
    this.fixedEnd = options.end === undefined ? undefined : checkInt('end', options.end, this.bytesPtr + 64, 2 ** 32);
    this.refresh();
    if (this.bytesEnd < this.bytesPtr + 64) this.growTo(this.bytesPtr + 64 * 1024);
    // a region fixed too small for the UTF-16 scratch and some keys hashes strings from UTF-8
    this.unitsFit = this.fixedEnd === undefined || this.fixedEnd - this.bytesPtr >= 2 * this.tmp16Bytes;
  }
  private readonly unitsFit: boolean;

  /** Rebuilds views if the memory grew (here or in another thread sharing it). */
  private refresh(): void {
    const ab = this.memory.buffer;
    if (this.u8 !== undefined && this.u8.byteLength === ab.byteLength) return;
    this.u8 = new Uint8Array(ab);
    this.u32 = new Uint32Array(ab);
    this.u16 = new Uint16Array(ab);
    this.buf = Buffer.from(ab) as Buffer & Utf8Writer;
    this.bytesEnd = Math.min(this.fixedEnd ?? ab.byteLength, ab.byteLength);
  }

  /** Makes the bytes region at least `need` bytes long. */
  private ensureBytes(need: number): void {
    if (this.bytesPtr + need <= this.bytesEnd) return;
    this.refresh();
    if (this.bytesPtr + need <= this.bytesEnd) return;
    this.growTo(this.bytesPtr + need);
  }

  private growTo(endByte: number): void {
    const limit = this.fixedEnd ?? KERNEL_MAX_PAGES * WASM_PAGE;
    if (endByte > limit) {
      throw new HashGateError(ErrorCodes.CAPACITY, `key needs ${endByte - this.bytesPtr} bytes of kernel memory; region ends at ${limit}`, {
        details: { need: endByte - this.bytesPtr, limit },
      });
    }
    const have = this.memory.buffer.byteLength;
    if (endByte > have) {
      // Double to amortise growth, but never past the module's maximum.
      const target = Math.min(Math.max(endByte, have * 2), KERNEL_MAX_PAGES * WASM_PAGE);
      try {
        this.memory.grow(Math.ceil((target - have) / WASM_PAGE));
      } catch {
        try {
          this.memory.grow(Math.ceil((endByte - have) / WASM_PAGE));
        } catch (err) {
          throw new HashGateError(ErrorCodes.CAPACITY, `cannot grow kernel memory to ${endByte} bytes`, { cause: err });
        }
      }
    }
    this.refresh();
  }

  /** Encodes/copies one key to the start of the bytes region; returns its byte length. */
  private putOne(input: string | Uint8Array, name: string): number {
    if (typeof input === 'string') {
      this.ensureBytes(input.length * 3);
      return this.buf.utf8Write(input, this.bytesPtr);
    }
    if (!(input instanceof Uint8Array)) throw invalidType(name, 'a string or Uint8Array', input);
    this.ensureBytes(input.length);
    this.u8.set(input, this.bytesPtr);
    return input.length;
  }

  // ---- single key ----

  /** This arena, or a throw-away one when the key would grow this memory past maxBytes. */
  private pick(input: string | Uint8Array): HashArena {
    const need = typeof input === 'string' ? input.length * 3 : input instanceof Uint8Array ? input.length : 0;
    return need > this.maxBytes ? HashArena.oneOff(need) : this;
  }

  /** An arena with its own memory sized for one `need`-byte key, for keys beyond maxBytes. */
  private static oneOff(need: number): HashArena {
    const pages = Math.ceil((KERNEL_RESERVED_BYTES + 2048 + need + 64) / WASM_PAGE);
    return new HashArena({ chunkKeys: 1, maxBytes: Number.MAX_SAFE_INTEGER, memory: createKernelMemory(pages) });
  }

  /** 16-byte x64_128 digest (Guava asBytes order) into a fresh, non-shared Uint8Array. */
  murmur128(input: string | Uint8Array, seed: number, name = 'input'): Uint8Array {
    const a = this.pick(input);
    const len = a.putOne(input, name);
    a.kernel.mm128One(a.bytesPtr, len, seed, a.scratch);
    return a.u8.slice(a.scratch, a.scratch + 16);
  }

  murmur128Hex(input: string | Uint8Array, seed: number, name = 'input'): string {
    const a = this.pick(input);
    const len = a.putOne(input, name);
    a.kernel.mm128One(a.bytesPtr, len, seed, a.scratch);
    return a.buf.toString('hex', a.scratch, a.scratch + 16);
  }

  /** x64_128 with the seed zero-extended (the C++ reference convention). */
  murmur128Ref(input: string | Uint8Array, seed: number, name = 'input'): Uint8Array {
    const a = this.pick(input);
    const len = a.putOne(input, name);
    a.kernel.mm128OneRef(a.bytesPtr, len, seed, a.scratch);
    return a.u8.slice(a.scratch, a.scratch + 16);
  }

  /** First 64-bit lane (Guava asLong) as an unsigned bigint. */
  murmur64(input: string | Uint8Array, seed: number, name = 'input'): bigint {
    const a = this.pick(input);
    const len = a.putOne(input, name);
    a.kernel.mm128One(a.bytesPtr, len, seed, a.scratch);
    return a.buf.readBigUInt64LE(a.scratch);
  }

  murmur32(input: string | Uint8Array, seed: number, name = 'input'): number {
    const a = this.pick(input);
    const len = a.putOne(input, name);
    return a.kernel.mm32One(a.bytesPtr, len, seed) >>> 0;
  }

  murmur86_128(input: string | Uint8Array, seed: number, name = 'input'): Uint8Array {
    const a = this.pick(input);
    const len = a.putOne(input, name);
    a.kernel.mm86_128One(a.bytesPtr, len, seed, a.scratch);
    return a.u8.slice(a.scratch, a.scratch + 16);
  }

  /** XXH64 with a 64-bit seed given as u32 halves, as an unsigned bigint. */
  xxh64(input: string | Uint8Array, seedLo: number, seedHi: number, name = 'input'): bigint {
    const a = this.pick(input);
    const len = a.putOne(input, name);
    return BigInt.asUintN(64, a.kernel.xxh64One(a.bytesPtr, len, seedLo, seedHi));
  }

  bucket(input: string | Uint8Array, buckets: number, seed: number, name = 'key'): number {
    const a = this.pick(input);
    const len = a.putOne(input, name);
    return a.kernel.mm128BucketOne(a.bytesPtr, len, seed, buckets) >>> 0;
  }

  jump(input: string | Uint8Array, buckets: number, seed: number, name = 'key'): number {
    const a = this.pick(input);
    const len = a.putOne(input, name);
    return a.kernel.mm128JumpOne(a.bytesPtr, len, seed, buckets);
  }

  /**
   * One-member compact SADDs (`SADD <head>t}s.d <member>` per record) built by the kernel:
   * `fill(u32, at)` writes `count` records of four words from word index `at` (member low and
   * high words, table, the table's sub-bucket count). Returns the RESP as a view of kernel
   * memory, valid until this arena's next call: copy it out before anything else runs here.
   */
  compactSadds(head: Uint8Array, count: number, fill: (u32: Uint32Array, at: number) => void): Uint8Array {
    // bytes region: the key head, then the records, then the RESP
    const inAt = align64(head.length);
    const outAt = inAt + count * 16;
    this.refresh();
    this.ensureBytes(outAt + count * (head.length + 80));
    const base = this.bytesPtr;
    this.u8.set(head, base);
    fill(this.u32, (base + inAt) >>> 2);
    const len = this.kernel.saddCompactBatch(base + inAt, count, base, head.length, base + outAt);
    return this.u8.subarray(base + outAt, base + outAt + len);
  }

  // ---- batches ----

  private run(kind: BatchKind, base: number, count: number, seed: number, param: number): void {
    const k = this.kernel;
    switch (kind) {
      case BatchKind.Murmur128: k.mm128Batch(base, this.offPtr, count, seed, this.outPtr); break;
      case BatchKind.Murmur32: k.mm32Batch(base, this.offPtr, count, seed, this.outPtr); break;
      case BatchKind.Murmur86_128: k.mm86_128Batch(base, this.offPtr, count, seed, this.outPtr); break;
      case BatchKind.Bucket: k.mm128BucketBatch(base, this.offPtr, count, seed, param, this.outPtr); break;
      case BatchKind.Jump: k.mm128JumpBatch(base, this.offPtr, count, seed, param, this.outPtr); break;
      case BatchKind.Xxh64: k.xxh64Batch(base, this.offPtr, count, seed, param, this.outPtr); break;
    }
  }

  /**
   * Runs `kind` over every key, writing KIND_SIZE[kind] bytes per key to `dest` (byte view,
   * already checked to be large enough). A CheckedKeys is taken as validated (nothing here
   * re-checks key types or offsets); plain Keys are checked first. This is the one place batch
   * keys are copied into kernel memory.
   */
  batch(keys: Keys | CheckedKeys, kind: BatchKind, seed: number, param: number, dest: Uint8Array): void {
    const c = checkKeys(keys);
    this.refresh();
    if (c.packed !== undefined) this.batchPacked(c.packed, kind, seed, param, dest);
    else if (c.strings && kind === BatchKind.Murmur128 && this.unitsFit) this.batchUnits(c.keys as ReadonlyArray<string>, seed, dest);
    else this.batchList(c.keys as ReadonlyArray<Key>, kind, seed, param, dest);
  }

  /**
   * murmur3_128 of strings from their UTF-16 code units (mm128Batch16: the kernel transcodes to
   * TextEncoder's UTF-8 while it hashes, so the digests are those of batchList). Copying code
   * units costs JS a charCodeAt a unit; encoding UTF-8 cost a native utf8Write call per key past
   * 16 units (name + ID number keys are about 20), which made it most of the hashing time.
   * Bytes region: the kernel's UTF-16 scratch, then the keys' code units.
   */
  private batchUnits(keys: ReadonlyArray<string>, seed: number, dest: Uint8Array): void {
    const n = keys.length;
    const offIdx = this.offPtr >>> 2;
    const chunk = this.chunkKeys;
    const tmp = this.bytesPtr;
    const unitsPtr = this.bytesPtr + this.tmp16Bytes;
    const base = unitsPtr >>> 1;
    let buf = this.buf;
    let u16 = this.u16;
    let u32 = this.u32;
    let room = (this.bytesEnd - unitsPtr) >>> 1;
    let i = 0;
    while (i < n) {
      const i0 = i;
      let at = 0;
      let c = 0;
      u32[offIdx] = 0;
      while (c < chunk && i < n) {
        const key = keys[i]!;
        if (at + key.length > room) {
          if (c > 0) break;
          if (key.length * 2 > this.maxBytes) {
            this.oversized(key, BatchKind.Murmur128, seed, 0, dest, i * 16);
            i++;
            break; // empty chunk; the next one starts after this key
          }
          this.ensureBytes(this.tmp16Bytes + key.length * 2);
          ({ buf, u16, u32 } = this);
          room = (this.bytesEnd - unitsPtr) >>> 1;
        }
        at = putUnits(key, u16, base + at, buf) - base;
        c++;
        i++;
        u32[offIdx + c] = at;
      }
      if (c === 0) continue;
      this.kernel.mm128Batch16(unitsPtr, this.offPtr, c, seed, this.outPtr, tmp);
      this.copyOut(dest, i0 * 16, c * 16);
    }
  }

  private batchList(keys: ReadonlyArray<Key>, kind: BatchKind, seed: number, param: number, dest: Uint8Array): void {
    const size = KIND_SIZE[kind];
    const n = keys.length;
    const offIdx = this.offPtr >>> 2;
    const chunk = this.chunkKeys;
    const bytesPtr = this.bytesPtr;
    // Locals, not `this.` loads, in the per-key loop; re-read after any growth.
    let buf = this.buf;
    let u8 = this.u8;
    let u32 = this.u32;
    let end = this.bytesEnd;
    let i = 0;
    while (i < n) {
      const i0 = i;
      let p = bytesPtr;
      let c = 0;
      u32[offIdx] = 0;
      while (c < chunk && i < n) {
        const key = keys[i]!;
        if (typeof key === 'string') {
          if (p + key.length * 3 > end) {
            if (c > 0) break;
            if (key.length * 3 > this.maxBytes) {
              this.oversized(key, kind, seed, param, dest, i * size);
              i++;
              break; // empty chunk; the next one starts after this key
            }
            this.ensureBytes(key.length * 3);
            ({ buf, u8, u32, bytesEnd: end } = this);
          }
          p = encodeUtf8(key, u8, p, buf);
        } else {
          // a Uint8Array: checkKeys refused anything else
          if (p + key.length > end) {
            if (c > 0) break;
            if (key.length > this.maxBytes) {
              this.oversized(key, kind, seed, param, dest, i * size);
              i++;
              break; // empty chunk; the next one starts after this key
            }
            this.ensureBytes(key.length);
            ({ buf, u8, u32, bytesEnd: end } = this);
          }
          buf.set(key, p);
          p += key.length;
        }
        c++;
        i++;
        u32[offIdx + c] = p - bytesPtr;
      }
      if (c === 0) continue;
      this.run(kind, bytesPtr, c, seed, param);
      this.copyOut(dest, i0 * size, c * size);
    }
  }

  /** Results of the last kernel run to dest[at..at+bytes); a few bytes (one key) by hand, no view. */
  private copyOut(dest: Uint8Array, at: number, bytes: number): void {
    const u8 = this.u8;
    const from = this.outPtr;
    if (bytes <= 64) for (let b = 0; b < bytes; b++) dest[at + b] = u8[from + b]!;
    else dest.set(u8.subarray(from, from + bytes), at);
  }

  /** One key beyond maxBytes, hashed in a throw-away memory straight into dest[at..]. */
  private oversized(key: Key, kind: BatchKind, seed: number, param: number, dest: Uint8Array, at: number): void {
    this.pick(key).batchList([key], kind, seed, param, dest.subarray(at, at + KIND_SIZE[kind]));
  }

  private batchPacked(keys: PackedKeys, kind: BatchKind, seed: number, param: number, dest: Uint8Array): void {
    const size = KIND_SIZE[kind];
    const { bytes, offsets, count } = keys;
    const offIdx = this.offPtr >>> 2;
    const chunk = this.chunkKeys;
    let i = 0;
    while (i < count) {
      const i0 = i;
      const start = offsets[i0]!;
      let cap = this.bytesEnd - this.bytesPtr;
      let prev = start;
      let c = 0;
      while (c < chunk && i < count) {
        // offsets were checked non-decreasing by checkKeys
        const end = offsets[i + 1]!;
        if (end - start > cap) {
          if (c > 0) break;
          if (end - start > this.maxBytes) break;
          this.ensureBytes(end - start);
          cap = this.bytesEnd - this.bytesPtr;
        }
        prev = end;
        c++;
        i++;
      }
      if (c === 0) {
        // Key i alone is larger than maxBytes.
        this.oversized(bytes.subarray(start, offsets[i + 1]), kind, seed, param, dest, i * size);
        i++;
        continue;
      }
      this.u8.set(bytes.subarray(start, prev), this.bytesPtr);
      this.u32.set(offsets.subarray(i0, i + 1), offIdx);
      // Offsets stay absolute; shifting the base (mod 2^32, as the kernel's pointer math wraps)
      // maps offsets[i0] onto the first copied byte.
      this.run(kind, (this.bytesPtr - start) | 0, c, seed, param);
      this.copyOut(dest, i0 * size, c * size);
    }
  }
}

export const kindSize = (kind: BatchKind): number => KIND_SIZE[kind];

const align64 = (n: number): number => (n + 63) & ~63;

let defaultArena: HashArena | undefined;

/** This thread's arena on its own kernel memory, created on first use. */
export function arena(): HashArena {
  return (defaultArena ??= new HashArena());
}
