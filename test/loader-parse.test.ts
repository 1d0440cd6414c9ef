import { describe, it, expect } from 'vitest';
import { ChunkParser, REJECT_NAMES } from '../src/loader/parse.js';
import { RegionHasher } from '../src/loader/hasher.js';
import { bucketOf } from '../src/hash/index.js';

const mk = (fields: number[] | null = null, windowField = -1, fieldCount = 0) => {
  const h = new RegionHasher(1 << 16, 1 << 14);
  const p = new ChunkParser({ delimiter: 124, fields, fieldCount, maxLineBytes: 40, windowField }, h, 1 << 14);
  return { h, p };
};
const keysOf = (h: RegionHasher, n: number) =>
  Array.from({ length: n }, (_, i) => Buffer.from(h.keyBytes.slice(h.keyOffsets[i], h.keyOffsets[i + 1])).toString());

describe('ChunkParser', () => {
  it('concatenates all fields, handles CRLF, empty, wrong field count, missing final newline', () => {
    const { h, p } = mk();
    const text = Buffer.from('张三|110101199001011234\r\nbob|22\n\n|\nx|y|z\nlast|9');
    p.parse(text, 0, text.length, true);
    expect(p.lines).toBe(6);
    expect(keysOf(h, p.count)).toEqual(['张三110101199001011234', 'bob22', 'last9']);
    expect(Array.from(p.rowLine.slice(0, p.count))).toEqual([0, 1, 5]);
    expect(p.rejLine).toEqual([2, 3, 4]);
    expect(p.rejReason.map((r) => REJECT_NAMES[r])).toEqual(['empty', 'empty', 'field-count']);
    const line0 = text.subarray(p.rowStart[0], p.rowEnd[0]).toString();
    expect(line0).toBe('张三|110101199001011234');
  });

  it('rejects invalid UTF-8 and over-long lines, keeps neighbours', () => {
    const { h, p } = mk();
    const text = Buffer.concat([Buffer.from('a|1\n'), Buffer.from([0x62, 0x7c, 0xff, 0xfe, 0x0a]), Buffer.from('c|' + 'x'.repeat(50) + '\nd|4\n')]);
    p.parse(text, 0, text.length, false);
    expect(keysOf(h, p.count)).toEqual(['a1', 'd4']);
    expect(p.rejReason.map((r) => REJECT_NAMES[r])).toEqual(['invalid-utf8', 'too-long']);
    expect(p.rejLine).toEqual([1, 2]);
  });

  it('selected fields in the given order, window field positions', () => {
    const { h, p } = mk([1, 0], 2);
    const text = Buffer.from('n1|id1|20260101\r\nn2|id2|20251231\nbad|x\n');
    p.parse(text, 0, text.length, false);
    expect(keysOf(h, p.count)).toEqual(['id1n1', 'id2n2']);
    expect(text.subarray(p.rowWinStart[1], p.rowWinEnd[1]).toString()).toBe('20251231');
    expect(p.rejReason.map((r) => REJECT_NAMES[r])).toEqual(['field-count']);
  });

  it('kernel buckets equal bucketOf', () => {
    const { h, p } = mk();
    const lines = Array.from({ length: 300 }, (_, i) => `name${i}|${1e17 + i * 7919}`);
    const text = Buffer.from(lines.join('\n') + '\n');
    p.parse(text, 0, text.length, false);
    const b = h.buckets(p.count, 1000);
    const keys = keysOf(h, p.count);
    for (let i = 0; i < p.count; i++) expect(b[i]).toBe(bucketOf(keys[i]!, 1000));
  });
});
