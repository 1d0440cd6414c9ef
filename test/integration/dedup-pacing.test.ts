// firstSeen against a real redis-server (AOF always) under load and faults: no fail-open answer
// because of our own queue, resends with a requestId return the original answers, no command of
// ours keeps Redis busy for long.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DedupService } from 'hashgate/dedup';
import { ErrorCodes } from 'hashgate';
import { requireRedisOrSkip, scardSum, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { startProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

const has = requireRedisOrSkip('dedup pacing tests');
const NOW = Date.parse('2026-06-01T00:00:00Z');
const now = (): number => NOW;
const jdir = (): string => mkdtempSync(join(tmpdir(), 'hg-pacing-'));
const keysOf = (tag: string, n: number, from = 0): string[] => Array.from({ length: n }, (_, i) => `${tag}-${from + i}`);
const ones = (a: Uint8Array): number => a.reduce((s, v) => s + v, 0);
const members = (redis: Redis, prefix: string): Promise<number> => scardSum(redis, `${prefix}:2026:c{*`);

async function ready(redis: Redis | undefined, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (redis!.status !== 'ready') {
    if (Date.now() > end) throw new Error(`client not ready (${redis!.status})`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.skipIf(!has)('dedup pacing on a real Redis (appendfsync always)', () => {
  let srv: RedisServer;
  let admin: Redis;
  let proxy: TcpProxy | undefined;
  beforeAll(async () => {
    srv = await startRedis({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    admin = new Redis(srv.url);
    admin.on('error', () => undefined); // the kill -9 test takes the server away under it
  });
  afterAll(async () => {
    admin?.disconnect();
    await proxy?.close();
    await srv?.stop();
  });

  it('fail-open, commandTimeoutMs 300: 8 concurrent 100k-key calls of present keys answer 0 for every key and journal nothing', async () => {
    const keys = keysOf('present', 100_000);
    const writer = new DedupService({ redis: srv.url, dedup: { prefix: 'p1', journalDir: jdir(), replayIntervalMs: 0 }, now });
    expect(ones(await writer.firstSeen(keys))).toBe(100_000);
    await writer.close();
    const fresh = new DedupService({
      redis: srv.url,
      dedup: { prefix: 'p1', onStoreError: 'fail-open', commandTimeoutMs: 300, journalDir: jdir(), replayIntervalMs: 0 },
      now,
    });
    await fresh.connect();
    const answers = await Promise.all(Array.from({ length: 8 }, () => fresh.firstSeen(keys)));
    expect(answers.map(ones)).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(fresh.counters.journaledKeys).toBe(0);
    expect(fresh.counters.storeErrors).toBe(0);
    await fresh.close();
  }, 300_000);

  it('a batch over dedup.maxQueuedKeys while others wait is refused with HG_ERR_OVERLOADED and writes nothing', async () => {
    const svc = new DedupService({
      redis: srv.url,
      dedup: { prefix: 'p-over', maxQueuedKeys: 50_000, journalDir: jdir(), replayIntervalMs: 0 },
      now,
    });
    await svc.connect();
    const calls = [0, 1, 2, 3].map((c) => svc.firstSeen(keysOf(`over${c}`, 40_000)).then(ones, (e: { code: string }) => e.code));
    const got = await Promise.all(calls);
    expect(got[0]).toBe(40_000);
    expect(got.slice(1)).toEqual([ErrorCodes.OVERLOADED, ErrorCodes.OVERLOADED, ErrorCodes.OVERLOADED]);
    expect(await members(admin, 'p-over')).toBe(40_000);
    expect(svc.counters.journaledKeys).toBe(0);
    // once the queue drained, the same batch is taken
    expect(ones(await svc.firstSeen(keysOf('over1', 40_000)))).toBe(40_000);
    await svc.close();
  });

  it('one-key calls the seen-cache answers leave nothing counted against dedup.maxQueuedKeys', async () => {
    const svc = new DedupService({
      redis: srv.url,
      dedup: { prefix: 'p-hits', maxQueuedKeys: 100, cacheMaxEntries: 1000, journalDir: jdir(), replayIntervalMs: 0 },
      now,
    });
    await svc.connect();
    expect(ones(await svc.firstSeen(['hit']))).toBe(1);
    // its second sight: Redis answers "seen before", and the cache takes it (a first sight it does
    // not, while the keys so far are mostly new)
    expect(ones(await svc.firstSeen(['hit']))).toBe(0);
    expect(svc.counters.cacheHits).toBe(0);
    for (let i = 0; i < 300; i++) expect(ones(await svc.firstSeen(['hit']))).toBe(0);
    expect(svc.counters.cacheHits).toBe(300);
    // nothing waits for Redis now: a call of the full limit is taken (it would be refused if the
    // hits had left keys counted), and one more while it waits is refused
    const both = await Promise.all([svc.firstSeen(keysOf('hits-a', 100)), svc.firstSeen(keysOf('hits-b', 100))].map((p) => p.then(ones, (e: { code: string }) => e.code)));
    expect(both[0]).toBe(100);
    expect(both[1]).toBe(ErrorCodes.OVERLOADED);
    expect(ones(await svc.firstSeen(keysOf('hits-b', 100)))).toBe(100);
    await svc.close();
  });

  it('a batch on tables already read reaches Redis before firstSeen returns: its first sends run while the caller keeps the thread', async () => {
    const svc = new DedupService({ redis: srv.url, dedup: { prefix: 'p-early', journalDir: jdir(), replayIntervalMs: 0 }, now });
    expect(ones(await svc.firstSeen(keysOf('early-warm', 1000)))).toBe(1000); // tables read, pipe connected
    const sadds = async (): Promise<number> => Number(/cmdstat_sadd:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0);
    const before = await sadds();
    const answers = svc.firstSeen(keysOf('early', 10_000));
    // long enough for the ~9 reads of the first sends and an fsync after each (appendfsync always)
    const end = Date.now() + 1000;
    while (Date.now() < end) {
      // the caller keeps the thread: nothing of ours runs until it lets go
    }
    // asked before our event loop gets to run again: only what left inside firstSeen has run
    const during = (await sadds()) - before;
    expect(ones(await answers)).toBe(10_000);
    // the first piece of the batch, in dedup.maxInFlight (2) sends of up to maxKeysPerCommand
    expect(during).toBeGreaterThanOrEqual(2000);
    await svc.close();
  });

  it('the sends a 200k-key call queues behind dedup.maxInFlight hold no buffers: each is encoded when it leaves', async () => {
    const svc = new DedupService({ redis: srv.url, dedup: { prefix: 'p-mem', journalDir: jdir(), replayIntervalMs: 0 }, now });
    // a first call of the same size reads the tables and grows what the service keeps (the
    // pending-key and in-batch tables, the hashing arena), so the second call encodes before its
    // first await and allocates only what it holds itself
    expect(ones(await svc.firstSeen(keysOf('mem-warm', 200_000)))).toBe(200_000);
    const before = process.memoryUsage().arrayBuffers;
    const answers = svc.firstSeen(keysOf('mem', 200_000));
    const grown = process.memoryUsage().arrayBuffers - before;
    expect(ones(await answers)).toBe(200_000);
    // Its ~160 sends of up to maxKeysPerCommand SADDs, each encoded into a 256 KiB buffer at
    // once, took about 40 MiB; now only the sends in flight hold one.
    expect(grown).toBeLessThan(16 * 1024 * 1024);
    await svc.close();
  });

  // Durations on a shared test machine are noise; the shape is not: a 200k-key call is split into
  // commands of at most dedup.maxKeysPerCommand keys, and none of them holds a large share of the
  // Redis time the call took (one script of the whole batch held all of it).
  it('a 200k-key call is many short commands, none holding Redis for a third of the call (SLOWLOG, commandstats), fail-closed and fail-open', async () => {
    for (const onStoreError of ['fail-closed', 'fail-open'] as const) {
      const svc = new DedupService({ redis: srv.url, dedup: { prefix: `p3-${onStoreError}`, onStoreError, journalDir: jdir(), replayIntervalMs: 0 }, now });
      await svc.firstSeen(['warm-up']);
      await admin.config('SET', 'slowlog-log-slower-than', '0');
      await admin.config('SET', 'slowlog-max-len', '100000');
      await admin.slowlog('RESET');
      await admin.config('RESETSTAT');
      expect(ones(await svc.firstSeen(keysOf('busy', 200_000)))).toBe(200_000);
      // fail-closed: request-record scripts of at most maxKeysPerCommand keys; fail-open: one
      // SADD per key; both: the splits of the tables (DUMP and a split script each)
      const stats = await admin.info('commandstats');
      let calls = 0;
      let usec = 0;
      for (const cmd of ['evalsha', 'sadd', 'dump']) {
        const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+),usec=(\\d+)`).exec(stats);
        calls += Number(m?.[1] ?? 0);
        usec += Number(m?.[2] ?? 0);
      }
      expect(calls).toBeGreaterThanOrEqual(100);
      const log = (await admin.slowlog('GET', -1)) as Array<[number, number, number, string[]]>;
      const ours = log.filter((e) => /^(evalsha|sadd|dump)$/i.test(String(e[3][0])));
      // SLOWLOG keeps 32 arguments and ends with "... (N more arguments)": the true count
      const argc = (a: string[]): number => {
        const more = /^\.\.\. \((\d+) more arguments\)$/.exec(String(a[a.length - 1]));
        return more ? a.length - 1 + Number(more[1]) : a.length;
      };
      // at most maxKeysPerCommand (2000) members a command, next to the script's keys and fixed
      // arguments; one whole-batch script would carry all 200k
      expect(Math.max(...ours.map((e) => argc(e[3])))).toBeLessThan(2 * 2000);
      const longest = Math.max(0, ...ours.map((e) => e[2]));
      expect(longest).toBeGreaterThan(0);
      // a whole-batch script would hold all of the call's Redis time; a command preempted once on
      // a loaded 2-core machine can take ten times its neighbours, so the bound leaves room for that
      expect(longest).toBeLessThan(usec / 3);
      await svc.close();
    }
    await admin.config('SET', 'slowlog-log-slower-than', '10000');
    await admin.config('SET', 'slowlog-max-len', '128');
  }, 300_000);

  describe('through a TCP proxy', () => {
    beforeAll(async () => {
      proxy = await startProxy(srv.port);
    });

    it('replies stalled after the scripts ran: HG_ERR_STORE_OUTCOME_UNKNOWN; the retry with the same requestId answers the original 1s', async () => {
      const svc = new DedupService({
        redis: proxy!.url,
        dedup: { prefix: 'p2', onStoreError: 'fail-closed', commandTimeoutMs: 300, journalDir: jdir(), replayIntervalMs: 0 },
        now,
      });
      await svc.connect();
      await svc.firstSeen(['warm-up']); // the window's bucket count is known before the stall
      const keys = keysOf('stall', 20_000);
      await proxy!.stall('down');
      let err: { code: string; details: { requestId: string; answers: Uint8Array } };
      try {
        err = (await svc.firstSeen(keys, { requestId: 'order-42' }).then(() => undefined, (e: unknown) => e)) as typeof err;
      } finally {
        await proxy!.resume();
      }
      expect(err?.code).toBe(ErrorCodes.STORE_OUTCOME_UNKNOWN);
      expect(err.details.requestId).toBe('order-42');
      expect(err.details.answers.every((a) => a === 255)).toBe(true);
      // only the commands in flight reached Redis (dedup.maxInFlight x dedup.maxKeysPerCommand)
      expect(await members(admin, 'p2')).toBe(1 + 2 * 2000);
      await ready(svc.redis as Redis);
      const again = await svc.firstSeen(keys, { requestId: 'order-42' });
      expect(ones(again)).toBe(20_000);
      // and a third attempt still answers the same: the record, not luck
      expect(ones(await svc.firstSeen(keys, { requestId: 'order-42' }))).toBe(20_000);
      expect(ones(await svc.firstSeen(keys))).toBe(0);
      await svc.close();
    });

    it('fail-open: a member sent again after WRONGTYPE whose reply is lost is answered 1 and journaled, never sent a third time to read back its own 0', async () => {
      const prefix = 'p-resend';
      const svc = new DedupService({ redis: proxy!.url, dedup: { prefix, buckets: 4, journalDir: jdir(), replayIntervalMs: 0 }, now });
      await svc.connect();
      expect(ones(await svc.firstSeen(['warm-up']))).toBe(1); // the 4 tables read: one sub-bucket each
      // another instance split every table since: this writer's cached counts are stale, so its
      // first SADD meets a tombstone and it reads the count and sends the member again
      for (let t = 0; t < 4; t++) {
        await admin.set(`${prefix}:2026:c{${t}}n`, '2');
        await admin.set(`${prefix}:2026:c{${t}}0.0`, '0');
      }
      let grown = 0;
      const count = async (): Promise<number> => {
        let n = 0;
        for (let t = 0; t < 4; t++) n += await admin.exists(`${prefix}:2026:c{${t}}0.1`, `${prefix}:2026:c{${t}}1.1`);
        return n;
      };
      await proxy!.delay(200, 'down');
      try {
        const call = svc.firstSeen(['resent']);
        // the second send reached Redis (the member's new sub-bucket exists) while the proxy still
        // holds its reply: the connection dies now, and that reply with it
        const end = Date.now() + 10_000;
        while ((grown = await count()) === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
        await proxy!.cut();
        await proxy!.delay(0, 'down'); // and the network is fine again at once
        expect(grown).toBe(1);
        expect([...(await call)]).toEqual([1]);
      } finally {
        await proxy!.delay(0, 'down');
      }
      expect(svc.counters.journaledKeys).toBe(1);
      await ready(svc.redis as Redis);
      expect([...(await svc.firstSeen(['resent']))]).toEqual([0]);
      await svc.close();
    });

    it('fail-closed without a requestId: a stall shorter than the resend deadline is resent after the reconnect with the original answers', async () => {
      const svc = new DedupService({
        redis: proxy!.url,
        dedup: { prefix: 'p4', onStoreError: 'fail-closed', commandTimeoutMs: 500, journalDir: jdir(), replayIntervalMs: 0 },
        now,
      });
      await svc.connect();
      await svc.firstSeen(['warm-up']);
      const keys = keysOf('auto', 20_000);
      await proxy!.stall('down');
      // the network heals as soon as the stalled connection was given up (and a new one is being made)
      (svc.redis as Redis).once('close', () => void proxy!.resume());
      const call = svc.firstSeen(keys);
      expect(ones(await call)).toBe(20_000);
      expect(await members(admin, 'p4')).toBe(1 + 20_000);
      await svc.close();
    });

    it('fail-open: a stalled connection is detected within about commandTimeoutMs; the keys are answered 1 and journaled', async () => {
      const svc = new DedupService({
        redis: proxy!.url,
        dedup: { prefix: 'p5', onStoreError: 'fail-open', commandTimeoutMs: 300, journalDir: jdir(), replayIntervalMs: 0 },
        now,
      });
      await svc.connect();
      await svc.firstSeen(['warm-up']);
      await proxy!.stall('both');
      let a: Uint8Array;
      try {
        a = await svc.firstSeen(keysOf('dead', 10_000));
      } finally {
        await proxy!.resume();
      }
      expect(ones(a)).toBe(10_000);
      expect(svc.counters.journaledKeys).toBe(10_000);
      await svc.close();
    });

    it('fail-open with every reply delayed 100 ms (commandTimeoutMs 1000): 4 concurrent 100k-key calls answer exactly', async () => {
      const svc = new DedupService({
        redis: proxy!.url,
        dedup: { prefix: 'p6', onStoreError: 'fail-open', commandTimeoutMs: 1000, journalDir: jdir(), replayIntervalMs: 0 },
        now,
      });
      await svc.connect();
      await proxy!.delay(100, 'down');
      try {
        const got = await Promise.all([0, 1, 2, 3].map((c) => svc.firstSeen(keysOf('slow', 100_000, c * 50_000))));
        // calls overlap by half: 250k distinct keys, the earlier call of each overlap answers 1
        expect(got.map(ones)).toEqual([100_000, 50_000, 50_000, 50_000]);
        expect(svc.counters.journaledKeys).toBe(0);
      } finally {
        await proxy!.delay(0);
      }
      await svc.close();
    }, 300_000);
  });

  it('kill -9 mid-call (AOF always), restart: retrying with the requestId until it succeeds loses no first-seen event', async () => {
    const svc = new DedupService({
      redis: srv.url,
      dedup: { prefix: 'p7', onStoreError: 'fail-closed', commandTimeoutMs: 500, journalDir: jdir(), replayIntervalMs: 0 },
      now,
    });
    await svc.connect();
    const keys = keysOf('kill', 100_000);
    const first = svc.firstSeen(keys, { requestId: 'kill-1' }).then(ones, (e: { code: string }) => e.code);
    await new Promise((r) => setTimeout(r, 60));
    await srv.kill('SIGKILL');
    const outcome = await first;
    await srv.restart();
    await ready(svc.redis as Redis);
    let total: number | undefined = typeof outcome === 'number' ? outcome : undefined;
    if (total === undefined) {
      expect([ErrorCodes.STORE_OUTCOME_UNKNOWN, ErrorCodes.STORE_UNAVAILABLE]).toContain(outcome);
      for (let attempt = 0; total === undefined && attempt < 20; attempt++) {
        total = await svc.firstSeen(keys, { requestId: 'kill-1' }).then(ones, async () => {
          await new Promise((r) => setTimeout(r, 200));
          return undefined;
        });
      }
    }
    expect(total).toBe(100_000);
    await svc.close();
  }, 120_000);
});
