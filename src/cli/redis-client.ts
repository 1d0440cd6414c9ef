// The Redis client and the Ctrl-C/SIGTERM handling shared by the cron-style CLI commands (migrate, bloom); the client factory lives in src/redis.
export { connectCliRedis } from '../redis/client.js';

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
