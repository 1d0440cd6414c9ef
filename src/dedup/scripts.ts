// The dedup store's one Lua script: first-seen with a request record, for calls that carry a requestId (run through src/redis/scripts.ts). Calls without one are plain SADDs (redis-writer.ts).
import { LuaScript } from '../redis/scripts.js';
import { PLACE_LUA } from './growth.js';

/**
 * A retry of a command whose reply was lost must return the answers of the run that did happen,
 * or first-seen events are lost (the retry would find every key present and answer 0).
 * KEYS = one key per group of members: the table's state key (compact) or the bucket key (sets),
 * then the record key.
 * ARGV = G, record TTL in ms, '1' for compact / '0' for sets, addresses (3 bytes per member in
 * member order, growth.ts's putAddress; '' for sets), member count of group 1..G, [compact: table
 * number of group 1..G, table prefix of group 1..G], then the members of every group back to back.
 * The record is a set of "member@bucket" for every key this request answered 1 (the bucket tells
 * equal compact members of different tables apart). A key present in its sub-bucket answers 1 when
 * the record holds it (this request added it), else 0; an absent key is added to both. The answers
 * therefore do not depend on how the request was cut into commands, and a retry of any subset of
 * its keys (another chunking, one caller of a merged batch) gets the original answers. The script
 * places members from each table's state as it reads it, so a split between a call and its retry
 * changes nothing.
 * Returns { one '0'/'1' per member, members this call added }. The `#!lua` shebang (Redis 7)
 * makes Redis refuse the whole script before it runs when it is out of memory.
 */
const FIRST_SEEN_ONCE_LUA = `#!lua
local g = tonumber(ARGV[1])
local ttl = ARGV[2]
local compact = ARGV[3] == '1'
local addrs = ARGV[4]
${PLACE_LUA}
local rk = KEYS[g + 1]
local known = redis.call('EXISTS', rk) == 1
local out = {}
local n = 0
local p = 5 + g
if compact then p = p + 2 * g end
local rec = {}
local nr = 0
local ask = {}
local at = {}
local nq = 0
local added = 0
for k = 1, g do
  local c = tonumber(ARGV[4 + k])
  local tag, tp, tn
  if compact then
    tag = '@' .. ARGV[4 + g + k]
    tp = ARGV[4 + 2 * g + k]
    tn = tonumber(redis.call('GET', KEYS[k]) or '1')
  else
    tag = '@' .. string.match(KEYS[k], '[^:]*$')
  end
  for j = p, p + c - 1 do
    local mem = ARGV[j]
    n = n + 1
    local key = KEYS[k]
    if compact then key = name_of(tp, tn, addr_at(addrs, n)) end
    if redis.call('SADD', key, mem) == 1 then
      added = added + 1
      nr = nr + 1
      rec[nr] = mem .. tag
      out[n] = '1'
    else
      out[n] = '0'
      if known then
        nq = nq + 1
        ask[nq] = mem .. tag
        at[nq] = n
      end
    end
  end
  p = p + c
end
local s = 1
while s <= nq do
  local e = s + 3999
  if e > nq then e = nq end
  local q = redis.call('SMISMEMBER', rk, unpack(ask, s, e))
  for j = s, e do
    if q[j - s + 1] == 1 then out[at[j]] = '1' end
  end
  s = e + 1
end
s = 1
while s <= nr do
  local e = s + 3999
  if e > nr then e = nr end
  redis.call('SADD', rk, unpack(rec, s, e))
  s = e + 1
end
if nr > 0 then redis.call('PEXPIRE', rk, ttl) end
return { table.concat(out), added }
`;

export const FIRST_SEEN_ONCE = new LuaScript(FIRST_SEEN_ONCE_LUA);
