// Guava-compatible Bloom filter whose bits live in a shared WebAssembly.Memory, so any thread
// that attaches (BloomFilter.fromShared) reads and sets the same bits. Adds use atomic OR in the
// wasm kernel (no bit is ever lost between threads); reads take no lock.
//
// Memory layout (one memory per filter):
//   [0, 64 KiB)              kernel statics (rewritten identically by every instantiation)
//   [64 KiB, 64 KiB + bytes) the bits: `words` little-endian u64 (bit i = byte i>>3, bit i&7)
//   after that               one scratch region per attached thread, claimed with memory.grow
import {
  ErrorCodes,
  HashGateError,
  HashGateRangeError,
  checkKnownKeys,
  checkOneOf,
  checkUint32,
  invalidType,
} from '../errors.js';
import type { PackedKeys } from '../hash/index.js';
import { murmur3_128 } from '../hash/index.js';
import { NATIVE_UTF16_FROM, checkKeys, encodeUtf8, putUnits, type CheckedKeys, type Key, type Keys } from '../hash/keys.js';
import type { BloomKernel } from './kernel.js';
import { attach, detach, initHeader, BATCH_KEYS, SCRATCH_PAGES, type Scratch } from './attach.js';
import { probeIndexes } from './indexes.js';
import { keyBytes } from './keys.js';
import { KERNEL_RESERVED_BYTES } from '../hash/kernel.js';
import {
  bloomShape,
  BITS_OFFSET,
  MAX_BIT_SIZE,
  SCRATCH_HEADROOM_BYTES,
  shapeFor,
  type BloomShape,
} from './sizing.js';

export const DEFAULTS = {
  seed: 0,
  /** Keys per kernel call: bounds the scratch region and the result staging. */
  batchKeys: BATCH_KEYS,
  /** Scratch region per attached thread, in 64 KiB pages. */
  scratchPages: SCRATCH_PAGES,
} as const;

const PAGE = 65536;
/** Digest batches up to this many keys are copied byte by byte instead of through subarray views. */
const SMALL_COPY = 8;
/** Guava's BloomFilterStrategies ordinal of MURMUR128_MITZ_64: the only strategy we write. */
export const GUAVA_STRATEGY_MITZ_64 = 1;

export interface BloomFilterOptions {
  expectedItems: number;
  fpp: number;
  /** murmur3_128 seed (Guava int semantics). Guava's BloomFilter always uses 0. */
  seed?: number;
  /**
   * 'js' computes probe indexes and sets bits in plain JS: a reference for tests and debugging,
   * not a way around the kernel (keys are still hashed by it). Default 'wasm'.
   */
  engine?: 'wasm' | 'js';
}

/**
 * Everything another thread needs to attach to the same bits. Structured-clonable: post it to a
 * worker (postMessage / piscina workerData or task) and call `BloomFilter.fromShared(d)` there.
 */
export interface BloomSharedDescriptor {
  readonly kind: 'hashgate.bloom';
  readonly version: 1;
  /** Shared memory holding the bits (and each attached thread's scratch). */
  readonly memory: WebAssembly.Memory;
  /** Byte offset of the first bit word inside `memory` (8-byte aligned). */
  readonly bitsOffset: number;
  /** Bits used for indexing: a multiple of 64. */
  readonly bitSize: number;
  readonly hashFunctions: number;
  readonly seed: number;
  readonly strategy: 'MURMUR128_MITZ_64';
  /** Informational: the id stamped in the memory header (the header is what attach trusts). */
  readonly id: string;
}

function shapeError(msg: string, details: Record<string, unknown>): HashGateError {
  return new HashGateError(ErrorCodes.BLOOM_SHAPE_MISMATCH, msg, { details });
}

let batchEntry: (f: BloomFilter, batch: CheckedKeys, add: boolean, out: Uint8Array | undefined) => number;
let unitsEntry: (f: BloomFilter, keys: PackedUnits, add: boolean, out: Uint8Array | undefined) => number;
let inMemoryEntry: (f: BloomFilter, keys: KeysInMemory, op: InMemoryOp) => number;

/**
 * Keys that already sit in the filter's own memory (a worker lane the pool placed there), by
 * address: key i is [bytes + offsets[i], bytes + offsets[i+1]) with `offsets` count + 1 LE u32
 * at address `offsets`, in code units (2 bytes each) when `utf16`. `out`: the address of a
 * count-byte region for per-key answers (checks) or flags. The kernel reads them in place.
 */
export interface KeysInMemory {
  bytes: number;
  offsets: number;
  count: number;
  utf16: boolean;
  out: number;
}

const InMemoryOp = { Check: 0, Add: 1, AddFlags: 2 } as const;
type InMemoryOp = (typeof InMemoryOp)[keyof typeof InMemoryOp];

/** True when `memory` is this filter's and its kernel can take keys there (KeysInMemory). */
export function takesKeysIn(f: BloomFilter, memory: WebAssembly.Memory): boolean {
  return memory === f.memory && f.engine === 'wasm';
}

/** mightContainAll of keys in the filter's memory: 1/0 per key at keys.out; returns the 1s. */
export function containsInMemory(f: BloomFilter, keys: KeysInMemory): number {
  return inMemoryEntry(f, keys, InMemoryOp.Check);
}

/** addAll of keys in the filter's memory; returns how many changed at least one bit. */
export function addInMemory(f: BloomFilter, keys: KeysInMemory): number {
  return inMemoryEntry(f, keys, InMemoryOp.Add);
}

/** addFlagsChecked of keys in the filter's memory (flags at keys.out); returns the bits it set. */
export function addFlagsInMemory(f: BloomFilter, keys: KeysInMemory): number {
  return inMemoryEntry(f, keys, InMemoryOp.AddFlags);
}

/**
 * String keys as their UTF-16 code units, back to back: key i is units[offsets[i] ..
 * offsets[i+1]). The worker pool's lanes carry string keys this way (the calling thread copies
 * code units; the kernel transcodes to UTF-8 while hashing, on the worker).
 */
export interface PackedUnits {
  units: Uint16Array;
  offsets: Uint32Array;
  count: number;
}

/** addAll of string keys given as code units (offsets non-decreasing, inside units). */
export function addUnits(f: BloomFilter, keys: PackedUnits): number {
  return unitsEntry(f, keys, true, undefined);
}

/** addFlagsChecked of string keys given as code units. */
export function addFlagsUnits(f: BloomFilter, keys: PackedUnits, flags: Uint8Array): number {
  return unitsEntry(f, keys, true, flags);
}

/** mightContainAll of string keys given as code units, answers to out[0..count). */
export function containsUnits(f: BloomFilter, keys: PackedUnits, out: Uint8Array): number {
  return unitsEntry(f, keys, false, out);
}

/** addAll of a batch checkKeys validated already (the gate checks once, then splits it). */
export function addChecked(f: BloomFilter, batch: CheckedKeys): number {
  return batchEntry(f, batch, true, undefined);
}

/**
 * addAll of a checked batch that also writes, per key, 1 if it changed at least one bit, else 0,
 * to flags[0..count). Keys are added in order, so the flags equal what adding them one by one
 * would report (merged callers split them back into their own counts). Returns the 1s.
 */
export function addFlagsChecked(f: BloomFilter, batch: CheckedKeys, flags: Uint8Array): number {
  return batchEntry(f, batch, true, flags);
}

/** mightContainAll of a batch checkKeys validated already. */
export function containsChecked(f: BloomFilter, batch: CheckedKeys): Uint8Array {
  const res = new Uint8Array(batch.count);
  batchEntry(f, batch, false, res);
  return res;
}

export class BloomFilter {
  readonly bitSize: number;
  readonly hashFunctions: number;
  readonly seed: number;
  readonly memory: WebAssembly.Memory;
  readonly bitsOffset: number;
  readonly #words: number;
  readonly #kernel: BloomKernel | null;
  readonly #bits8: Uint8Array;
  readonly #bits32: Int32Array;
  readonly #scratch: Scratch;
  /** Random id stamped in the memory's header; equal on every thread attached to the same bits. */
  readonly id: string;
  readonly #idx: Float64Array;
  /** Set-bit count shared by all threads (header bytes 16..23), kept exact by every writer. */
  readonly #count: BigInt64Array;

  private constructor(
    memory: WebAssembly.Memory, bitsOffset: number, bitSize: number, k: number, seed: number, engine: 'wasm' | 'js' = 'wasm',
  ) {
    this.memory = memory;
    this.bitsOffset = bitsOffset;
    this.bitSize = bitSize;
    this.hashFunctions = k;
    this.seed = seed;
    this.#words = bitSize / 64;
    this.#bits8 = new Uint8Array(memory.buffer, bitsOffset, bitSize / 8);
    this.#bits32 = new Int32Array(memory.buffer, bitsOffset, bitSize / 32);
    const a = attach(memory, engine !== 'js');
    this.id = a.id;
    this.#kernel = a.kernel;
    this.#scratch = a.scratch;
    this.#idx = new Float64Array(k);
    this.#count = new BigInt64Array(memory.buffer, KERNEL_RESERVED_BYTES + 16, 1);
  }

  /** Sized exactly as Guava's `BloomFilter.create(funnel, expectedItems, fpp)`. */
  static create(options: BloomFilterOptions): BloomFilter {
    checkKnownKeys('options', options, ['expectedItems', 'fpp', 'seed', 'engine']);
    const shape = bloomShape(options, 'options');
    const seed = options.seed === undefined ? DEFAULTS.seed : checkUint32('options.seed', options.seed);
    const engine = options.engine === undefined ? 'wasm' : checkOneOf('options.engine', options.engine, ['wasm', 'js'] as const);
    return BloomFilter.withShape(shape, seed, engine);
  }

  /** An empty filter of an explicit shape (bitSize a multiple of 64). */
  static withShape(shape: Pick<BloomShape, 'bitSize' | 'hashFunctions'>, seed = 0, engine: 'wasm' | 'js' = 'wasm'): BloomFilter {
    const s = shapeFor(shape.bitSize, shape.hashFunctions, 'bitSize');
    if (s.bitSize !== shape.bitSize) throw shapeError(`bitSize must be a multiple of 64, got ${shape.bitSize}`, { bitSize: shape.bitSize });
    const bytes = s.bitSize / 8;
    const initial = Math.ceil((BITS_OFFSET + bytes) / PAGE);
    const maximum = Math.min(65536, initial + SCRATCH_HEADROOM_BYTES / PAGE);
    let memory: WebAssembly.Memory;
    try {
      memory = new WebAssembly.Memory({ initial, maximum, shared: true });
    } catch (cause) {
      throw new HashGateError(ErrorCodes.CAPACITY, `bloom: could not allocate ${bytes} bytes of shared memory`, { cause, details: { bitSize: s.bitSize } });
    }
    initHeader(memory);
    return new BloomFilter(memory, BITS_OFFSET, s.bitSize, s.hashFunctions, checkUint32('seed', seed), engine);
  }

  /** Attach to bits another thread created; both see every add at once. */
  static fromShared(d: BloomSharedDescriptor): BloomFilter {
    if (d === null || typeof d !== 'object' || d.kind !== 'hashgate.bloom') throw invalidType('descriptor', 'a BloomSharedDescriptor (filter.toShared())', d);
    if (d.version !== 1 || d.strategy !== 'MURMUR128_MITZ_64') throw shapeError(`descriptor: unsupported version ${d.version} / strategy ${d.strategy}`, { version: d.version });
    if (!(d.memory instanceof WebAssembly.Memory)) throw invalidType('descriptor.memory', 'a shared WebAssembly.Memory', d.memory);
    const s = shapeFor(d.bitSize, d.hashFunctions, 'descriptor.bitSize');
    if (s.bitSize !== d.bitSize || !Number.isInteger(d.bitsOffset) || d.bitsOffset < BITS_OFFSET || d.bitsOffset % 8 !== 0 || d.bitsOffset + d.bitSize / 8 > d.memory.buffer.byteLength) {
      throw shapeError('descriptor: bitSize/bitsOffset do not fit the memory', { bitSize: d.bitSize, bitsOffset: d.bitsOffset });
    }
    return new BloomFilter(d.memory, d.bitsOffset, d.bitSize, d.hashFunctions, checkUint32('descriptor.seed', d.seed));
  }

  /**
   * Releases this thread's scratch lease in the shared memory (long-lived threads need not call
   * it; a thread re-attaching always gets its own lease back). Do not use this object afterwards.
   */
  detach(): void {
    detach(this.memory);
  }

  toShared(): BloomSharedDescriptor {
    return {
      kind: 'hashgate.bloom',
      version: 1,
      memory: this.memory,
      bitsOffset: this.bitsOffset,
      bitSize: this.bitSize,
      hashFunctions: this.hashFunctions,
      seed: this.seed,
      strategy: 'MURMUR128_MITZ_64',
      id: this.id,
    };
  }

  /** 'wasm' when the kernel runs the batches, 'js' for a filter created with engine: 'js'. */
  get engine(): 'wasm' | 'js' {
    return this.#kernel === null ? 'js' : 'wasm';
  }

  /** Bytes of bit array (the shared memory also holds 64 KiB of kernel statics + scratch). */
  get byteLength(): number {
    return this.bitSize / 8;
  }

  /** Live little-endian view of the bits (word i = bytes 8i..8i+7). Do not write into it. */
  bitsView(): Uint8Array {
    return this.#bits8;
  }

  /** Returns true if a bit changed (Guava's put). */
  add(key: Key): boolean {
    return this.#one(key, true) === 1;
  }

  mightContain(key: Key): boolean {
    return this.#one(key, false) === 1;
  }

  static {
    batchEntry = (f, batch, add, out) => f.#batch(batch, add, out);
    unitsEntry = (f, keys, add, out) => f.#batchUnits(keys, add, out);
    inMemoryEntry = (f, keys, op) => f.#inMemory(keys, op);
  }

  /** How many keys changed at least one bit. */
  addAll(keys: Keys): number {
    return this.#batch(checkKeys(keys), true, undefined);
  }

  /**
   * 1 (might contain) or 0 (definitely not) per key. `out` (length >= key count) avoids the
   * allocation: results go to out[0..n) and a view of that range is returned.
   */
  mightContainAll(keys: Keys, out?: Uint8Array): Uint8Array {
    const batch = checkKeys(keys);
    const res = resultBytes(out, batch.count);
    this.#batch(batch, false, res);
    return res;
  }

  /**
   * addAll for keys already hashed: `digests` holds murmur3_128(key, this.seed) per key, 16 bytes
   * each in Guava asBytes order (hashBatch's output). The kernel skips hashing, so a caller that
   * needed the digests anyway hashes each key once. Returns how many keys changed a bit.
   */
  addDigests(digests: Uint8Array): number {
    return this.#digests(digests, true, undefined);
  }

  /** mightContainAll for keys given as digests (see addDigests); 1 or 0 per digest. */
  mightContainDigests(digests: Uint8Array, out?: Uint8Array): Uint8Array {
    const n = digestCount(digests);
    const res = resultBytes(out, n);
    this.#digests(digests, false, res);
    return res;
  }

  /**
   * Bits set. O(1): every writer (any thread) adds the bits it flipped to a counter in the shared
   * header, so metrics can poll it on a multi-GB filter. countBits() rescans to verify.
   */
  bitCount(): number {
    return Number(Atomics.load(this.#count, 0));
  }

  /** Full popcount of the bit array (O(bitSize)). */
  countBits(): number {
    if (this.#kernel !== null) return this.#kernel.bloomPopcount(this.bitsOffset, this.#words);
    let n = 0;
    for (let i = 0; i < this.#bits32.length; i++) n += popcount32(this.#bits32[i]!);
    return n;
  }

  /** Resets the shared counter from a full scan (after bits were loaded wholesale). */
  recountBits(): number {
    const n = this.countBits();
    Atomics.store(this.#count, 0, BigInt(n));
    return n;
  }

  /** Guava: (bitCount / bitSize) ^ k. */
  expectedFpp(): number {
    return Math.pow(this.bitCount() / this.bitSize, this.hashFunctions);
  }

  /** Guava: round_half_up(-ln(1 - bitCount/bitSize) * bitSize / k). */
  approximateElementCount(): number {
    const x = (-Math.log1p(-this.bitCount() / this.bitSize) * this.bitSize) / this.hashFunctions;
    const f = Math.floor(x);
    return x - f >= 0.5 ? f + 1 : f;
  }

  isCompatible(other: BloomFilter): boolean {
    return (
      other instanceof BloomFilter &&
      other !== this &&
      other.bitSize === this.bitSize &&
      other.hashFunctions === this.hashFunctions &&
      other.seed === this.seed
    );
  }

  /** Union (Guava putAll): bits are OR-ed atomically, so it may run while other threads add. */
  putAll(other: BloomFilter): void {
    if (!(other instanceof BloomFilter)) throw invalidType('other', 'a BloomFilter', other);
    if (!this.isCompatible(other)) {
      throw shapeError(
        other === this || other.memory === this.memory
          ? 'putAll: cannot combine a filter with itself'
          : `putAll: shapes differ (bitSize ${this.bitSize} vs ${other.bitSize}, k ${this.hashFunctions} vs ${other.hashFunctions}, seed ${this.seed} vs ${other.seed})`,
        { bitSize: [this.bitSize, other.bitSize], hashFunctions: [this.hashFunctions, other.hashFunctions], seed: [this.seed, other.seed] },
      );
    }
    const src = other.#bits32;
    const dst = this.#bits32;
    let added = 0;
    for (let i = 0; i < src.length; i++) {
      const v = src[i]!;
      if (v !== 0 && (dst[i]! & v) !== v) added += popcount32(v & ~Atomics.or(dst, i, v));
    }
    if (added > 0) Atomics.add(this.#count, 0, BigInt(added));
  }

  /** Copy the bits in from Guava-ordered data (used by readFrom / snapshots). */
  loadBitsLE(data: Uint8Array): void {
    if (data.length !== this.bitSize / 8) throw shapeError('bits length does not match bitSize', { got: data.length, want: this.bitSize / 8 });
    this.#bits8.set(data);
    this.recountBits();
  }

  /** Guava `BloomFilter.writeTo` bytes: strategy ordinal, k, int word count, big-endian longs. */
  writeTo(): Uint8Array {
    const out = Buffer.allocUnsafe(6 + this.bitSize / 8);
    out[0] = GUAVA_STRATEGY_MITZ_64;
    out[1] = this.hashFunctions;
    out.writeInt32BE(this.#words, 2);
    const data = out.subarray(6);
    data.set(this.#bits8);
    data.swap64();
    return out;
  }

  /** Reads Guava's `BloomFilter.writeTo` format (MURMUR128_MITZ_64 only). */
  static readFrom(bytes: Uint8Array, options: { seed?: number } = {}): BloomFilter {
    if (!(bytes instanceof Uint8Array)) throw invalidType('bytes', 'a Uint8Array', bytes);
    const h = parseGuavaHeader(bytes);
    if (bytes.length !== 6 + h.words * 8) {
      throw new HashGateError(ErrorCodes.SNAPSHOT_CORRUPT, `Guava Bloom stream: expected ${6 + h.words * 8} bytes for ${h.words} words, got ${bytes.length}`, { details: { words: h.words, length: bytes.length } });
    }
    const f = BloomFilter.withShape({ bitSize: h.words * 64, hashFunctions: h.hashFunctions }, options.seed ?? 0);
    // Nobody else can see `f` yet, so the bits may be byte-swapped in place (no 2nd copy).
    f.#bits8.set(bytes.subarray(6));
    Buffer.from(f.memory.buffer, f.bitsOffset, h.words * 8).swap64();
    f.recountBits();
    return f;
  }

  #one(key: Key, add: boolean): number {
    const s = this.#scratch;
    let len: number;
    if (typeof key === 'string') {
      if (key.length * 3 > s.keysCap) return this.#oneSlow(keyBytes(key, 'key'), add);
      const k = this.#kernel;
      if (k !== null) {
        // Code units, not UTF-8: the kernel transcodes while hashing (same bits, same answer).
        const at = s.keysPtr >>> 1;
        const units = putUnits(key, s.u16, at, s.buf) - at;
        if (!add) return k.bloomCheckOne16(this.bitsOffset, this.bitSize, this.hashFunctions, this.seed | 0, s.keysPtr, units, s.tmp16Ptr);
        const set = k.bloomAddOne16(this.bitsOffset, this.bitSize, this.hashFunctions, this.seed | 0, s.keysPtr, units, s.tmp16Ptr);
        if (set === 0) return 0;
        Atomics.add(this.#count, 0, BigInt(set));
        return 1;
      }
      len = encodeUtf8(key, s.u8, s.keysPtr, s.buf) - s.keysPtr;
    } else if (key instanceof Uint8Array) {
      if (key.length > s.keysCap) return this.#oneSlow(key, add);
      s.u8.set(key, s.keysPtr);
      len = key.length;
    } else {
      throw invalidType('key', 'a string or Uint8Array', key);
    }
    const k = this.#kernel;
    if (k === null) return this.#oneSlow(s.u8.slice(s.keysPtr, s.keysPtr + len), add);
    if (!add) return k.bloomCheckOne(this.bitsOffset, this.bitSize, this.hashFunctions, this.seed | 0, s.keysPtr, len);
    const set = k.bloomAddOne(this.bitsOffset, this.bitSize, this.hashFunctions, this.seed | 0, s.keysPtr, len);
    if (set === 0) return 0;
    Atomics.add(this.#count, 0, BigInt(set));
    return 1;
  }

  /** Reference path: keys too long for the scratch region, or engine 'js'. */
  #oneSlow(bytes: Uint8Array, add: boolean): number {
    return this.#oneDigest(murmur3_128(bytes, this.seed), add);
  }

  #oneDigest(digest: Uint8Array, add: boolean): number {
    const idx = this.#idx;
    probeIndexes(digest, this.hashFunctions, this.bitSize, idx);
    let set = 0;
    for (let j = 0; j < this.hashFunctions; j++) {
      const i = idx[j]!;
      const w = (i - (i & 31)) / 32;
      const mask = 1 << (i & 31);
      if (add) {
        if ((this.#bits32[w]! & mask) === 0 && (Atomics.or(this.#bits32, w, mask) & mask) === 0) set++;
      } else if ((this.#bits32[w]! & mask) === 0) {
        return 0;
      }
    }
    if (!add) return 1;
    if (set > 0) Atomics.add(this.#count, 0, BigInt(set));
    return set > 0 ? 1 : 0;
  }

  /** Digests staged in the scratch key region, up to batchKeys at a time; see addDigests. */
  #digests(digests: Uint8Array, add: boolean, out: Uint8Array | undefined): number {
    const n = digestCount(digests);
    const k = this.#kernel;
    let total = 0;
    if (k === null) {
      for (let i = 0; i < n; i++) {
        const r = this.#oneDigest(digests.subarray(i << 4, (i + 1) << 4), add);
        if (out !== undefined) out[i] = r;
        total += r;
      }
      return total;
    }
    const s = this.#scratch;
    const at = (s.keysPtr + 15) & ~15;
    const per = Math.min(DEFAULTS.batchKeys, (s.keysPtr + s.keysCap - at) >>> 4);
    const u8 = s.u8;
    for (let i = 0; i < n; i += per) {
      const c = Math.min(per, n - i);
      // Small batches (one call per event) copy by hand: two subarray views per call cost more.
      if (c <= SMALL_COPY) for (let b = i << 4, e = (i + c) << 4, p = at; b < e; b++, p++) u8[p] = digests[b]!;
      else u8.set(digests.subarray(i << 4, (i + c) << 4), at);
      if (add) {
        total += k.bloomAddDigests(this.bitsOffset, this.bitSize, this.hashFunctions, at, c, s.outPtr);
        this.#countSet(s);
      } else {
        total += k.bloomCheckDigests(this.bitsOffset, this.bitSize, this.hashFunctions, at, c, s.outPtr);
        if (c <= SMALL_COPY) for (let j = 0; j < c; j++) out![i + j] = u8[s.outPtr + j]!;
        else out!.set(u8.subarray(s.outPtr, s.outPtr + c), i);
      }
    }
    return total;
  }

  /** Adds the bit count a kernel add left at the scratch result region to the shared counter. */
  #countSet(s: Scratch): void {
    const u8 = s.u8;
    const o = s.outPtr;
    const set = (u8[o]! | (u8[o + 1]! << 8) | (u8[o + 2]! << 16) | (u8[o + 3]! << 24)) >>> 0;
    if (set > 0) Atomics.add(this.#count, 0, BigInt(set));
  }

  #batch(batch: CheckedKeys, add: boolean, out: Uint8Array | undefined): number {
    const s = this.#scratch;
    if (batch.packed !== undefined) return this.#batchPacked(batch.packed, add, out, s);
    if (batch.strings && this.#kernel !== null) return this.#batchStrings(batch.keys as ReadonlyArray<string>, add, out, s);
    const keys = batch.keys as ReadonlyArray<Key>;
    const u8 = s.u8;
    const offs = s.offsets;
    const base = s.keysPtr;
    const limit = base + s.keysCap;
    let total = 0;
    let done = 0;
    let count = 0;
    let pos = base;
    const n = keys.length;
    for (let i = 0; i < n; i++) {
      const key = keys[i]!;
      const need = typeof key === 'string' ? key.length * 3 : key.length;
      if (need > s.keysCap) {
        // Flush, then take the slow path for this one oversize key.
        total += this.#flush(add, out, done, count, s);
        done += count;
        count = 0;
        pos = base;
        const r = this.#oneSlow(keyBytes(key, `keys[${i}]`), add);
        if (out !== undefined) out[done] = r;
        total += r;
        done++;
        continue;
      }
      if (count === DEFAULTS.batchKeys || pos + need > limit) {
        total += this.#flush(add, out, done, count, s);
        done += count;
        count = 0;
        pos = base;
      }
      offs[count] = pos - base;
      if (typeof key === 'string') pos = encodeUtf8(key, u8, pos, s.buf);
      else {
        u8.set(key, pos);
        pos += key.length;
      }
      count++;
      offs[count] = pos - base;
    }
    total += this.#flush(add, out, done, count, s);
    return total;
  }

  /**
   * String keys (kernel engine): each key's UTF-16 code units are copied into the scratch region
   * and the kernel hashes them as UTF-8. For CJK keys the UTF-8 encoding was most of a check's
   * cost in JS (a native call per key); copying code units is a short loop.
   */
  #batchStrings(keys: ReadonlyArray<string>, add: boolean, out: Uint8Array | undefined, s: Scratch): number {
    const u16 = s.u16;
    const buf = s.buf as Buffer & { ucs2Write(s: string, offset: number): number };
    const offs = s.offsets;
    const base = s.keysPtr >>> 1;
    const capUnits = s.keysCap >>> 1;
    const limit = base + capUnits;
    const most = DEFAULTS.batchKeys;
    let total = 0;
    let done = 0;
    let count = 0;
    let pos = base;
    const n = keys.length;
    offs[0] = 0;
    for (let i = 0; i < n; i++) {
      const key = keys[i]!;
      const len = key.length;
      if (len > capUnits) {
        // Flush, then take the slow path for this one oversize key.
        total += this.#flush16(add, out, done, count, s, 0);
        done += count;
        count = 0;
        pos = base;
        const r = this.#oneSlow(keyBytes(key, `keys[${i}]`), add);
        if (out !== undefined) out[done] = r;
        total += r;
        done++;
        continue;
      }
      if (count === most || pos + len > limit) {
        total += this.#flush16(add, out, done, count, s, 0);
        done += count;
        count = 0;
        pos = base;
      }
      // putUnits, inlined: this loop is most of a string check's JS time.
      if (len > NATIVE_UTF16_FROM) pos += buf.ucs2Write(key, pos << 1) >>> 1;
      else {
        let j = 0;
        for (; j + 4 <= len; j += 4, pos += 4) {
          u16[pos] = key.charCodeAt(j);
          u16[pos + 1] = key.charCodeAt(j + 1);
          u16[pos + 2] = key.charCodeAt(j + 2);
          u16[pos + 3] = key.charCodeAt(j + 3);
        }
        for (; j < len; j++) u16[pos++] = key.charCodeAt(j);
      }
      offs[++count] = pos - base;
    }
    total += this.#flush16(add, out, done, count, s, 0);
    return total;
  }

  /** KeysInMemory: one kernel call over the keys where they are (see takesKeysIn). */
  #inMemory(keys: KeysInMemory, op: InMemoryOp): number {
    const k = this.#kernel;
    if (k === null) throw new HashGateError(ErrorCodes.INVALID_ARG, 'bloom: keys in memory need the wasm engine');
    const { bytes, offsets, count, out } = keys;
    if (count === 0) return 0;
    const s = this.#scratch;
    const seed = this.seed | 0;
    if (op === InMemoryOp.Check) {
      return keys.utf16
        ? k.bloomCheckBatch16(this.bitsOffset, this.bitSize, this.hashFunctions, seed, bytes, offsets, count, out, s.tmp16Ptr)
        : k.bloomCheckBatch(this.bitsOffset, this.bitSize, this.hashFunctions, seed, bytes, offsets, count, out);
    }
    if (op === InMemoryOp.Add) {
      // The bit count goes to this thread's scratch result region, as #flush's does.
      const changed = keys.utf16
        ? k.bloomAddBatch16(this.bitsOffset, this.bitSize, this.hashFunctions, seed, bytes, offsets, count, s.outPtr, s.tmp16Ptr)
        : k.bloomAddBatch(this.bitsOffset, this.bitSize, this.hashFunctions, seed, bytes, offsets, count, s.outPtr);
      this.#countSet(s);
      return changed;
    }
    const set = keys.utf16
      ? k.bloomAddFlags16(this.bitsOffset, this.bitSize, this.hashFunctions, seed, bytes, offsets, count, out, s.tmp16Ptr)
      : k.bloomAddFlags(this.bitsOffset, this.bitSize, this.hashFunctions, seed, bytes, offsets, count, out);
    if (set > 0) Atomics.add(this.#count, 0, BigInt(set));
    return set;
  }

  /** PackedUnits (a worker lane's string keys): runs of keys copied into scratch, as #batchPacked. */
  #batchUnits(keys: PackedUnits, add: boolean, out: Uint8Array | undefined): number {
    const s = this.#scratch;
    const { units, offsets, count: n } = keys;
    if (this.#kernel === null) {
      let total = 0;
      for (let i = 0; i < n; i++) {
        const key = Buffer.from(units.buffer, units.byteOffset + offsets[i]! * 2, (offsets[i + 1]! - offsets[i]!) * 2).toString('utf16le');
        const r = this.#oneSlow(keyBytes(key, 'key'), add);
        if (out !== undefined) out[i] = r;
        total += r;
      }
      return total;
    }
    const capUnits = s.keysCap >>> 1;
    const offs = s.offsets;
    let total = 0;
    let i = 0;
    while (i < n) {
      const start = offsets[i]!;
      let j = i;
      const maxJ = Math.min(n, i + DEFAULTS.batchKeys);
      while (j < maxJ) {
        if (offsets[j + 1]! - start > capUnits) break;
        j++;
      }
      if (j === i) {
        const key = Buffer.from(units.buffer, units.byteOffset + start * 2, (offsets[i + 1]! - start) * 2).toString('utf16le');
        const r = this.#oneSlow(keyBytes(key, 'key'), add);
        if (out !== undefined) out[i] = r;
        total += r;
        i++;
        continue;
      }
      s.u16.set(units.subarray(start, offsets[j]!), s.keysPtr >>> 1);
      offs.set(offsets.subarray(i, j + 1));
      total += this.#flush16(add, out, i, j - i, s, start);
      i = j;
    }
    return total;
  }

  /** #flush for UTF-16 keys staged at keysPtr; `bias` (code units) as #flush's. Kernel engine only. */
  #flush16(add: boolean, out: Uint8Array | undefined, done: number, count: number, s: Scratch, bias: number): number {
    if (count === 0) return 0;
    const k = this.#kernel!;
    const base = (s.keysPtr - bias * 2) | 0;
    let r: number;
    if (add && out !== undefined) r = k.bloomAddFlags16(this.bitsOffset, this.bitSize, this.hashFunctions, this.seed | 0, base, s.offsetsPtr, count, s.outPtr, s.tmp16Ptr);
    else if (add) r = k.bloomAddBatch16(this.bitsOffset, this.bitSize, this.hashFunctions, this.seed | 0, base, s.offsetsPtr, count, s.outPtr, s.tmp16Ptr);
    else r = k.bloomCheckBatch16(this.bitsOffset, this.bitSize, this.hashFunctions, this.seed | 0, base, s.offsetsPtr, count, s.outPtr, s.tmp16Ptr);
    return this.#settle(add, out, done, count, s, r);
  }

  /** PackedKeys checked by checkKeys (offsets non-decreasing, inside bytes). */
  #batchPacked(keys: PackedKeys, add: boolean, out: Uint8Array | undefined, s: Scratch): number {
    const { bytes, offsets, count: n } = keys;
    const offs = s.offsets;
    let total = 0;
    let i = 0;
    while (i < n) {
      const start = offsets[i]!;
      // Largest run of keys that fits both the key count and the byte budget.
      let j = i;
      const maxJ = Math.min(n, i + DEFAULTS.batchKeys);
      while (j < maxJ) {
        if (offsets[j + 1]! - start > s.keysCap) break;
        j++;
      }
      if (j === i) {
        const r = this.#oneSlow(bytes.subarray(start, offsets[i + 1]!), add);
        if (out !== undefined) out[i] = r;
        total += r;
        i++;
        continue;
      }
      const end = offsets[j]!;
      s.u8.set(bytes.subarray(start, end), s.keysPtr);
      // Offsets go in unchanged (one memcpy); the kernel's bytes base is shifted by -start
      // instead (u32 address arithmetic wraps back into the scratch region).
      offs.set(offsets.subarray(i, j + 1));
      total += this.#flush(add, out, i, j - i, s, start);
      i = j;
    }
    return total;
  }

  /** Runs the kernel over `count` keys staged in scratch; results (adds: changed flags) land at out[done..]. */
  #flush(add: boolean, out: Uint8Array | undefined, done: number, count: number, s: Scratch, bias = 0): number {
    if (count === 0) return 0;
    const base = s.keysPtr - bias;
    const k = this.#kernel;
    if (k === null) {
      let r = 0;
      for (let i = 0; i < count; i++) {
        const key = s.u8.slice(base + s.offsets[i]!, base + s.offsets[i + 1]!);
        const v = this.#oneSlow(key, add);
        if (out !== undefined) out[done + i] = v;
        r += v;
      }
      return r;
    }
    let r: number;
    if (add && out !== undefined) r = k.bloomAddFlags(this.bitsOffset, this.bitSize, this.hashFunctions, this.seed | 0, base | 0, s.offsetsPtr, count, s.outPtr);
    else if (add) r = k.bloomAddBatch(this.bitsOffset, this.bitSize, this.hashFunctions, this.seed | 0, base | 0, s.offsetsPtr, count, s.outPtr);
    else r = k.bloomCheckBatch(this.bitsOffset, this.bitSize, this.hashFunctions, this.seed | 0, base | 0, s.offsetsPtr, count, s.outPtr);
    return this.#settle(add, out, done, count, s, r);
  }

  /**
   * The rest of a #flush or #flush16 once the kernel has run over `count` staged keys (UTF-8 and
   * UTF-16 kernels leave the same results): `r` is what the kernel returned. Returns what the
   * flush returns, and puts per-key results at out[done..].
   */
  #settle(add: boolean, out: Uint8Array | undefined, done: number, count: number, s: Scratch, r: number): number {
    if (add && out !== undefined) {
      // Per-key flags: the kernel wrote them to the result region and returned the bits it set.
      if (r > 0) Atomics.add(this.#count, 0, BigInt(r));
      const u8 = s.u8;
      let changed = 0;
      for (let i = 0, p = s.outPtr; i < count; i++, p++) {
        const f = u8[p]!;
        out[done + i] = f;
        changed += f;
      }
      return changed;
    }
    if (add) {
      // `r` is how many keys changed. The check-result region is idle during adds: the kernel
      // left its bit count there.
      this.#countSet(s);
      return r;
    }
    out!.set(s.u8.subarray(s.outPtr, s.outPtr + count), done);
    return r;
  }
}

function digestCount(digests: unknown): number {
  if (!(digests instanceof Uint8Array) || digests.length % 16 !== 0) {
    throw invalidType('digests', 'a Uint8Array of 16-byte murmur3_128 digests', digests);
  }
  return digests.length >>> 4;
}

/** `out` checked to hold n results (a view of its first n bytes), or a new array. */
function resultBytes(out: unknown, n: number): Uint8Array {
  if (out === undefined) return new Uint8Array(n);
  if (!(out instanceof Uint8Array) || out.length < n) throw invalidType('out', `a Uint8Array of length >= ${n}`, out);
  return out.subarray(0, n);
}

function popcount32(v: number): number {
  v = v - ((v >>> 1) & 0x55555555);
  v = (v & 0x33333333) + ((v >>> 2) & 0x33333333);
  return (Math.imul((v + (v >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24);
}

export interface GuavaHeader {
  strategy: number;
  hashFunctions: number;
  words: number;
}

export function parseGuavaHeader(bytes: Uint8Array): GuavaHeader {
  if (bytes.length < 6) {
    throw new HashGateError(ErrorCodes.SNAPSHOT_CORRUPT, `Guava Bloom stream: ${bytes.length} bytes is shorter than the 6-byte header`);
  }
  const strategy = (bytes[0]! << 24) >> 24;
  const hashFunctions = bytes[1]!;
  const words = ((bytes[2]! << 24) | (bytes[3]! << 16) | (bytes[4]! << 8) | bytes[5]!) | 0;
  if (strategy !== GUAVA_STRATEGY_MITZ_64) {
    throw new HashGateError(
      ErrorCodes.SNAPSHOT_MISMATCH,
      `Guava Bloom stream uses strategy ordinal ${strategy}; only MURMUR128_MITZ_64 (1) is supported`,
      { details: { strategy } },
    );
  }
  if (hashFunctions < 1 || words < 1) {
    throw new HashGateError(ErrorCodes.SNAPSHOT_CORRUPT, `Guava Bloom stream: bad header (k=${hashFunctions}, words=${words})`, { details: { hashFunctions, words } });
  }
  if (words * 64 > MAX_BIT_SIZE) {
    throw new HashGateRangeError(ErrorCodes.CAPACITY, `Guava Bloom stream: ${words * 64} bits exceeds the ceiling of ${MAX_BIT_SIZE} bits`, { bitSize: words * 64, max: MAX_BIT_SIZE });
  }
  return { strategy, hashFunctions, words };
}
