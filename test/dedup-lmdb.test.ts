// The durable embedded store (dedup.path, LMDB): options, answers against a reference model,
// restarts, windows, both layouts' member formats, stats and purge.
import { afterAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DedupService, LmdbStore, parseDedupOptions } from '../src/dedup/index.js';
import { HashGate } from '../src/index.js';
import { bucketsOfDigests, digestKeys } from '../src/dedup/layout.js';
import { ErrorCodes } from '../src/errors.js';
import { writeFirstFormatStore } from './helpers/lmdb-first-format.js';
import { open as lmdbOpen } from 'lmdb';

const root = mkdtempSync(join(tmpdir(), 'hg-lmdb-test-'));
let seq = 0;
const dir = (): string => join(root, `s${seq++}`);
afterAll(() => rmSync(root, { recursive: true, force: true }));

const T2026 = new Date('2026-06-01T00:00:00Z');
const T2027 = new Date('2027-06-01T00:00:00Z');

describe('dedup.path options', () => {
  it('validates path, sync and maxWindows and names the option', () => {
    expect(parseDedupOptions({ path: '/x' }).path).toBe('/x');
    expect(parseDedupOptions({}).path).toBeUndefined();
    expect(parseDedupOptions({ path: '/x' }).sync).toBe(true);
    for (const bad of ['', 42, null, {}, 'a\0b']) {
      const e = (() => { try { parseDedupOptions({ path: bad }); } catch (err) { return err as TypeError & { code: string }; } })();
      expect(e).toBeInstanceOf(TypeError);
      expect(e!.message).toMatch(/dedup\.path/);
      expect(e!.code).toBe(ErrorCodes.INVALID_OPTION);
    }
    expect(() => parseDedupOptions({ path: '/x', sync: 'yes' })).toThrow(/dedup\.sync/);
    expect(() => parseDedupOptions({ sync: false })).toThrow(/options\.dedup\.sync needs options\.dedup\.path/);
    expect(() => parseDedupOptions({ maxWindows: 10 })).toThrow(/options\.dedup\.maxWindows needs options\.dedup\.path/);
    expect(() => parseDedupOptions({ path: '/x', maxWindows: 0 })).toThrow(RangeError);
    const e = (() => { try { parseDedupOptions({ path: '/x', layout: 'sets', maxKeyBytes: 4096 }); } catch (err) { return err as RangeError & { code: string }; } })();
    expect(e).toBeInstanceOf(RangeError);
    expect(e!.code).toBe(ErrorCodes.INVALID_OPTION);
    expect(e!.message).toMatch(/dedup\.maxKeyBytes must be <= 1978/);
    expect(parseDedupOptions({ path: '/x', layout: 'compact', maxKeyBytes: 4096 }).maxKeyBytes).toBe(4096);
  });

  it('refuses dedup.path together with redis', async () => {
    await expect(HashGate.open({ threads: 0, redis: 'redis://127.0.0.1:1', dedup: { path: dir() } })).rejects.toMatchObject({
      code: ErrorCodes.INVALID_OPTION,
      message: expect.stringMatching(/dedup\.path/),
    });
  });

  it('an unopenable path is a coded store error naming the path', () => {
    const file = join(root, 'a-file');
    rmSync(file, { force: true, recursive: true });
    writeFileSync(file, 'x'); // a plain file where a directory is expected
    expect(() => new DedupService({ dedup: { path: join(file, 'sub') } })).toThrow(expect.objectContaining({ code: ErrorCodes.STORE }));
  });
});

describe.each(['compact', 'sets'] as const)('LMDB store, layout %s', (layout) => {
  it('answers like a Set per window, across batches with in-batch repeats (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.tuple(fc.integer({ min: 0, max: 60 }), fc.boolean()), { minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 6 }),
        async (batches) => {
          const svc = new DedupService({ dedup: { path: dir(), layout, buckets: 8, cacheMaxEntries: 0 } });
          try {
            const seen = { a: new Set<string>(), b: new Set<string>() };
            for (const batch of batches) {
              for (const win of ['a', 'b'] as const) {
                const keys = batch.filter(([, w]) => (win === 'a') === w).map(([k]) => `k${k}|${'x'.repeat(k % 7)}`);
                if (keys.length === 0) continue;
                const got = await svc.firstSeen(keys, { at: win === 'a' ? T2026 : T2027 });
                const want = keys.map((k) => (seen[win].has(k) ? 0 : (seen[win].add(k), 1)));
                expect([...got]).toEqual(want);
              }
            }
            expect((await svc.stats('2026')).exact).toBe(seen.a.size);
            expect((await svc.stats('2027')).exact).toBe(seen.b.size);
          } finally {
            await svc.close();
          }
        },
      ),
      { numRuns: 25 },
    );
  });

  it('survives a restart: every key answered 1 before is 0 after reopening', async () => {
    const path = dir();
    const keys = Array.from({ length: 5000 }, (_, i) => `李${i}|3201${i}`);
    const a = new DedupService({ dedup: { path, layout } });
    expect([...(await a.firstSeen(keys.slice(0, 3000), { at: T2026 }))].every((v) => v === 1)).toBe(true);
    await a.close();
    const b = new DedupService({ dedup: { path, layout } });
    const got = await b.firstSeen(keys, { at: T2026 });
    expect(got.subarray(0, 3000).every((v) => v === 0)).toBe(true);
    expect(got.subarray(3000).every((v) => v === 1)).toBe(true);
    // another window is independent
    expect((await b.firstSeen(keys.slice(0, 10), { at: T2027 })).every((v) => v === 1)).toBe(true);
    const st = await b.stats('2026');
    expect(st).toMatchObject({ store: 'lmdb', layout, exact: 5000, approximate: 5000 });
    await b.close();
  });

  it('a batch of seen keys is answered from a read snapshot: no write transaction, no page copied', async () => {
    const path = dir();
    const keys = Array.from({ length: 3000 }, (_, i) => `王${i}|1101${i}`);
    const svc = new DedupService({ dedup: { path, layout, buckets: 64, cacheMaxEntries: 0 } });
    try {
      expect((await svc.firstSeen(keys, { at: T2026 })).every((v) => v === 1)).toBe(true);
      const store = new LmdbStore({ path, sync: false, maxWindows: 4 });
      const before = store.env.getStats() as { lastTxnId: number; lastPageNumber: number };
      const again = await svc.firstSeen([...keys].reverse(), { at: T2026 });
      expect(again.every((v) => v === 0)).toBe(true);
      store.env.resetReadTxn();
      const after = store.env.getStats() as { lastTxnId: number; lastPageNumber: number };
      await store.close();
      expect(after.lastTxnId).toBe(before.lastTxnId);
      expect(after.lastPageNumber).toBe(before.lastPageNumber);
      // a mostly-new batch still answers exactly: the seen ones 0, the new ones 1, once
      const mixed = [...keys.slice(0, 100), ...Array.from({ length: 900 }, (_, i) => `新${i}`)];
      const got = await svc.firstSeen(mixed, { at: T2026 });
      expect([...got]).toEqual(mixed.map((_, i) => (i < 100 ? 0 : 1)));
      expect((await svc.firstSeen(mixed, { at: T2026 })).every((v) => v === 0)).toBe(true);
    } finally {
      await svc.close();
    }
  });

  it('concurrent one-key calls share write transactions (group commit), with and without call merging', async () => {
    for (const coalesce of [false, undefined] as const) {
      const path = dir();
      const svc = new DedupService({ ...(coalesce === false ? { coalesce } : {}), dedup: { path } });
      const env = lmdbOpen({ path, maxDbs: 8 });
      try {
        await svc.firstSeen(['warm'], { at: T2026 }); // records the window
        const txn = (): number => (env.getStats() as { lastTxnId: number }).lastTxnId;
        const before = txn();
        const answers = await Promise.all(Array.from({ length: 64 }, (_, i) => svc.firstSeen([`g${i}`], { at: T2026 })));
        expect(answers.every((a) => a.length === 1 && a[0] === 1)).toBe(true);
        // one transaction (and fsync) per call would be 64; lmdb-js puts the transactions queued
        // while one commits into the next one
        expect(txn() - before).toBeLessThanOrEqual(4);
      } finally {
        await svc.close();
        await env.close();
      }
    }
  });

  it('one commit per sequential new-key call, and one per round of closed-loop callers', async () => {
    const path = dir();
    const svc = new DedupService({ dedup: { path, layout } });
    const env = lmdbOpen({ path, maxDbs: 8 });
    try {
      await svc.firstSeen(['warm'], { at: T2026 }); // records the window
      const txn = (): number => (env.getStats() as { lastTxnId: number }).lastTxnId;
      // a lone caller: its own commit and nothing else (no second transaction per call)
      let before = txn();
      for (let i = 0; i < 20; i++) expect([...(await svc.firstSeen([`seq${i}`], { at: T2026 }))]).toEqual([1]);
      expect(txn() - before).toBe(20);
      // 16 callers, each awaiting its answer before its next call (as request handlers do): the
      // callers woken by one commit go into the next one together, round after round
      const rounds = 20;
      before = txn();
      const answered = await Promise.all(Array.from({ length: 16 }, async (_, c) => {
        let ones = 0;
        for (let r = 0; r < rounds; r++) ones += (await svc.firstSeen([`loop${c}-${r}`], { at: T2026 }))[0]!;
        return ones;
      }));
      expect(answered).toEqual(Array.from({ length: 16 }, () => rounds));
      // a commit per call would be 320
      expect(txn() - before).toBeLessThanOrEqual(rounds + 4);
    } finally {
      await svc.close();
      await env.close();
    }
  });

  it('keeps the first recorded bucket count for a window', async () => {
    const path = dir();
    const a = new DedupService({ dedup: { path, layout, buckets: 64 } });
    await a.firstSeen(['x', 'y'], { at: T2026 });
    await a.close();
    const b = new DedupService({ dedup: { path, layout, buckets: 128 } });
    expect((await b.stats('2026')).buckets).toBe(64);
    expect([...(await b.firstSeen(['x', 'y', 'z'], { at: T2026 }))]).toEqual([0, 0, 1]);
    expect((await b.stats('2027')).buckets).toBe(128);
    await b.close();
  });

  it('purgeWindow drops one window in bounded batches and leaves the others', async () => {
    const path = dir();
    const svc = new DedupService({ dedup: { path, layout, buckets: 2000 } });
    const keys = Array.from({ length: 20_000 }, (_, i) => `p${i}`);
    await svc.firstSeen(keys, { at: T2026 });
    await svc.firstSeen(keys.slice(0, 100), { at: T2027 });
    const distinctBuckets = new Set(bucketsOfDigests(digestKeys(keys), layout, 2000)).size;
    // bucket keys + the meta record, as Redis counts unlinked keys
    expect(await svc.purgeWindow('2026')).toBe(distinctBuckets + 1);
    expect((await svc.stats('2026')).exact).toBe(0);
    expect((await svc.stats('2027')).exact).toBe(100);
    // stats() is read-only: it recorded nothing, so a second purge finds nothing
    expect(await svc.purgeWindow('2026')).toBe(0);
    expect((await svc.firstSeen(keys.slice(0, 3), { at: T2026 })).every((v) => v === 1)).toBe(true);
    expect((await svc.firstSeen(keys.slice(0, 3), { at: T2027 })).every((v) => v === 0)).toBe(true);
    await svc.close();
  });
});

describe('compact member blocks', () => {
  /** A store whose window 2026 keeps every member in one block: one bucket, block bits 0. */
  const oneBlockStore = async (): Promise<string> => {
    const path = dir();
    const st = new LmdbStore({ path, sync: false, maxWindows: 4, blockBits: 0 });
    expect(await st.resolveBuckets('2026', 'compact', 1)).toBe(1);
    await st.close();
    return path;
  };

  it('one block holding every member answers like a Set, sequentially and concurrently (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.integer({ min: 0, max: 300 }), { minLength: 1, maxLength: 60 }), { minLength: 1, maxLength: 6 }),
        fc.boolean(),
        async (batches, concurrent) => {
          const path = await oneBlockStore();
          const svc = new DedupService({ dedup: { path, buckets: 1, cacheMaxEntries: 0 } });
          try {
            const seen = new Set<string>();
            const keyed = batches.map((b) => b.map((k) => `块${k}|${k * 7919}`));
            // the model: call order decides which occurrence is the first
            const want = keyed.map((keys) => keys.map((k) => (seen.has(k) ? 0 : (seen.add(k), 1))));
            const got = concurrent
              ? await Promise.all(keyed.map((keys) => svc.firstSeen(keys, { at: T2026 })))
              : await keyed.reduce<Promise<Uint8Array[]>>(async (acc, keys) => [...(await acc), await svc.firstSeen(keys, { at: T2026 })], Promise.resolve([]));
            expect(got.map((a) => [...a])).toEqual(want);
            expect((await svc.stats('2026')).exact).toBe(seen.size);
          } finally {
            await svc.close();
          }
          // reopened, every stored key is seen and the block holds each member once
          const store = new LmdbStore({ path, sync: false, maxWindows: 4 });
          await store.ready();
          const rows = [...store.members('2026', 'compact')].flat();
          expect(rows.every((r) => r.bucket === 0)).toBe(true);
          expect(new Set(rows.map((r) => r.member.toString('hex'))).size).toBe(rows.length);
          expect(rows.length).toBe(new Set(batches.flat()).size);
          const hex = rows.map((r) => r.member.toString('hex'));
          expect(hex).toEqual([...hex].sort()); // sorted, which the binary search relies on
          await store.close();
        },
      ),
      { numRuns: 30 },
    );
  });

  it('bulk rows (the loader path) count repeated and stored members once (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 40 })), { minLength: 1, maxLength: 80 }), { minLength: 1, maxLength: 4 }),
        fc.constantFrom(0, 1, 9),
        async (calls, blockBits) => {
          const store = new LmdbStore({ path: dir(), sync: false, maxWindows: 4, blockBits });
          try {
            const seen = new Set<string>();
            for (const rows of calls) {
              const keys = new Uint8Array(rows.length * 8);
              const offsets = new Uint32Array(rows.length + 1);
              rows.forEach(([, m], i) => {
                // members that differ only in their last byte, or in their first (other blocks)
                keys[i * 8] = (m * 37) & 0xff;
                keys[i * 8 + 7] = m;
                offsets[i + 1] = (i + 1) * 8;
              });
              const want = rows.filter(([b, m]) => !seen.has(`${b}:${m}`) && (seen.add(`${b}:${m}`), true)).length;
              expect(await store.addRows('2026', 'compact', 4, rows.length, (i) => rows[i]![0], keys, offsets)).toBe(want);
            }
            expect((await store.count('2026', 'compact')).exact).toBe(seen.size);
            const got = [...store.members('2026', 'compact', 7)].flat().map((r) => `${r.bucket}:${r.member[7]}`);
            expect(got.sort()).toEqual([...seen].sort());
          } finally {
            await store.close();
          }
        },
      ),
      { numRuns: 30 },
    );
  });

  it('a block larger than an LMDB page (overflow pages) keeps exact answers across restarts', async () => {
    const path = await oneBlockStore();
    const keys = Array.from({ length: 9000 }, (_, i) => `大${i}|${i}`);
    const a = new DedupService({ dedup: { path, buckets: 1, cacheMaxEntries: 0 } });
    for (let o = 0; o < keys.length; o += 3000) {
      expect((await a.firstSeen(keys.slice(o, o + 3000), { at: T2026 })).every((v) => v === 1)).toBe(true);
    }
    await a.close();
    const b = new DedupService({ dedup: { path, buckets: 1, cacheMaxEntries: 0 } });
    const mixed = [...keys.filter((_, i) => i % 3 === 0), 'new-1', 'new-2'];
    expect([...(await b.firstSeen(mixed, { at: T2026 }))]).toEqual(mixed.map((k) => (k.startsWith('new-') ? 1 : 0)));
    expect((await b.stats('2026')).exact).toBe(9002);
    await b.close();
  });

  it('converts a window written in the first format (one duplicate per member) on open', async () => {
    const path = dir();
    const buckets = 64;
    const oldKeys = Array.from({ length: 4000 }, (_, i) => `旧${i}|${i}`);
    const d = digestKeys(oldKeys);
    const bk = bucketsOfDigests(d, 'compact', buckets);
    await writeFirstFormatStore(path, oldKeys, buckets);
    const svc = new DedupService({ dedup: { path, cacheMaxEntries: 0 } });
    const keys = [...oldKeys, '新1', '新2'];
    expect([...(await svc.firstSeen(keys, { at: T2026 }))]).toEqual(keys.map((k) => (k.startsWith('新') ? 1 : 0)));
    expect(await svc.stats('2026')).toMatchObject({ buckets, exact: 4002 });
    await svc.close();
    // the old sub-database is gone; the members are in blocks under the same buckets
    const raw = lmdbOpen({ path, maxDbs: 8 });
    expect([...raw.getKeys()].map(String).sort()).toEqual(['b:2026', 'hg:meta']);
    await raw.close();
    const store = new LmdbStore({ path, sync: false, maxWindows: 4 });
    await store.ready();
    const rows = [...store.members('2026', 'compact', 500)].flat();
    const want = oldKeys.map((_, i) => `${bk[i]}:${Buffer.from(d.subarray(i * 16, i * 16 + 8)).toString('hex')}`);
    const nd = digestKeys(['新1', '新2']);
    const nb = bucketsOfDigests(nd, 'compact', buckets);
    want.push(...[0, 1].map((i) => `${nb[i]}:${Buffer.from(nd.subarray(i * 16, i * 16 + 8)).toString('hex')}`));
    expect(rows.map((r) => `${r.bucket}:${r.member.toString('hex')}`).sort()).toEqual(want.sort());
    await store.close();
  });
});

describe('member formats on disk', () => {
  it("compact never writes a raw key; 'sets' stores raw keys (readable for export)", async () => {
    const marker = 'RAWKEY-Ω-7f3a9c';
    for (const layout of ['compact', 'sets'] as const) {
      const path = dir();
      const svc = new DedupService({ dedup: { path, layout } });
      await svc.firstSeen([marker, `${marker}-2`], { at: T2026 });
      await svc.close();
      const bytes = readFileSync(join(path, 'data.mdb'));
      expect(bytes.includes(Buffer.from(marker, 'utf8'))).toBe(layout === 'sets');
      // raw keys (or digests of them) are readable by the owner only
      expect(statSync(path).mode & 0o777).toBe(0o700);
      for (const f of ['data.mdb', 'lock.mdb']) expect(statSync(join(path, f)).mode & 0o777).toBe(0o600);
    }
  });

  it('compact members are the 8 digest bytes under their bucket; export reads them back', async () => {
    const path = dir();
    const svc = new DedupService({ dedup: { path, buckets: 16 } });
    const keys = ['alpha', 'beta', 'gamma'];
    await svc.firstSeen(keys, { at: T2026 });
    await svc.close();
    const store = new LmdbStore({ path, sync: true, maxWindows: 10 });
    const rows = [...store.members('2026', 'compact', 2)].flat();
    const d = digestKeys(keys);
    const b = bucketsOfDigests(d, 'compact', 16);
    const want = keys.map((_, i) => `${b[i]}:${Buffer.from(d.subarray(i * 16, i * 16 + 8)).toString('hex')}`).sort();
    expect(rows.map((r) => `${r.bucket}:${r.member.toString('hex')}`).sort()).toEqual(want);
    expect(store.windows()).toEqual([{ window: '2026', layout: 'compact', buckets: 16 }]);
    await store.close();
  });
});

describe('HashGate facade', () => {
  it('HashGate.open({ dedup: { path } }) is durable; without path the memory table stays the default', async () => {
    const path = dir();
    const g = await HashGate.open({ threads: 0, dedup: { path } });
    expect([...(await g.firstSeen(['u1', 'u2', 'u1']))]).toEqual([1, 1, 0]);
    expect((await g.dedupStats()).store).toBe('lmdb');
    await g.close();
    const g2 = await HashGate.open({ threads: 0, dedup: { path } });
    expect([...(await g2.firstSeen(['u1', 'u3']))]).toEqual([0, 1]);
    await g2.close();
    const m = await HashGate.open({ threads: 0 });
    expect((await m.dedupStats()).store).toBe('memory');
    await m.close();
  });

  it('rejects calls after close with HG_ERR_CLOSED', async () => {
    const svc = new DedupService({ dedup: { path: dir() } });
    await svc.close();
    await expect(svc.firstSeen(['a'])).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
  });
});
