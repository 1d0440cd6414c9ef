// Loads hashgate's one WebAssembly kernel (wasm/hashgate.wasm: MurmurHash3, XXH64, the Bloom
// filter kernels and the compact SADD writer, built by `npm run build:wasm`). The Module is
// compiled lazily, on the first call that needs it (importing hashgate loads nothing), once per
// thread, and cached. Every instance imports a *shared* WebAssembly.Memory so a worker can
// instantiate the same Module on the memory the main thread created (postMessage the Memory, then
// `instantiateKernel(memory)` there).
//
// Fallback rule, the same for hashing and Bloom filters: none. A missing or uncompilable binary
// throws HashGateError HG_ERR_WASM from the first call that needs the kernel (and again on every
// later one; nothing is cached on failure), never a silently slower or different answer.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ErrorCodes, HashGateError } from '../errors.js';

/** Bytes [0, KERNEL_RESERVED_BYTES) belong to the kernel (AS statics); JS layouts start here. */
export const KERNEL_RESERVED_BYTES = 65536;
export const WASM_PAGE = 65536;
/** The module declares this maximum, so any shared memory up to 4 GiB can be imported. */
export const KERNEL_MAX_PAGES = 65536;

/**
 * Raw kernel exports. Pointers are byte offsets into the memory; every batch export reads keys as
 * `bytes + offsets[i] .. bytes + offsets[i+1]` with `offsets` holding count+1 little-endian u32
 * (pointer arithmetic wraps mod 2^32, so `bytes` may be `base - offsets[0]`). Seeds are uint32;
 * 128-bit seeds are sign-extended as Guava does (`mm128OneRef` zero-extends like the C++ reference).
 * Numbers come back as signed i32: use `>>> 0` for u32 results.
 */
export interface KernelExports {
  readonly memory: WebAssembly.Memory;
  readonly RESERVED_BYTES: WebAssembly.Global;
  /** Lanes of the last x64_128 computation in this instance (BigInt when read from JS). */
  readonly mmH1: WebAssembly.Global;
  readonly mmH2: WebAssembly.Global;
  /** 16 digest bytes (h1 LE, h2 LE) to `out`. */
  mm128One(ptr: number, len: number, seed: number, out: number): void;
  mm128OneRef(ptr: number, len: number, seed: number, out: number): void;
  mm32One(ptr: number, len: number, seed: number): number;
  /** x86_128 digest (h1..h4, each u32 LE) to `out`. */
  mm86_128One(ptr: number, len: number, seed: number, out: number): void;
  mm128BucketOne(ptr: number, len: number, seed: number, buckets: number): number;
  mm128JumpOne(ptr: number, len: number, seed: number, buckets: number): number;
  mm128Batch(bytes: number, offsets: number, count: number, seed: number, out: number): void;
  mm32Batch(bytes: number, offsets: number, count: number, seed: number, out: number): void;
  mm86_128Batch(bytes: number, offsets: number, count: number, seed: number, out: number): void;
  mm128BucketBatch(bytes: number, offsets: number, count: number, seed: number, buckets: number, out: number): void;
  mm128JumpBatch(bytes: number, offsets: number, count: number, seed: number, buckets: number, out: number): void;
  /** XXH64, 8 bytes LE per key; the 64-bit seed as two u32 halves. */
  xxh64Batch(bytes: number, offsets: number, count: number, seedLo: number, seedHi: number, out: number): void;
  /** XXH64 of one key as a signed 64-bit BigInt (BigInt.asUintN(64, v) for the unsigned value). */
  xxh64One(ptr: number, len: number, seedLo: number, seedHi: number): bigint;
  /**
   * mm128One / mm128Batch over UTF-16 code units (little-endian u16, lengths and offsets in code
   * units): the digest of TextEncoder's UTF-8 bytes of those units, transcoded while hashing.
   * `tmp`: UTF16_TMP_BYTES (a kernel global) private to the calling thread.
   */
  mm128One16(ptr: number, units: number, seed: number, out: number, tmp: number): void;
  mm128Batch16(units: number, offsets: number, count: number, seed: number, out: number, tmp: number): void;
  /** UTF-8 byte length of `units` code units at `ptr` (a lone surrogate counts 3, as U+FFFD). */
  utf8Length16(ptr: number, units: number): number;
  /** TextEncoder's UTF-8 of `units` code units at `src` to `dst` (3 bytes of slack); returns its length. */
  utf16ToUtf8(src: number, units: number, dst: number): number;
  /**
   * RESP of one compact-layout SADD per 16-byte record at `inp` (member i64 LE, table u32, the
   * table's sub-bucket count u32), the key being `head` (headLen bytes) + t + '}' + s + '.' + d;
   * writes at most count * (headLen + 80) bytes at `out` and returns how many.
   */
  saddCompactBatch(inp: number, count: number, head: number, headLen: number, out: number): number;
  /**
   * The Bloom filter exports (bloomAddOne, bloomCheckBatch, ..., BLOOM_ABI) of the same module,
   * typed where they are used: src/bloom/kernel.ts.
   */
  readonly [name: string]: unknown;
}

// src/hash/kernel.ts under vitest and dist/src/hash/kernel.js after tsc sit at different depths.
const CANDIDATES = ['../../wasm/hashgate.wasm', '../../../wasm/hashgate.wasm'];

/** Absolute path of the committed kernel binary. */
export function kernelPath(): string {
  for (const rel of CANDIDATES) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(p)) return p;
  }
  throw new HashGateError(ErrorCodes.WASM, `hashgate.wasm not found next to ${fileURLToPath(import.meta.url)} (the package ships it in wasm/; a checkout rebuilds it with \`npm run build:wasm\`)`, {
    details: { tried: CANDIDATES },
  });
}

let cachedModule: WebAssembly.Module | undefined;

/** The compiled kernel, compiled synchronously on first use and then cached for this thread. */
export function kernelModule(): WebAssembly.Module {
  if (cachedModule === undefined) {
    try {
      cachedModule = new WebAssembly.Module(readFileSync(kernelPath()));
    } catch (err) {
      if (err instanceof HashGateError) throw err;
      throw new HashGateError(ErrorCodes.WASM, `cannot compile hashgate.wasm: ${(err as Error).message}`, { cause: err });
    }
  }
  return cachedModule;
}

/** A shared memory the kernel can import. Sizes in 64 KiB pages; initial must be >= 1. */
export function createKernelMemory(initialPages = 64, maximumPages = KERNEL_MAX_PAGES): WebAssembly.Memory {
  return new WebAssembly.Memory({ initial: Math.max(1, initialPages), maximum: maximumPages, shared: true });
}

/**
 * Instantiates the kernel on `memory` (must be shared, as created by createKernelMemory or any
 * `new WebAssembly.Memory({ initial, maximum, shared: true })`). Globals (mmH1/mmH2) are per
 * instance, memory is not: threads sharing a memory must use disjoint regions (every export
 * writes only where its `out` pointer says).
 */
export function instantiateKernel(memory: WebAssembly.Memory, module: WebAssembly.Module = kernelModule()): KernelExports {
  try {
    const instance = new WebAssembly.Instance(module, { env: { memory } });
    return instance.exports as unknown as KernelExports;
  } catch (err) {
    throw new HashGateError(ErrorCodes.WASM, `cannot instantiate hashgate.wasm: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Throws HG_ERR_WASM unless the instance's `global` export (e.g. BLOOM_ABI) equals `want`: a stale
 * binary built from older AssemblyScript is refused, never misused. `what` names the kernel part.
 */
export function requireKernelAbi(exports: KernelExports, global: string, want: number, what: string): void {
  const abi = (exports as unknown as Record<string, WebAssembly.Global | undefined>)[global];
  if (abi?.value !== want) {
    throw new HashGateError(
      ErrorCodes.WASM,
      `hashgate.wasm has ${what} kernel ABI ${String(abi?.value)}, this code needs ${want}: rebuild it with \`npm run build:wasm\``,
      { details: { abi: abi?.value, want } },
    );
  }
}
