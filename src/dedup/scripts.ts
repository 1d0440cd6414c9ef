// Lua run by Redis. EVALSHA first, EVAL on NOSCRIPT (which also re-caches the script after a
// restart or SCRIPT FLUSH). The `#!lua` shebang (Redis 7) makes Redis refuse the whole script
// before it runs when it is out of memory, so a script call is all-or-nothing.
import { createHash } from 'node:crypto';
import type { RedisClient } from './layout.js';

/**
 * KEYS = bucket keys of G groups [+ the HyperLogLog key when ARGV[2] == '1'];
 * ARGV = G, hll flag, count of group 1..G, then the members of every group back to back.
 * Returns one character per member: '1' = was not in its bucket (first seen), '0' = was.
 * SMISMEMBER + SADD per group (chunks of 4000 to stay under Lua's unpack limit); a group of one
 * member is a single SADD, whose reply is already the answer.
 */
export const FIRST_SEEN_LUA = `#!lua
local g = tonumber(ARGV[1])
local hll = ARGV[2] == '1'
local hk = KEYS[g + 1]
local out = {}
local n = 0
local p = g + 3
for k = 1, g do
  local c = tonumber(ARGV[k + 2])
  local key = KEYS[k]
  while c > 0 do
    local m = c
    if m > 4000 then m = 4000 end
    local e = p + m - 1
    if m == 1 then
      n = n + 1
      out[n] = redis.call('SADD', key, ARGV[p])
    else
      local r = redis.call('SMISMEMBER', key, unpack(ARGV, p, e))
      redis.call('SADD', key, unpack(ARGV, p, e))
      for j = 1, m do
        n = n + 1
        out[n] = 1 - r[j]
      end
    end
    p = e + 1
    c = c - m
  end
end
if hll then
  local last = #ARGV
  local s = g + 3
  while s <= last do
    local e = s + 3999
    if e > last then e = last end
    redis.call('PFADD', hk, unpack(ARGV, s, e))
    s = e + 1
  end
end
return table.concat(out)
`;

export const RELEASE_LOCK_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;
export const REFRESH_LOCK_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;

const shas = new Map<string, string>();
export const FIRST_SEEN_SHA = createHash('sha1').update(FIRST_SEEN_LUA).digest('hex');
const sha1 = (s: string): string => {
  let h = shas.get(s);
  if (h === undefined) shas.set(s, (h = createHash('sha1').update(s).digest('hex')));
  return h;
};

/** EVALSHA with EVAL fallback. `args` = numkeys, keys..., argv... (arrays are flattened by ioredis). */
export async function runScript(redis: RedisClient, lua: string, numKeys: number, args: Array<string | Buffer | number | Array<string | Buffer>>): Promise<unknown> {
  try {
    return await redis.call('evalsha', sha1(lua), numKeys, ...(args as string[]));
  } catch (err) {
    if (err instanceof Error && err.message.startsWith('NOSCRIPT')) {
      return redis.call('eval', lua, numKeys, ...(args as string[]));
    }
    throw err;
  }
}
