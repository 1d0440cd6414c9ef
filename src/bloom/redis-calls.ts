// Runs the gate's bloomAdd/bloomCheck against a filter held in Redis (RedisBloom, ShardedRedisBloom,
// or a RedisBloomReplica writing through to Redis), so every instance of a fleet shares one filter
// that outlives restarts, instead of each process holding its own bits.
//
// Order: a check waits until every add called before it has settled, so a caller that adds and
// then checks (without awaiting in between) sees its own keys, as with the in-process queue.
// Errors are the filter's own typed rejections (HG_ERR_STORE, HG_ERR_BLOOM_*): a check that Redis
// could not answer never reads as "absent". Keys in flight are bounded; past the bound a call
// rejects with HG_ERR_QUEUE_FULL instead of queueing without limit.
import { ErrorCodes, HashGateError } from '../errors.js';
import { checkKeys, type Key, type Keys } from '../hash/keys.js';
import type { Metrics } from '../metrics/index.js';
import { timeBatch } from '../metrics/time-batch.js';
import { tryCheck } from '../pool/jobs.js';
import { RedisBloom } from './redis-bloom.js';
import { RedisBloomReplica } from './redis-replica.js';
import { ShardedRedisBloom } from './redis-sharded.js';

/** A Bloom filter every instance shares through Redis. */
export type RedisHeldBloom = RedisBloom | ShardedRedisBloom | RedisBloomReplica;

export const isRedisHeldBloom = (b: unknown): b is RedisHeldBloom =>
  b instanceof RedisBloom || b instanceof ShardedRedisBloom || b instanceof RedisBloomReplica;

/** The gate's Bloom calls, whichever filter holds the bits. */
export interface GateBloomCalls {
  add(keys: Keys): Promise<number>;
  check(keys: Keys): Promise<Uint8Array>;
  /** Settles when every call made so far has its answer. */
  close(): Promise<void>;
}

export class RedisBloomCalls implements GateBloomCalls {
  // Adds not settled yet: a later check waits for them.
  readonly #adds = new Set<Promise<unknown>>();
  readonly #all = new Set<Promise<unknown>>();
  #pendingKeys = 0;

  /** `maxKeys`: most keys in flight at once over all calls. */
  constructor(
    readonly filter: RedisHeldBloom,
    private readonly metrics: Metrics,
    private readonly maxKeys: number,
  ) {}

  add(keys: Keys): Promise<number> {
    return this.#run('bloom_add', keys, async (list) => {
      const flags = await this.#addFlags(list);
      let changed = 0;
      for (let i = 0; i < flags.length; i++) changed += flags[i]!;
      return changed;
    });
  }

  check(keys: Keys): Promise<Uint8Array> {
    return this.#run('bloom_check', keys, (list) => this.contains(list));
  }

  /** The filter's answer for already-checked keys (no ordering, no metrics): for firstSeen sampling. */
  contains(list: Key[]): Promise<Uint8Array> {
    const f = this.filter;
    return f instanceof RedisBloomReplica ? f.containsAllFresh(list) : f.containsAll(list);
  }

  #addFlags(list: Key[]): Promise<Uint8Array> {
    return this.filter.addAllFlags(list);
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.#all]);
  }

  #run<T>(op: 'bloom_add' | 'bloom_check', keys: Keys, call: (list: Key[]) => Promise<T>): Promise<T> {
    const c = tryCheck(() => checkKeys(keys), keys);
    const exec = (): Promise<T> => {
      if (c.batch === undefined) return Promise.reject(c.invalid);
      const n = c.n;
      if (this.#pendingKeys + n > this.maxKeys && this.#pendingKeys > 0) {
        return Promise.reject(
          new HashGateError(ErrorCodes.QUEUE_FULL, `bloom${op === 'bloom_add' ? 'Add' : 'Check'}: ${this.#pendingKeys} keys already in flight to the Redis-held filter (limit ${this.maxKeys})`, {
            details: { pending: this.#pendingKeys, keys: n, maxKeys: this.maxKeys },
          }),
        );
      }
      const b = c.batch;
      const list: Key[] = b.packed === undefined ? (b.keys as Key[]) : Array.from({ length: n }, (_, i) => b.at(i));
      this.#pendingKeys += n;
      const earlier = op === 'bloom_check' && this.#adds.size > 0 ? Promise.allSettled([...this.#adds]) : undefined;
      const p = earlier === undefined ? call(list) : earlier.then(() => call(list));
      const tracked = p.finally(() => {
        this.#pendingKeys -= n;
        this.#adds.delete(tracked);
        this.#all.delete(tracked);
      });
      tracked.catch(() => undefined);
      if (op === 'bloom_add') this.#adds.add(tracked);
      this.#all.add(tracked);
      return p;
    };
    return this.metrics.enabled ? timeBatch(this.metrics, op, c.n, exec) : exec();
  }
}
