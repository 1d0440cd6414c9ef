// The one rule every command that needs Redis follows for its address: --redis, else the
// HASHGATE_REDIS_URL environment variable, else the local default.
export const REDIS_URL_ENV = 'HASHGATE_REDIS_URL';
export const LOCAL_REDIS_URL = 'redis://127.0.0.1:6379';

export function defaultRedisUrl(env: NodeJS.ProcessEnv = process.env): string {
  const v = env[REDIS_URL_ENV];
  return v !== undefined && v !== '' ? v : LOCAL_REDIS_URL;
}

/** Help line shared by every command with a --redis flag (same column layout as the help texts). */
export const REDIS_HELP = `  --redis URL               Redis URL (default $${REDIS_URL_ENV}, else ${LOCAL_REDIS_URL})`;
