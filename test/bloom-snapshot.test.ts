import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdtempSync, rmSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BloomFilter,
  CountingBloomFilter,
  writeSnapshot,
  readSnapshot,
  readCountingSnapshot,
  readSnapshotInfo,
  SNAPSHOT_HEADER_BYTES,
} from '../src/bloom/index.js';
import { ErrorCodes } from '../src/errors.js';

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hg-snap-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const keys = Array.from({ length: 20_000 }, (_, i) => `snap:${i}`);

function filled(seed = 0): BloomFilter {
  const f = BloomFilter.create({ expectedItems: 20_000, fpp: 0.01, seed });
  f.addAll(keys);
  return f;
}

describe('snapshots', () => {
  it('hashgate format round trip keeps bits, k, seed', async () => {
    const f = filled(7);
    const p = join(dir, 'a.hgbf');
    await writeSnapshot(f, p);
    const info = await readSnapshotInfo(p);
    expect(info).toMatchObject({ format: 'hashgate', kind: 'bits', seed: 7, hashFunctions: f.hashFunctions, bitSize: f.bitSize });
    const g = await readSnapshot(p, { expect: { seed: 7, bitSize: f.bitSize, hashFunctions: f.hashFunctions } });
    expect(g.seed).toBe(7);
    expect(g.bitCount()).toBe(f.bitCount());
    expect(Buffer.from(g.bitsView()).equals(Buffer.from(f.bitsView()))).toBe(true);
    expect(g.mightContainAll(keys).every((v) => v === 1)).toBe(true);
  });

  it('Guava format file equals writeTo() and reads back', async () => {
    const f = filled();
    const p = join(dir, 'a.guava');
    await writeSnapshot(f, p, { format: 'guava' });
    expect(readFileSync(p).equals(Buffer.from(f.writeTo()))).toBe(true);
    const g = await readSnapshot(p);
    expect((await readSnapshotInfo(p)).format).toBe('guava');
    expect(Buffer.from(g.bitsView()).equals(Buffer.from(f.bitsView()))).toBe(true);
    await expect(writeSnapshot(filled(3), join(dir, 'seeded.guava'), { format: 'guava' })).rejects.toMatchObject({ code: ErrorCodes.SNAPSHOT_MISMATCH });
  });

  it('refuses a snapshot whose seed, k or bitSize differs from what the caller runs with', async () => {
    const f = filled(7);
    const p = join(dir, 'b.hgbf');
    await writeSnapshot(f, p);
    for (const expect_ of [{ seed: 0 }, { hashFunctions: f.hashFunctions + 1 }, { bitSize: f.bitSize + 64 }]) {
      await expect(readSnapshot(p, { expect: expect_ })).rejects.toMatchObject({ code: ErrorCodes.SNAPSHOT_MISMATCH });
    }
    // Kind mismatch both ways.
    await expect(readCountingSnapshot(p)).rejects.toMatchObject({ code: ErrorCodes.SNAPSHOT_MISMATCH });
    // Unknown algorithm id (header checksum fixed up so only the algorithm is wrong).
    const { crc32 } = await import('node:zlib');
    const bytes = readFileSync(p);
    bytes[8] = 9;
    bytes.writeUInt32LE(crc32(bytes.subarray(0, 44)) >>> 0, 44);
    writeFileSync(join(dir, 'alg.hgbf'), bytes);
    await expect(readSnapshot(join(dir, 'alg.hgbf'))).rejects.toMatchObject({ code: ErrorCodes.SNAPSHOT_MISMATCH });
    // Guava stream with the MURMUR128_MITZ_32 strategy (ordinal 0).
    const g = Buffer.from(f.writeTo());
    g[0] = 0;
    writeFileSync(join(dir, 'mitz32.guava'), g);
    await expect(readSnapshot(join(dir, 'mitz32.guava'))).rejects.toMatchObject({ code: ErrorCodes.SNAPSHOT_MISMATCH });
  });

  it('refuses corrupt snapshots: flipped data bit, header bit, truncation, garbage, empty', async () => {
    const f = filled();
    const p = join(dir, 'c.hgbf');
    await writeSnapshot(f, p);
    const good = readFileSync(p);
    const cases: Array<[string, Buffer]> = [
      ['data bit', Buffer.from(good).fill(good[SNAPSHOT_HEADER_BYTES + 100]! ^ 1, SNAPSHOT_HEADER_BYTES + 100, SNAPSHOT_HEADER_BYTES + 101)],
      ['header bit', Buffer.from(good).fill(good[10]! ^ 2, 10, 11)],
      ['truncated', good.subarray(0, good.length - 8)],
      ['truncated header', good.subarray(0, 20)],
      ['garbage', Buffer.from('PK\u0003\u0004 definitely not a bloom filter')],
      ['empty', Buffer.alloc(0)],
      ['guava truncated', Buffer.from(f.writeTo()).subarray(0, 100)],
    ];
    for (const [name, bytes] of cases) {
      const q = join(dir, `bad-${name.replace(/ /g, '-')}`);
      writeFileSync(q, bytes);
      await expect(readSnapshot(q), name).rejects.toMatchObject({ code: ErrorCodes.SNAPSHOT_CORRUPT });
    }
  });

  it('counting filter snapshots round trip', async () => {
    const c = CountingBloomFilter.create({ expectedItems: 1000, fpp: 0.01, seed: 5 });
    for (let i = 0; i < 500; i++) c.add(`c${i}`);
    c.add('c1');
    const p = join(dir, 'd.hgbf');
    await writeSnapshot(c, p);
    const d = await readCountingSnapshot(p, { expect: { seed: 5 } });
    expect(Buffer.from(d.bytesView()).equals(Buffer.from(c.bytesView()))).toBe(true);
    expect(d.count('c1')).toBeGreaterThanOrEqual(2);
    await expect(readSnapshot(p)).rejects.toMatchObject({ code: ErrorCodes.SNAPSHOT_MISMATCH });
  });
});
