// Builds wasm/hashgate.wasm (committed) from wasm/assembly/. Run with `npm run build:wasm`.
// Flags: stub runtime (no GC, we never allocate), imported shared memory so worker threads can
// instantiate the same Module on one WebAssembly.Memory, statics kept inside the first 64 KiB page.
import asc from 'assemblyscript/asc';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

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

// One script builds every committed binary: wasm/hashgate.wasm compiles bloom.ts too, and the
// Bloom suite's standalone wasm/bloom.wasm comes from build-bloom.mjs.
const bloom = join(here, 'build-bloom.mjs');
if (outAt < 0 && existsSync(bloom)) await import(pathToFileURL(bloom).href);
// RedisBloom's HighwayHash kernel, wasm/highway.wasm.
const highway = join(here, 'build-highway.mjs');
if (outAt < 0 && existsSync(highway)) await import(pathToFileURL(highway).href);
