// Intset DUMP payloads against a real redis-server: what Redis DUMPs is read back exactly (every
// integer width), and the halves cut at any boundary RESTORE into sets holding exactly those members.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import fc from 'fast-check';
import { crc64Into, intsetPayload, lowerBound, readIntsetDump } from '../src/redis/dump.js';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';

const has = requireRedisOrSkip('redis dump payloads');

const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
const widths = [
  fc.integer({ min: -(2 ** 15), max: 2 ** 15 - 1 }).map(BigInt),
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }).map(BigInt),
  int64,
];

describe.skipIf(!has)('intset DUMP payloads', () => {
  let srv: RedisServer;
  let r: Redis;
  let n = 0;
  beforeAll(async () => {
    // rdbcompression on (the default): a payload Redis compressed is refused, never misread
    srv = await startRedis({ args: ['--set-max-intset-entries', '4096'] });
    r = new Redis(srv.url);
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
  });

  it('CRC-64 matches the checksum Redis puts on its own payloads', async () => {
    await r.sadd('crc', ...Array.from({ length: 300 }, (_, i) => String(i * 7919 - 1e6)));
    const p = (await r.dumpBuffer('crc'))!;
    const crc = Buffer.alloc(8);
    crc64Into(p, 0, p.length - 8, crc, 0);
    expect(crc).toEqual(p.subarray(p.length - 8));
    expect(readIntsetDump(p, true)).toBeDefined();
    const bad = Buffer.from(p);
    bad[5]! ^= 1;
    expect(readIntsetDump(bad, true)).toBeUndefined();
  });

  it('reads every member of every integer width; halves cut at any value RESTORE to exactly their members', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(...widths.map((w) => fc.uniqueArray(w, { minLength: 1, maxLength: 600 }))), int64, async (members, cut) => {
        const key = `set${n++}`;
        await r.sadd(key, ...members.map(String));
        const payload = (await r.dumpBuffer(key))!;
        const d = readIntsetDump(payload, true);
        if (d === undefined) {
          // only a blob Redis LZF-compressed may be refused; such members repeat long byte runs
          expect(payload[1]! >> 6).toBe(3);
          return;
        }
        const sorted = [...members].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        expect(d.count).toBe(members.length);
        const k = lowerBound(d, Number(BigInt.asIntN(32, cut >> 32n)), Number(BigInt.asUintN(32, cut)));
        expect(k).toBe(sorted.filter((m) => m < cut).length);
        for (const [s, e, name] of [[0, k, `${key}:lo`], [k, d.count, `${key}:hi`]] as const) {
          const part = intsetPayload(d, s, e);
          if (s === e) {
            expect(part.length).toBe(0);
            continue;
          }
          expect(await r.restore(name, 0, part)).toBe('OK');
          expect(await r.object('ENCODING', name)).toBe('intset');
          const got = (await r.smembers(name)).map(BigInt).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
          expect(got).toEqual(sorted.slice(s, e));
        }
      }),
      { numRuns: 150, seed: 17 },
    );
  });

  it('refuses what is not an intset: a hashtable set, a string, a truncated payload', async () => {
    await r.sadd('strings', 'a', 'b');
    await r.set('str', 'x'.repeat(100));
    expect(readIntsetDump((await r.dumpBuffer('strings'))!)).toBeUndefined();
    expect(readIntsetDump((await r.dumpBuffer('str'))!)).toBeUndefined();
    await r.sadd('ok', '1', '2', '3');
    const p = (await r.dumpBuffer('ok'))!;
    expect(readIntsetDump(p.subarray(0, p.length - 1))).toBeUndefined();
  });
});

describe('CRC-64/Jones', () => {
  /** One bit at a time, in BigInt: the definition the table-driven version must match. */
  const reference = (buf: Uint8Array, s: number, e: number): bigint => {
    const poly = 0x95ac9329ac4bc9b5n;
    let crc = 0n;
    for (let i = s; i < e; i++) {
      crc ^= BigInt(buf[i]!);
      for (let k = 0; k < 8; k++) crc = crc & 1n ? (crc >> 1n) ^ poly : crc >> 1n;
    }
    return crc;
  };
  it('known answer: "123456789" is 0xe9c6d914c4b8d9ca (the check value Redis tests its crc64 with)', () => {
    const out = Buffer.alloc(8);
    crc64Into(Buffer.from('123456789'), 0, 9, out, 0);
    expect(out.readBigUInt64LE(0)).toBe(0xe9c6d914c4b8d9can);
  });
  it('eight bytes a step equals one bit at a time for any bytes, length and offsets', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 300 }), fc.nat(), fc.nat(), (bytes, a, b) => {
        const s = bytes.length === 0 ? 0 : a % (bytes.length + 1);
        const e = s + (bytes.length - s === 0 ? 0 : b % (bytes.length - s + 1));
        const out = new Uint8Array(12).fill(0xee);
        crc64Into(bytes, s, e, out, 3);
        expect(Buffer.from(out).readBigUInt64LE(3)).toBe(reference(bytes, s, e));
        expect([out[0], out[1], out[2], out[11]]).toEqual([0xee, 0xee, 0xee, 0xee]);
      }),
      { numRuns: 500, seed: 64 },
    );
  });
});
