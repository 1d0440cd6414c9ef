// RedisBloom's HighwayHash exports of the one hashgate kernel (wasm/hashgate.wasm, compiled once
// per thread by src/hash/kernel.ts), instantiated on a memory private to this thread: the
// HighwayHash exports keep a key's last bytes in memory [0, 64), so threads must not share it.
// Same rule as hashing and Bloom filters: a missing, uncompilable or stale binary throws
// HashGateError HG_ERR_WASM; there is no silent JS fallback (src/hash/highway.ts is the reference
// the tests hold the kernel to).
import { KERNEL_RESERVED_BYTES, createKernelMemory, instantiateKernel, requireKernelAbi } from './kernel.js';

/** Must equal HIGHWAY_ABI in wasm/assembly/highway.ts. */
const HIGHWAY_ABI = 2;

export interface HighwayKernel {
  memory: WebAssembly.Memory;
  /** First byte callers may use; below it are the kernel's scratch and statics. */
  reserved: number;
  highway128(p: number, len: number, out: number): void;
  redissonIndexes(bytes: number, offsets: number, count: number, k: number, size: number, out: number): void;
  redissonContains(bytes: number, offsets: number, count: number, k: number, size: number, bits: number, bitsLen: number, out: number): void;
}

let cached: HighwayKernel | undefined;

/** This thread's HighwayHash kernel, instantiated on first use. */
export function highwayKernel(): HighwayKernel {
  if (cached !== undefined) return cached;
  const memory = createKernelMemory(2);
  const e = instantiateKernel(memory);
  requireKernelAbi(e, 'HIGHWAY_ABI', HIGHWAY_ABI, 'HighwayHash');
  cached = {
    memory,
    reserved: KERNEL_RESERVED_BYTES,
    highway128: e.highway128 as HighwayKernel['highway128'],
    redissonIndexes: e.redissonIndexes as HighwayKernel['redissonIndexes'],
    redissonContains: e.redissonContains as HighwayKernel['redissonContains'],
  };
  return cached;
}
