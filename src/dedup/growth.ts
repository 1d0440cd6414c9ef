// The compact layout's growth rules: how a bucket ("table") is cut into sub-buckets that split as the window fills, how a member finds its sub-bucket, and the one script that splits.
//
// Why splitting: a bucket count fixed when a window is first written is either too big for a
// small window (a Redis key per handful of members: ~90 B of key overhead each) or too small for
// a big one (past set-max-intset-entries, 512 by default, a set turns from an intset, 8 B a
// member, into a hashtable, about 8x that). Splitting keeps every window at 8-10 B a key from
// 1e5 to 1e10 keys with no sizing.
//
// Why writers need no script: every write is one plain SADD per member into the sub-bucket the
// writer computes from the table's sub-bucket count `n`, which it caches. A split never reuses a
// name: the sub-bucket it splits is replaced by two new names and its old name becomes a
// tombstone, a string key. A writer whose cached `n` is stale therefore either names the right
// sub-bucket (it did not split since) or a tombstone, where Redis refuses the SADD with WRONGTYPE
// and writes nothing; the writer then reads `n` again and resends. Redis does the atomic
// check-and-add natively, so a key costs one command, not one redis.call inside a script.
//
// Keys of table t (0 <= t < T, T = the window's recorded bucket count) of window W, under
// base = `${prefix}:${W}`:
//   prefix         TP = `${base}:c{${t}}` (the hash tag puts a table in one Cluster slot)
//   sub-bucket     `${TP}${s}.${d}`: index s, depth d (the number of address bits that select it)
//   tombstone      a string at the name of a sub-bucket that split (value "0")
//   state          `${TP}n`: n, the number of sub-buckets (missing: 1)
//   window count   `${base}:c:count`: members added to the window, as writers report them
//                  (the 'sets' layout, whose buckets never split, counts in `${base}:count`)
// Member: digest bytes 0..7 as a signed 64-bit integer in decimal (canonical, so Redis keeps a set
// of them as an intset). Table: digest bytes 8..15 (unsigned, little endian) mod T.
// Address r of a member: u = member XOR 2^63 (the member as an unsigned value with the same
// order); bit i of r is bit 63 - i of u (i < 20). Sub-bucket of a member in a table of n
// sub-buckets (linear hashing): L2 = the largest power of two <= n, s = r mod 2*L2, and if s >= n
// then s = r mod L2; its depth d = log2(L2) + 1 if s < n - L2 or s >= L2, else log2(L2).
// Because the address bits are u's top bits, the members of one sub-bucket form one contiguous
// range of values, and a split (of sub-bucket p = n - L2, depth d, into p and p + L2 at depth
// d + 1) cuts that range at one value: Redis keeps an intset sorted, so the split cuts the DUMP
// payload of the set in two and RESTOREs the halves (src/redis/dump.ts), with no member moved one
// by one. The RESTOREs are plain commands sent just ahead of the script that seals the split (a
// RESTORE inside a script cost Redis three times as much, the payload passing through Lua): a
// RESTORE never replaces a key, and the seal moves whatever of the sub-bucket its halves lack, so
// halves restored by another writer, or by one that stopped before its seal, leave the result
// exact.
// When a table splits: the window count K decides, for every writer alike. Table t should have
// target(t, K) = max(1, floor((K / alpha + t) / T)) sub-buckets (alpha = SPLIT_SHARE, 0.3, of the intset
// limit, the members a sub-bucket averages), so tables split one after another, not all at once.
// A writer adds what it added to K (INCRBY); the writer whose INCRBY carried K past a table's next
// threshold splits that table. A writer about to send a batch big enough to overfill a table
// first splits it itself. The split script checks the state it was given, so two writers never
// split the same sub-bucket twice.

/** Redis's default set-max-intset-entries, assumed where the server's own cannot be read. */
export const DEFAULT_INTSET_LIMIT = 512;
/** Share of set-max-intset-entries a table's sub-buckets average. */
export const SPLIT_SHARE = 0.3;
/** Most sub-buckets of one table (20 address bits). */
export const MAX_SUB_BUCKETS = 2 ** 20;
/** Value of a tombstone. */
export const TOMBSTONE = '0';

/** Members per sub-bucket on average, for a Redis whose intset limit is `intsetLimit`. */
export const splitLoad = (intsetLimit: number): number => Math.max(1, Math.floor(intsetLimit * SPLIT_SHARE));

/** Key prefix of table t of the window whose keys start with `base` (`${prefix}:${window}`). */
export const tablePrefix = (base: string, t: number): string => `${base}:c{${t}}`;
/** Sub-bucket s at depth d of the table whose prefix is `tp`. */
export const subBucketName = (tp: string, s: number, d: number): string => `${tp}${s}.${d}`;
/** State key (the sub-bucket count) of the table whose prefix is `tp`. */
export const tableStateKey = (tp: string): string => `${tp}n`;
/** The window's member count as writers report it (it times compact splits). */
export const windowCountKey = (base: string, layout: 'compact' | 'sets'): string => (layout === 'compact' ? `${base}:c:count` : `${base}:count`);

/** Largest power of two <= n (1 <= n < 2^31). */
export const pow2le = (n: number): number => 1 << (31 - Math.clz32(n));

/** Sub-bucket of address r in a table of n sub-buckets (n < 2^31). */
export function subBucketOf(r: number, n: number): number {
  if (n <= 1) return 0;
  const l2 = 1 << (31 - Math.clz32(n));
  const s = r & (2 * l2 - 1);
  return s >= n ? r & (l2 - 1) : s;
}

/** Depth of sub-bucket s in a table of n sub-buckets. */
export function depthOf(s: number, n: number): number {
  const d = 31 - Math.clz32(n);
  const l2 = 1 << d;
  return s < n - l2 || s >= l2 ? d + 1 : d;
}

/** 10-bit reversal table for the address. */
const REV10 = new Uint16Array(1024);
for (let i = 0; i < 1024; i++) {
  let r = 0;
  for (let b = 0; b < 10; b++) if (i & (1 << b)) r |= 1 << (9 - b);
  REV10[i] = r;
}

/** Address of the member whose high 32-bit word (digest bytes 4..7, little endian, unsigned) is `hi`. */
export function addressOfHigh(hi: number): number {
  const top20 = ((hi ^ 0x8000_0000) >>> 12) & 0xfffff;
  return (REV10[top20 & 1023]! << 10) | REV10[top20 >>> 10]!;
}

/** Address of a member given as its signed 64-bit value. */
export const addressOf = (member: bigint): number => addressOfHigh(Number((BigInt.asUintN(64, member) >> 32n) & 0xffff_ffffn));

/**
 * The smallest member that goes to the new half when sub-bucket p (depth d) splits: members >= it
 * move to sub-bucket p + 2^d, the others stay in p (both at depth d + 1).
 */
export function splitBoundary(p: number, d: number): bigint {
  // Bit i of p (i < d <= 19) is bit 63 - i of the boundary as unsigned, bit 63 - d is set and the
  // rest are 0: its top 20 bits are t20 below. Signed (the sign bit flipped), that is t20 x 2^44 - 2^63.
  // Straight-line small-integer arithmetic and one in-range BigInt: a loop over p's bits met new
  // branches (and 64-bit BigInt overflows) as tables reached new depths, long after the split path
  // was compiled, and each cost a recompile of that path.
  const t20 = REV10[p & 1023]! * 1024 + REV10[(p >>> 10) & 1023]! + (1 << (19 - d));
  return BigInt(t20 - 0x80000) << 44n;
}

/** Sub-buckets table t should have once the window holds K members. */
export function targetSubBuckets(t: number, K: number, T: number, alpha: number): number {
  const n = Math.floor((K / alpha + t) / T);
  return n < 1 ? 1 : n > MAX_SUB_BUCKETS ? MAX_SUB_BUCKETS : n;
}

/** Calls visit(t, target) for every table whose target grew when the window count went from kOld to kNew. */
export function crossings(kOld: number, kNew: number, T: number, alpha: number, visit: (t: number, target: number) => void): void {
  if (kNew <= kOld) return;
  const a = kOld / alpha;
  const b = kNew / alpha;
  const check = (t: number): void => {
    const before = targetSubBuckets(t, kOld, T, alpha);
    const after = targetSubBuckets(t, kNew, T, alpha);
    if (after > before) visit(t, after);
  };
  if (b - a >= T) {
    for (let t = 0; t < T; t++) check(t);
    return;
  }
  // t crosses when a multiple of T lies in (a + t, b + t]: t in [jT - b, jT - a)
  const j1 = Math.floor(a / T) + 1;
  for (let j = j1; j <= j1 + 1; j++) {
    const lo = Math.max(0, Math.ceil(j * T - b));
    const hi = Math.min(T - 1, Math.ceil(j * T - a) - 1);
    for (let t = lo; t <= hi; t++) check(t);
  }
}

/**
 * Lua placing a member: `name_of(tp, n, r)` = the sub-bucket key of address r in the table whose
 * prefix is tp and which has n sub-buckets; `addr_at(addrs, i)` = address of member i from the
 * 3-byte little-endian entries a command carries (the caller has the digests; see putAddress).
 */
export const PLACE_LUA: string = `local function pow2le(n)
  local l2 = 1
  while l2 * 2 <= n do l2 = l2 * 2 end
  return l2
end
local function log2i(l2)
  local d = 0
  while l2 > 1 do
    l2 = l2 / 2
    d = d + 1
  end
  return d
end
local function name_of(tp, n, r)
  if n <= 1 then return tp .. '0.0' end
  local l2 = pow2le(n)
  local s = r % (2 * l2)
  if s >= n then s = r % l2 end
  local d = log2i(l2)
  if s < n - l2 or s >= l2 then d = d + 1 end
  return tp .. s .. '.' .. d
end
local function addr_at(addrs, i)
  local b0, b1, b2 = string.byte(addrs, 3 * i - 2, 3 * i)
  return b0 + 256 * b1 + 65536 * b2
end
`;

/** Writes the 3-byte entry addr_at reads: address r, little endian, at buf[at..at+3). */
export function putAddress(buf: Uint8Array, at: number, r: number): void {
  buf[at] = r & 0xff;
  buf[at + 1] = (r >>> 8) & 0xff;
  buf[at + 2] = r >>> 16;
}

/**
 * The one split step both split scripts run: split_one(sk, tp, expect, mode, a4, a5) on the table
 * whose state key is sk and prefix TP is tp, which the caller read at `expect` sub-buckets. Modes:
 *   'empty' a4 = target, a5 = most splits: splits while the sub-bucket to split next does not
 *           exist (nothing to move: its name only becomes a tombstone)
 *   'seal'  a4 = the split boundary (splitBoundary) in decimal: one split, whose two halves the
 *           caller RESTOREd just before from a DUMP of the sub-bucket. Members the halves lack
 *           (added since the DUMP: writers do not stop; or all of them, where a RESTORE was
 *           refused) are moved one by one. The halves only ever hold members of the sub-bucket,
 *           each on its side of the boundary, so equal counts mean nothing is missing.
 *   'scan'  a4 = the split boundary (splitBoundary) in decimal: one split, members moved one by
 *           one (a sub-bucket that is not an intset, or whose payload the caller could not read)
 * Returns the sub-bucket count after the step; when the state is not `expect` it changes nothing
 * and returns the state (another writer split first).
 */
const SPLIT_STEP_LUA = `${PLACE_LUA}
-- m >= the boundary bs (bn: its double): compared as doubles, exactly (digit by digit) where the
-- double of a member rounds onto the boundary's (which is exact: a multiple of 2^43)
local function ge(m, bs, bn)
  local x = tonumber(m)
  if x ~= bn then return x > bn end
  local neg = string.byte(m, 1) == 45
  if neg ~= (string.byte(bs, 1) == 45) then return not neg end
  if #m ~= #bs then
    if neg then return #m < #bs end
    return #m > #bs
  end
  for i = 1, #m do
    local a, b = string.byte(m, i), string.byte(bs, i)
    if a ~= b then
      if neg then return a < b end
      return a > b
    end
  end
  return true
end
-- SADD of each member of list to lo or hi by the boundary
local function place_all(list, lo, hi, bs, bn)
  local stay, go = {}, {}
  for i = 1, #list do
    local m = list[i]
    if ge(m, bs, bn) then go[#go + 1] = m else stay[#stay + 1] = m end
  end
  for _, part in ipairs({ { lo, stay }, { hi, go } }) do
    local key, ms = part[1], part[2]
    local s = 1
    while s <= #ms do
      local e = s + 3999
      if e > #ms then e = #ms end
      redis.call('SADD', key, unpack(ms, s, e))
      s = e + 1
    end
  end
end
local function split_one(sk, tp, expect, mode, a4, a5)
  local v = redis.call('GET', sk)
  local n = 1
  if v then n = tonumber(v) end
  if n ~= expect then return n end
  if mode == 'empty' then
    local target = tonumber(a4)
    local budget = tonumber(a5)
    while n < target and budget > 0 do
      local l2 = pow2le(n)
      local src = tp .. (n - l2) .. '.' .. log2i(l2)
      if redis.call('EXISTS', src) == 1 then break end
      redis.call('SET', src, '${TOMBSTONE}')
      n = n + 1
      budget = budget - 1
    end
    if n ~= expect then redis.call('SET', sk, n) end
    return n
  end
  local l2 = pow2le(n)
  local d = log2i(l2)
  local p = n - l2
  local src = tp .. p .. '.' .. d
  local lo = tp .. p .. '.' .. (d + 1)
  local hi = tp .. (p + l2) .. '.' .. (d + 1)
  local bn = tonumber(a4)
  if mode == 'seal' then
    local card = redis.call('SCARD', src)
    if card ~= redis.call('SCARD', lo) + redis.call('SCARD', hi) then place_all(redis.call('SDIFF', src, lo, hi), lo, hi, a4, bn) end
  else
    place_all(redis.call('SMEMBERS', src), lo, hi, a4, bn)
  end
  redis.call('SET', src, '${TOMBSTONE}')
  redis.call('SET', sk, n + 1)
  return n + 1
end
`;

/**
 * SPLIT: one split step (split_one) of one table. KEYS[1] = the table's state key. ARGV[1] = the
 * table prefix TP, ARGV[2] = the sub-bucket count the caller read, ARGV[3] = the mode, ARGV[4]
 * and ARGV[5] its arguments. Returns the sub-bucket count after the call. The `#!lua` shebang
 * makes Redis refuse the whole script before it runs when it is out of memory.
 */
export const SPLIT_LUA: string = `#!lua
${SPLIT_STEP_LUA}
return split_one(KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5])
`;

/**
 * SEALS: the seals of several tables' splits in one call, each as SPLIT's 'seal' mode would run
 * it. KEYS[i] = table i's state key; ARGV[3i-2] = its prefix TP, ARGV[3i-1] = the sub-bucket count
 * the caller read, ARGV[3i] = the split boundary. Returns each table's sub-bucket count after its
 * seal, in order. One call in place of one per table: a script call's own cost in Redis (its
 * arguments and functions set up again) was about a fifth of a seal's, 13-14 us with a call per
 * table against 10-12 us with 32 seals a call, in the same 1M-key runs; the rest is the seal's
 * own commands.
 */
export const SEALS_LUA: string = `#!lua
${SPLIT_STEP_LUA}
local out = {}
for i = 1, #KEYS do
  out[i] = split_one(KEYS[i], ARGV[3 * i - 2], tonumber(ARGV[3 * i - 1]), 'seal', ARGV[3 * i])
end
return out
`;

/**
 * COUNT: KEYS[1] = a table's state key, ARGV[1] = its prefix TP, ARGV[2] = the sub-bucket count
 * an earlier call on this table saw (-1 on the first), ARGV[3] = the first sub-bucket to count,
 * ARGV[4] = the most sub-buckets to count in this call. Returns { members, the largest
 * sub-bucket's members, sub-buckets n, the next sub-bucket to count } over that range, or
 * { -1, 0, n, 0 } when n is no longer the count ARGV[2] names (a split ran between two calls: the
 * caller starts the table again). A table of millions of sub-buckets is so counted in slices of a
 * few ms each (other clients of a shared Redis are served between them), yet exactly: every slice
 * reads the state with the sub-buckets it counts.
 */
export const COUNT_LUA: string = `#!lua flags=no-writes
local v = redis.call('GET', KEYS[1])
local n = 1
if v then n = tonumber(v) end
local expect = tonumber(ARGV[2])
if expect >= 0 and n ~= expect then return { -1, 0, n, 0 } end
local tp = ARGV[1]
${PLACE_LUA}
local l2 = pow2le(n)
local d = log2i(l2)
local from = tonumber(ARGV[3])
local last = from + tonumber(ARGV[4]) - 1
if last > n - 1 then last = n - 1 end
local sum, most = 0, 0
for s = from, last do
  local dd = d
  if n > 1 and (s < n - l2 or s >= l2) then dd = d + 1 end
  local c = redis.call('SCARD', tp .. s .. '.' .. dd)
  sum = sum + c
  if c > most then most = c end
end
return { sum, most, n, last + 1 }
`;
