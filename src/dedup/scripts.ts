// The dedup store's Lua script (run through src/redis/scripts.ts). The `#!lua` shebang (Redis 7)
// makes Redis refuse the whole script before it runs when it is out of memory, so a script call
// is all-or-nothing.
import { LuaScript, luaPfaddRest } from '../redis/scripts.js';
import { TABLE_LUA } from './growth.js';

/**
 * KEYS = bucket keys of G groups [+ the HyperLogLog key when ARGV[2] == '1'];
 * ARGV = G, hll flag, alpha (members per sub-bucket before a compact bucket splits, see
 * growth.ts; 0 for 'sets' buckets, which never split), lows (3 bytes per member, in member order:
 * its low 20 bits, see putLow20; may be empty when alpha is 0), count of group 1..G, then the
 * members of every group back to back.
 * Returns one character per member: '1' = was not in its bucket (first seen), '0' = was.
 * A bucket of one sub-bucket: SMISMEMBER + SADD per group (chunks of 4000 to stay under Lua's
 * unpack limit), a group of one member a single SADD, whose reply is already the answer. A bucket
 * that has split: one SADD per member into its sub-bucket.
 */
const FIRST_SEEN_LUA = `#!lua
local g = tonumber(ARGV[1])
local hll = ARGV[2] == '1'
local alpha = tonumber(ARGV[3])
local lows = ARGV[4]
${TABLE_LUA}
local hk = KEYS[g + 1]
-- answers kept as one-character strings: table.concat would format every number with sprintf
local D = { [0] = '0', [1] = '1' }
local out = {}
local n = 0
local p = g + 5
if alpha > 0 and g > 1 then read_states(function(i) return KEYS[i] end, g) end
for k = 1, g do
  local c = tonumber(ARGV[k + 4])
  local key = KEYS[k]
  local pre, tn, tk, l2, n0
  if alpha > 0 then pre, tn, tk, l2, n0 = open(key, c) else tn = 1 end
  local added = 0
  if tn == 1 then
    while c > 0 do
      local m = c
      if m > 4000 then m = 4000 end
      local e = p + m - 1
      if m == 1 then
        n = n + 1
        local r = redis.call('SADD', key, ARGV[p])
        out[n] = D[r]
        added = added + r
      else
        local r = redis.call('SMISMEMBER', key, unpack(ARGV, p, e))
        added = added + redis.call('SADD', key, unpack(ARGV, p, e))
        for j = 1, m do
          n = n + 1
          out[n] = D[1 - r[j]]
        end
      end
      p = e + 1
      c = c - m
    end
  else
    for j = p, p + c - 1 do
      n = n + 1
      local r = redis.call('SADD', place(key, pre, tn, l2, low_at(lows, n)), ARGV[j])
      out[n] = D[r]
      added = added + r
    end
    p = p + c
  end
  if alpha > 0 then close(pre, tn, tk, n0, added) end
end
write_states()
if hll then
${luaPfaddRest('hk', 'g + 5')}
end
return table.concat(out)
`;

export const FIRST_SEEN = new LuaScript(FIRST_SEEN_LUA);

/**
 * FIRST_SEEN with a request record, for calls that carry a requestId: a retry of a command whose
 * reply was lost must return the answers of the run that did happen, or first-seen events are
 * lost (the retry would find every key present and answer 0).
 * KEYS = bucket keys of G groups [+ the HyperLogLog key when ARGV[2] == '1'] + the record key;
 * ARGV = G, hll flag, alpha (as for FIRST_SEEN), record TTL in ms, lows (as for FIRST_SEEN),
 * count of group 1..G, then the members.
 * The record is a set of "member@bucket" for every key this request answered 1 (the bucket tells
 * equal compact members of different buckets apart; it names the bucket, not the sub-bucket, so a
 * split between a call and its retry changes nothing). A key present in its bucket answers 1 when
 * the record holds it (this request added it), else 0; an absent key is added to both. The answers
 * therefore do not depend on how the request was split into commands, and a retry of any subset
 * of its keys (another chunking, one caller of a merged batch) gets the original answers.
 * A group of one member (the usual case: a command's keys spread over many buckets) is one SADD
 * whose reply is the answer, and the record is asked once per command, so the cost per key stays
 * close to FIRST_SEEN's.
 */
const FIRST_SEEN_ONCE_LUA = `#!lua
local g = tonumber(ARGV[1])
local hll = ARGV[2] == '1'
local alpha = tonumber(ARGV[3])
local ttl = ARGV[4]
local lows = ARGV[5]
${TABLE_LUA}
local rk = KEYS[#KEYS]
local hk = KEYS[g + 1]
local known = redis.call('EXISTS', rk) == 1
local out = {}
local n = 0
local p = g + 6
local rec = {}
local nr = 0
local ask = {}
local at = {}
local nq = 0
if alpha > 0 and g > 1 then read_states(function(i) return KEYS[i] end, g) end
-- answers the next key: new keys go to the record, present ones are asked of it (when it exists)
local function answer(mem, tag, new)
  n = n + 1
  if new then
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
for k = 1, g do
  local c = tonumber(ARGV[k + 5])
  local key = KEYS[k]
  local tag = '@' .. string.match(key, '[^:]*$')
  local pre, tn, tk, l2, n0
  if alpha > 0 then pre, tn, tk, l2, n0 = open(key, c) else tn = 1 end
  local added = 0
  if tn > 1 then
    for j = p, p + c - 1 do
      -- n counts the members answered so far: this one is member n + 1 of the command
      local r = redis.call('SADD', place(key, pre, tn, l2, low_at(lows, n + 1)), ARGV[j])
      added = added + r
      answer(ARGV[j], tag, r == 1)
    end
    p = p + c
  elseif c == 1 then
    local r = redis.call('SADD', key, ARGV[p])
    added = r
    answer(ARGV[p], tag, r == 1)
    p = p + 1
  else
    while c > 0 do
      local m = c
      if m > 4000 then m = 4000 end
      local e = p + m - 1
      local r = redis.call('SMISMEMBER', key, unpack(ARGV, p, e))
      local add = {}
      local na = 0
      for j = 1, m do
        local mem = ARGV[p + j - 1]
        if r[j] == 0 then
          na = na + 1
          add[na] = mem
        end
        answer(mem, tag, r[j] == 0)
      end
      if na > 0 then added = added + redis.call('SADD', key, unpack(add, 1, na)) end
      p = e + 1
      c = c - m
    end
  end
  if alpha > 0 then close(pre, tn, tk, n0, added) end
end
write_states()
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
callall('SADD', rk, rec, nr)
if nr > 0 then redis.call('PEXPIRE', rk, ttl) end
if hll then
${luaPfaddRest('hk', 'g + 6')}
end
return table.concat(out)
`;

export const FIRST_SEEN_ONCE = new LuaScript(FIRST_SEEN_ONCE_LUA);
