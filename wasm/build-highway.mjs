// Builds wasm/highway.wasm (committed) from wasm/assembly/highway.ts: stub runtime, its own
// exported memory (no statics: the module keeps its state in globals). `node wasm/build-highway.mjs
// [--out FILE]`.
import asc from 'assemblyscript/asc';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const here = dirname(fileURLToPath(import.meta.url));
const outAt = process.argv.indexOf('--out');
const out = outAt > 0 ? process.argv[outAt + 1] : join(here, 'highway.wasm');
const args = [
  join(here, 'assembly', 'highway.ts'),
  '--outFile', out,
  '--runtime', 'stub',
  '--initialMemory', '2',
  '--maximumMemory', '16384',
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
