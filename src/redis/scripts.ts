// How every Lua script is run: through ioredis scripting, or by hand for a call sent as prebuilt RESP.
//
// runScript: ioredis sends EVAL the first time a script goes out on a connection (which caches it there),
// EVALSHA after that, and EVAL again after a NOSCRIPT (a restarted or flushed Redis); on a Cluster
// the call is routed by its keys. Because the first call per connection is an EVAL, no call waits
// for a NOSCRIPT round trip that later calls could overtake. Scripts are defined on the caller's
// client under a name derived from their SHA1 (so scripts of different components never clash and
// a shared client defines each once); the number of keys is passed per call, so one script can run
// with different key counts.
import { createHash } from 'node:crypto';
import type { ChainableCommander, Redis } from 'ioredis';
import { ErrorCodes, HashGateError } from '../errors.js';
import type { RedisClient } from './client.js';
import { RawCommand, UntimedRawCommand } from './resp.js';

export type ScriptArg = string | Buffer | number;

export class LuaScript {
  readonly sha: string;
  /** The ioredis command this script is defined as (string replies; `${command}Buffer` for Buffers). */
  readonly command: string;
  /** Connections (their sockets) that were sent SCRIPT LOAD of this script (runScriptWire). */
  readonly loadedOn = new WeakSet<object>();

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

/** Defines `scripts` on `redis` (once per client); runScript does it itself, queueScript needs it done first. */
export function defineScripts(redis: RedisClient, ...scripts: LuaScript[]): void {
  const c = redis as unknown as Scripting;
  for (const script of scripts) if (c[script.command] === undefined) c.defineCommand(script.command, { lua: script.lua });
}

/** Runs `script` with `keys` (the first `numKeys` of `args` are key names); replies decoded as UTF-8 strings, or as Buffers with `buffer`. */
export function runScript(redis: RedisClient, script: LuaScript, numKeys: number, args: readonly ScriptArg[], buffer = false): Promise<unknown> {
  defineScripts(redis, script);
  const c = redis as unknown as Scripting;
  const f = c[buffer ? `${script.command}Buffer` : script.command]!;
  return f.call(c, numKeys, ...args);
}

/**
 * Queues `script` on an ioredis pipeline; its reply lands in the pipeline's exec() results. An
 * ioredis pipeline copies the scripts defined on its client when it is created, so call
 * defineScripts(client, script) before client.pipeline(). The call goes out the same way as
 * runScript's (EVAL first on a connection, EVALSHA after, resent through the client on NOSCRIPT).
 */
export function queueScript(pipeline: ChainableCommander, script: LuaScript, numKeys: number, args: readonly ScriptArg[], buffer = false): void {
  const f = (pipeline as unknown as Partial<Scripting>)[buffer ? `${script.command}Buffer` : script.command];
  if (f === undefined) throw new HashGateError(ErrorCodes.INVALID_ARG, 'queueScript: the script was not defined on the client before its pipeline was created (defineScripts)');
  void f.call(pipeline, numKeys, ...args);
}

/**
 * A script call whose whole wire form (EVALSHA sha numkeys keys... args...) the caller built with
 * RespWriter; standalone Redis only, reply left as a Buffer. SCRIPT LOAD goes out ahead of the
 * first such call on each connection (same socket, so Redis runs them in that order): no call
 * waits for a NOSCRIPT round trip that a later call could overtake, which would swap two callers'
 * answers. A NOSCRIPT anyway (SCRIPT FLUSH) loads the script and sends the call again.
 * `untimed`: ioredis' commandTimeout does not apply (the caller times the call itself).
 */
export async function runScriptWire(redis: Redis, script: LuaScript, wire: Buffer, untimed = false): Promise<Buffer> {
  const Cmd = untimed ? UntimedRawCommand : RawCommand;
  const socket = (redis as unknown as { stream?: object }).stream;
  if (socket !== undefined && !script.loadedOn.has(socket)) {
    script.loadedOn.add(socket);
    redis.script('LOAD', script.lua).catch(() => script.loadedOn.delete(socket));
  }
  try {
    return (await redis.sendCommand(new Cmd('evalsha', [], wire))) as Buffer;
  } catch (err) {
    if (!(err instanceof Error && err.message.startsWith('NOSCRIPT'))) throw err;
    await redis.script('LOAD', script.lua);
    return (await redis.sendCommand(new Cmd('evalsha', [], wire))) as Buffer;
  }
}
