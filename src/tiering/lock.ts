// A single-holder Redis lock: SET NX PX with a random token; renew and release only while the
// token still matches (Lua), so a run whose lock expired can never free someone else's.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

const RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";
const RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";

export class RedisLock {
  readonly token = randomUUID();
  #held = false;

  constructor(
    private readonly redis: Redis,
    readonly key: string,
    readonly ttlMs: number,
  ) {}

  get held(): boolean {
    return this.#held;
  }

  async acquire(): Promise<boolean> {
    const r = await this.redis.set(this.key, this.token, 'PX', this.ttlMs, 'NX');
    this.#held = r === 'OK';
    return this.#held;
  }

  /** False when the lock expired and may belong to another run now. */
  async renew(): Promise<boolean> {
    const r = await this.redis.eval(RENEW, 1, this.key, this.token, String(this.ttlMs));
    this.#held = r === 1;
    return this.#held;
  }

  async release(): Promise<boolean> {
    if (!this.#held) return false;
    this.#held = false;
    return (await this.redis.eval(RELEASE, 1, this.key, this.token)) === 1;
  }
}
