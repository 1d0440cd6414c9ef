// The Redis connection (one behaviour for a dead Redis in every command, bounded by
// --connect-timeout-ms) and the Ctrl-C/SIGTERM handling shared by the CLI commands; the client
// factory lives in src/redis.
export { connectCliRedis, CLI_CONNECT_TIMEOUT_MS } from '../redis/client.js';

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
