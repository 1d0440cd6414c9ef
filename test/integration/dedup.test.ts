// Dedup against a real private redis-server: layouts, seed compatibility, meta, loader path,
// stats/purge, fail-open journal + recover, fail-closed, torn journal tail, lock, bad input.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { mkdtempSync, readdirSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { DedupService, type DedupOptions } from '../../src/dedup/index.js';
import { load } from '../../src/loader/loader.js';
import { RedisLayoutSink } from '../../src/loader/sink.js';
import { bucketOf, packKeys } from '../../src/hash/index.js';
import { ErrorCodes } from '../../src/errors.js';

const has = requireRedisOrSkip('dedup integration');
const NOW = Date.parse('2026-06-01T00:00:00Z');

describe.skipIf(!has)('dedup on Redis', () => {
  let srv: RedisServer;
  let r: Redis;
  let dir: string;
  let n = 0;
  const open = (dedup: DedupOptions = {}, extra: { now?: () => number } = {}) =>
    new DedupService({ redis: srv.url, dedup: { journalDir: dir, prefix: `t${n}`, replayIntervalMs: 0, commandTimeoutMs: 500, ...dedup }, now: () => NOW, ...extra });

  beforeAll(async () => {
    srv = await startRedis();
    r = new Redis(srv.url);
    r.on('error', () => undefined); // the tests kill the server on purpose
    dir = mkdtempSync(join(tmpdir(), 'hg-dedup-it-'));
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const layout of ['compact', 'sets'] as const) {
    it(`${layout}: exact answers, batch duplicates, second service sees the first's keys`, async () => {
      n++;
      const a = open({ layout, buckets: 64 });
      const b = open({ layout, buckets: 64 });
      const keys = Array.from({ length: 5000 }, (_, i) => `name${i % 3000}|1101${i % 3000}`);
      const got = await a.firstSeen(keys);
      expect(got.reduce((x, y) => x + y, 0)).toBe(3000);
      expect([...got.subarray(0, 3)]).toEqual([1, 1, 1]);
      expect(got[3000]).toBe(0);
      expect([...(await b.firstSeen(['name1|11011', 'new-one']))]).toEqual([0, 1]);
      const st = await a.stats('2026');
      expect(st.exact).toBe(3001);
      expect(Math.abs(st.approximate - 3001)).toBeLessThan(3001 * 0.05);
      await a.close();
      await b.close();
    });
  }

  it('sets layout uses the same sets as a Java service: {prefix}:{year}:{bucketOf(key,1000)} with raw members', async () => {
    const s = new DedupService({ redis: srv.url, dedup: { layout: 'sets', prefix: 'tianyu', journalDir: dir, replayIntervalMs: 0 }, now: () => NOW });
    const key = '张三110101199003071234';
    await r.sadd(`tianyu:2026:${bucketOf('李四110101199003075678', 1000)}`, '李四110101199003075678'); // written by "Java"
    expect([...(await s.firstSeen(['李四110101199003075678', key]))]).toEqual([0, 1]);
    expect(await r.sismember(`tianyu:2026:${bucketOf(key, 1000)}`, key)).toBe(1);
    await s.close();
  });

  it('compact layout keeps intsets, never stores raw keys, and records the bucket count per window', async () => {
    n++;
    const s = open({ layout: 'compact', buckets: 16 });
    await s.firstSeen(Array.from({ length: 2000 }, (_, i) => `secret-id-${i}`));
    const keys = await r.keys(`t${n}:2026:c{*`);
    // one table per bucket, none split yet: its one sub-bucket is {table}0.0
    const buckets = keys.filter((k) => /:c\{\d+\}0\.0$/.test(k));
    expect(buckets.length).toBe(16);
    for (const k of buckets) expect(await r.object('ENCODING', k)).toBe('intset');
    const members = await r.smembers(buckets[0]!);
    expect(members.every((m) => /^-?\d+$/.test(m))).toBe(true);
    expect(await r.hget(`t${n}:2026:meta`, 'compact.buckets')).toBe('16');
    // a later instance configured differently keeps using the window's recorded count
    const t = open({ layout: 'compact', buckets: 1000 });
    expect((await t.firstSeen(['secret-id-5']))[0]).toBe(0);
    expect((await t.stats('2026')).buckets).toBe(16);
    await s.close();
    await t.close();
  });

  it('the bulk loader (load into a RedisLayoutSink) writes the same keys/members firstSeen reads, idempotently', async () => {
    for (const layout of ['compact', 'sets'] as const) {
      n++;
      const file = join(dir, `loaded-${n}.txt`);
      writeFileSync(file, Array.from({ length: 3000 }, (_, i) => `loaded-${i}\n`).join(''));
      const loadOnce = async () => {
        const sink = new RedisLayoutSink(new Redis(srv.url), { layout, prefix: `t${n}`, buckets: 32 });
        try {
          return await load({ inputs: [file], window: '2026', buckets: 32, batch: 1000, checkpointFile: join(dir, `loaded-${n}.cp`) }, { sink });
        } finally {
          await sink.close();
        }
      };
      expect(await loadOnce()).toMatchObject({ ok: true, rows: 3000, loaded: 3000, failed: 0, newMembers: 3000 });
      expect(await loadOnce()).toMatchObject({ ok: true, loaded: 3000, newMembers: 0 });
      const s = open({ layout, buckets: 32 });
      expect([...(await s.firstSeen(['loaded-7', 'loaded-2999', 'fresh']))]).toEqual([0, 0, 1]);
      await s.close();
    }
  });

  it('purgeWindow deletes only that window with SCAN + UNLINK', async () => {
    n++;
    let now = Date.parse('2025-06-01T00:00:00Z');
    const s = open({ buckets: 8 }, { now: () => now });
    await s.firstSeen(['a', 'b', 'c']);
    now = NOW;
    await s.firstSeen(['a', 'b']);
    expect(await s.purgeWindow('2025')).toBeGreaterThanOrEqual(3);
    expect((await r.keys(`t${n}:2025:*`)).length).toBe(0);
    expect((await s.stats('2026')).exact).toBe(2);
    await s.close();
  });

  it.each(['all', 'repeats'] as const)("cacheAdmit '%s': a big call's keys reach the seen-cache once it answered, and a purge right after its answer keeps them out", async (cacheAdmit) => {
    n++;
    // one piece of a call (pieces of a big call that end earlier add theirs before the call answers)
    const keys = Array.from({ length: 2000 }, (_, i) => `cached-${i}`);
    const s = open({ buckets: 16, cacheAdmit });
    // the answer whose cache adds follow it: under 'all' the first (every key first seen); under
    // 'repeats' the second (Redis answers "seen before": first sights stay out of the cache)
    const admitted = async (): Promise<void> => {
      expect((await s.firstSeen(keys)).every((a) => a === 1)).toBe(true);
      if (cacheAdmit === 'all') return;
      await new Promise<void>((resolve) => setImmediate(resolve));
      const hits = s.counters.cacheHits;
      expect((await s.firstSeen(keys)).every((a) => a === 0)).toBe(true);
      expect(s.counters.cacheHits).toBe(hits);
    };
    await admitted();
    // the window is purged, and used again by another call, before the cache adds of that answer
    // ran: they must not bring its keys back as "seen" (Redis no longer has them)
    const purged = s.purgeWindow('2026');
    const other = s.firstSeen(Array.from({ length: 500 }, (_, i) => `other-${i}`));
    expect(await purged).toBeGreaterThan(0);
    await other;
    await new Promise<void>((resolve) => setImmediate(resolve));
    await admitted();
    // past a turn of the event loop the adds of that answer are in: a repeat is answered by the
    // cache (0, without asking Redis)
    await new Promise<void>((resolve) => setImmediate(resolve));
    const hits = s.counters.cacheHits;
    expect((await s.firstSeen(keys)).every((a) => a === 0)).toBe(true);
    expect(s.counters.cacheHits - hits).toBe(keys.length);
    expect((await s.stats('2026')).cacheAdmits).toBe(cacheAdmit);
    await s.close();
  });

  it.each([
    ['repeats', [1, 0], 1],
    ['all', [0, 0], 0],
  ] as const)("cacheAdmit '%s': which keys seen before an outage the seen-cache answers during it", async (cacheAdmit, want, journaled) => {
    n++;
    const jdir = mkdtempSync(join(tmpdir(), 'hg-dedup-admit-'));
    const s = open({ journalDir: jdir, buckets: 8, cacheAdmit });
    expect([...(await s.firstSeen(['once', 'twice']))]).toEqual([1, 1]);
    expect([...(await s.firstSeen(['twice']))]).toEqual([0]);
    await srv.kill('SIGKILL');
    // 'once' was answered first-seen only: under 'repeats' it is not cached, and Redis being
    // down, it gets the fail-open answer (1) and goes to the journal
    expect([...(await s.firstSeen(['once', 'twice']))]).toEqual(want);
    expect(s.counters.journaledKeys).toBe(journaled);
    // a key only the journal holds is cached in every mode: asked again during the outage, and
    // one-key calls too (their own path), it is a repeat, not a second first sight
    expect([...(await s.firstSeen(['once', 'twice']))]).toEqual([0, 0]);
    expect([...(await s.firstSeen(['solo']))]).toEqual([1]);
    expect([...(await s.firstSeen(['solo']))]).toEqual([0]);
    expect(s.counters.journaledKeys).toBe(journaled + 1);
    await srv.restart();
    await s.close();
    rmSync(jdir, { recursive: true, force: true });
  });

  it('bad input rejects with the index and writes nothing', async () => {
    n++;
    const s = open({ maxKeyBytes: 16 });
    const before = await r.dbsize();
    await expect(s.firstSeen(['good', 'good2', 7 as unknown as string])).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG, details: { index: 2 } });
    await expect(s.firstSeen(['good', ''])).rejects.toMatchObject({ code: ErrorCodes.EMPTY_KEY, details: { index: 1 } });
    await expect(s.firstSeen(['good', 'x'.repeat(17)])).rejects.toMatchObject({ code: ErrorCodes.KEY_TOO_LONG, details: { index: 1 } });
    expect(await r.dbsize()).toBe(before);
    await s.close();
  });

  it('fail-open: answers 1 and journals while Redis is down; recover() replays idempotently under the lock', async () => {
    n++;
    const jdir = mkdtempSync(join(tmpdir(), 'hg-dedup-fo-'));
    const s = open({ journalDir: jdir, buckets: 8 });
    expect([...(await s.firstSeen(['before-1', 'before-2']))]).toEqual([1, 1]);
    // a repeat, answered "seen before" by Redis: the seen-cache takes it
    expect([...(await s.firstSeen(['before-1']))]).toEqual([0]);
    await srv.kill('SIGKILL');
    const down = await s.firstSeen(['before-1', 'during-1', 'during-2', 'during-1']);
    expect([...down]).toEqual([0, 1, 1, 0]); // 'before-1' from the seen-cache
    expect(s.counters.journaledKeys).toBe(2);
    expect((await s.stats('2026').catch(() => null))).toBeNull();
    await srv.restart(); // --save '' --appendonly no: the server comes back EMPTY
    const t = open({ journalDir: jdir, buckets: 8 });
    // a replay lock held by someone else: nothing happens
    await r.set(`t${n}:lock:recover`, 'other', 'PX', 10_000);
    const blocked = await s.recover();
    expect(blocked.lockHeld).toBe(true);
    expect(await r.get(`t${n}:lock:recover`)).toBe('other');
    await r.del(`t${n}:lock:recover`);
    // another live instance never takes s's active segment; s's own recover() seals and replays it
    expect((await t.recover()).segments).toBe(0);
    const rep = await s.recover();
    expect(rep).toMatchObject({ lockHeld: false, segments: 1, records: 1, keys: 2, added: 2, failed: [] });
    expect(await r.exists(`t${n}:lock:recover`)).toBe(0);
    expect([...(await t.firstSeen(['during-1', 'during-2', 'new']))]).toEqual([0, 0, 1]);
    const again = await t.recover();
    expect(again).toMatchObject({ segments: 0, keys: 0 });
    expect(readdirSync(jdir)).toEqual([]);
    await s.close();
    await t.close();
    rmSync(jdir, { recursive: true, force: true });
  });

  it('fail-closed: rejects with HG_ERR_STORE_UNAVAILABLE and writes nothing', async () => {
    n++;
    const jdir = mkdtempSync(join(tmpdir(), 'hg-dedup-fc-'));
    const s = open({ journalDir: jdir, onStoreError: 'fail-closed', buckets: 8, connectTimeoutMs: 1000 });
    await srv.kill('SIGKILL');
    const err = await s.firstSeen(['x1', 'x2']).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: ErrorCodes.STORE_UNAVAILABLE });
    expect([...((err as { details: { answers: Uint8Array } }).details.answers)]).toEqual([255, 255]);
    await srv.restart();
    expect(await r.dbsize()).toBe(0);
    expect(readdirSync(jdir)).toEqual([]);
    // the service's client reconnects on its own backoff, after the server is back
    for (const end = Date.now() + 10_000; (s.redis as Redis).status !== 'ready' && Date.now() < end; ) await new Promise((res) => setTimeout(res, 20));
    expect([...(await s.firstSeen(['x1', 'x2']))]).toEqual([1, 1]);
    await s.close();
    rmSync(jdir, { recursive: true, force: true });
  });

  it('a truncated SEALED segment: intact records replayed, the segment quarantined, report not complete', async () => {
    n++;
    const jdir = mkdtempSync(join(tmpdir(), 'hg-dedup-torn-'));
    const s = open({ journalDir: jdir, buckets: 4, cacheMaxEntries: 0 });
    await s.firstSeen(['warm']);
    await srv.kill('SIGKILL');
    await s.firstSeen(['t1', 't2']);
    await s.firstSeen(['t3']);
    await s.close(); // seals the segment
    const seg = readdirSync(jdir).map((f) => join(jdir, f));
    expect(seg).toHaveLength(1);
    truncateSync(seg[0]!, statSync(seg[0]!).size - 3);
    await srv.restart();
    const t = open({ journalDir: jdir, buckets: 4 });
    const rep = await t.recover();
    expect(rep.tornTails).toEqual([]);
    expect(rep.quarantined).toHaveLength(1);
    expect(rep).toMatchObject({ records: 1, keys: 2, segments: 1, complete: false });
    expect([...(await t.firstSeen(['t1', 't2', 't3']))]).toEqual([0, 0, 1]);
    expect(readdirSync(jdir)).toEqual([`${seg[0]!.split('/').pop()}.corrupt`]);
    await t.close();
    rmSync(jdir, { recursive: true, force: true });
  });
  it('background replay (replayIntervalMs) empties the journal once Redis is back', async () => {
    n++;
    const jdir = mkdtempSync(join(tmpdir(), 'hg-dedup-bg-'));
    const s = open({ journalDir: jdir, buckets: 8, replayIntervalMs: 100 });
    await s.firstSeen(['bg0']);
    await srv.kill('SIGKILL');
    expect([...(await s.firstSeen(['bg1', 'bg2']))]).toEqual([1, 1]);
    expect((await s.stats('2026').catch(() => null))).toBeNull();
    await srv.restart();
    for (let i = 0; i < 100 && readdirSync(jdir).length > 0; i++) {
      await new Promise((res) => setTimeout(res, 100));
    }
    expect(readdirSync(jdir)).toEqual([]);
    expect((await s.stats('2026')).exact).toBe(2); // bg1, bg2 (bg0 died with the non-persistent server)
    await s.close();
    rmSync(jdir, { recursive: true, force: true });
  });

  it('compact layout with a secret: HMAC members differ from plain digests, answers stay exact', async () => {
    n++;
    const plain = open({ buckets: 4 });
    const keyed = new DedupService({ redis: srv.url, dedup: { journalDir: dir, prefix: `t${n}k`, buckets: 4, secret: 'pepper', replayIntervalMs: 0 }, now: () => NOW });
    expect([...(await plain.firstSeen(['id-1', 'id-2']))]).toEqual([1, 1]);
    expect([...(await keyed.firstSeen(['id-1', 'id-2', 'id-1']))]).toEqual([1, 1, 0]);
    const a = new Set((await Promise.all([0, 1, 2, 3].map((b) => r.smembers(`t${n}:2026:c{${b}}0.0`)))).flat());
    const b = (await Promise.all([0, 1, 2, 3].map((x) => r.smembers(`t${n}k:2026:c{${x}}0.0`)))).flat();
    expect(b).toHaveLength(2);
    for (const m of b) expect(a.has(m)).toBe(false);
    await plain.close();
    await keyed.close();
  });
  it('batches larger than one pipelined chunk: duplicates across chunks, arrays and PackedKeys agree with a model', async () => {
    for (const layout of ['compact', 'sets'] as const) {
      n++;
      const s = open({ layout, buckets: 32 });
      const keys = Array.from({ length: 9000 }, (_, i) => `c${(i * 7) % 5003}`);
      const seen = new Set<string>();
      const want = keys.map((k) => (seen.has(k) ? 0 : (seen.add(k), 1)));
      expect([...(await s.firstSeen(keys))]).toEqual(want);
      const more = Array.from({ length: 7000 }, (_, i) => `c${i}`);
      const want2 = more.map((k) => (seen.has(k) ? 0 : (seen.add(k), 1)));
      expect([...(await s.firstSeen(packKeys(more)))]).toEqual(want2);
      expect((await s.stats('2026')).exact).toBe(seen.size);
      await s.close();
    }
  });
});
