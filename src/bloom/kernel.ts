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
  ): number;
  bloomCheckBatch(
    bits: number, bitSize: number, k: number, seed: number, bytes: number, offsets: number, count: number,
    out: number,
  ): number;
  bloomPopcount(ptr: number, words: number): number;
}

const REQUIRED = ['bloomAddOne', 'bloomCheckOne', 'bloomAddBatch', 'bloomCheckBatch', 'bloomPopcount'];

let cachedModule: WebAssembly.Module | null | undefined;

/** Candidates relative to src/bloom (vitest) and dist/src/bloom (built). */
function findWasm(): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const rel of ['../../wasm', '../../../wasm']) {
    for (const name of ['bloom.wasm', 'hashgate.wasm']) {
      const p = join(here, rel, name);
      if (existsSync(p)) {
        const mod = new WebAssembly.Module(readFileSync(p));
        const names = new Set(WebAssembly.Module.exports(mod).map((e) => e.name));
        if (REQUIRED.every((n) => names.has(n))) return p;
      }
    }
  }
  return undefined;
}

export function bloomModule(): WebAssembly.Module | null {
  if (cachedModule !== undefined) return cachedModule;
  if (process.env.HASHGATE_BLOOM_JS === '1') return (cachedModule = null);
  const path = findWasm();
  cachedModule = path === undefined ? null : new WebAssembly.Module(readFileSync(path));
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
