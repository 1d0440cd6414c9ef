// L1 invalidation bus across three real OS processes sharing one real redis-server: a write or an
// invalidate() on one instance evicts positive and negative local entries on the other two, and a
// redis-server killed with SIGKILL and restarted makes every instance clear its local tier.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { startInstance, type Instance } from '../../bench/_fleet.js';
import { InvalidationBus, TieredCache, HotColdStore, type BusListener } from '../../src/entries/cache.js';

const CHILD = join(process.cwd(), 'dist/bench/_bus-child.js');
const has = requireRedisOrSkip('invalidation bus (integration)');
if (has && !existsSync(CHILD)) throw new Error('run `npm run build` first: the instances run dist/bench/_bus-child.js');

const until = async (cond: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 10));
  }
};

interface Stats {
  cache: { local: { hits: number; negativeHits: number; entries: number } };
  bus: { received: number; resyncs: number; connected: boolean; sent: number; ownEchoes: number };
}

/** Bound for "evicted soon" in a functional test on a loaded 2-core box; the latency is measured in bench/bus.ts. */
const BOUND_MS = 2_000;

describe.skipIf(!has)('invalidation bus: 3 processes, one Redis', () => {
  let srv: RedisServer;
  let fleet: Instance[] = [];
  beforeAll(async () => {
    srv = await startRedis();
    fleet = await Promise.all([0, 1, 2].map(() => startInstance(CHILD, srv.url, 'hg:test:bus')));
  });
  afterAll(async () => {
    for (const i of fleet) i.kill();
    await srv?.stop();
  });

  // IPC carries JSON: an absent value (undefined) arrives as null
  const lookup = async (i: Instance, keys: string[]): Promise<unknown[]> => (await i.call<{ values: unknown[] }>('lookup', { table: 'users', keys })).values;
  const stats = (i: Instance): Promise<Stats> => i.call<Stats>('stats');

  it('a write on A evicts stale positive and negative entries on B and C', async () => {
    const [a, b, c] = fleet as [Instance, Instance, Instance];
    await a.call('write', { table: 'users', entries: [{ key: '用户1', value: { v: 1 } }] });
    // that write's own message must land before B and C cache, or it would (rightly) evict them
    for (const x of [b, c]) await x.evictionOf('users', '用户1', BOUND_MS);
    // B and C cache 用户1 = v1 (positive) and 用户2 as absent (negative)
    for (const x of [b, c]) expect(await lookup(x, ['用户1', '用户2'])).toEqual([{ v: 1 }, null]);
    for (const x of [b, c]) {
      const before = await stats(x);
      expect(await lookup(x, ['用户1', '用户2'])).toEqual([{ v: 1 }, null]);
      const after = await stats(x);
      expect(after.cache.local.hits - before.cache.local.hits).toBe(1);
      expect(after.cache.local.negativeHits - before.cache.local.negativeHits).toBe(1);
    }
    const w = await a.call<{ t0: number; t1: number }>('write', { table: 'users', entries: [{ key: '用户1', value: { v: 2 } }, { key: '用户2', value: { v: 3 } }] });
    for (const x of [b, c]) {
      const at = await x.evictionOf('users', '用户2', BOUND_MS);
      expect(at - w.t0).toBeLessThan(BOUND_MS);
      // without the bus these would still be {v:1} and a cached "absent" for ten minutes
      expect(await lookup(x, ['用户1', '用户2'])).toEqual([{ v: 2 }, { v: 3 }]);
    }
    // the writer skips its own messages when Redis echoes them back
    let sa = await stats(a);
    for (let i = 0; i < 100 && sa.bus.ownEchoes < 2; i++) sa = await stats(a);
    expect(sa.bus.sent).toBe(2);
    expect(sa.bus.received).toBe(0);
    expect(sa.bus.ownEchoes).toBe(2);
  });

  it('invalidate() on C evicts on A and B only for the named keys', async () => {
    const [a, b, c] = fleet as [Instance, Instance, Instance];
    for (const x of fleet) await lookup(x, ['k-keep', 'k-drop']);
    await c.call('invalidate', { table: 'users', keys: ['k-drop'] });
    for (const x of [a, b]) await x.evictionOf('users', 'k-drop', BOUND_MS);
    for (const x of [a, b]) {
      expect(x.evicted.some((e) => e.keys.includes('k-keep'))).toBe(false);
      const before = await stats(x);
      await lookup(x, ['k-keep']);
      expect((await stats(x)).cache.local.negativeHits - before.cache.local.negativeHits).toBe(1);
    }
  });

  it('redis-server killed (SIGKILL) and restarted: every instance clears its local tier once resubscribed', async () => {
    const clearsBefore = fleet.map((x) => x.resyncs.length);
    for (const x of fleet) {
      await lookup(x, ['p1', 'p2', 'p3']);
      expect((await stats(x)).cache.local.entries).toBeGreaterThan(0);
    }
    await srv.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    await srv.restart();
    const deadline = Date.now() + 15_000;
    for (const [n, x] of fleet.entries()) {
      let s = await stats(x);
      while ((s.bus.resyncs < 1 || !s.bus.connected) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        s = await stats(x);
      }
      expect(s.bus.resyncs).toBe(1);
      expect(x.resyncs.length).toBe(clearsBefore[n]! + 1);
      expect(s.cache.local.entries).toBe(0);
    }
    // and the bus works again after the outage
    const [a, b] = fleet as [Instance, Instance];
    // the instances' fail-fast data connections may still be reconnecting: until they are, a
    // lookup cannot check the key and rejects (unknown, never "absent"); retry it, then the write
    for (let i = 0; ; i++) {
      try {
        expect((await lookup(b, ['after']))[0] ?? undefined).toBeUndefined(); // null over IPC
        break;
      } catch (e) {
        if (i > 50 || !/could not check/.test(String(e))) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    for (let i = 0; ; i++) {
      try {
        await a.call('write', { table: 'users', entries: [{ key: 'after', value: { v: 9 } }] });
        break;
      } catch (e) {
        if (i > 50) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    await b.evictionOf('users', 'after', BOUND_MS);
    expect(await lookup(b, ['after'])).toEqual([{ v: 9 }]);
  }, 60_000);
});

describe.skipIf(!has)('invalidation bus: in-process behaviour', () => {
  let srv: RedisServer;
  beforeAll(async () => {
    srv = await startRedis();
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('large invalidations are split into bounded messages and all keys arrive', async () => {
    const pub = new InvalidationBus({ url: srv.url, channel: 'split', maxKeysPerMessage: 100 });
    const sub = new InvalidationBus({ url: srv.url, channel: 'split' });
    await Promise.all([pub.ready(), sub.ready()]);
    const got = new Set<string>();
    let messages = 0;
    sub.subscribe({ keys: (_t, k) => (messages++, k.forEach((x) => got.add(x))), resync: () => undefined });
    const keys = Array.from({ length: 1050 }, (_, i) => `k${i}`);
    pub.publish('t', keys);
    for (let i = 0; i < 100 && got.size < keys.length; i++) await new Promise((r) => setTimeout(r, 20));
    expect(got.size).toBe(1050);
    expect(messages).toBe(11);
    expect(pub.stats().sent).toBe(11);
    expect(sub.stats().receivedKeys).toBe(1050);
    await pub.close();
    await sub.close();
  });

  it('malformed messages on the channel are counted and ignored; listeners in one process see each other', async () => {
    const bus = new InvalidationBus({ url: srv.url, channel: 'mal' });
    await bus.ready();
    const seen: string[] = [];
    const l1: BusListener = { keys: (_t, k) => seen.push(`l1:${k.join()}`), resync: () => undefined };
    const l2: BusListener = { keys: (_t, k) => seen.push(`l2:${k.join()}`), resync: () => undefined };
    bus.subscribe(l1);
    bus.subscribe(l2);
    bus.publish('t', ['x'], l1);
    expect(seen).toEqual(['l2:x']);
    const raw = new Redis(srv.url);
    await raw.publish('mal', 'not json');
    await raw.publish('mal', JSON.stringify([1, 'someone', Date.now(), 't', [1, 2]]));
    await raw.publish('mal', JSON.stringify([99, 'someone', Date.now(), 't', ['x']]));
    for (let i = 0; i < 50 && bus.stats().droppedMalformed < 3; i++) await new Promise((r) => setTimeout(r, 20));
    expect(bus.stats().droppedMalformed).toBe(3);
    expect(seen).toEqual(['l2:x']);
    raw.disconnect();
    await bus.close();
  });

  it('a HotColdStore without a cache publishes on its bus; a cache with bus: true copies its redis connection', async () => {
    const redis = new Redis(srv.url);
    const cache = new TieredCache({ redis: { client: redis }, bus: { channel: 'hc' }, negativeTtlMs: 60_000 });
    const bus = new InvalidationBus({ url: srv.url, channel: 'hc' });
    await Promise.all([cache.ready(), bus.ready()]);
    expect(await cache.lookup('t', ['a'])).toEqual([undefined]);
    const writer = new HotColdStore({ redis, bus });
    await writer.write('t', [{ key: 'a', value: { n: 1 } }]);
    for (let i = 0; i < 100 && cache.bus!.stats().received < 1; i++) await new Promise((r) => setTimeout(r, 10));
    expect(await cache.lookup('t', ['a'])).toEqual([{ n: 1 }]);
    await cache.close();
    expect(redis.status).toBe('ready'); // the user's client is not closed, only the bus's copies
    await bus.close();
    redis.disconnect();
  });

  it('listeners registered before the first subscription are told to resync (they may hold stale entries); resyncs counts only reconnects', async () => {
    const bus = new InvalidationBus({ url: srv.url, channel: 'first' });
    let clears = 0;
    bus.subscribe({ keys: () => undefined, resync: () => void clears++ });
    await bus.ready();
    expect(clears).toBe(1);
    expect(bus.stats().resyncs).toBe(0);
    let late = 0;
    bus.subscribe({ keys: () => undefined, resync: () => void late++ });
    await new Promise((r) => setTimeout(r, 50));
    expect(late).toBe(0);
    await bus.close();
  });

  it('publishes made while the publisher is down are queued (bounded) and sent on reconnect; close() does not hang on a dead server', async () => {
    const own = await startRedis();
    const pub = new InvalidationBus({ url: own.url, channel: 'q', maxPendingMessages: 2 });
    await pub.ready();
    await own.kill('SIGKILL');
    // wait for the publisher's own connection to drop (the subscriber's may drop first)
    for (let i = 0; i < 250 && pub.stats().publisherConnected; i++) await new Promise((r) => setTimeout(r, 20));
    expect(pub.stats().publisherConnected).toBe(false);
    pub.publish('t', ['a']);
    pub.publish('t', ['b']);
    pub.publish('t', ['c']); // over maxPendingMessages: dropped and counted
    expect(pub.stats().pending).toBe(2);
    expect(pub.stats().droppedSend).toBe(1);
    await own.restart();
    const sub = new InvalidationBus({ url: own.url, channel: 'q' });
    await sub.ready();
    // the queue may flush before sub subscribed; what matters is that it drains
    for (let i = 0; i < 200 && pub.stats().sent < 2; i++) await new Promise((r) => setTimeout(r, 20));
    expect(pub.stats().pending).toBe(0);
    expect(pub.stats().sent).toBe(2);
    await sub.close();
    await own.kill('SIGKILL');
    const t0 = Date.now();
    await pub.close();
    expect(Date.now() - t0).toBeLessThan(5_000); // not waiting for a reconnect that never comes
    await own.stop();
  }, 30_000);

  describe('replay log', () => {
    /** Kills the subscriber connection of the bus whose clients carry `name` (CLIENT KILL ID). */
    const killSub = async (admin: Redis, name: string): Promise<void> => {
      const list = await admin.client('LIST', 'TYPE', 'pubsub') as string;
      const line = list.split('\n').find((l) => l.includes(` name=${name} `));
      const id = /\bid=(\d+)/.exec(line ?? '')?.[1];
      if (!id) throw new Error(`no pubsub connection named ${name}`);
      await admin.client('KILL', 'ID', id);
    };
    const named = (name: string): Redis => new Redis(srv.url, { connectionName: name, lazyConnect: true });

    it('a subscriber that lost its connection replays what it missed instead of clearing; one without a log clears', async () => {
      const admin = new Redis(srv.url);
      const pub = new InvalidationBus({ url: srv.url, channel: 'rp', replay: { maxEntries: 100 } });
      const b = new InvalidationBus({ redis: named('rpB'), channel: 'rp', replay: { maxEntries: 100 } });
      const c = new InvalidationBus({ redis: named('rpC'), channel: 'rp' });
      await Promise.all([pub.ready(), b.ready(), c.ready()]);
      const got: string[] = [];
      let clearsB = 0;
      let clearsC = 0;
      b.subscribe({ keys: (_t, k) => got.push(...k), resync: () => void clearsB++ });
      c.subscribe({ keys: () => undefined, resync: () => void clearsC++ });
      pub.publish('t', ['before']);
      await until(() => got.includes('before'));
      await killSub(admin, 'rpB');
      await killSub(admin, 'rpC');
      // both reconnect after >= 25 ms; these land while they are away
      pub.publish('t', ['missed-1']);
      pub.publish('t', ['missed-2', 'missed-3']);
      await until(() => b.stats().resyncs === 1 && c.stats().resyncs === 1 && b.stats().connected);
      await until(() => got.includes('missed-3'));
      expect(got).toEqual(expect.arrayContaining(['missed-1', 'missed-2', 'missed-3']));
      expect(b.stats()).toMatchObject({ replays: 1, replayedMessages: 2, localClears: 0 });
      expect(clearsB).toBe(0);
      expect(c.stats()).toMatchObject({ replays: 0, localClears: 1 });
      expect(clearsC).toBe(1);

      // more missed than the log may replay: clear instead
      await killSub(admin, 'rpB');
      for (let i = 0; i < 150; i++) pub.publish('t', [`flood-${i}`]);
      await until(() => b.stats().resyncs === 2 && b.stats().connected);
      await until(() => b.stats().localClears === 1);
      expect(b.stats().replays).toBe(1);
      expect(clearsB).toBe(1);
      admin.disconnect();
      await Promise.all([pub.close(), b.close(), c.close()]);
    });

    it('a Redis restart without persistence loses the log: the epoch changes and subscribers clear', async () => {
      const own = await startRedis();
      const pub = new InvalidationBus({ url: own.url, channel: 'rr', replay: {} });
      const b = new InvalidationBus({ url: own.url, channel: 'rr', replay: {}, heartbeatMs: 200 });
      await Promise.all([pub.ready(), b.ready()]);
      pub.publish('t', ['x']);
      await until(() => b.stats().received === 1);
      await own.kill('SIGKILL');
      await own.restart();
      await until(() => b.stats().resyncs === 1 && b.stats().connected, 15_000);
      await until(() => b.stats().localClears === 1);
      expect(b.stats().replays).toBe(0);
      await Promise.all([pub.close(), b.close()]);
      await own.stop();
    }, 30_000);

    it('replay is refused on a Cluster client', () => {
      expect(() => new InvalidationBus({ redis: { isCluster: true, duplicate: () => undefined } as never, replay: {} })).toThrow(/bus\.replay/);
    });
  });

  it('rejects bad options with typed errors naming the option', () => {
    expect(() => new InvalidationBus({})).toThrow(/bus\.redis/);
    expect(() => new InvalidationBus({ url: srv.url, maxKeysPerMessage: 0 })).toThrow(/bus\.maxKeysPerMessage/);
    expect(() => new InvalidationBus({ url: srv.url, onReconnect: 'sometimes' as never })).toThrow(/bus\.onReconnect/);
    expect(() => new TieredCache({ bus: true })).toThrow(/bus\.redis/);
  });
});
