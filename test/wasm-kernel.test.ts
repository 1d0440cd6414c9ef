import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { createKernelMemory, instantiateKernel, kernelModule, kernelPath, KERNEL_RESERVED_BYTES } from '../src/hash/kernel.js';
import { refMurmur3x64_128Bytes, refMurmur3x86_32 } from '../src/hash/reference.js';
import { hashBatch, packKeys, xxh64 } from '../src/hash/index.js';
import { BloomFilter } from '../src/bloom/index.js';
import { kernelFor } from '../src/bloom/kernel.js';

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
      'BLOOM_ABI', 'bloomAddOne', 'bloomCheckOne', 'bloomAddBatch', 'bloomAddFlags', 'bloomCheckBatch', 'bloomAddDigests', 'bloomCheckDigests', 'bloomPopcount',
      'HIGHWAY_ABI', 'highway128', 'redissonIndexes', 'redissonContains',
      'UTF16_TMP_BYTES', 'mm128One16', 'mm128Batch16', 'utf8Length16', 'utf16ToUtf8',
      'bloomAddOne16', 'bloomCheckOne16', 'bloomAddBatch16', 'bloomAddFlags16', 'bloomCheckBatch16',
      'saddCompactBatch',
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

  it('is the only binary: the Bloom filter runs its exports on the filter memory', () => {
    const wasmDir = fileURLToPath(new URL('../wasm/', import.meta.url));
    expect(readdirSync(wasmDir).filter((f) => f.endsWith('.wasm'))).toEqual(['hashgate.wasm']);
    const f = BloomFilter.create({ expectedItems: 1000, fpp: 0.01 });
    expect(f.engine).toBe('wasm');
    const k = kernelFor(f.memory);
    expect(kernelFor(f.memory)).toBe(k); // one instance per (thread, memory)
    // Raw Bloom export on the key staged by hand agrees with the filter's own answer.
    const key = new TextEncoder().encode('王伟');
    new Uint8Array(f.memory.buffer).set(key, 200);
    expect(k.bloomCheckOne(f.bitsOffset, f.bitSize, f.hashFunctions, 0, 200, key.length)).toBe(0);
    expect(k.bloomAddOne(f.bitsOffset, f.bitSize, f.hashFunctions, 0, 200, key.length)).toBeGreaterThan(0);
    expect(f.mightContain('王伟')).toBe(true);
    expect(f.countBits()).toBe(k.bloomPopcount(f.bitsOffset, f.bitSize / 64));
  });

  it('xxh64One returns the digest xxh64() and the batch path give', () => {
    const mem = createKernelMemory(2);
    const k = instantiateKernel(mem);
    const d = new TextEncoder().encode('用户-xxh64-'.repeat(7));
    new Uint8Array(mem.buffer).set(d, 70_000);
    const v = BigInt.asUintN(64, k.xxh64One(70_000, d.length, 0x89abcdef, 0x01234567));
    expect(v).toBe(xxh64(d, 0x0123456789abcdefn));
    expect(new DataView(hashBatch([d], { algorithm: 'xxh64', seed: 5 }).buffer).getBigUint64(0, true)).toBe(xxh64(d, 5));
  });
});

/**
 * The fallback rule, on a built copy of the package whose wasm/ is missing, corrupt or stale:
 * importing works (loading is lazy), then every call that needs what the binary cannot give
 * throws HG_ERR_WASM naming the file, and a later call throws again rather than answering
 * differently. Nothing silently switches engine.
 */
describe('without a usable kernel binary', () => {
  const repo = fileURLToPath(new URL('..', import.meta.url));
  const probe = `
    const hg = await import(process.argv[1]);
    const { BloomFilter } = await import(process.argv[2]);
    const res = {};
    const tryIt = (name, f) => { try { f(); res[name] = 'ok'; } catch (e) { res[name] = e.code + ' ' + e.name + ': ' + e.message; } };
    tryIt('murmur3_128', () => hg.murmur3_128('a'));
    tryIt('xxh64', () => hg.xxh64('a'));
    tryIt('hashBatch', () => hg.hashBatch(['a', 'b'], { algorithm: 'xxh64' }));
    tryIt('bloom', () => BloomFilter.create({ expectedItems: 1000, fpp: 0.01 }));
    tryIt('bloomJs', () => BloomFilter.create({ expectedItems: 1000, fpp: 0.01, engine: 'js' }).add('a'));
    tryIt('again', () => hg.murmur3_32('a'));
    console.log(JSON.stringify(res));`;

  function runWith(wasm: Buffer | undefined): Record<string, string> {
    if (!existsSync(join(repo, 'dist/src/index.js'))) {
      expect(spawnSync('npm', ['run', 'build', '--silent'], { cwd: repo, encoding: 'utf8' }).status).toBe(0);
    }
    const dir = mkdtempSync(join(tmpdir(), 'hg-nowasm-'));
    try {
      cpSync(join(repo, 'dist/src'), join(dir, 'dist/src'), { recursive: true });
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'hg-nowasm', type: 'module' }));
      symlinkSync(join(repo, 'node_modules'), join(dir, 'node_modules'), 'dir');
      if (wasm !== undefined) {
        mkdirSync(join(dir, 'wasm'));
        writeFileSync(join(dir, 'wasm/hashgate.wasm'), wasm);
      }
      const entry = pathToFileURL(join(dir, 'dist/src/index.js')).href;
      const bloomEntry = pathToFileURL(join(dir, 'dist/src/entries/bloom.js')).href;
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', probe, entry, bloomEntry], { encoding: 'utf8', timeout: 60_000 });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      return JSON.parse(r.stdout) as Record<string, string>;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it('missing: every kernel user throws HG_ERR_WASM, none falls back', () => {
    const res = runWith(undefined);
    expect(Object.keys(res)).toEqual(['murmur3_128', 'xxh64', 'hashBatch', 'bloom', 'bloomJs', 'again']);
    for (const [name, v] of Object.entries(res)) {
      expect(v, name).toMatch(/^HG_ERR_WASM HashGateError: hashgate\.wasm not found next to .*npm run build:wasm/);
    }
  });

  it('stale (Bloom ABI changed): hashing works, a wasm Bloom filter is refused with HG_ERR_WASM', () => {
    const res = runWith(withBloomAbi(readFileSync(kernelPath()), 3));
    expect(res).toMatchObject({ murmur3_128: 'ok', xxh64: 'ok', hashBatch: 'ok', bloomJs: 'ok', again: 'ok' });
    expect(res.bloom).toMatch(/^HG_ERR_WASM HashGateError: hashgate\.wasm has Bloom kernel ABI 3, this code needs 5: rebuild it/);
  });

  it('corrupt: the same rule, with the compile error in the message', () => {
    const res = runWith(Buffer.from('\0asm this is not a module'));
    for (const [name, v] of Object.entries(res)) {
      expect(v, name).toMatch(/^HG_ERR_WASM HashGateError: cannot compile hashgate\.wasm: /);
    }
  });
});

/** A copy of the kernel binary whose exported BLOOM_ABI global starts at `abi` (0..63). */
function withBloomAbi(wasm: Buffer, abi: number): Buffer {
  const out = Buffer.from(wasm);
  let p = 8;
  const leb = (): number => {
    let v = 0;
    let shift = 0;
    let b: number;
    do {
      b = out[p++]!;
      v += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80);
    return v;
  };
  let globalIndex = -1;
  const globalsAt: number[] = [];
  while (p < out.length) {
    const id = out[p++]!;
    const size = leb();
    const end = p + size;
    if (id === 6) {
      for (let n = leb(), i = 0; i < n; i++) {
        p += 2; // value type, mutability
        globalsAt.push(p);
        while (out[p] !== 0x0b) {
          const op = out[p++]!;
          if (op === 0x41 || op === 0x42 || op === 0x23) leb();
        }
        p++;
      }
    } else if (id === 7) {
      for (let n = leb(), i = 0; i < n; i++) {
        const len = leb();
        const name = out.toString('utf8', p, p + len);
        p += len + 1;
        const index = leb();
        if (name === 'BLOOM_ABI') globalIndex = index;
      }
    }
    p = end;
  }
  const at = globalsAt[globalIndex];
  if (at === undefined || out[at] !== 0x41 || out[at + 2] !== 0x0b) throw new Error('BLOOM_ABI is not an i32.const global');
  out[at + 1] = abi;
  return out;
}
