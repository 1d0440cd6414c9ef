// Loads wasm/highway.wasm (Redisson-variant HighwayHash and Bloom indexes on native 64-bit lanes)
// once per thread. Null when the binary is missing or stale: callers then use the plain-JS
// version in highway.ts, which gives the same results, slower.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Must equal HIGHWAY_ABI in wasm/assembly/highway.ts. */
const HIGHWAY_ABI = 2;

export interface HighwayKernel {
  memory: WebAssembly.Memory;
  /** First byte callers may use; below it is the kernel's scratch. */
  reserved: number;
  highway128(p: number, len: number, out: number): void;
  redissonIndexes(bytes: number, offsets: number, count: number, k: number, size: number, out: number): void;
  redissonContains(bytes: number, offsets: number, count: number, k: number, size: number, bits: number, bitsLen: number, out: number): void;
}

let cached: HighwayKernel | null | undefined;

export function highwayKernel(): HighwayKernel | null {
  if (cached !== undefined) return cached;
  cached = null;
  if (process.env.HASHGATE_HIGHWAY_JS === '1') return cached;
  const here = dirname(fileURLToPath(import.meta.url));
  for (const rel of ['../../wasm', '../../../wasm']) {
    const p = join(here, rel, 'highway.wasm');
    if (!existsSync(p)) continue;
    const inst = new WebAssembly.Instance(new WebAssembly.Module(readFileSync(p)), {
      env: {
        abort: () => {
          throw new Error('highway kernel abort');
        },
      },
    });
    const e = inst.exports as Record<string, unknown>;
    if ((e.HIGHWAY_ABI as WebAssembly.Global | undefined)?.value !== HIGHWAY_ABI) continue;
    cached = {
      memory: e.memory as WebAssembly.Memory,
      reserved: (e.RESERVED as WebAssembly.Global).value as number,
      highway128: e.highway128 as HighwayKernel['highway128'],
      redissonIndexes: e.redissonIndexes as HighwayKernel['redissonIndexes'],
      redissonContains: e.redissonContains as HighwayKernel['redissonContains'],
    };
    break;
  }
  return cached;
}
