import { describe, expect, it } from 'vitest';
import { createKernelMemory, instantiateKernel, kernelModule, KERNEL_RESERVED_BYTES } from '../src/hash/kernel.js';
import { refMurmur3x64_128Bytes, refMurmur3x86_32 } from '../src/hash/reference.js';

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
});
