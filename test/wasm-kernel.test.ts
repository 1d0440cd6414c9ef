import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { createKernelMemory, instantiateKernel, kernelModule, kernelPath, KERNEL_RESERVED_BYTES } from '../src/hash/kernel.js';
import { refMurmur3x64_128Bytes, refMurmur3x86_32 } from '../src/hash/reference.js';
import { hashBatch, packKeys } from '../src/hash/index.js';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

describe('wasm kernel (raw exports)', () => {
  it('exposes the documented exports and imports a shared memory', () => {
    const mod = kernelModule();
    const imports = WebAssembly.Module.imports(mod);
    expect(imports).toEqual([{ module: 'env', name: 'memory', kind: 'memory' }]);
    const names = WebAssembly.Module.exports(mod).map((e) => e.name);
    for (const n of [
      'RESERVED_BYTES', 'mmH1', 'mmH2', 'mm3x64_128', 'mm128One', 'mm128OneRef', 'mm32One', 'mm86_128One',
      'mm128BucketOne', 'mm128JumpOne', 'mm128Batch', 'mm32Batch', 'mm86_128Batch', 'mm128BucketBatch', 'mm128JumpBatch',
      'xxh64Batch', 'xxh64One',
    ]) expect(names).toContain(n);
    const mem = createKernelMemory(2);
    expect(mem.buffer).toBeInstanceOf(SharedArrayBuffer);
    const k = instantiateKernel(mem);
    expect(k.RESERVED_BYTES.value).toBe(KERNEL_RESERVED_BYTES);
    expect(kernelModule()).toBe(mod);
  });

  it('single-key exports match the JS reference for lengths 0..299', () => {
    const mem = createKernelMemory(4);
    const k = instantiateKernel(mem);
    const u8 = new Uint8Array(mem.buffer);
    for (let len = 0; len < 300; len++) {
      const d = new Uint8Array(len);
      for (let i = 0; i < len; i++) d[i] = (i * 131 + len * 7) & 255;
      u8.set(d, 70_000);
      k.mm128One(70_000, len, 42, 80_000);
      expect(hex(u8.slice(80_000, 80_016))).toBe(hex(refMurmur3x64_128Bytes(d, 42n)));
      expect(BigInt.asUintN(64, k.mmH1.value as bigint)).toBe(new DataView(u8.slice(80_000, 80_008).buffer).getBigUint64(0, true));
      expect(k.mm32One(70_000, len, 0x9747b28c) >>> 0).toBe(refMurmur3x86_32(d, 0x9747b28c));
    }
  });

  it('memory growth keeps earlier data and results right (views rebuilt)', () => {
    const mem = createKernelMemory(2, 64);
    const k = instantiateKernel(mem);
    const keys = packKeys(['a', '王伟110101199003074518', 'x'.repeat(100)]);
    const lay = (base: number): void => {
      const u8 = new Uint8Array(mem.buffer);
      u8.set(keys.bytes, base);
      new Uint32Array(mem.buffer).set(keys.offsets, (base + 4096) >>> 2);
      k.mm128Batch(base, base + 4096, keys.count, 9, base + 8192);
    };
    lay(70_000);
    const before = new Uint8Array(mem.buffer).slice(70_000 + 8192, 70_000 + 8192 + 48);
    const old = new Uint8Array(mem.buffer);
    mem.grow(10);
    expect(old.byteLength).toBe(2 * 65536); // stale view keeps its length
    expect(mem.buffer.byteLength).toBe(12 * 65536);
    lay(11 * 65536);
    const after = new Uint8Array(mem.buffer).slice(11 * 65536 + 8192, 11 * 65536 + 8192 + 48);
    expect(after).toEqual(before);
    expect(before).toEqual(hashBatch(keys, { seed: 9 }));
    expect(new Uint8Array(mem.buffer).slice(70_000 + 8192, 70_000 + 8192 + 48)).toEqual(before);
  });

  it('a worker thread instantiates the same Module on the same shared memory', async () => {
    const mem = createKernelMemory(4);
    const keys = packKeys(Array.from({ length: 100 }, (_, i) => `用户-${i}`));
    new Uint8Array(mem.buffer).set(keys.bytes, 100_000);
    new Uint32Array(mem.buffer).set(keys.offsets, 150_000 >>> 2);
    const src = `
      const { parentPort, workerData } = require('node:worker_threads');
      const { module, memory } = workerData;
      const k = new WebAssembly.Instance(module, { env: { memory } }).exports;
      k.mm128Batch(100000, 150000, 100, 3, 200000);
      parentPort.postMessage('done');`;
    const w = new Worker(src, { eval: true, workerData: { module: kernelModule(), memory: mem } });
    const msg = await new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    await w.terminate();
    expect(msg).toBe('done');
    expect(new Uint8Array(mem.buffer).slice(200_000, 200_000 + 1600)).toEqual(hashBatch(keys, { seed: 3 }));
  });

  it('the committed wasm/hashgate.wasm is what `npm run build:wasm` makes from wasm/assembly', () => {
    const dir = mkdtempSync(join(tmpdir(), 'hg-wasm-'));
    try {
      const out = join(dir, 'hashgate.wasm');
      execFileSync(process.execPath, [fileURLToPath(new URL('../wasm/build.mjs', import.meta.url)), '--out', out], { stdio: 'pipe' });
      // If this fails: a wasm/assembly/*.ts changed without `npm run build:wasm` (and committing the binary).
      expect(Buffer.compare(readFileSync(out), readFileSync(kernelPath()))).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
