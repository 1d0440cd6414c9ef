// Typed view of the Bloom exports of the one hashgate kernel (wasm/hashgate.wasm, loaded and
// cached per thread by src/hash/kernel.ts), instantiated once per (thread, filter memory).
// No silent fallback: a missing, unreadable or stale binary is a HashGateError HG_ERR_WASM, the
// same rule as hashing. The plain-JS bit engine runs only when a filter asks for `engine: 'js'`.
import { ErrorCodes, HashGateError } from '../errors.js';
import { instantiateKernel, requireKernelAbi } from '../hash/kernel.js';

export interface BloomKernel {
  bloomAddOne(bits: number, bitSize: number, k: number, seed: number, ptr: number, len: number): number;
  bloomCheckOne(bits: number, bitSize: number, k: number, seed: number, ptr: number, len: number): number;
  bloomAddBatch(
    bits: number, bitSize: number, k: number, seed: number, bytes: number, offsets: number, count: number,
    bitsSetOut: number,
  ): number;
  bloomCheckBatch(
    bits: number, bitSize: number, k: number, seed: number, bytes: number, offsets: number, count: number,
    out: number,
  ): number;
  /** bloomAddBatch with a 1/0 "changed a bit" byte per key at `flags`; returns the bits set. */
  bloomAddFlags(
    bits: number, bitSize: number, k: number, seed: number, bytes: number, offsets: number, count: number,
    flags: number,
  ): number;
  /** `count` 16-byte murmur3_128 digests (h1 LE, h2 LE) at `digests`; bits set to `bitsSetOut`. */
  bloomAddDigests(bits: number, bitSize: number, k: number, digests: number, count: number, bitsSetOut: number): number;
  bloomCheckDigests(bits: number, bitSize: number, k: number, digests: number, count: number, out: number): number;
  bloomPopcount(ptr: number, words: number): number;
  // The same over UTF-16 keys (a string's code units, `units` code units at `ptr`; batch offsets
  // in code units): hashed as TextEncoder's UTF-8 of them, so every answer and bit is the same.
  // `tmp`: UTF16_TMP_BYTES (attach.ts) private to the calling thread.
  bloomAddOne16(bits: number, bitSize: number, k: number, seed: number, ptr: number, units: number, tmp: number): number;
  bloomCheckOne16(bits: number, bitSize: number, k: number, seed: number, ptr: number, units: number, tmp: number): number;
  bloomAddBatch16(
    bits: number, bitSize: number, k: number, seed: number, units: number, offsets: number, count: number,
    bitsSetOut: number, tmp: number,
  ): number;
  bloomAddFlags16(
    bits: number, bitSize: number, k: number, seed: number, units: number, offsets: number, count: number,
    flags: number, tmp: number,
  ): number;
  bloomCheckBatch16(
    bits: number, bitSize: number, k: number, seed: number, units: number, offsets: number, count: number,
    out: number, tmp: number,
  ): number;
}

/** Must equal BLOOM_ABI in wasm/assembly/bloom.ts: a stale binary is refused, never misused. */
const BLOOM_ABI = 5;

/**
 * Bytes each thread's scratch gives the kernel's UTF-16 exports as `tmp` (attach.ts): at least the
 * binary's UTF16_TMP_BYTES, which kernelFor checks.
 */
export const UTF16_TMP_BYTES = 3 * 1024 + 16 + 64 * 16 + 2 * 64;

const instances = new WeakMap<WebAssembly.Memory, BloomKernel>();

/**
 * The kernel instantiated on `memory` (one instance per thread and memory; instantiation rewrites
 * only the statics below 64 KiB, identical for every instance). Throws HG_ERR_WASM when the
 * binary is missing, does not compile, or lacks the Bloom exports this code expects.
 */
export function kernelFor(memory: WebAssembly.Memory): BloomKernel {
  let k = instances.get(memory);
  if (k === undefined) {
    const exports = instantiateKernel(memory);
    requireKernelAbi(exports, 'BLOOM_ABI', BLOOM_ABI, 'Bloom');
    const tmp = (exports as unknown as Record<string, WebAssembly.Global | undefined>).UTF16_TMP_BYTES?.value as number | undefined;
    if (tmp === undefined || tmp > UTF16_TMP_BYTES) {
      throw new HashGateError(ErrorCodes.WASM, `hashgate.wasm needs ${String(tmp)} bytes of UTF-16 scratch, this code gives ${UTF16_TMP_BYTES}: rebuild it with \`npm run build:wasm\``, {
        details: { need: tmp, have: UTF16_TMP_BYTES },
      });
    }
    k = exports as unknown as BloomKernel;
    instances.set(memory, k);
  }
  return k;
}
