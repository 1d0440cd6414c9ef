// Builds wasm/bloom.wasm (committed) from wasm/assembly/bloom-entry.ts with the same flags as
// wasm/build.mjs: stub runtime, imported shared memory, statics below 64 KiB.
// Run with `node wasm/build-bloom.mjs`.
import asc from 'assemblyscript/asc';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, 'bloom.wasm');
const args = [
  join(here, 'assembly', 'bloom-entry.ts'),
  '--outFile', out,
  '--runtime', 'stub',
  '--importMemory',
  '--sharedMemory',
  '--initialMemory', '1',
  '--maximumMemory', '65536',
  '--memoryBase', '4096',
  '--enable', 'threads',
  '-O3',
  '--noAssert',
  '--converge',
  '--uncheckedBehavior', 'always',
];
const { error, stderr } = await asc.main(args, {});
if (error) {
  console.error(stderr.toString());
  console.error(error.message);
  process.exit(1);
}
console.log(`built ${out}`);
