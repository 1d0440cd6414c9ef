// Creating ioredis clients from options: the dedup store's fail-fast client and the CLI's one-shot client.
import { Redis, Cluster, type RedisOptions } from 'ioredis';
import { ErrorCodes, HashGateTypeError, invalidUrl } from '../errors.js';
import type { RedisConfig } from '../dedup/options.js';

export type RedisClient = Redis | Cluster;

export const isCluster = (c: RedisClient): c is Cluster => (c as Cluster).isCluster === true;

/** Refuses what ioredis would misread: a URL that is not redis:// or rediss:// (never echoes it: it may hold a password). */
export function checkRedisUrl(url: string, name = 'redis'): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `${name} must be a redis:// URL (or rediss://); the value given could not be parsed`, { name });
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `${name} must be a redis:// or rediss:// URL, got a ${u.protocol} URL`, { name, scheme: u.protocol });
  }
}

export function createRedisClient(config: RedisConfig, commandTimeoutMs: number): RedisClient {
  // Fail fast instead of queueing forever: fail-open needs an answer within the timeout.
  // disconnectTimeout: ioredis arms it on disconnect() even for a socket that already closed (a
  // refused connection), and nothing clears it then; short, so close() never keeps a process
  // alive for long.
  const ours: RedisOptions = { maxRetriesPerRequest: 1, commandTimeout: commandTimeoutMs, enableAutoPipelining: false, disconnectTimeout: 100 };
  if (typeof config === 'string') {
    checkRedisUrl(config);
    try {
      return new Redis(config, ours);
    } catch (err) {
      throw invalidUrl('redis', 'a redis:// URL', err);
    }
  }
  if (config !== null && typeof config === 'object' && 'cluster' in config && Array.isArray(config.cluster)) {
    return new Cluster(config.cluster, {
      enableAutoPipelining: false,
      ...(config.options ?? {}),
      redisOptions: { ...ours, ...((config.options?.redisOptions as RedisOptions | undefined) ?? {}) },
    });
  }
  return new Redis({ ...ours, ...(config as RedisOptions) });
}

/**
 * A client for a one-shot command: one retry per command and a bounded reconnect (a cron job must
 * end with its error when Redis is down, not hang). With `cluster`, `url` is any node of the cluster.
 */
export function connectCliRedis(url: string, cluster = false): RedisClient {
  const redis = cluster
    ? new Cluster([url])
    : new Redis(url, { maxRetriesPerRequest: 1, connectTimeout: 5_000, retryStrategy: (t) => (t > 3 ? null : 200 * t) });
  redis.on('error', () => undefined); // failures surface through the commands
  return redis;
}
