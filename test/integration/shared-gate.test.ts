// Gates shared across instances through the SharedGate interface, on a real redis-server: the
// fingerprint index and the ID registry with a ReplicatedGate (local Bloom copy + invalidation bus)
// see values written by another instance without a per-process rebuildGate(), where a private
// gate answers "definitely absent"; after a bus outage the gate is reloaded from storage.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { BloomFilter, ReplicatedGate } from '../../src/entries/bloom.js';
import { FingerprintIndex } from '../../src/entries/fingerprint.js';
import { IdRegistry } from '../../src/entries/ids.js';
import { InvalidationBus } from '../../src/entries/cache.js';

const has = requireRedisOrSkip('shared gates');
const until = async (cond: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe.skipIf(!has)('shared gates (real Redis)', () => {
  let srv: RedisServer;
  const closers: Array<() => Promise<unknown> | void> = [];
  beforeAll(async () => {
    // AOF: the outage test restarts the server and the index must still hold its values
    srv = await startRedis({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  });
  afterAll(async () => {
    for (const c of closers.reverse()) await c();
    await srv?.stop();
  });

  /** One "instance": its own Redis connection, bus and gate, like a separate process. */
  const instance = async (name: string) => {
    const r = new Redis(srv.url);
    const bus = new InvalidationBus({ url: srv.url, channel: 'gates', heartbeatMs: 200 });
    await bus.ready();
    const gate = new ReplicatedGate({ filter: BloomFilter.create({ expectedItems: 10_000, fpp: 0.001 }), bus, name });
    closers.push(() => r.disconnect(), () => bus.close(), () => gate.close());
    return { r, bus, gate };
  };

  it('FingerprintIndex: a value indexed on A matches on B at once; a private gate on C misses it', async () => {
    const a = await instance('idx');
    const b = await instance('idx');
    const ia = new FingerprintIndex({ redis: a.r, keyPrefix: 'sg', sharedGate: a.gate });
    const ib = new FingerprintIndex({ redis: b.r, keyPrefix: 'sg', sharedGate: b.gate });
    const ic = new FingerprintIndex({ redis: new Redis(srv.url), keyPrefix: 'sg' }); // private local gate
    closers.push(() => ic.close());
    expect(await ib.match({ ip: '10.0.0.7' })).toEqual([]);
    expect(ib.stats().gateShortCircuits).toBe(1);
    await ia.put('dev-1', { ip: '10.0.0.7', canvas: 'c9' });
    await until(() => b.bus.stats().received >= 1);
    expect(await ib.match({ ip: '10.0.0.7' })).toEqual(['dev-1']);
    expect(await ib.any({ ip: '10.0.0.7', canvas: 'never' })).toEqual(['dev-1']);
    expect(ib.stats().gateDroppedTerms).toBe(1);
    // the private gate never heard of it: "definitely absent" although Redis has it
    expect(await ic.match({ ip: '10.0.0.7' })).toEqual([]);
    expect(await ic.rebuildGate()).toBe(2);
    expect(await ic.match({ ip: '10.0.0.7' })).toEqual(['dev-1']);

    // bus outage: an instance's gate reloads from storage through rebuildGate(), which uses the
    // gate's loadAll() and so re-publishes nothing
    const d = await instance('unused');
    const reloaded: number[] = [];
    let id: FingerprintIndex | undefined;
    const dGate = new ReplicatedGate({
      filter: BloomFilter.create({ expectedItems: 10_000, fpp: 0.001 }),
      bus: d.bus,
      name: 'idx',
      onResync: async () => reloaded.push(await id!.rebuildGate()),
    });
    closers.push(() => dGate.close());
    id = new FingerprintIndex({ redis: d.r, keyPrefix: 'sg', sharedGate: dGate });
    expect(await id.match({ canvas: 'c9' })).toEqual([]); // joined after the write, no rebuild yet
    await srv.kill('SIGKILL');
    await srv.restart();
    await until(() => reloaded.length === 1, 15_000);
    expect(reloaded[0]).toBe(2);
    expect(dGate.resyncs).toBe(1);
    expect(await id.match({ canvas: 'c9' })).toEqual(['dev-1']);
    expect(d.bus.stats().sent).toBe(0);
  }, 60_000);

  it('IdRegistry: find() on B sees a document upserted on A; unknown records cost no store call', async () => {
    const a = await instance('ids');
    const b = await instance('ids');
    const ra = new IdRegistry({ redis: a.r, keyPrefix: 'sgids', gate: a.gate });
    const rb = new IdRegistry({ redis: b.r, keyPrefix: 'sgids', gate: b.gate });
    const rec = { name: '李四', card: '6222' };
    expect(await rb.find(rec)).toBeUndefined();
    expect(rb.gateShortCircuits).toBe(1);
    const up = await ra.upsert(rec);
    await until(() => b.bus.stats().received >= 1);
    expect((await rb.find(rec))?.physicalId).toBe(up.physicalId);
    expect(rb.gateShortCircuits).toBe(1);
    expect(() => new IdRegistry({ gate: {} as never })).toThrow(/ids\.gate/);
    // an instance that joined after the write: its replica never heard of it until rebuildGate(),
    // which loads through loadAll() and so publishes nothing on the bus
    const c = await instance('ids');
    const rc = new IdRegistry({ redis: c.r, keyPrefix: 'sgids', gate: c.gate });
    expect(await rc.find(rec)).toBeUndefined();
    expect(await rc.rebuildGate()).toBe(1);
    expect((await rc.find(rec))?.physicalId).toBe(up.physicalId);
    expect(c.bus.stats().sent).toBe(0);
  });
});
