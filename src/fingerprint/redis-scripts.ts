// Lua for the Redis index backend. Every script touches keys of one shard only (all carry the
// shard's hash tag in cluster mode), so each runs atomically on one node.
//
// Key layout per shard prefix SP ('idx' standalone, 'idx:{N}' when sharded):
//   SP:<attr>:<value>          set of device ids (short values, kept verbatim so other readers need no hashing)
//   SP:<attr>:#<hex>[~i]       set for a long value hashed with murmur3_128; ~i = probe slot i
//   SP:<attr>:#<hex>[~i]:raw   the raw value that owns that slot (collision check)
//   SP:~dev:<deviceId>         hash: v:<attr> -> raw value, k:<attr> -> resolved set key
import { LuaScript } from '../redis/scripts.js';

const RESOLVE = `
local MAXP = 8
local function resolve(base, raw, claim)
  for i = 0, MAXP - 1 do
    local k = base
    if i > 0 then k = base .. '~' .. i end
    local r = redis.call('GET', k .. ':raw')
    if not r then
      if claim then redis.call('SET', k .. ':raw', raw) return k end
      return nil
    end
    if r == raw then return k end
  end
  return false
end
`;

const UNLINK = `
local function unlink(k, id)
  redis.call('SREM', k, id)
  if redis.call('SCARD', k) == 0 then
    local rawk = k .. ':raw'
    if redis.call('EXISTS', rawk) == 1 then
      -- a later probe slot is only reachable through this one: keep the raw as a tombstone then
      local base, i = string.match(k, '^(.*)~(%d+)$')
      if not base then base = k; i = 0 end
      if redis.call('EXISTS', base .. '~' .. (tonumber(i) + 1) .. ':raw') == 0 then
        redis.call('DEL', rawk)
      end
    end
  end
end
`;

/** KEYS[1]=device record; ARGV: id, mode, n, then n x (attr, value, baseKey, hashed). */
export const PUT = new LuaScript(`${RESOLVE}${UNLINK}
local dev = KEYS[1]
local id, mode, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local old = redis.call('HGETALL', dev)
local oldk, oldv = {}, {}
for j = 1, #old, 2 do
  local f = old[j]
  local attr = string.sub(f, 3)
  if string.sub(f, 1, 2) == 'k:' then oldk[attr] = old[j + 1] else oldv[attr] = old[j + 1] end
end
-- resolve every hashed key before mutating so a probe overflow leaves the device untouched
local keys, seen = {}, {}
for j = 1, n do
  local p = 4 + (j - 1) * 4
  local attr, val, base, hashed = ARGV[p], ARGV[p + 1], ARGV[p + 2], ARGV[p + 3]
  seen[attr] = true
  if oldv[attr] ~= val then
    local k = base
    if hashed == '1' then
      k = resolve(base, val, true)
      if not k then return redis.error_reply('HG_ERR_STORE index probe chain full for ' .. base) end
    end
    keys[j] = k
  end
end
local fields = {}
for j = 1, n do
  local k = keys[j]
  if k then
    local p = 4 + (j - 1) * 4
    local attr, val = ARGV[p], ARGV[p + 1]
    if oldk[attr] then unlink(oldk[attr], id) end
    redis.call('SADD', k, id)
    local f = #fields
    fields[f + 1] = 'v:' .. attr
    fields[f + 2] = val
    fields[f + 3] = 'k:' .. attr
    fields[f + 4] = k
  end
end
if #fields > 0 then redis.call('HSET', dev, unpack(fields)) end
if mode == 'replace' then
  for attr, k in pairs(oldk) do
    if not seen[attr] then
      unlink(k, id)
      redis.call('HDEL', dev, 'v:' .. attr, 'k:' .. attr)
    end
  end
end
return 1
`);

/** KEYS[1]=device record; ARGV[1]=id. Returns 1 when the device existed. */
export const REMOVE = new LuaScript(`${UNLINK}
local dev = KEYS[1]
local old = redis.call('HGETALL', dev)
if #old == 0 then return 0 end
for j = 1, #old, 2 do
  if string.sub(old[j], 1, 2) == 'k:' then unlink(old[j + 1], ARGV[1]) end
end
redis.call('DEL', dev)
return 1
`);

// Below ARGV[3] members (sinterThreshold) the C SINTER/SUNION beats a Lua walk even when the limit is tiny; above it
// the walk's early exit at \`limit\` wins and keeps the reply bounded.

/** KEYS[1]=any key of the shard (routing only); ARGV: limit, n, small, then n x (baseKey, value, hashed). */
export const MATCH = new LuaScript(`${RESOLVE}
local limit, n, small = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local sets = {}
for j = 1, n do
  local p = 4 + (j - 1) * 3
  local k = ARGV[p]
  if ARGV[p + 2] == '1' then
    k = resolve(k, ARGV[p + 1], false)
    if not k then return {} end
  end
  local c = redis.call('SCARD', k)
  if c == 0 then return {} end
  sets[j] = { c, k }
end
table.sort(sets, function(a, b) return a[1] < b[1] end)
local out = {}
if sets[1][1] <= small then
  local ks = {}
  for j = 1, #sets do ks[j] = sets[j][2] end
  local all = redis.call('SINTER', unpack(ks))
  if #all <= limit then return all end
  for j = 1, limit do out[j] = all[j] end
  return out
end
local seenm = {}
local cursor = '0'
repeat
  local r = redis.call('SSCAN', sets[1][2], cursor, 'COUNT', 512)
  cursor = r[1]
  for _, m in ipairs(r[2]) do
    if not seenm[m] then
      seenm[m] = true
      local ok = true
      for j = 2, #sets do
        if redis.call('SISMEMBER', sets[j][2], m) == 0 then ok = false break end
      end
      if ok then
        out[#out + 1] = m
        if #out >= limit then return out end
      end
    end
  end
until cursor == '0'
return out
`);

/** Same arguments as MATCH; union instead of intersection. */
export const ANY = new LuaScript(`${RESOLVE}
local limit, n, small = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local sets, total = {}, 0
for j = 1, n do
  local p = 4 + (j - 1) * 3
  local k = ARGV[p]
  if ARGV[p + 2] == '1' then k = resolve(k, ARGV[p + 1], false) end
  if k then
    local c = redis.call('SCARD', k)
    if c > 0 then sets[#sets + 1] = { c, k } total = total + c end
  end
end
local out = {}
if #sets == 0 then return out end
if total <= small then
  local ks = {}
  for j = 1, #sets do ks[j] = sets[j][2] end
  local all = redis.call('SUNION', unpack(ks))
  if #all <= limit then return all end
  for j = 1, limit do out[j] = all[j] end
  return out
end
local seenm = {}
for j = 1, #sets do
  local cursor = '0'
  repeat
    local r = redis.call('SSCAN', sets[j][2], cursor, 'COUNT', 512)
    cursor = r[1]
    for _, m in ipairs(r[2]) do
      if not seenm[m] then
        seenm[m] = true
        out[#out + 1] = m
        if #out >= limit then return out end
      end
    end
  until cursor == '0'
end
return out
`);

/**
 * Many queries in one script call: the service pattern sends hundreds of one-device queries at
 * once, and one EVALSHA for all of them costs Redis and the client one command instead of one
 * each. KEYS[1] = any key of the shard (routing only); ARGV: q, then per query: kind ('m' match,
 * 'a' any), len, and the len arguments MATCH/ANY take. Returns one reply per query, in order.
 * The bodies are MATCH's and ANY's, reading their arguments at an offset instead of from 1.
 */
const atOffset = (script: LuaScript): string => script.lua.slice(RESOLVE.length).replace(/ARGV\[/g, 'ARGV[o + ');
export const QUERY_MANY = new LuaScript(`${RESOLVE}
local function matchWalk(o)
${atOffset(MATCH)}
end
-- The common service query names one selective value: as soon as one set is known to be at most
-- 'small', SINTER (which itself starts from the smallest set) is the answer, so the other sets'
-- SCARD and the sort are skipped; otherwise the full script decides.
local function match1(o)
  local limit, n, small = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])
  local ks = {}
  local smallFound = false
  for j = 1, n do
    local p = o + 4 + (j - 1) * 3
    local k = ARGV[p]
    if ARGV[p + 2] == '1' then
      k = resolve(k, ARGV[p + 1], false)
      if not k then return {} end
    end
    ks[j] = k
    if not smallFound then
      local c = redis.call('SCARD', k)
      if c == 0 then return {} end
      if c <= small then smallFound = true end
    end
  end
  if not smallFound then return matchWalk(o) end
  local all = redis.call('SINTER', unpack(ks))
  if #all <= limit then return all end
  local out = {}
  for j = 1, limit do out[j] = all[j] end
  return out
end
local function any1(o)
${atOffset(ANY)}
end
local q = tonumber(ARGV[1])
local res = {}
local p = 2
for i = 1, q do
  local len = tonumber(ARGV[p + 1])
  if ARGV[p] == 'm' then res[i] = match1(p + 1) else res[i] = any1(p + 1) end
  p = p + 2 + len
end
return res
`);
