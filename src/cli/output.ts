// How every command reports a failure: one line `hashgate <command>: message [code]` on stderr
// and, when --json was asked for, one line of JSON {"ok":false,"code","message","exitCode"} on
// stdout, so a script that parses stdout sees a failure as such instead of an empty line.
import { ErrorCodes } from '../errors.js';
import { redact } from '../util/redact.js';

/** Whether `--json` was given among a command's flags (before a `--` end-of-flags marker). */
export function wantsJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).some((a) => a === '--json' || a === '--json=true');
}

/**
 * The stable code of a failure: the error's own (HG_ERR_*, or a Node errno such as ENOENT);
 * else HG_ERR_INVALID_OPTION for a usage error, and HG_ERR_STORE for the rest (in these
 * commands an error without a code comes from the Redis client).
 */
export function failureCode(err: unknown, exitCode: number): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code !== '') return code;
  return exitCode === 2 ? ErrorCodes.INVALID_OPTION : ErrorCodes.STORE;
}

/** The message of a failure, with credentials masked and the Redis client's internals named plainly. */
export function failureMessage(err: unknown): string {
  const e = err as { name?: unknown; message?: unknown } | null;
  if (e?.name === 'MaxRetriesPerRequestError') return 'the connection to Redis was lost and the command could not be retried';
  return redact(typeof e?.message === 'string' ? e.message : String(err));
}

export interface FailOptions {
  /** Print the JSON line on stdout too. */
  json: boolean;
  /** Print the JSON line on stderr instead (a command whose stdout carries data, e.g. `export --out -`). */
  jsonToStderr?: boolean;
  /** Text printed after the message on stderr (e.g. the usage text after a usage error). */
  help?: string;
}

/** Reports a failed command as described above and returns `exitCode`. */
export function fail(command: string, err: unknown, exitCode: number, o: FailOptions): number {
  const code = failureCode(err, exitCode);
  const message = failureMessage(err);
  console.error(`hashgate${command ? ` ${command}` : ''}: ${message}${code.startsWith('HG_ERR_') ? ` [${code}]` : ''}${o.help ? `\n\n${o.help}` : ''}`);
  if (o.json) (o.jsonToStderr ? console.error : console.log)(JSON.stringify({ ok: false, code, message, exitCode }));
  return exitCode;
}
