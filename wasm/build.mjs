// Builds wasm/hashgate.wasm (committed), the one WebAssembly kernel: MurmurHash3, XXH64, the
// Bloom filter kernels and the compact SADD writer, from wasm/assembly/index.ts. Run with `npm run build:wasm`.
// Flags: stub runtime (no GC, we never allocate), SIMD (ASCII runs of UTF-16 keys; every Node
// this package supports has it), imported shared memory so worker threads can
// instantiate the same Module on one WebAssembly.Memory (a filter's bits or a hashing arena),
// statics kept inside the first 64 KiB page (KERNEL_RESERVED_BYTES), which every JS layout skips.
import asc from 'assemblyscript/asc';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const here = dirname(fileURLToPath(import.meta.url));
// `--out FILE` builds elsewhere (test/wasm-kernel.test.ts checks the committed binary is current).
const outAt = process.argv.indexOf('--out');
const out = outAt > 0 ? process.argv[outAt + 1] : join(here, 'hashgate.wasm');
const args = [
  join(here, 'assembly', 'index.ts'),
  '--outFile', out,
  '--runtime', 'stub',
  '--importMemory',
  '--sharedMemory',
  '--initialMemory', '1',
  '--maximumMemory', '65536',
  '--memoryBase', '4096',
  '--enable', 'threads',
  '--enable', 'simd',
  '-O3',
  '--noAssert',
  '--converge',
  '--uncheckedBehavior', 'always',
];
// `--wat` also writes a text listing next to the binary, for reading the optimized output.
if (process.argv.includes('--wat')) args.push('--textFile', join(here, 'hashgate.wat'));
const { error, stderr } = await asc.main(args, {});
if (error) {
  console.error(stderr.toString());
  console.error(error.message);
  process.exit(1);
}
console.log(`built ${out}`);
