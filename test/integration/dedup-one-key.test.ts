// Sequential one-key firstSeen calls on a real redis-server (the lone-call path that skips the
// batch machinery): the same answers as a model and as batches of the same keys, on tables that
// split under the calls (the caller's own splits and another instance's), in both layouts, with a
// secret, behind a big batch that holds the same key, and across a SIGKILL and a SIGSTOP of Redis.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { HashGate } from 'hashgate';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { compactSets, misplaced } from '../helpers/layout.js';

const has = requireRedisOrSkip('one-key dedup calls');
const LIMIT = 64;
const ones = (a: ArrayLike<number>): number => Array.from(a).reduce((x, y) => x + y, 0);

describe.skipIf(!has)('sequential one-key calls', () => {
  let srv: RedisServer;
  let r: Redis;
  let dir: string;
  let n = 0;
  beforeAll(async () => {
    // a small intset limit: a few thousand keys split the tables many times
    srv = await startRedis({ args: ['--set-max-intset-entries', String(LIMIT), '--appendonly', 'yes'] });
    r = new Redis(srv.url);
    r.on('error', () => undefined); // reconnects while the kill test has the server down
    dir = mkdtempSync(join(tmpdir(), 'hg-one-key-'));
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const open = (dedup: Record<string, unknown>) =>
    HashGate.open({ threads: 0, redis: srv.url, dedup: { journalDir: join(dir, `j${n++}`), replayIntervalMs: 0, lockTtlMs: 3000, ...dedup } });

  /** recover() until it completes, as a service's replay timer would: a Redis just back may refuse the first attempts. */
  const recoverAll = async (gate: HashGate): Promise<number> => {
    for (let i = 0; ; i++) {
      try {
        const rep = await gate.recover();
        if (rep.complete) return rep.keys;
      } catch (err) {
        if (i >= 30 || (err as { code?: string }).code !== 'HG_ERR_STORE_UNAVAILABLE') throw err;
      }
      await new Promise((res) => setTimeout(res, 500));
    }
  };

  /** Keys with repeats (every fifth call asks for a key of ten calls before). */
  const stream = (tag: string, count: number): string[] =>
    Array.from({ length: count }, (_, i) => (i % 5 === 4 ? `${tag}-${i - 10 < 0 ? 0 : i - 10}` : `${tag}-${i}`));

  it.each([
    { layout: 'compact', cacheMaxEntries: 0 },
    { layout: 'compact', cacheMaxEntries: 100_000 },
    { layout: 'sets', cacheMaxEntries: 0 },
    { layout: 'compact', cacheMaxEntries: 0, secret: 'a-secret-of-16-bytes-or-more' },
  ])('$layout, cache $cacheMaxEntries, secret $secret: each key answers 1 once, batches of the same keys agree, nothing misplaced', async (o) => {
    const prefix = `one${n}`;
    const gate = await open({ buckets: 4, prefix, window: () => '2030', ...o });
    try {
      const keys = stream(prefix, 4000);
      const model = new Set<string>();
      let wrong = 0;
      for (const k of keys) {
        const want = model.has(k) ? 0 : 1;
        model.add(k);
        if ((await gate.firstSeen([k]))[0] !== want) wrong++;
      }
      expect(wrong).toBe(0);
      // one-key answers and batch answers come from the same members in the same places
      expect(ones(await gate.firstSeen([...model]))).toBe(0);
      expect(ones(await gate.firstSeen([...model].map((k) => `${k}+`)))).toBe(model.size);
      const st = await gate.dedupStats('2030');
      expect(st.exact).toBe(2 * model.size);
      if (o.layout === 'compact') {
        // the calls' own splits ran between them: many sub-buckets, each an intset within the limit
        expect(st.subBuckets!).toBeGreaterThan(4 * 8);
        expect(await misplaced(r, prefix, '2030')).toBe(0);
        for (const s of await compactSets(r, prefix, '2030')) {
          expect(s.encoding).toBe('intset');
          expect(s.size).toBeLessThanOrEqual(LIMIT);
        }
      }
      // a fresh instance (no cache; the table counts it read at open are after every split) agrees with every answer
      const fresh = await open({ buckets: 4, prefix, window: () => '2030', cacheMaxEntries: 0, ...(o.secret ? { secret: o.secret } : {}), layout: o.layout });
      try {
        let seen = 0;
        for (const k of [...model].slice(0, 500)) seen += 1 - (await fresh.firstSeen([k]))[0]!;
        expect(seen).toBe(500);
      } finally {
        await fresh.close();
      }
    } finally {
      await gate.close();
    }
  }, 120_000);

  it('open() readies the current window (bucket count recorded, both pipes connected) so the first call waits for neither; lazyConnect does neither', async () => {
    const ours = async (): Promise<number> => ((await r.client('LIST')) as string).split('\n').filter((l) => / name=hashgate /.test(l)).length;
    const before = await ours();
    const prefix = `warm${n}`;
    const gate = await open({ buckets: 8, prefix, window: () => '2031' });
    try {
      expect(await r.hget(`${prefix}:2031:meta`, 'compact.buckets')).toBe('8');
      expect(await ours()).toBe(before + 2);
      expect((await gate.firstSeen(['warm-a']))[0]).toBe(1);
      expect((await gate.firstSeen(['warm-a']))[0]).toBe(0);
      // the first call used the connections open() made
      expect(await ours()).toBe(before + 2);
    } finally {
      await gate.close();
    }
    const lazyPrefix = `lazy${n}`;
    const lazy = await open({ buckets: 8, prefix: lazyPrefix, window: () => '2031', lazyConnect: true });
    try {
      await new Promise((res) => setTimeout(res, 200));
      expect(await r.exists(`${lazyPrefix}:2031:meta`)).toBe(0);
      expect(await ours()).toBe(before);
      expect((await lazy.firstSeen(['lazy-a']))[0]).toBe(1);
      expect(await r.hget(`${lazyPrefix}:2031:meta`, 'compact.buckets')).toBe('8');
    } finally {
      await lazy.close();
    }
  });

  it('open() resolves when readying the window fails (a window function that throws at first): the calls after it are exact', async () => {
    let asked = 0;
    const prefix = `wfail${n}`;
    const gate = await open({ buckets: 8, prefix, window: () => {
      if (asked++ === 0) throw new Error('calendar not loaded yet');
      return '2032';
    } });
    try {
      expect(asked).toBe(1);
      expect(await r.exists(`${prefix}:2032:meta`)).toBe(0);
      expect((await gate.firstSeen(['wf-a']))[0]).toBe(1);
      expect((await gate.firstSeen(['wf-a']))[0]).toBe(0);
    } finally {
      await gate.close();
    }
  });

  it('one-key calls of an instance whose table counts went stale (another instance split them): exact, after WRONGTYPE replies', async () => {
    const a = await open({ buckets: 2, prefix: 'oks', window: () => '2030', cacheMaxEntries: 0 });
    const b = await open({ buckets: 2, prefix: 'oks', window: () => '2030', cacheMaxEntries: 0 });
    try {
      const keys = Array.from({ length: 6000 }, (_, i) => `oks-${i}`);
      expect(ones(await b.firstSeen(keys.slice(0, 2)))).toBe(2);
      await new Promise((res) => setTimeout(res, 200));
      for (let o = 2; o < 5000; o += 500) expect(ones(await a.firstSeen(keys.slice(o, Math.min(o + 500, 5000))))).toBe(Math.min(500, 5000 - o));
      await r.config('RESETSTAT');
      let wrong = 0;
      // b still holds counts of one sub-bucket per table: old keys seen, new keys new
      for (let i = 0; i < 6000; i += 37) if ((await b.firstSeen([keys[i]!]))[0] !== (i < 5000 ? 0 : 1)) wrong++;
      expect(wrong).toBe(0);
      expect(Number(/cmdstat_sadd:.*failed_calls=(\d+)/.exec(await r.info('commandstats'))?.[1])).toBeGreaterThan(0); // refused as stale, sent again
      expect(await misplaced(r, 'oks', '2030')).toBe(0);
    } finally {
      await a.close();
      await b.close();
    }
  }, 60_000);

  it('a one-key call for a key a big call has in flight waits for it: the big call answers 1, the one-key call 0', async () => {
    const gate = await open({ buckets: 64, prefix: 'okw', window: () => '2030', cacheMaxEntries: 0 });
    try {
      await gate.firstSeen(['warm']); // the window's bucket count and tables are known
      for (let round = 0; round < 5; round++) {
        const keys = Array.from({ length: 50_000 }, (_, i) => `okw-${round}-${i}`);
        const waited = gate.dedup.counters.batchDuplicates;
        const big = gate.firstSeen(keys);
        // one at a time, so each is a one-key batch of its own; the first surely meets the big call in flight
        const solo: number[] = [];
        for (const k of [keys[49_999]!, keys[0]!, keys[25_000]!]) solo.push((await gate.firstSeen([k]))[0]!);
        expect(solo).toEqual([0, 0, 0]);
        // the first is answered by the big call, never sent: it found the key among those in flight
        expect(gate.dedup.counters.batchDuplicates).toBeGreaterThan(waited);
        expect(ones(await big)).toBe(keys.length);
      }
    } finally {
      await gate.close();
    }
  }, 60_000);

  it('fail-open one-key calls across a SIGKILL of Redis: answered 1 and journaled while it is down, recover() then puts each key in once', async () => {
    const jdir = join(dir, 'kill');
    // every acknowledged SADD must come back after the SIGKILL: under everysec Redis may reply
    // before its AOF write (it holds the write back while a slow fsync runs)
    await r.config('SET', 'appendfsync', 'always');
    const gate = await open({ prefix: 'okk', window: () => '2030', journalDir: jdir, cacheMaxEntries: 0 });
    try {
      const keys = Array.from({ length: 900 }, (_, i) => `okk-${i}`);
      let before = 0;
      for (const k of keys.slice(0, 300)) before += (await gate.firstSeen([k]))[0]!;
      expect(before).toBe(300);
      await srv.kill('SIGKILL');
      let down = 0;
      for (const k of keys.slice(300, 600)) down += (await gate.firstSeen([k]))[0]!;
      expect(down).toBe(300); // the documented fail-open answer
      expect(readdirSync(jdir).length).toBeGreaterThan(0);
      // the AOF kept what was acknowledged before the kill (appendfsync always: written and synced
      // before each reply); the journal holds what came while it was down
      await srv.restart();
      expect(await recoverAll(gate)).toBe(300);
      expect(readdirSync(jdir)).toEqual([]);
      let after = 0;
      for (const k of keys.slice(600)) after += (await gate.firstSeen([k]))[0]!;
      expect(after).toBe(300);
      expect(ones(await gate.firstSeen(keys))).toBe(0);
      expect((await gate.dedupStats('2030')).exact).toBe(900);
    } finally {
      await gate.close();
    }
  }, 120_000);

  it('a Redis that comes back empty after a SIGKILL (no persistence, as a promoted empty replica): counts are read again, and a fresh instance finds what the old one wrote', async () => {
    const own = await startRedis({ args: ['--set-max-intset-entries', String(LIMIT)] });
    const openOn = (): Promise<HashGate> =>
      HashGate.open({ threads: 0, redis: own.url, dedup: { buckets: 8, prefix: 'oke', window: () => '2031', journalDir: join(dir, `j${n++}`), replayIntervalMs: 0, lockTtlMs: 3000, cacheMaxEntries: 0 } });
    const a = await openOn();
    try {
      let before = 0;
      for (let i = 0; i < 3000; i++) before += (await a.firstSeen([`oke-a${i}`]))[0]!;
      expect(before).toBe(3000);
      const grown = await a.dedupStats('2031');
      expect(grown.subBuckets).toBeGreaterThan(grown.buckets); // the tables split: counts above 1 are cached
      await own.restart(); // SIGKILL, and back with nothing
      const later = Array.from({ length: 1000 }, (_, i) => `oke-b${i}`);
      let fresh = 0;
      for (const k of later) fresh += (await a.firstSeen([k]))[0]!;
      expect(fresh).toBe(1000);
      await recoverAll(a); // calls made before the connection was back were journaled (fail-open)
      const b = await openOn();
      try {
        expect(ones(await b.firstSeen(later))).toBe(0);
        let again = 0;
        for (const k of later) again += (await b.firstSeen([k]))[0]!;
        expect(again).toBe(0);
      } finally {
        await b.close();
      }
      expect(ones(await a.firstSeen(later))).toBe(0);
    } finally {
      await a.close();
      await own.stop();
    }
  }, 120_000);

  it('a one-key call whose Redis stalls (SIGSTOP) past the command timeout: fail-open answers 1, journaled, exactly once after recover()', async () => {
    const gate = await open({ prefix: 'okp', window: () => '2030', cacheMaxEntries: 0, commandTimeoutMs: 500 });
    try {
      expect(Array.from(await gate.firstSeen(['okp-a']))).toEqual([1]);
      process.kill(srv.pid!, 'SIGSTOP');
      let got: Uint8Array;
      try {
        got = await gate.firstSeen(['okp-b']);
      } finally {
        process.kill(srv.pid!, 'SIGCONT');
      }
      expect(Array.from(got)).toEqual([1]);
      expect(gate.dedup.counters.journaledKeys).toBe(1);
      expect(await recoverAll(gate)).toBe(1);
      expect(Array.from(await gate.firstSeen(['okp-b']))).toEqual([0]);
      expect((await gate.dedupStats('2030')).exact).toBe(2);
    } finally {
      await gate.close();
    }
  }, 60_000);
});
