// Where loaded batches go. The loader only needs "add these members to this (window, bucket),
// idempotently, and tell me when it is acknowledged"; the Redis layouts implement that.
import type { Cluster, Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { ErrorCodes, HashGateError } from '../errors.js';
import { bucketKey, hllKey, metaField, metaKey } from '../dedup/layout.js';
import { isCluster } from '../redis/client.js';
import { RawCommand, RespWriter } from '../redis/resp.js';
import { LuaScript, luaPfaddRest, runScript, runScriptWire } from '../redis/scripts.js';
import { intsetLimitOf, memberLow20, putLow20, splitLoad, TABLE_LUA } from '../dedup/growth.js';
import { viewOf } from './buffers.js';
import { int64Decimal } from '../redis/int64.js';

/** One batch of one (window, bucket): key i = keys[keyOffsets[i] .. keyOffsets[i+1]). */
export interface SinkBatch {
  window: string;
  /** The bucket of every row, unless `rowBuckets` is given (a batch spanning a group of buckets). */
  bucket: number;
  rowBuckets?: Uint32Array;
  count: number;
  keys: Uint8Array;
  keyOffsets: Uint32Array;
}

export interface LoadSink {
  readonly name: string;
  /** 'compact' sinks get 8 digest bytes per key, bucketed by digest bytes 8..15; default raw keys. */
  readonly layout?: 'sets' | 'compact';
  /** Called once per window before its first batch (e.g. to record the bucket count). */
  prepareWindow?(window: string): Promise<void>;
  /** Adds every member; must be idempotent (a retried batch re-adds). Resolves with the number of
   *  members Redis reported as new (best effort), rejects when the batch was not acknowledged. */
  add(batch: SinkBatch): Promise<number>;
  close(): Promise<void>;
}

/** Retry only what can heal by itself; WRONGTYPE, NOAUTH, NOPERM and the like fail at once. */
export function isTransient(err: unknown): boolean {
  const e = err as { code?: string; message?: string; name?: string };
  const msg = `${e?.name ?? ''} ${e?.code ?? ''} ${e?.message ?? ''}`;
  return /ECONNRESET|ECONNREFUSED|ECONNABORTED|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTCONN|Connection is closed|Stream isn't writeable|MaxRetriesPerRequest|enableOfflineQueue|Command timed out|timed out|LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY|OOM|Failed to refresh slots|None of startup nodes/i.test(msg);
}

/** Room the RESP bulk strings of `n` members take at most: int64 decimals, or `keyBytes` of raw keys. */
const membersRoom = (compact: boolean, n: number, keyBytes: number): number => (compact ? n * 27 : keyBytes + n * 15);

/**
 * Appends the RESP bulk strings of a batch's members (or of its `rows`) to `w`: raw key bytes
 * ('sets') or int64 decimals of the 8 digest bytes ('compact'). `offsOut[j]` gets where member j
 * starts, relative to where the first one starts.
 */
export function encodeMembers(batch: SinkBatch, compact: boolean, w: RespWriter, rows?: Uint32Array, offsOut?: Uint32Array): void {
  const n = rows ? rows.length : batch.count;
  const ko = batch.keyOffsets;
  const src = batch.keys;
  const sdv = viewOf(src);
  const base = w.p;
  for (let j = 0; j < n; j++) {
    if (offsOut) offsOut[j] = w.p - base;
    const i = rows ? rows[j]! : j;
    if (compact) w.int64(sdv, ko[i]!);
    else w.bulk(src, ko[i]!, ko[i + 1]!, sdv);
  }
  if (offsOut) offsOut[n] = w.p - base;
}

/** `cmd key member...` with the members already in RESP form (`members[s..e)`, `count` of them). */
function command(cmd: string, key: string, count: number, members: Buffer, s: number, e: number): Buffer {
  const w = new RespWriter(32 + Buffer.byteLength(key) + e - s);
  w.array(count + 2);
  w.str(cmd);
  w.str(key);
  w.raw(members, s, e);
  return w.bytes();
}

/**
 * Adds group after group (each group's members to its bucket) and counts what was new: the body
 * of GROUP_ADD and NODE_GROUP_ADD. `alpha` > 0: compact buckets that split as they fill
 * (growth.ts); 0: plain sets.
 */
const GROUPS_LUA = `local added = 0
local first = p
if alpha > 0 and g > 1 and batch_states then read_states(keyOf, g) end
for k = 1, g do
  local c = tonumber(ARGV[cs + k])
  local key = keyOf(k)
  local pre, tn, tk, l2, n0
  if alpha > 0 then pre, tn, tk, l2, n0 = open(key, c) else tn = 1 end
  local a = 0
  if tn == 1 then
    while c > 0 do
      local m = c
      if m > 4000 then m = 4000 end
      local e = p + m - 1
      if m == 1 then
        a = a + redis.call('SADD', key, ARGV[p])
      else
        a = a + redis.call('SADD', key, unpack(ARGV, p, e))
      end
      p = e + 1
      c = c - m
    end
  else
    -- members grouped by sub-bucket first: one SADD per sub-bucket, not one per member
    local by = {}
    for j = p, p + c - 1 do
      local m = ARGV[j]
      local sk = place(key, pre, tn, l2, low_at(lows, j - first + 1))
      local t = by[sk]
      if t then t[#t + 1] = m else by[sk] = { m } end
    end
    for sk, t in pairs(by) do a = a + callall('SADD', sk, t, #t) end
    p = p + c
  end
  if alpha > 0 then close(pre, tn, tk, n0, a) end
  added = added + a
end
write_states()`;

/**
 * KEYS = bucket keys of G buckets [+ the HyperLogLog key when ARGV[2] == '1'];
 * ARGV = G, hll flag, alpha (see GROUPS_LUA), lows (3 bytes of low bits per member, as the dedup
 * scripts take them, see putLow20; empty for 'sets'), member count of bucket 1..G, then every
 * bucket's members back to back.
 * Returns how many members were new. One call carries many buckets' SADDs: with many buckets a
 * batch holds about one row per bucket, and a command per row is what limits the load. The
 * `#!lua` shebang (Redis 7) makes Redis refuse the whole script before it runs when it is out of
 * memory; SADD is idempotent, so a retried call re-adds harmlessly. Chunks of 4000 members stay
 * under Lua's unpack limit.
 */
const GROUP_ADD = new LuaScript(`#!lua
local g = tonumber(ARGV[1])
local alpha = tonumber(ARGV[3])
local lows = ARGV[4]
${TABLE_LUA}
local cs = 4
local p = g + 5
local function keyOf(k) return KEYS[k] end
local batch_states = true
${GROUPS_LUA}
if ARGV[2] == '1' then
  local hk = KEYS[g + 1]
${luaPfaddRest('hk', 'g + 5')}
end
return added
`);

/**
 * GROUP_ADD for one Cluster master: no declared keys; ARGV = G, alpha, lows, member count of
 * bucket 1..G, the G bucket keys, then the members. `allow-cross-slot-keys` lets one call touch buckets
 * of many slots; Redis still refuses (with an error, before writing that key) any key whose slot
 * the node does not serve right now (moved, or migrating), so a stale slot map never puts a member
 * on the wrong node: the caller re-sends that part bucket by bucket, routed by the Cluster client,
 * which follows the redirections.
 */
const NODE_GROUP_ADD = new LuaScript(`#!lua flags=allow-cross-slot-keys
local g = tonumber(ARGV[1])
local alpha = tonumber(ARGV[2])
local lows = ARGV[3]
${TABLE_LUA}
local cs = 3
local p = 2 * g + 4
local function keyOf(k) return ARGV[g + k + 3] end
-- tables of many slots: their states are read and written one by one (no cross-slot MGET/MSET)
local batch_states = false
${GROUPS_LUA}
return added
`);

/** Most members one GROUP_ADD call carries, so no call of ours keeps a shared Redis busy for long. */
export const GROUP_ADD_MAX_ROWS = 1024;

export type LoaderLayout = 'sets' | 'compact';

/** Key names come from the dedup store's layout module, so loader and store never disagree. */
export const layoutKeys = {
  bucket: (layout: LoaderLayout, prefix: string, window: string, bucket: number): string => bucketKey({ layout, prefix }, window, bucket),
  hll: (layout: LoaderLayout, prefix: string, window: string): string => hllKey(prefix, window, layout),
  meta: (prefix: string, window: string): string => metaKey(prefix, window),
  metaField: (layout: LoaderLayout): string => metaField(layout),
};

export interface RedisLayoutSinkOptions {
  layout: LoaderLayout;
  prefix: string;
  buckets: number;
  /** Also PFADD members to the window's HyperLogLog (what `hashgate stats` reads). Default true. */
  hll?: boolean;
  /** Quit the client on close(). Default true. */
  ownsClient?: boolean;
}

/**
 * Writes batches in the dedup store's layouts. 'sets' keeps raw keys (key
 * `{prefix}:{window}:{bucket}`, members = raw key bytes) so a Java service using it reads and
 * writes the same sets; 'compact' stores 64-bit digest members in intset buckets. The loader gives
 * 'compact' batches whose "keys" are the 8 digest bytes, bucketed by digest bytes 8..15.
 */
export class RedisLayoutSink implements LoadSink {
  readonly name: string;
  readonly layout: LoaderLayout;
  private readonly hll: boolean;
  private readonly prepared = new Map<string, Promise<void>>();
  /** Members per sub-bucket before a compact bucket splits (growth.ts); read in prepareWindow. */
  private alpha = String(splitLoad(512));

  constructor(readonly redis: Redis | Cluster, readonly opts: RedisLayoutSinkOptions) {
    this.layout = opts.layout;
    this.hll = opts.hll ?? true;
    this.name = `redis-${opts.layout}`;
  }

  /** Bucket count already recorded for `window` (first writer wins), if any. */
  async recordedBuckets(window: string): Promise<number | undefined> {
    const v = await this.redis.hget(layoutKeys.meta(this.opts.prefix, window), layoutKeys.metaField(this.layout));
    return v === null ? undefined : Number(v);
  }

  /** Records our bucket count for `window`, refusing to mix two bucketings in one window. */
  prepareWindow(window: string): Promise<void> {
    let p = this.prepared.get(window);
    if (!p) {
      p = (async () => {
        const mk = layoutKeys.meta(this.opts.prefix, window);
        const field = layoutKeys.metaField(this.layout);
        if (this.layout === 'compact') this.alpha = String(splitLoad(await intsetLimitOf(this.redis)));
        await this.redis.hsetnx(mk, field, String(this.opts.buckets));
        const v = Number(await this.redis.hget(mk, field));
        if (v !== this.opts.buckets) {
          throw new HashGateError(
            ErrorCodes.INVALID_OPTION,
            `--buckets: window ${window} of prefix ${this.opts.prefix} already uses ${v} ${this.layout} buckets (${mk}); load it with --buckets ${v}`,
            { details: { window, recorded: v, requested: this.opts.buckets } },
          );
        }
      })();
      p.catch(() => this.prepared.delete(window));
      this.prepared.set(window, p);
    }
    return p;
  }

  /** Holds socket writes until uncork(): the commands of one batch leave in one writev. */
  private cork(): () => void {
    const streams: { cork(): void; uncork(): void }[] = [];
    const r = this.redis as unknown as { stream?: { cork(): void; uncork(): void }; nodes?: (role: string) => { stream?: { cork(): void; uncork(): void } }[] };
    if (typeof r.nodes === 'function') for (const n of r.nodes('master')) n.stream && streams.push(n.stream);
    else if (r.stream) streams.push(r.stream);
    for (const st of streams) st.cork();
    return () => {
      for (const st of streams) st.uncork();
    };
  }

  /**
   * A batch spanning many buckets. Standalone Redis: one GROUP_ADD call per GROUP_ADD_MAX_ROWS
   * rows. Cluster (buckets live on different slots, which one script may not touch): one SADD
   * per bucket, all written at once, and one PFADD for the whole batch.
   */
  private async addGrouped(batch: SinkBatch, rb: Uint32Array): Promise<number> {
    const { layout } = this.opts;
    const n = batch.count;
    const compact = layout === 'compact';
    // every member is encoded once; commands copy their rows' encodings
    const offs = new Uint32Array(n + 1);
    const enc = new RespWriter(membersRoom(compact, n, batch.keyOffsets[n]! - batch.keyOffsets[0]!));
    encodeMembers(batch, compact, enc, undefined, offs);
    const all = enc.bytes();
    const allView = viewOf(all);
    // order rows by bucket: bucket * 2^20 + row sorts as one Float64Array (rows < 2^20)
    const order = new Float64Array(n);
    for (let i = 0; i < n; i++) order[i] = rb[i]! * 1048576 + i;
    order.sort();
    if (!isCluster(this.redis)) return this.addScripted(batch, all, allView, offs, order);
    return this.addClusterGrouped(batch, all, allView, offs, order);
  }

  /** `[start, end)` runs of `order` (sorted by bucket), one per bucket. */
  private static runs(order: Float64Array): number[] {
    const out: number[] = [];
    const n = order.length;
    for (let a = 0; a < n; ) {
      const bucket = Math.floor(order[a]! / 1048576);
      let b = a + 1;
      while (b < n && Math.floor(order[b]! / 1048576) === bucket) b++;
      out.push(a, b);
      a = b;
    }
    return out;
  }

  /**
   * One command per run (bucket) through the Cluster client, which follows MOVED/ASK: a SADD, or
   * for compact buckets (which may have split) GROUP_ADD with that one bucket.
   */
  private saddRuns(batch: SinkBatch, all: Buffer, allView: DataView, offs: Uint32Array, order: Float64Array, runs: number[]): Promise<number> {
    const { layout, prefix } = this.opts;
    const r = this.redis as Cluster;
    const adds: Promise<unknown>[] = [];
    const dv = viewOf(batch.keys);
    for (let k = 0; k < runs.length; k += 2) {
      const a = runs[k]!;
      const b = runs[k + 1]!;
      const bucket = Math.floor(order[a]! / 1048576);
      if (layout === 'compact') {
        const key = layoutKeys.bucket(layout, prefix, batch.window, bucket);
        const members: string[] = [];
        const lows = Buffer.allocUnsafe(3 * (b - a));
        for (let j = a; j < b; j++) {
          const o = batch.keyOffsets[order[j]! % 1048576]!;
          members.push(int64Decimal(dv, o));
          putLow20(lows, 3 * (j - a), memberLow20(dv, o));
        }
        adds.push(runScript(r, GROUP_ADD, 1, [key, '1', '0', this.alpha, lows, String(b - a), ...members]));
        continue;
      }
      let bytes = 0;
      for (let j = a; j < b; j++) {
        const row = order[j]! % 1048576;
        bytes += offs[row + 1]! - offs[row]!;
      }
      const key = layoutKeys.bucket(layout, prefix, batch.window, bucket);
      const w = new RespWriter(32 + Buffer.byteLength(key) + bytes);
      w.array(b - a + 2);
      w.str('SADD');
      w.str(key);
      for (let j = a; j < b; j++) {
        const row = order[j]! % 1048576;
        w.raw(all, offs[row]!, offs[row + 1]!, allView);
      }
      adds.push(r.sendCommand(new RawCommand('sadd', [key], w.bytes())) as Promise<unknown>);
    }
    return Promise.all(adds).then((res) => res.reduce<number>((x, v) => x + Number(v), 0));
  }

  /**
   * Cluster: the buckets of each master (by the client's slot map) go to it as NODE_GROUP_ADD
   * calls of up to GROUP_ADD_MAX_ROWS rows; a call the node refuses (slot moved or migrating,
   * unknown owner) is re-sent as plain SADDs through the Cluster client. SADD is idempotent, so
   * re-adding what a refused call already wrote is harmless (its "new" count is then low).
   */
  private async addClusterGrouped(batch: SinkBatch, all: Buffer, allView: DataView, offs: Uint32Array, order: Float64Array): Promise<number> {
    const { layout, prefix } = this.opts;
    const cl = this.redis as Cluster;
    const keyView = viewOf(batch.keys);
    const internals = cl as unknown as { slots?: (string[] | undefined)[]; connectionPool?: { getInstanceByKey(k: string): Redis | undefined } };
    const runs = RedisLayoutSink.runs(order);
    const perNode = new Map<Redis, { runs: number[]; keys: string[] }>();
    const orphan: number[] = [];
    for (let k = 0; k < runs.length; k += 2) {
      const key = layoutKeys.bucket(layout, prefix, batch.window, Math.floor(order[runs[k]!]! / 1048576));
      const nodeKey = internals.slots?.[calculateSlot(key)]?.[0];
      const node = nodeKey === undefined ? undefined : internals.connectionPool?.getInstanceByKey(nodeKey);
      if (node === undefined) {
        orphan.push(runs[k]!, runs[k + 1]!);
        continue;
      }
      let g = perNode.get(node);
      if (g === undefined) perNode.set(node, (g = { runs: [], keys: [] }));
      g.runs.push(runs[k]!, runs[k + 1]!);
      g.keys.push(key);
    }
    const calls: Promise<number>[] = [];
    const uncork = this.cork();
    try {
      if (orphan.length > 0) calls.push(this.saddRuns(batch, all, allView, offs, order, orphan));
      for (const [node, g] of perNode) {
        for (let s = 0; s < g.keys.length; ) {
          // whole buckets up to GROUP_ADD_MAX_ROWS rows per call
          let e = s;
          let rows = 0;
          let bytes = 0;
          while (e < g.keys.length) {
            const n = g.runs[2 * e + 1]! - g.runs[2 * e]!;
            if (e > s && rows + n > GROUP_ADD_MAX_ROWS) break;
            rows += n;
            bytes += g.keys[e]!.length + 16;
            for (let j = g.runs[2 * e]!; j < g.runs[2 * e + 1]!; j++) {
              const row = order[j]! % 1048576;
              bytes += offs[row + 1]! - offs[row]!;
            }
            e++;
          }
          const w = new RespWriter(96 + bytes + (e - s) * 16 + 3 * rows);
          w.array(3 + 3 + 2 * (e - s) + rows);
          w.str('EVALSHA');
          w.str(NODE_GROUP_ADD.sha);
          w.uintStr(0);
          w.uintStr(e - s);
          w.str(this.alpha);
          if (layout === 'compact') {
            let at = w.bulkSpace(3 * rows);
            for (let k = s; k < e; k++) {
              for (let j = g.runs[2 * k]!; j < g.runs[2 * k + 1]!; j++, at += 3) putLow20(w.buf, at, memberLow20(keyView, batch.keyOffsets[order[j]! % 1048576]!));
            }
          } else w.str('');
          for (let k = s; k < e; k++) w.uintStr(g.runs[2 * k + 1]! - g.runs[2 * k]!);
          for (let k = s; k < e; k++) w.str(g.keys[k]!);
          for (let k = s; k < e; k++) {
            for (let j = g.runs[2 * k]!; j < g.runs[2 * k + 1]!; j++) {
              const row = order[j]! % 1048576;
              w.raw(all, offs[row]!, offs[row + 1]!, allView);
            }
          }
          const part = g.runs.slice(2 * s, 2 * e);
          calls.push(
            runScriptWire(node, NODE_GROUP_ADD, w.bytes()).then(
              (v) => Number(v),
              // refused keys (moved/migrating slot): plain SADDs follow the redirection; a
              // connection error fails those too, and the batch is retried as a whole
              () => this.saddRuns(batch, all, allView, offs, order, part),
            ),
          );
          s = e;
        }
      }
      if (this.hll) {
        const hk = layoutKeys.hll(layout, prefix, batch.window);
        const n = order.length;
        calls.push((cl.sendCommand(new RawCommand('pfadd', [hk], command('PFADD', hk, n, all, 0, all.length))) as Promise<unknown>).then(() => 0));
      }
    } finally {
      uncork();
    }
    const res = await Promise.all(calls);
    let added = 0;
    for (const v of res) added += v;
    return added;
  }

  /** GROUP_ADD calls for rows `order` (sorted by bucket) of a batch whose members are encoded in `all`. */
  private async addScripted(batch: SinkBatch, all: Buffer, allView: DataView, offs: Uint32Array, order: Float64Array): Promise<number> {
    const { layout, prefix } = this.opts;
    const n = order.length;
    const r = this.redis as Redis;
    const keyView = viewOf(batch.keys);
    const hk = this.hll ? layoutKeys.hll(layout, prefix, batch.window) : undefined;
    const calls: Promise<Buffer>[] = [];
    const keys: string[] = [];
    const counts: number[] = [];
    const uncork = this.cork();
    try {
      for (let s = 0; s < n; ) {
        // one call: whole buckets up to GROUP_ADD_MAX_ROWS rows (a bigger bucket gets a call to itself)
        keys.length = 0;
        counts.length = 0;
        let e = s;
        let keyBytes = 0;
        while (e < n) {
          const bucket = Math.floor(order[e]! / 1048576);
          let b = e + 1;
          while (b < n && Math.floor(order[b]! / 1048576) === bucket) b++;
          if (e > s && b - s > GROUP_ADD_MAX_ROWS) break;
          const key = layoutKeys.bucket(layout, prefix, batch.window, bucket);
          keys.push(key);
          counts.push(b - e);
          keyBytes += key.length + 16;
          e = b;
        }
        let bytes = 0;
        for (let j = s; j < e; j++) {
          const row = order[j]! % 1048576;
          bytes += offs[row + 1]! - offs[row]!;
        }
        const g = keys.length;
        const numKeys = g + (hk === undefined ? 0 : 1);
        const w = new RespWriter(96 + keyBytes + (hk?.length ?? 0) + g * 16 + bytes + 3 * (e - s));
        w.array(3 + numKeys + 4 + g + (e - s));
        w.str('EVALSHA');
        w.str(GROUP_ADD.sha);
        w.uintStr(numKeys);
        for (const k of keys) w.str(k);
        if (hk !== undefined) w.str(hk);
        w.uintStr(g);
        w.str(hk === undefined ? '0' : '1');
        w.str(this.alpha);
        if (layout === 'compact') {
          let at = w.bulkSpace(3 * (e - s));
          for (let j = s; j < e; j++, at += 3) putLow20(w.buf, at, memberLow20(keyView, batch.keyOffsets[order[j]! % 1048576]!));
        } else w.str('');
        for (const c of counts) w.uintStr(c);
        for (let j = s; j < e; j++) {
          const row = order[j]! % 1048576;
          w.raw(all, offs[row]!, offs[row + 1]!, allView);
        }
        calls.push(runScriptWire(r, GROUP_ADD, w.bytes()));
        s = e;
      }
    } finally {
      uncork();
    }
    const res = await Promise.all(calls);
    let added = 0;
    for (const v of res) added += Number(v);
    return added;
  }

  async add(batch: SinkBatch): Promise<number> {
    // while the client is reconnecting, fail at once: the loader's backoff decides when to retry,
    // instead of every batch queueing behind ioredis' reconnect attempts
    const st = this.redis.status;
    if (st === 'reconnecting' || st === 'close' || st === 'end') throw new Error(`Connection is closed (client ${st})`);
    if (batch.rowBuckets) return this.addGrouped(batch, batch.rowBuckets);
    // a compact bucket may have split: only the script knows which sub-bucket a member goes to
    if (this.layout === 'compact') return this.addGrouped(batch, new Uint32Array(batch.count).fill(batch.bucket));
    const { layout, prefix } = this.opts;
    const key = layoutKeys.bucket(layout, prefix, batch.window, batch.bucket);
    // members are encoded once, right after the SADD header; PFADD copies them
    const compact = layout === 'compact';
    const w = new RespWriter(32 + Buffer.byteLength(key) + membersRoom(compact, batch.count, batch.keyOffsets[batch.count]! - batch.keyOffsets[0]!));
    w.array(batch.count + 2);
    w.str('SADD');
    w.str(key);
    const m0 = w.p;
    encodeMembers(batch, compact, w);
    const wire = w.bytes();
    const r = this.redis as Redis;
    if (this.hll) {
      const hk = layoutKeys.hll(layout, prefix, batch.window);
      const uncork = this.cork();
      let sadd: Promise<unknown>;
      let pfadd: Promise<unknown>;
      try {
        sadd = r.sendCommand(new RawCommand('sadd', [key], wire)) as Promise<unknown>;
        pfadd = r.sendCommand(new RawCommand('pfadd', [hk], command('PFADD', hk, batch.count, wire, m0, wire.length))) as Promise<unknown>;
      } finally {
        uncork();
      }
      const [added] = await Promise.all([sadd, pfadd]);
      return Number(added);
    }
    return Number(await r.sendCommand(new RawCommand('sadd', [key], wire)));
  }

  async close(): Promise<void> {
    if (this.opts.ownsClient === false) return;
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}
