import { describe, it, expect } from 'vitest';
import { isUtf8 } from 'node:buffer';
import { ChunkParser, REJECT_NAMES } from '../src/loader/parse.js';
import { RegionHasher, compactBuckets } from '../src/loader/hasher.js';
import { bucketsOfDigests } from '../src/dedup/layout.js';
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

  // Word-at-a-time scanning and the search for bad UTF-8 lines against a line-by-line reading of
  // the rules: random lines of ASCII, CJK, delimiters, CR, broken UTF-8 and empty lines, each
  // ending anywhere relative to a 4-byte word and to the end of the region.
  it('equals a line-by-line reading of random dirty lines, all fields and selected fields', () => {
    let seed = 12345;
    const rnd = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    const PIECES = [[0x61], [0x62], [0x31], [0xe5, 0xbc, 0xa0], [0x7c], [0x7c], [0x0d], [0xff], [0xe5, 0xbc]];
    const maxLen = 40;
    const maxKey = 24;
    for (let trial = 0; trial < 60; trial++) {
      const fieldCount = 2 + (trial % 2);
      const lines: number[][] = [];
      for (let l = 0, n = 200 + rnd(600); l < n; l++) {
        const line: number[] = [];
        const kind = rnd(10);
        // mostly well-formed lines (so rows are accepted), some random ones, some empty
        if (kind < 6) {
          for (let f = 0; f < fieldCount; f++) {
            if (f > 0) line.push(0x7c);
            for (let k = 0, m = rnd(12); k < m; k++) line.push(...(rnd(3) === 0 ? [0xe5, 0xbc, 0xa0] : [0x61 + rnd(26)]));
          }
          if (rnd(8) === 0) line.push(0x0d);
        } else if (kind < 9) {
          for (let k = 0, m = rnd(45); k < m; k++) line.push(...PIECES[rnd(PIECES.length)]!);
        }
        lines.push(line);
      }
      const final = rnd(2) === 0;
      const bytes: number[] = [];
      lines.forEach((l, i) => {
        bytes.push(...l);
        if (i < lines.length - 1 || !final) bytes.push(0x0a);
      });
      const text = Buffer.from(bytes);
      for (const fields of [null, [1, 0]] as const) {
        const h = new RegionHasher(1 << 16, 1 << 14);
        const p = new ChunkParser({ delimiter: 124, fields, fieldCount, maxLineBytes: maxLen, maxKeyBytes: maxKey, windowField: -1 }, h, 1 << 14);
        p.parse(text, 0, text.length, final);
        const wantKeys: string[] = [];
        const wantRowLines: number[] = [];
        const wantRejects: [number, string][] = [];
        lines.forEach((l, i) => {
          if (final && i === lines.length - 1 && l.length === 0) return; // no line there
          let le = l.length;
          if (le > 0 && l[le - 1] === 0x0d) le--;
          const body = Buffer.from(l.slice(0, le));
          const parts: Buffer[] = [];
          for (let s = 0; ; ) {
            const e = body.indexOf(0x7c, s);
            parts.push(body.subarray(s, e < 0 ? body.length : e));
            if (e < 0) break;
            s = e + 1;
          }
          const key = Buffer.concat(fields === null ? parts : fields.map((f) => parts[f] ?? Buffer.alloc(0)));
          let reason = '';
          if (le === 0) reason = 'empty';
          else if (le > maxLen) reason = 'too-long';
          else if (fields !== null && parts.length <= 1) reason = 'field-count';
          else if (!isUtf8(body)) reason = 'invalid-utf8';
          else if (parts.length !== fieldCount) reason = 'field-count';
          else if (key.length === 0) reason = 'empty';
          else if (key.length > maxKey) reason = 'key-too-long';
          if (reason) wantRejects.push([i, reason]);
          else {
            wantKeys.push(key.toString('latin1'));
            wantRowLines.push(i);
          }
        });
        const gotKeys = Array.from({ length: p.count }, (_, i) => Buffer.from(h.keyBytes.slice(h.keyOffsets[i], h.keyOffsets[i + 1])).toString('latin1'));
        expect(p.lines).toBe(lines.length - (final && lines.at(-1)!.length === 0 ? 1 : 0));
        expect(gotKeys).toEqual(wantKeys);
        expect(Array.from(p.rowLine.slice(0, p.count))).toEqual(wantRowLines);
        expect(p.rejLine.map((l, j) => [l, REJECT_NAMES[p.rejReason[j]!]])).toEqual(wantRejects);
        expect(wantRejects.some(([, r]) => r === 'invalid-utf8')).toBe(true);
      }
    }
  });

  it('compact buckets equal bucketsOfDigests for every kind of bucket count', () => {
    let seed = 99;
    const rnd = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed;
    };
    const n = 20_000;
    const digests = new Uint8Array(n * 16);
    for (let i = 0; i < digests.length; i++) digests[i] = rnd() >>> 24;
    // digests near the 64-bit edges, where an inexact remainder would show first
    digests.fill(0xff, 0, 32);
    digests.fill(0x00, 32, 64);
    for (const buckets of [1, 2, 7, 1000, 65_535, 65_536, 65_537, 999_983, 2 ** 21 - 1, 2 ** 21, 2 ** 21 + 1, 4_194_304, 1_000_000_007 % 2 ** 30, 2 ** 30]) {
      const got = compactBuckets(digests, n, buckets, new Uint32Array(n));
      const want = bucketsOfDigests(digests, 'compact', buckets);
      expect(Array.from(got), String(buckets)).toEqual(Array.from(want));
    }
  });
});
