// How a compact Redis bucket grows: each bucket is a small linear-hash table of sub-buckets that
// splits itself, inside the scripts that write it, before any sub-bucket leaves Redis's intset.
//
// Why: a bucket count fixed when a window is first written is either too big for a small window
// (a Redis key per handful of members: about 90 B of key overhead each) or too small for a big
// one (past set-max-intset-entries, 512 by default, a set turns from an intset, 8 B a member,
// into a hashtable, about 8x that). Growing in place keeps every window at 8-10 B a key from
// 1e5 to 1e10 keys with no sizing, and needs no migration, lock or second write path.
//
// Layout of one bucket ("base" key `${prefix}:${window}:c:${bucket}`, bucket = digest bytes 8..15
// mod the window's recorded bucket count, as always):
//   sub-bucket 0        the base key itself (so a window written before buckets grew is a
//                       valid table of one sub-bucket and keeps working);
//   sub-bucket s > 0    `${base}:{${base}}:${s}` (the hash tag puts it in the base key's Cluster
//                       slot, so one script updates a whole table atomically);
//   state               `${base}:{${base}}:n`, the integer k * 2^21 + n (n sub-buckets, k members
//                       counted as they were added). Missing: n = 1 and k = SCARD(base).
//   A base key that already has a hash tag uses `${base}:${s}` / `${base}:n` instead.
// Sub-bucket of a member: r = the member's low 20 bits (digest byte 0..2 bits, i.e. the low bits
// of the signed 64-bit integer), L2 = the largest power of two <= n, s = r mod 2*L2, and if s >= n
// then s = r mod L2 (linear hashing). The bucket id carries independent digest bits (bytes 8..15),
// so a key is still identified by 64 + log2(buckets) bits: splitting only uses bits the member
// already holds.
// Splits: before adding c members to a table with k members, while k + c > alpha * n the
// sub-bucket n - L2 is split (its members with bit log2(L2) set move to sub-bucket n). alpha is
// a third of the intset limit (168 at 512): sub-buckets not yet split at the current level hold about
// 2 * alpha members on average, and the Poisson tail over millions of them stays below the limit
// (simulated: the largest sub-bucket of a table fed 3M keys held 403). A call splits at most
// SPLIT_BUDGET times plus twice what its own members need (each split moves about alpha members,
// so the work stays proportional to the call's size): a window written with far too few buckets
// catches up over several calls instead of in one long one.
import type { RedisClient } from '../redis/client.js';
import { isCluster } from '../redis/client.js';
import type { Cluster, Redis } from 'ioredis';

/** Share of set-max-intset-entries a table's sub-buckets average before the next split. */
export const SPLIT_SHARE = 0.33;
/** Most sub-buckets of one table (the member's low 20 bits address them). */
export const MAX_SUB_BUCKETS = 2 ** 20;
/** Splits one script call may make beyond what its own members need. */
export const SPLIT_BUDGET = 32;
const TWO21 = 2 ** 21;

/** Members per sub-bucket before a table splits, for a Redis whose intset limit is `intsetLimit`. */
export const splitLoad = (intsetLimit: number): number => Math.max(1, Math.floor(intsetLimit * SPLIT_SHARE));

/** Prefix of a table's sub-bucket and state keys: in the base key's Cluster slot. */
export function tablePrefix(base: string): string {
  const o = base.indexOf('{');
  const c = o < 0 ? -1 : base.indexOf('}', o + 1);
  return c > o + 1 ? `${base}:` : `${base}:{${base}}:`;
}
export const subBucketKey = (base: string, s: number): string => (s === 0 ? base : `${tablePrefix(base)}${s}`);
export const tableStateKey = (base: string): string => `${tablePrefix(base)}n`;

/** Decodes a table state value (null: a table that never split). */
export function decodeTableState(v: string | null): { subBuckets: number; counted: number } | undefined {
  if (v === null) return undefined;
  const x = Number(v);
  const n = x % TWO21;
  return { subBuckets: n, counted: (x - n) / TWO21 };
}

/** Sub-bucket of a member whose low 20 bits are `r`, in a table of `n` sub-buckets. */
export function subBucketOf(r: number, n: number): number {
  if (n <= 1) return 0;
  let l2 = 1;
  while (l2 * 2 <= n) l2 *= 2;
  let s = r % (2 * l2);
  if (s >= n) s = r % l2;
  return s;
}

/** Low 20 bits of the compact member of the digest at byte offset `o` (bytes 0..7, little endian). */
export const memberLow20 = (dv: DataView, o: number): number => dv.getUint32(o, true) & 0xfffff;

/** Low 20 bits of a compact member given as its signed 64-bit decimal (journal records without digests). */
export const decimalLow20 = (m: string): number => Number(BigInt.asUintN(64, BigInt(m)) & 0xfffffn);

/**
 * Writes the scripts' `lows` entry of one member at buf[at..at+3): its low 20 bits, little endian.
 * A script places a member of a table that split from these three bytes (one string.byte in Lua)
 * rather than from its decimal digits (a substring and a strtod per member).
 */
export function putLow20(buf: Uint8Array, at: number, r: number): void {
  buf[at] = r & 0xff;
  buf[at + 1] = (r >>> 8) & 0xff;
  buf[at + 2] = r >>> 16;
}

const limits = new WeakMap<object, Promise<number>>();

/**
 * Redis's `set-max-intset-entries` (on a Cluster, of its first master), read once per client.
 * 512, Redis's default, when CONFIG is refused (managed Redis services often rename it).
 */
export function intsetLimitOf(redis: RedisClient): Promise<number> {
  let p = limits.get(redis);
  if (p === undefined) {
    p = (async () => {
      try {
        const node = isCluster(redis) ? (redis as Cluster).nodes('master')[0] : (redis as Redis);
        const r = (await node?.config('GET', 'set-max-intset-entries')) as string[] | undefined;
        const v = Number(r?.[1]);
        return Number.isInteger(v) && v > 0 ? v : 512;
      } catch {
        return 512;
      }
    })();
    limits.set(redis, p);
  }
  return p;
}

/**
 * Lua shared by every script that writes compact buckets. Expects a local `alpha` (members per
 * sub-bucket before a split; 0 = a fixed bucket that never grows, the 'sets' layout). Gives:
 *   open(base, c)      -> pre, n, k, L2, n0   (splits first so c more members fit)
 *   place(base, pre, n, L2, r)      -> the sub-bucket key of a member whose low 20 bits are r
 *   low_at(lows, i)                 -> r of member i of a command, from its 3-byte lows entry
 *                                      (a split reads the members it moves from their digits)
 *   close(pre, n, k, n0, added)              (records the table's new state)
 *   read_states(keyOf, cnt) / write_states()  (optional: one MGET before and one MSET after a
 *                                              command over many tables of one Redis)
 *   callall(cmd, key, list, cnt) -> sum of replies   (cmd over a list of any length)
 * low20 reads the low 20 bits of a signed 64-bit decimal exactly: 2^20 divides 10^20, so they
 * depend only on the last 20 digits, taken as two 10-digit halves (exact in a Lua double).
 */
export const TABLE_LUA: string = `local TWO20 = ${2 ** 20}
local TWO21 = ${TWO21}
local budget = ${SPLIT_BUDGET}
local function low20(m)
  local neg = string.byte(m, 1) == 45
  local s0 = 1
  if neg then s0 = 2 end
  local e = #m
  local r
  if e - s0 >= 10 then
    local hs = e - 19
    if hs < s0 then hs = s0 end
    r = ((tonumber(string.sub(m, hs, e - 10)) % TWO20) * ${10 ** 10 % 2 ** 20} + tonumber(string.sub(m, e - 9, e))) % TWO20
  else
    r = tonumber(string.sub(m, s0, e)) % TWO20
  end
  if neg then r = (TWO20 - r) % TWO20 end
  return r
end
local function prefix_of(base)
  local o = string.find(base, '{', 1, true)
  if o then
    local c = string.find(base, '}', o + 1, true)
    if c and c > o + 1 then return base .. ':' end
  end
  return base .. ':{' .. base .. '}:'
end
local function pow2le(n)
  local l2 = 1
  while l2 * 2 <= n do l2 = l2 * 2 end
  return l2
end
-- cmd(key, list[1..cnt]) in runs of 4000 members (Lua's unpack takes a few thousand values at
-- most); returns the sum of the replies (members added or removed)
local function callall(cmd, key, list, cnt)
  local sum, s = 0, 1
  while s <= cnt do
    local e = s + 3999
    if e > cnt then e = cnt end
    sum = sum + redis.call(cmd, key, unpack(list, s, e))
    s = e + 1
  end
  return sum
end
local function digits_for(l2)
  -- 2 * l2 = 2^j divides 10^j: the last j digits of a member decide its low20 mod 2 * l2
  local nd, x = 1, 2
  while x < 2 * l2 do
    x = x * 2
    nd = nd + 1
  end
  return nd
end
-- The member's low 20 bits mod 'mod' (a power of two dividing 10^nd), read from its last nd
-- digits: one sub and one short tonumber instead of low20's two of each.
local function low_mod(m, mod, nd)
  local e = #m
  local s0 = e - nd + 1
  if string.byte(m, 1) == 45 then
    if s0 < 2 then s0 = 2 end
    return (mod - tonumber(string.sub(m, s0, e)) % mod) % mod
  end
  if s0 < 1 then s0 = 1 end
  return tonumber(string.sub(m, s0, e)) % mod
end
local function bit_of(m, l2, nd)
  -- bit log2(l2) of the member's low 20 bits
  if l2 > 16384 then return math.floor(low20(m) / l2) % 2 end
  if low_mod(m, 2 * l2, nd) >= l2 then return 1 end
  return 0
end
local function split(base, pre, n)
  local l2 = pow2le(n)
  local p = n - l2
  local src = base
  if p > 0 then src = pre .. p end
  local ms = redis.call('SMEMBERS', src)
  local nd = digits_for(l2)
  local go, ng = {}, 0
  for i = 1, #ms do
    local m = ms[i]
    if bit_of(m, l2, nd) == 1 then
      ng = ng + 1
      go[ng] = m
    end
  end
  if ng > 0 then
    if #ms > 3 * alpha then
      -- rewritten rather than SREMed: a set this big may have turned into a hashtable (a window
      -- written before buckets grew), and a rewritten one is an intset again
      local stay, ns = {}, 0
      for i = 1, #ms do
        local m = ms[i]
        if bit_of(m, l2, nd) == 0 then
          ns = ns + 1
          stay[ns] = m
        end
      end
      redis.call('DEL', src)
      callall('SADD', src, stay, ns)
    else
      callall('SREM', src, go, ng)
    end
    callall('SADD', pre .. (p + l2), go, ng)
  end
end
-- Table states of a command that touches many tables are read with one MGET up front and their
-- new member counts written with one MSET at the end (with a few members per table per command,
-- a GET and a SET per table were most of a command's redis.calls). A state whose sub-bucket count
-- changed is written at once: readers must never see members moved to a sub-bucket the recorded
-- count does not reach. A deferred count only times the next split.
local pres, skeys = {}, {}
local states = {}
local dirty, dirtyset, ndirty = {}, {}, 0
local function prefix_cached(base)
  local p = pres[base]
  if p == nil then
    p = prefix_of(base)
    pres[base] = p
  end
  return p
end
-- state key of the table whose prefix is pre (open and close both need it: built once)
local function state_key(pre)
  local k = skeys[pre]
  if k == nil then
    k = pre .. 'n'
    skeys[pre] = k
  end
  return k
end
-- keyOf(i) = base key of table i; only for commands whose tables share one Redis (MGET and MSET
-- would be cross-slot on a Cluster node)
local function read_states(keyOf, cnt)
  local ks = {}
  for i = 1, cnt do ks[i] = state_key(prefix_cached(keyOf(i))) end
  local s = 1
  while s <= cnt do
    local e = s + 3999
    if e > cnt then e = cnt end
    local vs = redis.call('MGET', unpack(ks, s, e))
    for i = s, e do states[ks[i]] = vs[i - s + 1] end
    s = e + 1
  end
end
local function write_states()
  local s = 1
  while s <= ndirty do
    local e = s + 1999
    if e > ndirty then e = ndirty end
    local kv = {}
    for i = s, e do
      kv[#kv + 1] = dirty[i]
      kv[#kv + 1] = states[dirty[i]]
    end
    redis.call('MSET', unpack(kv))
    s = e + 1
  end
  ndirty = 0
end
local function open(base, c)
  budget = budget + 2 * math.ceil(c / alpha)
  local pre = prefix_cached(base)
  local sk = state_key(pre)
  local v = states[sk]
  if v == nil then v = redis.call('GET', sk) end
  local n, k, n0
  if v then
    v = tonumber(v)
    n = v % TWO21
    k = (v - n) / TWO21
    n0 = n
  else
    n = 1
    k = redis.call('SCARD', base)
    n0 = 0
  end
  while k + c > alpha * n and n < TWO20 and budget > 0 do
    split(base, pre, n)
    n = n + 1
    budget = budget - 1
  end
  return pre, n, k, pow2le(n), n0
end
-- place() keeps the sub-bucket key strings it built for the table it last served: a number
-- concatenated to a string goes through sprintf (it showed in profiles of redis-server).
local w_pre, w_n, w_keys = nil, 0, nil
local function place(base, pre, n, l2, r)
  if pre ~= w_pre or n ~= w_n then w_pre, w_n, w_keys = pre, n, {} end
  local s = r % (2 * l2)
  if s >= n then s = r % l2 end
  if s == 0 then return base end
  local k = w_keys[s]
  if k == nil then
    k = pre .. s
    w_keys[s] = k
  end
  return k
end
local function low_at(lows, i)
  local b0, b1, b2 = string.byte(lows, 3 * i - 2, 3 * i)
  return b0 + 256 * b1 + 65536 * b2
end
local function close(pre, n, k, n0, added)
  if added > 0 or n ~= n0 then
    local sk = state_key(pre)
    local val = string.format('%d', (k + added) * TWO21 + n)
    if n == n0 and states[sk] ~= nil then
      states[sk] = val
      if not dirtyset[sk] then
        dirtyset[sk] = true
        ndirty = ndirty + 1
        dirty[ndirty] = sk
      end
    else
      redis.call('SET', sk, val)
      if states[sk] ~= nil then states[sk] = val end
    end
  end
end
`;
