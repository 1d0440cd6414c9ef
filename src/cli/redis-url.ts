// The rules every command that needs Redis follows: its address is --redis (or --cluster),
// else the HASHGATE_REDIS_URL environment variable, else a usage error; it waits for the first
// connection at most --connect-timeout-ms. No command guesses localhost: a sidecar or cron job
// silently writing to whatever Redis listens on 6379 is worse than one that refuses to start.
import { ErrorCodes, HashGateTypeError } from '../errors.js';
import { CLI_CONNECT_TIMEOUT_MS } from '../redis/client.js';
import { intFlag } from './line-flags.js';

export const REDIS_URL_ENV = 'HASHGATE_REDIS_URL';

export function defaultRedisUrl(env: NodeJS.ProcessEnv = process.env): string {
  const v = env[REDIS_URL_ENV];
  if (v !== undefined && v !== '') return v;
  throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `--redis URL (or $${REDIS_URL_ENV}) is required`, { name: '--redis' });
}

/** Help line shared by every command with a --redis flag (same column layout as the help texts). */
export const REDIS_HELP = `  --redis URL               Redis URL (default $${REDIS_URL_ENV}; one of them is required)`;

/** The flag every command that talks to Redis takes, with the same name, default and check. */
export const CONNECT_TIMEOUT_FLAG = { 'connect-timeout-ms': { type: 'string' } } as const;

export const CONNECT_TIMEOUT_HELP = `  --connect-timeout-ms MS   wait at most MS for Redis to answer the first connection, then exit 1
                            (default ${CLI_CONNECT_TIMEOUT_MS})`;

/** --connect-timeout-ms: a positive integer of milliseconds (the default when absent). */
export function connectTimeoutMs(v: unknown): number {
  if (v === undefined) return CLI_CONNECT_TIMEOUT_MS;
  return intFlag('--connect-timeout-ms', typeof v === 'string' ? v : String(v), 1, 3_600_000)!;
}
