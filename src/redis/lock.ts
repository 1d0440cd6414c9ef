// A Redis lock so one instance runs a job at a time: SET key token NX PX ttl; refreshed and released
// only by its owner (compare-and-pexpire / compare-and-del in Lua).
import { randomBytes } from 'node:crypto';
import type { RedisClient } from './client.js';
import { LuaScript, runScript } from './scripts.js';

const RELEASE = new LuaScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`);
const REFRESH = new LuaScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`);

export class RedisLock {
  private constructor(
    private readonly redis: RedisClient,
    readonly key: string,
    readonly token: string,
    private readonly ttlMs: number,
  ) {}

  /** The lock, or undefined when another owner holds it. */
  static async acquire(redis: RedisClient, key: string, ttlMs: number): Promise<RedisLock | undefined> {
    const token = `${process.pid}:${randomBytes(12).toString('hex')}`;
    const ok = await redis.set(key, token, 'PX', ttlMs, 'NX');
    return ok === 'OK' ? new RedisLock(redis, key, token, ttlMs) : undefined;
  }

  /** False when the lock expired and someone else owns it now. */
  async refresh(): Promise<boolean> {
    return (await runScript(this.redis, REFRESH, 1, [this.key, this.token, String(this.ttlMs)])) === 1;
  }

  async release(): Promise<boolean> {
    return (await runScript(this.redis, RELEASE, 1, [this.key, this.token])) === 1;
  }
}
