import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { mkdtempSync, rmSync, truncateSync, statSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DedupService, DEFAULTS, parseDedupOptions, windowId, WindowClock, Journal } from '../src/dedup/index.js';
import { bucketsOfDigests, bucketKey, compactMember, digestKeys, orderByBucket } from '../src/dedup/layout.js';
import { encodeKeys } from './helpers/layout.js';
import { bucketOf, packKeys } from '../src/hash/index.js';
import { ErrorCodes } from '../src/errors.js';

describe('windows', () => {
  it('natural year flips at local midnight of 1 Jan in Asia/Shanghai (UTC+8)', () => {
    expect(windowId(Date.parse('2025-12-31T15:59:59.999Z'))).toBe('2025');
    expect(windowId(Date.parse('2025-12-31T16:00:00.000Z'))).toBe('2026');
    expect(windowId(Date.parse('2025-12-31T16:00:00.000Z'), 'year', 'UTC')).toBe('2025');
    expect(windowId(new Date('2026-03-07T20:00:00Z'), 'month')).toBe('2026-03');
    expect(windowId(new Date('2026-03-07T20:00:00Z'), 'day')).toBe('2026-03-08');
    expect(windowId(new Date('2026-03-07T20:00:00Z'), 'day', 'America/New_York')).toBe('2026-03-07');
    expect(windowId(0, (d) => `w${d.getUTCFullYear()}`)).toBe('w1970');
  });

  it('rejects unknown zones and bad custom ids', () => {
    expect(() => windowId(0, 'year', 'Mars/Olympus')).toThrow(TypeError);
    expect(() => windowId(0, () => 'a:b')).toThrow(/dedup.window/);
  });

  it('WindowClock agrees with windowId on any instant, across DST zones', () => {
    const clocks = ['year', 'month', 'day'].flatMap((w) =>
      ['Asia/Shanghai', 'America/New_York', 'Europe/London', 'Australia/Lord_Howe'].map((tz) => ({ w, tz, c: new WindowClock(w as 'year', tz) })),
    );
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 4_102_444_800_000 }), { minLength: 1, maxLength: 30 }), fc.integer({ min: 0, max: 3 * 86_400_000 }), (starts, step) => {
        for (const { w, tz, c } of clocks) {
          for (const s of starts) {
            for (const t of [s, s + step, s + 2 * step]) expect(c.idAt(t)).toBe(windowId(t, w as 'year', tz));
          }
        }
      }),
      { numRuns: 60 },
    );
  });
});

describe('options', () => {
  it('has documented defaults', () => {
    const o = parseDedupOptions(undefined);
    expect(o.layout).toBe('compact');
    expect(o.buckets).toBe(DEFAULTS.compactBuckets);
    expect(o.timeZone).toBe('Asia/Shanghai');
    expect(o.onStoreError).toBe('fail-open');
    expect(o.replayIntervalMs).toBe(3_600_000);
    expect(parseDedupOptions({ layout: 'sets' }).buckets).toBe(1000);
    // sized so that no table splits before the window holds its expected keys (153 a table on
    // Redis); an LMDB window's buckets never split and hold 256
    expect(parseDedupOptions({ expectedKeys: 1e9 }).buckets).toBe(2 ** 23);
    expect(parseDedupOptions({ expectedKeys: 1e6 }).buckets).toBe(8192);
    expect(parseDedupOptions({ expectedKeys: 1e9, path: '/tmp/x' }).buckets).toBe(2 ** 22);
  });

  it('names the bad option as written', () => {
    expect(() => parseDedupOptions({ layout: 'hash' })).toThrow(/dedup\.layout/);
    expect(() => parseDedupOptions({ buckets: 0 })).toThrow(RangeError);
    expect(() => parseDedupOptions({ buckets: 1.5 })).toThrow(/dedup\.buckets/);
    expect(() => parseDedupOptions({ onStoreError: 'ignore' })).toThrow(/dedup\.onStoreError/);
    expect(() => parseDedupOptions({ timeZone: 'Nowhere/X' })).toThrow(/dedup\.timeZone/);
    expect(() => parseDedupOptions({ bucket: 3 })).toThrow(/dedup\.bucket is not a known option/);
    expect(() => parseDedupOptions({ layout: 'sets', secret: 's' })).toThrow(/dedup\.secret/);
    expect(() => new DedupService({ dedup: { replayIntervalMs: -1 } })).toThrow(/dedup\.replayIntervalMs/);
  });
});

describe('layout', () => {
  it('sets-layout buckets equal bucketOf(key, buckets) (the Java scheme), for any bucket count', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 50 }), fc.integer({ min: 1, max: 2 ** 30 }), (keys, buckets) => {
        const d = digestKeys(keys);
        const b = bucketsOfDigests(d, 'sets', buckets);
        keys.forEach((k, i) => expect(b[i]).toBe(bucketOf(k, buckets)));
      }),
      { numRuns: 200 },
    );
  });

  it('buckets of a power-of-two count equal the 64-bit digest word modulo the count, in both layouts', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ minLength: 16, maxLength: 16 }), { minLength: 1, maxLength: 40 }), fc.integer({ min: 0, max: 31 }), (digests, k) => {
        const d = Uint8Array.from(digests.flatMap((x) => [...x]));
        const buckets = 2 ** k;
        const dv = new DataView(d.buffer, d.byteOffset, d.byteLength);
        for (const [layout, at] of [['sets', 0], ['compact', 8]] as const) {
          const b = bucketsOfDigests(d, layout, buckets);
          for (let i = 0; i < d.length / 16; i++) expect(b[i]).toBe(Number(dv.getBigUint64(i * 16 + at, true) % BigInt(buckets)));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('compact members are canonical signed 64-bit integers from digest bytes 0..7; buckets from bytes 8..15', () => {
    const d = digestKeys(['张三110101199003071234', 'b', 'c']);
    const dv = new DataView(d.buffer);
    for (let i = 0; i < 3; i++) {
      const m = compactMember(d, i);
      expect(m).toMatch(/^-?[1-9][0-9]*$|^0$/);
      expect(BigInt(m)).toBe(dv.getBigInt64(i * 16, true));
      expect(bucketsOfDigests(d, 'compact', 1000)[i]).toBe(Number(dv.getBigUint64(i * 16 + 8, true) % 1000n));
    }
    expect(bucketKey({ layout: 'sets', prefix: 'p' }, '2026', 7)).toBe('p:2026:7');
    expect(bucketKey({ layout: 'compact', prefix: 'p' }, '2026', 7)).toBe('p:2026:c{7}');
  });

  it('HMAC secret changes compact members and never exposes the raw key', () => {
    const a = encodeKeys(['k1'], { layout: 'compact', prefix: 'p', buckets: 10 });
    const b = encodeKeys(['k1'], { layout: 'compact', prefix: 'p', buckets: 10, secret: new TextEncoder().encode('s3cret') });
    expect(a.members[0]).not.toBe(b.members[0]);
    expect(encodeKeys(['k1'], { layout: 'sets', prefix: 'p', buckets: 10 }).members[0]).toBe('k1');
  });

  it('orderByBucket is a stable sort by bucket', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 2 ** 32 - 1 }), { maxLength: 300 }), (arr) => {
        const b = Uint32Array.from(arr);
        const o = [...orderByBucket(b)];
        const want = arr.map((_, i) => i).sort((x, y) => arr[x]! - arr[y]! || x - y);
        expect(o).toEqual(want);
      }),
    );
  });

  it('bucketOrder (the radix order of the service) is the same stable sort, for small and large bucket ranges', async () => {
    const { bucketOrder } = await import('../src/dedup/order.js');
    fc.assert(
      fc.property(
        fc.oneof(fc.constant(2 ** 32 - 1), fc.constant(65_535), fc.constant(999), fc.constant(3)),
        fc.array(fc.nat(), { maxLength: 3000 }),
        (max, raw) => {
          const arr = raw.map((v) => v % (max + 1));
          const b = Uint32Array.from(arr);
          const want = arr.map((_, i) => i).sort((x, y) => arr[x]! - arr[y]! || x - y);
          expect([...bucketOrder(b, b.length)]).toEqual(want);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('DedupService (embedded store)', () => {
  it('answers 1 once per window, duplicates in one batch: first 1, rest 0', async () => {
    let now = Date.parse('2026-06-01T00:00:00Z');
    const s = new DedupService({ now: () => now });
    expect([...(await s.firstSeen(['a', 'b', 'a', 'c', 'b']))]).toEqual([1, 1, 0, 1, 0]);
    expect([...(await s.firstSeen(['a', 'd']))]).toEqual([0, 1]);
    // the same keys in the next natural year are new again, and the old year is unaffected
    now = Date.parse('2026-12-31T16:00:00Z');
    expect([...(await s.firstSeen(['a', 'd']))]).toEqual([1, 1]);
    expect([...(await s.firstSeen(['a', 'e'], { at: new Date('2026-03-01T00:00:00Z') }))]).toEqual([0, 1]);
    expect((await s.stats('2026')).exact).toBe(5);
    expect((await s.stats()).window).toBe('2027');
    expect((await s.stats()).exact).toBe(2);
    expect(await s.purgeWindow('2026')).toBeGreaterThan(0);
    expect((await s.stats('2026')).exact).toBe(0);
    expect([...(await s.firstSeen(['a'], { at: new Date('2026-03-01T00:00:00Z') }))]).toEqual([1]);
    await s.close();
    await expect(s.firstSeen(['a'])).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
  });

  it('strings, Uint8Arrays and PackedKeys name the same keys', async () => {
    for (const layout of ['compact', 'sets'] as const) {
      const s = new DedupService({ dedup: { layout, cacheMaxEntries: 0 } });
      const keys = ['李四', 'x', 'yy'];
      expect([...(await s.firstSeen(keys.map((k) => new TextEncoder().encode(k))))]).toEqual([1, 1, 1]);
      expect([...(await s.firstSeen(packKeys(keys)))]).toEqual([0, 0, 0]);
      expect([...(await s.firstSeen([...keys, 'z']))]).toEqual([0, 0, 0, 1]);
      await s.close();
    }
  });

  it('the seen-cache never turns a new key into a duplicate (property vs a model)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'), { maxLength: 10 }), { maxLength: 12 }),
        fc.integer({ min: 0, max: 4 }),
        fc.constantFrom('compact', 'sets'),
        fc.constantFrom('auto', 'repeats', 'all'),
        async (batches, cacheMaxEntries, layout, cacheAdmit) => {
          // 'sets' on the embedded store keeps a seen-cache (the compact table answers repeats itself)
          const s = new DedupService({ dedup: { cacheMaxEntries, layout, cacheAdmit } });
          const seen = new Set<string>();
          for (const b of batches) {
            const got = [...(await s.firstSeen(b))];
            const want = b.map((k) => (seen.has(k) ? 0 : (seen.add(k), 1)));
            expect(got).toEqual(want);
          }
          await s.close();
        },
      ),
      { numRuns: 100 },
    );
  });

  it("cacheAdmit 'auto' caches first sights only while the stream repeats keys often, and reviews that as it goes", async () => {
    // 'sets' on the embedded store keeps a seen-cache (the compact table answers repeats itself)
    const s = new DedupService({ dedup: { layout: 'sets' } });
    const keys = (tag: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${tag}-${i}`);
    const ones = (a: Uint8Array): number => a.reduce((x, y) => x + y, 0);
    // a big answer's cache adds run a turn of the event loop after it (the caller goes first)
    const entries = async (): Promise<number> => {
      await new Promise<void>((resolve) => setImmediate(resolve));
      return (await s.stats()).cacheEntries;
    };
    expect((await s.stats()).cacheAdmits).toBe('repeats');
    // all-new keys: none is cached, and the review keeps it so
    expect(ones(await s.firstSeen(keys('a', 70_000)))).toBe(70_000);
    expect(await entries()).toBe(0);
    expect((await s.stats()).cacheAdmits).toBe('repeats');
    // one key in 64 a repeat: those are cached, and the review stays with 'repeats'
    const rare = keys('r', 70_000).map((k, i) => (i % 64 === 0 ? `a-${i}` : k));
    expect(ones(await s.firstSeen(rare))).toBe(70_000 - 1094);
    expect(await entries()).toBeGreaterThan(1080);
    expect(await entries()).toBeLessThanOrEqual(1094);
    expect((await s.stats()).cacheAdmits).toBe('repeats');
    // one key in eight a repeat (of the keys above): those are cached, and the review turns to 'all'
    const mixed = keys('b', 70_000).map((k, i) => (i % 8 === 0 ? `a-${i}` : k));
    expect(ones(await s.firstSeen(mixed))).toBe(70_000 - 8750);
    expect(await entries()).toBeGreaterThanOrEqual(8750);
    expect((await s.stats()).cacheAdmits).toBe('all');
    // now a first sight is cached too
    let before = await entries();
    expect(ones(await s.firstSeen(keys('c', 200)))).toBe(200);
    // (a set of the cache meets a fifth key now and then, and drops its oldest)
    expect(await entries()).toBeGreaterThan(before + 190);
    expect(ones(await s.firstSeen(keys('c', 200)))).toBe(0);
    expect(s.counters.cacheHits).toBeGreaterThanOrEqual(200);
    // a review period of new keys only: back to 'repeats'
    for (const tag of ['d', 'e']) expect(ones(await s.firstSeen(keys(tag, 70_000)))).toBe(70_000);
    expect((await s.stats()).cacheAdmits).toBe('repeats');
    before = await entries();
    expect(ones(await s.firstSeen(keys('f', 200)))).toBe(200);
    expect(await entries()).toBe(before);
    await s.close();
  });

  it("cacheAdmit 'repeats' and 'all' hold whatever the stream", async () => {
    for (const [cacheAdmit, firsts] of [['repeats', false], ['all', true]] as const) {
      const s = new DedupService({ dedup: { layout: 'sets', cacheAdmit } });
      const keys = Array.from({ length: 70_000 }, (_, i) => `k-${i}`);
      const entries = async (): Promise<number> => {
        await new Promise<void>((resolve) => setImmediate(resolve));
        return (await s.stats()).cacheEntries;
      };
      // a set of the cache meets a fifth key now and then and drops its oldest: a few fewer entries
      // than keys added
      await s.firstSeen(keys);
      if (firsts) expect(await entries()).toBeGreaterThan(69_900);
      else expect(await entries()).toBe(0);
      // every key a repeat now: 'repeats' caches them all
      await s.firstSeen(keys);
      expect(await entries()).toBeGreaterThan(69_900);
      expect((await s.stats()).cacheAdmits).toBe(cacheAdmit);
      await s.close();
    }
    expect(() => new DedupService({ dedup: { cacheAdmit: 'most' as 'all' } })).toThrow(/dedup\.cacheAdmit/);
  });

  it('bad input rejects with a typed error naming the index, and writes nothing', async () => {
    const s = new DedupService({ dedup: { maxKeyBytes: 8 } });
    await expect(s.firstSeen(['ok', 42 as unknown as string])).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG, details: { index: 1 } });
    await expect(s.firstSeen(['ok', 'x', ''])).rejects.toMatchObject({ code: ErrorCodes.EMPTY_KEY, details: { index: 2 } });
    await expect(s.firstSeen(['ok', '123456789'])).rejects.toMatchObject({ code: ErrorCodes.KEY_TOO_LONG, details: { index: 1 } });
    await expect(s.firstSeen(['ok', '一二三'])).rejects.toMatchObject({ code: ErrorCodes.KEY_TOO_LONG, details: { index: 1 } });
    await expect(s.firstSeen(['ok', 'x'], { at: new Date(NaN) })).rejects.toThrow(TypeError);
    await expect(s.firstSeen('ok' as unknown as string[])).rejects.toThrow(TypeError);
    expect((await s.stats()).exact).toBe(0);
    expect([...(await s.firstSeen(['ok']))]).toEqual([1]);
    await s.close();
  });
});

describe('journal', () => {
  const rec = (i: number, n = 2) => ({ v: 2 as const, t: i, w: '2026', p: 'hg', l: 'compact' as const, b: 4, h: 0 as const, d: new Uint8Array(16 * n).fill(i & 255) });

  it('round-trips records, rotates size-bounded segments, detects a torn tail', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hg-journal-'));
    try {
      const j = new Journal(dir, 4096, 1 << 20);
      for (let i = 0; i < 3; i++) await j.append(rec(i));
      await j.seal();
      const files = j.replayable();
      expect(files).toHaveLength(1);
      expect(statSync(files[0]!).mode & 0o777).toBe(0o600);
      const r = Journal.read(files[0]!);
      expect(r.records.map((x) => x.t)).toEqual([0, 1, 2]);
      expect(r.damaged).toEqual([]);
      // torn tail: cut the last record in half
      truncateSync(files[0]!, statSync(files[0]!).size - 5);
      const t = Journal.read(files[0]!);
      expect(t.records.map((x) => x.t)).toEqual([0, 1]);
      expect(t.tailAt).toBeGreaterThan(0);
      // rotation: big records spill into several segments
      for (let i = 0; i < 5; i++) await j.append(rec(9, 100));
      await j.seal();
      expect(readdirSync(dir).filter((f) => f.endsWith('.hgj')).length).toBeGreaterThan(2);
      expect(j.pendingBytes()).toBeGreaterThan(5 * 1600);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('concurrent appends share one write and each resolves after it is on disk', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hg-journal-'));
    try {
      const j = new Journal(dir, 1 << 20, 1 << 20);
      await Promise.all(Array.from({ length: 256 }, (_, i) => j.append(rec(i, 1))));
      await j.close();
      expect(readdirSync(dir).filter((f) => f.endsWith('.open'))).toEqual([]);
      const [f] = j.replayable();
      expect(Journal.read(f!).records).toHaveLength(256);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('one damaged byte range never costs an intact record outside it, and never invents one', async () => {
    const { encodeRecord } = await import('../src/dedup/journal.js');
    const dir = mkdtempSync(join(tmpdir(), 'hg-journal-'));
    const file = join(dir, 'seg-1-000000000000001-000000.hgj');
    try {
      fc.assert(
        fc.property(
          fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 12 }),
          fc.nat(),
          fc.integer({ min: 1, max: 200 }),
          fc.uint8Array({ minLength: 1, maxLength: 200 }),
          (sizes, at, len, noise) => {
            const bufs = sizes.map((n, i) => encodeRecord(rec(i, n)));
            const starts: number[] = [];
            let off = 0;
            for (const b of bufs) {
              starts.push(off);
              off += b.length;
            }
            const seg = Buffer.concat(bufs);
            const a = at % seg.length;
            const e = Math.min(seg.length, a + len);
            for (let i = a; i < e; i++) seg[i] = noise[(i - a) % noise.length]!;
            writeFileSync(file, seg);
            const r = Journal.read(file);
            const got = new Set(r.records.map((x) => x.t));
            expect(got.size).toBe(r.records.length);
            for (let i = 0; i < bufs.length; i++) {
              const s0 = starts[i]!;
              const s1 = s0 + bufs[i]!.length;
              if (s1 <= a || s0 >= e) expect(got.has(i)).toBe(true); // untouched record kept
              if (got.has(i)) {
                const x = r.records.find((y) => y.t === i)!;
                expect(x).toMatchObject({ v: 2, w: '2026', b: 4 });
              }
            }
            for (const t of got) expect(t).toBeLessThan(bufs.length);
            if (r.records.length < bufs.length) expect(r.damaged.length).toBeGreaterThan(0);
          },
        ),
        { numRuns: 300 },
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses to grow past journalMaxBytes with HG_ERR_JOURNAL', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hg-journal-'));
    try {
      const j = new Journal(dir, 4096, 4096);
      await expect(
        (async () => {
          for (let i = 0; i < 1000; i++) await j.append(rec(i));
        })(),
      ).rejects.toMatchObject({ code: ErrorCodes.JOURNAL });
      await j.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('int64Decimal', () => {
  it('is the signed decimal of 8 little-endian bytes at any offset', async () => {
    const { int64Decimal } = await import('../src/redis/int64.js');
    const buf = new Uint8Array(24);
    const dv = new DataView(buf.buffer);
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.integer({ min: 0, max: 16 }), (v, o) => {
        dv.setBigInt64(o, v, true);
        expect(int64Decimal(dv, o)).toBe(v.toString());
      }),
      { numRuns: 2_000 },
    );
    for (const v of [0n, -1n, 1n, -(2n ** 63n), 2n ** 63n - 1n, -100000n, 100000n, 4294967296n, -4294967296n]) {
      dv.setBigInt64(3, v, true);
      expect(int64Decimal(dv, 3)).toBe(v.toString());
    }
  });
});

describe('RespWriter', () => {
  it('int64 bulk strings carry the same digits as int64Decimal', async () => {
    const { RespWriter } = await import('../src/redis/resp.js');
    const { int64Decimal } = await import('../src/redis/int64.js');
    const dv = new DataView(new ArrayBuffer(8));
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), (v) => {
        dv.setBigInt64(0, v, true);
        const w = new RespWriter(1);
        w.int64(dv, 0);
        const s = int64Decimal(dv, 0);
        expect(w.bytes().toString('latin1')).toBe(`$${s.length}\r\n${s}\r\n`);
      }),
      { numRuns: 2_000 },
    );
    // digit-count and limb boundaries (the digits are computed in 1e8 pieces of 16-bit limbs)
    const edges: bigint[] = [0n, 2n ** 63n - 1n, -(2n ** 63n)];
    for (let e = 0n, p = 1n; e <= 18n; e++, p *= 10n) edges.push(p - 1n, p, p + 1n, -p, 1n - p);
    for (let b = 15n; b <= 62n; b++) edges.push(2n ** b - 1n, 2n ** b, -(2n ** b), 1n - 2n ** b);
    edges.push(10n ** 16n * 922n + 12345678n, 99_999_999n * 10n ** 8n, -(10n ** 16n) - 7n);
    for (const v of edges) {
      dv.setBigInt64(0, v, true);
      const w = new RespWriter(1);
      w.int64(dv, 0);
      expect(w.bytes().toString('latin1')).toBe(`$${v.toString().length}\r\n${v}\r\n`);
    }
    const w = new RespWriter(1);
    w.array(2);
    w.str('键');
    w.member(Buffer.from([0, 255]));
    expect(w.bytes()).toEqual(Buffer.concat([Buffer.from('*2\r\n$3\r\n键\r\n$2\r\n'), Buffer.from([0, 255]), Buffer.from('\r\n')]));
  });

  it('str and uintStr write the bytes of a bulk string of the UTF-8, for ASCII, non-ASCII and mixed strings of any length', async () => {
    const { RespWriter } = await import('../src/redis/resp.js');
    const bulk = (s: string): Buffer => Buffer.concat([Buffer.from(`$${Buffer.byteLength(s)}\r\n`), Buffer.from(s, 'utf8'), Buffer.from('\r\n')]);
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.string({ maxLength: 80 }), fc.string({ unit: 'binary', maxLength: 70 }), fc.string({ unit: 'binary-ascii', minLength: 9, maxLength: 66 }))), fc.nat(1_000_000), (strs, v) => {
        const w = new RespWriter(1);
        for (const s of strs) w.str(s);
        w.uintStr(v);
        w.uintStr(v % 10);
        expect(w.bytes()).toEqual(Buffer.concat([...strs.map(bulk), bulk(String(v)), bulk(String(v % 10))]));
      }),
      { numRuns: 1_000 },
    );
  });

  it('bulk strings of any length, copied by bytes, by words or in one piece, while the buffer grows', async () => {
    const { RespWriter } = await import('../src/redis/resp.js');
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(7), fc.boolean(), (bytes, skip, words) => {
        const src = new Uint8Array(bytes.length + skip);
        src.set(bytes, skip);
        const w = new RespWriter(1);
        w.str('x');
        w.bulk(src, skip, src.length, words ? new DataView(src.buffer) : undefined);
        expect(w.bytes()).toEqual(Buffer.concat([Buffer.from(`$1\r\nx\r\n$${bytes.length}\r\n`), Buffer.from(bytes), Buffer.from('\r\n')]));
      }),
      { numRuns: 500 },
    );
  });

  it('bulkSpace: bytes written into buf at the returned offset, after the call, land in the bulk string even when the buffer grew', async () => {
    const { RespWriter } = await import('../src/redis/resp.js');
    const { putAddress } = await import('../src/dedup/growth.js');
    fc.assert(
      fc.property(fc.nat(200), fc.array(fc.integer({ min: 0, max: 0xfffff }), { maxLength: 120 }), (before, lows) => {
        const w = new RespWriter(1);
        const pad = 'p'.repeat(before);
        w.str(pad);
        const at = w.bulkSpace(3 * lows.length);
        lows.forEach((r, i) => putAddress(w.buf, at + 3 * i, r));
        w.str('end');
        const want = Buffer.alloc(3 * lows.length);
        lows.forEach((r, i) => want.writeUIntLE(r, 3 * i, 3));
        expect(w.bytes()).toEqual(Buffer.concat([Buffer.from(`$${before}\r\n${pad}\r\n$${want.length}\r\n`), want, Buffer.from('\r\n$3\r\nend\r\n')]));
      }),
      { numRuns: 500 },
    );
  });
});
