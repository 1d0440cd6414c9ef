// The dedup store's Lua script (run through src/redis/scripts.ts). The `#!lua` shebang (Redis 7)
// makes Redis refuse the whole script before it runs when it is out of memory, so a script call
// is all-or-nothing.
import { LuaScript } from '../redis/scripts.js';

/**
 * KEYS = bucket keys of G groups [+ the HyperLogLog key when ARGV[2] == '1'];
 * ARGV = G, hll flag, count of group 1..G, then the members of every group back to back.
 * Returns one character per member: '1' = was not in its bucket (first seen), '0' = was.
 * SMISMEMBER + SADD per group (chunks of 4000 to stay under Lua's unpack limit); a group of one
 * member is a single SADD, whose reply is already the answer.
 */
const FIRST_SEEN_LUA = `#!lua
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

export const FIRST_SEEN = new LuaScript(FIRST_SEEN_LUA);
