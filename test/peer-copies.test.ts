// The application's ioredis and prom-client are peer dependencies: the client and the registry it
// passes in may come from another copy of those packages than the one hashgate's modules loaded
// (another version, or a second install). Such a copy has its own classes, so these tests load a
// second, fresh copy of each package and hand its objects to hashgate.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import { dirname, sep } from 'node:path';
import { Registry } from 'prom-client';
import { Redis } from 'ioredis';
import { HashGate, ErrorCodes, createMetrics, serveMetrics } from '../src/index.js';
import { RedisBloom } from '../src/entries/bloom.js';
import { redisBloomMetrics } from '../src/entries/bloom.js';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';

const require = createRequire(import.meta.url);

/** A second instance of a CommonJS package: its own module objects, so its own classes. */
function secondCopy<T>(pkg: string): T {
  const dir = dirname(require.resolve(`${pkg}/package.json`)) + sep;
  const ours = Object.keys(require.cache).filter((k) => k.startsWith(dir));
  const saved = new Map(ours.map((k) => [k, require.cache[k]]));
  for (const k of ours) delete require.cache[k];
  try {
    return require(pkg) as T;
  } finally {
    for (const k of Object.keys(require.cache)) if (k.startsWith(dir)) delete require.cache[k];
    for (const [k, m] of saved) require.cache[k] = m;
  }
}

async function scrape(url: string): Promise<string> {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  return res.text();
}

describe('a Registry from another prom-client copy', () => {
  const other = secondCopy<typeof import('prom-client')>('prom-client');

  it('is another class, as in an app with its own prom-client', () => {
    expect(other.Registry).not.toBe(Registry);
    expect(new other.Registry()).not.toBeInstanceOf(Registry);
  });

  it('is accepted by createMetrics and HashGate, and serveMetrics serves it and the gate\'s metrics', async () => {
    const registry = new other.Registry();
    const gate = await HashGate.open({ threads: 0, metrics: { registry } });
    try {
      expect([...(await gate.firstSeen(['a', 'a', 'b']))]).toEqual([1, 0, 1]);
      expect(createMetrics({ registry })).toBe(gate.metrics); // one instance per (registry, prefix)
      for (const source of [registry, gate.metrics]) {
        const server = await serveMetrics(source, { port: 0, host: '127.0.0.1' });
        try {
          expect(await scrape(server.url)).toMatch(/^hashgate_dedup_keys_checked_total 3$/m);
        } finally {
          await server.close();
        }
      }
      const bloomMetrics = redisBloomMetrics(registry);
      expect(typeof bloomMetrics.addReplica).toBe('function');
    } finally {
      await gate.close();
    }
  });

  it('serveMetrics(gate.metrics) on a gate without metrics says how to turn them on', async () => {
    const gate = await HashGate.open({ threads: 0 });
    try {
      await expect(serveMetrics(gate.metrics)).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG, message: expect.stringMatching(/metrics: true/) });
      expect(() => createMetrics({ registry: {} as never })).toThrow(/metrics\.registry must be a prom-client Registry/);
    } finally {
      await gate.close();
    }
  });
});

const HAVE_REDIS = requireRedisOrSkip('peer copies (ioredis)');

describe.runIf(HAVE_REDIS)('an ioredis client from another ioredis copy', () => {
  const other = secondCopy<typeof import('ioredis')>('ioredis');
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => server?.stop());

  it('is another class, as in an app with its own ioredis', () => {
    expect(other.Redis).not.toBe(Redis);
    const c = new other.Redis({ lazyConnect: true });
    expect(c).not.toBeInstanceOf(Redis);
    c.disconnect();
  });

  it('is used as given by the gate (dedup store, health) and by RedisBloom', async () => {
    const client = new other.Redis(server.port, '127.0.0.1');
    const gate = await HashGate.open({ threads: 0, redis: client, dedup: { prefix: 'peer' } });
    try {
      expect(gate.dedup.redis).toBe(client);
      expect([...(await gate.firstSeen(['x', 'y', 'x']))]).toEqual([1, 1, 0]);
      expect([...(await gate.firstSeen(['x']))]).toEqual([0]);
      expect(await client.keys('peer:*')).not.toEqual([]);
      const health = await gate.health();
      expect(health.tiers.dedup).toMatchObject({ store: 'redis', status: 'up' });

      const bloom = await RedisBloom.open({ redis: client, name: 'peer:bloom', expectedItems: 1000, fpp: 0.01 });
      await bloom.tryInit();
      await bloom.addAll(['k1', 'k2']);
      expect([...(await bloom.containsAll(['k1', 'k2']))]).toEqual([1, 1]);
    } finally {
      await gate.close();
      client.disconnect();
    }
  });
});
