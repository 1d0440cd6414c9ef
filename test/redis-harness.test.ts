import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { requireRedisOrSkip, startRedis, type RedisServer } from './helpers/redis-server.js';

const has = requireRedisOrSkip('redis harness');

describe.skipIf(!has)('redis test harness', () => {
  let srv: RedisServer;
  beforeAll(async () => {
    srv = await startRedis({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  });
  afterAll(async () => srv?.stop());

  it('runs a private server that is not 6379 and keeps AOF data across a SIGKILL restart', async () => {
    expect(srv.port).not.toBe(6379);
    const r = new Redis(srv.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await r.connect();
    await r.sadd('k', 'a', 'b');
    r.disconnect();
    await srv.restart();
    const r2 = new Redis(srv.url);
    expect(await r2.scard('k')).toBe(2);
    r2.disconnect();
  });
});
