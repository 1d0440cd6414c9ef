// How every Lua script is run: ioredis scripting (defineCommand), one command per script and client.
//
// ioredis sends EVAL the first time a script goes out on a connection (which caches it there),
// EVALSHA after that, and EVAL again after a NOSCRIPT (a restarted or flushed Redis); on a Cluster
// the call is routed by its keys. Because the first call per connection is an EVAL, no call waits
// for a NOSCRIPT round trip that later calls could overtake. Scripts are defined on the caller's
// client under a name derived from their SHA1 (so scripts of different components never clash and
// a shared client defines each once); the number of keys is passed per call, so one script can run
// with different key counts.
import { createHash } from 'node:crypto';
import type { RedisClient } from './client.js';

export type ScriptArg = string | Buffer | number;

export class LuaScript {
  readonly sha: string;
  /** The ioredis command this script is defined as (string replies; `${command}Buffer` for Buffers). */
  readonly command: string;

  constructor(readonly lua: string) {
    this.sha = createHash('sha1').update(lua).digest('hex');
    this.command = `hgLua${this.sha}`;
  }
}

type Scripting = Record<string, ((...args: ScriptArg[]) => Promise<unknown>) | undefined> & {
  defineCommand(name: string, d: { lua: string }): void;
};

/** Whether `redis` can run scripts (an ioredis Redis or Cluster). */
export const canRunScripts = (redis: unknown): boolean =>
  redis !== null && typeof redis === 'object' && typeof (redis as Partial<Scripting>).defineCommand === 'function';

/** Runs `script` with `keys` (the first `numKeys` of `args` are key names); replies decoded as UTF-8 strings, or as Buffers with `buffer`. */
export function runScript(redis: RedisClient, script: LuaScript, numKeys: number, args: readonly ScriptArg[], buffer = false): Promise<unknown> {
  const c = redis as unknown as Scripting;
  if (c[script.command] === undefined) c.defineCommand(script.command, { lua: script.lua });
  const f = c[buffer ? `${script.command}Buffer` : script.command]!;
  return f.call(c, numKeys, ...args);
}
