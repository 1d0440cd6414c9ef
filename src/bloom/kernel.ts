// Loads wasm/bloom.wasm once per thread and instantiates it on each filter's shared memory.
// Falls back to a plain-JS engine (reference MurmurHash3) when the binary is missing, so a
// checkout without built wasm still works, slowly.
import { readFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

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
  bloomPopcount(ptr: number, words: number): number;
}

const REQUIRED = ['bloomAddOne', 'bloomCheckOne', 'bloomAddBatch', 'bloomCheckBatch', 'bloomPopcount', 'BLOOM_ABI'];
/** Must equal BLOOM_ABI in wasm/assembly/bloom.ts: a stale binary is refused, never misused. */
const BLOOM_ABI = 2;

let cachedModule: WebAssembly.Module | null | undefined;

/** wasm/bloom.wasm relative to src/bloom (vitest) or dist/src/bloom (built). */
function findModule(): WebAssembly.Module | null {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const rel of ['../../wasm', '../../../wasm']) {
    const p = join(here, rel, 'bloom.wasm');
    if (!existsSync(p)) continue;
    const mod = new WebAssembly.Module(readFileSync(p));
    const names = new Set(WebAssembly.Module.exports(mod).map((e) => e.name));
    if (!REQUIRED.every((n) => names.has(n))) continue;
    // Read the ABI global from a throwaway instance on a tiny memory.
    const probe = new WebAssembly.Instance(mod, {
      env: { memory: new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true }), abort: () => undefined },
    });
    const abi = probe.exports.BLOOM_ABI as WebAssembly.Global;
    if (abi.value === BLOOM_ABI) return mod;
  }
  return null;
}

export function bloomModule(): WebAssembly.Module | null {
  if (cachedModule !== undefined) return cachedModule;
  if (process.env.HASHGATE_BLOOM_JS === '1') return (cachedModule = null);
  cachedModule = findModule();
  return cachedModule;
}

const instances = new WeakMap<WebAssembly.Memory, BloomKernel>();

/** One instance per (thread, memory); instantiation rewrites only statics below 64 KiB. */
export function kernelFor(memory: WebAssembly.Memory): BloomKernel | null {
  const mod = bloomModule();
  if (mod === null) return null;
  let k = instances.get(memory);
  if (k === undefined) {
    const inst = new WebAssembly.Instance(mod, {
      env: {
        memory,
        abort: () => {
          throw new Error('bloom kernel abort');
        },
      },
    });
    k = inst.exports as unknown as BloomKernel;
    instances.set(memory, k);
  }
  return k;
}
