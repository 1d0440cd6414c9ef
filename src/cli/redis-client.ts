// The Redis client and the Ctrl-C/SIGTERM handling shared by the cron-style CLI commands (migrate, bloom).
import { Cluster, Redis } from 'ioredis';

/**
 * A client for a one-shot command: one retry per command and a bounded reconnect (a cron job must
 * end with its error when Redis is down, not hang). With `cluster`, `url` is any node of the cluster.
 */
export function connectCliRedis(url: string, cluster = false): Redis | Cluster {
  const redis = cluster
    ? new Cluster([url])
    : new Redis(url, { maxRetriesPerRequest: 1, connectTimeout: 5_000, retryStrategy: (t) => (t > 3 ? null : 200 * t) });
  redis.on('error', () => undefined); // failures surface through the commands
  return redis;
}

/**
 * Aborts `signal` on the first SIGINT/SIGTERM so the command can finish its current batch, keep
 * its checkpoint and release its lock; `dispose()` removes the handlers (call it in `finally`).
 */
export function abortOnSignals(): { signal: AbortSignal; dispose(): void } {
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return {
    signal: stop.signal,
    dispose() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}
