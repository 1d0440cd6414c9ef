// Counting Bloom filter: 4-bit saturating counters instead of bits, so keys can be removed
// (deletion needs counts: a plain bit may be shared by many keys).
//
// Same sizing and probe indexes as BloomFilter (Guava MURMUR128_MITZ_64 over `size` counters),
// so toBloomFilter() yields a Guava-compatible filter. Counters live in a SharedArrayBuffer and
// every update is a compare-and-swap on the 32-bit word holding 8 counters: threads attached
// with fromShared may add/remove concurrently without losing an update.
//
// Saturation: a counter stops at 15 and never wraps. Once saturated, the true number of keys
// on it is unknown; decrementing could take it to 0 while keys still use it, turning them into
// false negatives. So remove() leaves a saturated counter at 15: the price is that it can
// only cause false positives, never false negatives. saturatedCount() reports how many.
import { checkUint32, ErrorCodes, HashGateError, invalidType } from '../errors.js';
import { hashBatch, murmur3_128 } from '../hash/index.js';
import { BloomFilter } from './bloom-filter.js';
import { probeIndexes } from './indexes.js';
import { keyBytes } from './keys.js';
import type { Key, Keys } from '../hash/keys.js';
import { bloomShape, shapeFor } from './sizing.js';

const MAX = 15;

export interface CountingBloomFilterOptions {
  expectedItems: number;
  fpp: number;
  seed?: number;
}

export interface CountingSharedDescriptor {
  readonly kind: 'hashgate.counting-bloom';
  readonly version: 1;
  readonly buffer: SharedArrayBuffer;
  readonly size: number;
  readonly hashFunctions: number;
  readonly seed: number;
}

export class CountingBloomFilter {
  /** Number of 4-bit counters (a multiple of 64, as BloomFilter.bitSize). */
  readonly size: number;
  readonly hashFunctions: number;
  readonly seed: number;
  readonly buffer: SharedArrayBuffer;
  readonly #words: Int32Array;
  readonly #idx: Float64Array;

  private constructor(buffer: SharedArrayBuffer, size: number, k: number, seed: number) {
    this.buffer = buffer;
    this.size = size;
    this.hashFunctions = k;
    this.seed = seed;
    this.#words = new Int32Array(buffer, 0, size / 8);
    this.#idx = new Float64Array(k);
  }

  /** Same (size, k) as `BloomFilter.create` for the options; 4 bits per counter. */
  static create(options: CountingBloomFilterOptions): CountingBloomFilter {
    const shape = bloomShape(options, 'options');
    const seed = options.seed === undefined ? 0 : checkUint32('options.seed', options.seed);
    return CountingBloomFilter.withShape(shape.bitSize, shape.hashFunctions, seed);
  }

  static withShape(size: number, hashFunctions: number, seed = 0): CountingBloomFilter {
    // Counters take 4x the bytes of bits: check the same ceiling on the byte size.
    const s = shapeFor(size * 4, hashFunctions, 'size');
    if (s.bitSize !== size * 4) throw invalidType('size', 'a multiple of 64', size);
    return new CountingBloomFilter(new SharedArrayBuffer(size / 2), size, hashFunctions, seed);
  }

  static fromShared(d: CountingSharedDescriptor): CountingBloomFilter {
    if (d === null || typeof d !== 'object' || d.kind !== 'hashgate.counting-bloom' || !(d.buffer instanceof SharedArrayBuffer)) {
      throw invalidType('descriptor', 'a CountingSharedDescriptor (filter.toShared())', d);
    }
    if (d.buffer.byteLength !== d.size / 2) {
      throw new HashGateError(ErrorCodes.BLOOM_SHAPE_MISMATCH, 'descriptor: buffer size does not match size', { details: { size: d.size } });
    }
    return new CountingBloomFilter(d.buffer, d.size, d.hashFunctions, d.seed);
  }

  toShared(): CountingSharedDescriptor {
    return { kind: 'hashgate.counting-bloom', version: 1, buffer: this.buffer, size: this.size, hashFunctions: this.hashFunctions, seed: this.seed };
  }

  get byteLength(): number {
    return this.size / 2;
  }

  /** Counter bytes (8 counters per little-endian u32, counter i in nibble i & 7). */
  bytesView(): Uint8Array {
    return new Uint8Array(this.buffer);
  }

  add(key: Key): void {
    this.#apply(murmur3_128(keyBytes(key, 'key'), this.seed), +1);
  }

  addAll(keys: Keys): number {
    const d = this.#digests(keys);
    const n = d.length / 16;
    for (let i = 0; i < n; i++) this.#apply(d.subarray(i * 16, i * 16 + 16), +1);
    return n;
  }

  /**
   * Decrements the key's counters if it might be present; returns false (and changes nothing)
   * when it is definitely absent. Removing a key that was never added corrupts other keys'
   * counts: only remove what you added. Saturated counters stay at 15 (see file header).
   */
  remove(key: Key): boolean {
    const d = murmur3_128(keyBytes(key, 'key'), this.seed);
    if (!this.#test(d)) return false;
    this.#apply(d, -1);
    return true;
  }

  mightContain(key: Key): boolean {
    return this.#test(murmur3_128(keyBytes(key, 'key'), this.seed));
  }

  mightContainAll(keys: Keys): Uint8Array {
    const d = this.#digests(keys);
    const out = new Uint8Array(d.length / 16);
    for (let i = 0; i < out.length; i++) out[i] = this.#test(d.subarray(i * 16, i * 16 + 16)) ? 1 : 0;
    return out;
  }

  /** Smallest of the key's counters: an upper bound on how many times it was added (<= 15). */
  count(key: Key): number {
    probeIndexes(murmur3_128(keyBytes(key, 'key'), this.seed), this.hashFunctions, this.size, this.#idx);
    let min = MAX;
    for (let j = 0; j < this.hashFunctions; j++) min = Math.min(min, this.#get(this.#idx[j]!));
    return min;
  }

  saturatedCount(): number {
    let n = 0;
    for (let w = 0; w < this.#words.length; w++) {
      const v = this.#words[w]!;
      if (v === 0) continue;
      for (let s = 0; s < 32; s += 4) if (((v >>> s) & 15) === MAX) n++;
    }
    return n;
  }

  /** Counters that are non-zero. */
  nonZeroCount(): number {
    let n = 0;
    for (let w = 0; w < this.#words.length; w++) {
      const v = this.#words[w]!;
      if (v === 0) continue;
      for (let s = 0; s < 32; s += 4) if (((v >>> s) & 15) !== 0) n++;
    }
    return n;
  }

  /** A plain (Guava-compatible) BloomFilter with a bit set wherever a counter is non-zero. */
  toBloomFilter(): BloomFilter {
    const f = BloomFilter.withShape({ bitSize: this.size, hashFunctions: this.hashFunctions }, this.seed);
    const bits = new Uint8Array(this.size / 8);
    for (let w = 0; w < this.#words.length; w++) {
      const v = this.#words[w]!;
      if (v === 0) continue;
      let b = 0;
      for (let s = 0; s < 8; s++) if (((v >>> (s * 4)) & 15) !== 0) b |= 1 << s;
      bits[w] = b;
    }
    f.loadBitsLE(bits);
    return f;
  }

  /** Replaces the counters with `data` (snapshot loading; the filter must not be shared yet). */
  loadCounters(data: Uint8Array): void {
    if (data.length !== this.byteLength) throw new HashGateError(ErrorCodes.BLOOM_SHAPE_MISMATCH, 'counter bytes do not match size', { details: { got: data.length, want: this.byteLength } });
    new Uint8Array(this.buffer).set(data);
  }

  #digests(keys: Keys): Uint8Array {
    return hashBatch(keys, { seed: this.seed });
  }

  #get(i: number): number {
    return (this.#words[(i - (i & 7)) / 8]! >>> ((i & 7) * 4)) & 15;
  }

  #test(digest: Uint8Array): boolean {
    probeIndexes(digest, this.hashFunctions, this.size, this.#idx);
    for (let j = 0; j < this.hashFunctions; j++) if (this.#get(this.#idx[j]!) === 0) return false;
    return true;
  }

  /** CAS loop per counter: saturating increment, or decrement that leaves 0 and 15 alone. */
  #apply(digest: Uint8Array, delta: 1 | -1): void {
    probeIndexes(digest, this.hashFunctions, this.size, this.#idx);
    const words = this.#words;
    for (let j = 0; j < this.hashFunctions; j++) {
      const i = this.#idx[j]!;
      const w = (i - (i & 7)) / 8;
      const shift = (i & 7) * 4;
      for (;;) {
        const old = Atomics.load(words, w);
        const c = (old >>> shift) & 15;
        if (c === MAX || (delta < 0 && c === 0)) break;
        const next = (old & ~(15 << shift)) | ((c + delta) << shift);
        if (Atomics.compareExchange(words, w, old, next) === old) break;
      }
    }
  }
}
