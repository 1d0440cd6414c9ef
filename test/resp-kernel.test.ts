// The kernel's compact SADD writer: byte for byte the RESP of `SADD <sub-bucket key> <member>`
// as built from growth.ts's placement rule and the canonical decimal member, for every table,
// sub-bucket count and member, including the decimal boundaries of a signed 64-bit integer.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { arena } from '../src/hash/arena.js';
import { utf8Length } from '../src/hash/keys.js';
import { RespWriter } from '../src/redis/resp.js';
import { addressOf, depthOf, subBucketName, subBucketOf, tablePrefix } from '../src/dedup/growth.js';

interface Rec {
  m: bigint;
  t: number;
  n: number;
}

const bulk = (s: string): string => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;

function reference(base: string, recs: Rec[]): string {
  let out = '';
  for (const { m, t, n } of recs) {
    const s = n <= 1 ? 0 : subBucketOf(addressOf(m), n);
    const key = subBucketName(tablePrefix(base, t), s, n <= 1 ? 0 : depthOf(s, n));
    out += `*3\r\n$4\r\nSADD\r\n${bulk(key)}${bulk(m.toString())}`;
  }
  return out;
}

function kernel(base: string, recs: Rec[]): string {
  const head = Buffer.from(`${base}:c{`, 'latin1');
  const bytes = arena().compactSadds(head, recs.length, (u32, at) => {
    for (const { m, t, n } of recs) {
      const u = BigInt.asUintN(64, m);
      u32[at] = Number(u & 0xffff_ffffn);
      u32[at + 1] = Number(u >> 32n);
      u32[at + 2] = t;
      u32[at + 3] = n;
      at += 4;
    }
  });
  return Buffer.from(bytes).toString('latin1');
}

/** Index of the first differing character (-1: equal): a diff of megabytes would take minutes to print. */
function firstDiff(a: string, b: string): number {
  if (a === b) return -1;
  let i = 0;
  while (i < a.length && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

const EDGES = [
  0n, 1n, -1n, 9n, 10n, -10n, 99_999_999n, 100_000_000n, -100_000_000n, 9_999_999_999_999_999n, 10_000_000_000_000_000n,
  -10_000_000_000_000_000n, 10_000_000_000_000_001n, 2n ** 63n - 1n, -(2n ** 63n), -(2n ** 63n) + 1n, 2n ** 32n, -(2n ** 32n),
];

describe('kernel compact SADD writer', () => {
  it('writes the same bytes as the string reference (decimal edges, every small sub-bucket count)', () => {
    const recs: Rec[] = [];
    for (const m of EDGES) for (const n of [0, 1, 2, 3, 4, 5, 7, 8, 9, 1000, 2 ** 20]) recs.push({ m, t: (recs.length * 7919) % 100_000, n });
    expect(kernel('hg:dedup:2026', recs)).toBe(reference('hg:dedup:2026', recs));
  });

  it('writes the same bytes as the string reference (property)', () => {
    const rec = fc.record({
      m: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
      t: fc.oneof(fc.integer({ min: 0, max: 1023 }), fc.integer({ min: 0, max: 2 ** 30 })),
      n: fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 2 ** 20 })),
    });
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z:{}0-9-]{1,40}$/), fc.array(rec, { minLength: 1, maxLength: 300 }), (base, recs) => {
        expect(kernel(base, recs)).toBe(reference(base, recs));
      }),
      { numRuns: 300 },
    );
  });

  it('handles a batch larger than the arena region first held (the memory grows, views are rebuilt)', () => {
    const recs: Rec[] = Array.from({ length: 200_000 }, (_, i) => ({ m: BigInt.asIntN(64, BigInt(i) * 46_116_860_184_273_879n - 2n ** 62n), t: i % 4096, n: (i % 300) + 1 }));
    const base = 'x'.repeat(100);
    expect(firstDiff(kernel(base, recs), reference(base, recs))).toBe(-1);
  });
});

describe('RespWriter.prefixed', () => {
  it('property: a prefixed key is the bulk string of prefix + TextEncoder UTF-8, lone surrogates and all', () => {
    const enc = new TextEncoder();
    // code units of every width, lone surrogates of both halves included
    const unit = fc.oneof(fc.integer({ min: 0, max: 0x7f }), fc.integer({ min: 0x80, max: 0x7ff }), fc.integer({ min: 0x800, max: 0xffff }));
    const key = fc.oneof(fc.array(unit, { maxLength: 40 }).map((u) => String.fromCharCode(...u)), fc.string({ unit: 'grapheme', maxLength: 20 }));
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), fc.array(key, { minLength: 1, maxLength: 20 }), (prefix, keys) => {
        expect(keys.map((k) => utf8Length(k))).toEqual(keys.map((k) => enc.encode(k).length));
        const w = new RespWriter(8); // grows as it goes
        for (const k of keys) w.prefixed(prefix, k);
        const want = Buffer.concat(keys.map((k) => {
          const body = Buffer.concat([prefix, enc.encode(k)]);
          return Buffer.concat([Buffer.from(`$${body.length}\r\n`), body, Buffer.from('\r\n')]);
        }));
        expect(w.bytes().equals(want)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
