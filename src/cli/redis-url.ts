// The one rule every command that needs Redis follows for its address: --redis (or --cluster),
// else the HASHGATE_REDIS_URL environment variable, else a usage error. No command guesses
// localhost: a sidecar or cron job silently writing to whatever Redis listens on 6379 is worse
// than one that refuses to start.
import { ErrorCodes, HashGateTypeError } from '../errors.js';

export const REDIS_URL_ENV = 'HASHGATE_REDIS_URL';

export function defaultRedisUrl(env: NodeJS.ProcessEnv = process.env): string {
  const v = env[REDIS_URL_ENV];
  if (v !== undefined && v !== '') return v;
  throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `--redis URL (or $${REDIS_URL_ENV}) is required`, { name: '--redis' });
}

/** Help line shared by every command with a --redis flag (same column layout as the help texts). */
export const REDIS_HELP = `  --redis URL               Redis URL (default $${REDIS_URL_ENV}; one of them is required)`;
