// Redis IdStore. One Lua script per upsert makes check-and-insert atomic against every other
// client, so two processes upserting the same record see exactly one 'new' (a batch of merged
// upserts is one script too, its plans applied in order). The script touches the
// config epoch, the buckets, the doc and the collision keys together, so on a Redis Cluster all of
// one store's keys live in one slot: a keyPrefix without a `{tag}` is used as `{keyPrefix}`. One
// registry is therefore served by one master; independent registries (other prefixes) spread over
// the others. Every script names P:cfg as its key so the client routes it to that master.
//
// Keys (P = keyPrefix):
//   P:b:<lid>  hash physicalId -> canonical raw   ('!r' field = redirected to SHA-256 by repair)
//   P:d:<pid>  hash lid, alg, c(created), u(updated), x(collision 0/1), w(collision with)
//   P:a:<pid>  alias: physical id merged into another by repair
//   P:col      hash collisionId -> JSON CollisionRecord;  P:collided  set of logical ids
//   P:stats    hash docs, collisions;                     P:cfg  hash epoch, active
import type { Cluster, Redis } from 'ioredis';
import { HashGateError, ErrorCodes } from '../errors.js';
import { LuaScript, runScript } from '../redis/scripts.js';
import type { CollisionRecord, IdPage, IdStore, IdStoreConfig, IdStoreStats, StoredDoc, UpsertOutcome, UpsertPlan } from './types.js';

// One plan, the body of both upsert scripts: every plan of a batch is checked and written
// exactly as a lone upsert would be, so a batch answers like the same upserts run in order.
const UPSERT_ONE = `
local function upsertOne(P, wantEpoch, raw, pid, colId, alg, now, lids)
local epoch = redis.call('HGET', P .. ':cfg', 'epoch') or '0'
if epoch ~= wantEpoch then
  return { 'stale', epoch, redis.call('HGET', P .. ':cfg', 'active') or '' }
end
local primary
for i = 1, #lids do
  local lid = lids[i]
  local all = redis.call('HGETALL', P .. ':b:' .. lid)
  if i == 1 then primary = all end
  for j = 1, #all, 2 do
    if all[j + 1] == raw and all[j] ~= '!r' then
      redis.call('HSET', P .. ':d:' .. all[j], 'u', now)
      return { 'duplicate', all[j], lid }
    end
  end
end
local lid = lids[1]
local bk = P .. ':b:' .. lid
local first = nil
for j = 1, #primary, 2 do
  if primary[j] == '!r' then return { 'redirect' } end
  if not first then first = { primary[j], primary[j + 1] } end
end
redis.call('HSET', bk, pid, raw)
redis.call('HINCRBY', P .. ':stats', 'docs', 1)
if not first then
  redis.call('HSET', P .. ':d:' .. pid, 'lid', lid, 'alg', alg, 'c', now, 'u', now, 'x', '0')
  return { 'new', pid, lid }
end
redis.call('HSET', P .. ':d:' .. pid, 'lid', lid, 'alg', alg, 'c', now, 'u', now, 'x', '1', 'w', first[1])
local rec = cjson.encode({
  id = colId, hashId = lid, algorithm = alg, doc1Id = first[1], doc2Id = pid,
  doc1Snapshot = first[2], doc2Snapshot = raw, detectedAt = tonumber(now),
  status = 'pending', resolvedAt = cjson.null,
})
redis.call('HSET', P .. ':col', colId, rec)
redis.call('SADD', P .. ':collided', lid)
redis.call('HINCRBY', P .. ':stats', 'collisions', 1)
return { 'collision', pid, lid, rec }
end
`;

// ARGV: P, epoch, raw, pid, colId, alg, now, #lids, lids...
const UPSERT = new LuaScript(`${UPSERT_ONE}
local lids = {}
for i = 1, tonumber(ARGV[8]) do lids[i] = ARGV[8 + i] end
return upsertOne(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], lids)
`);

// ARGV: P, #plans, then per plan: epoch, raw, pid, colId, alg, now, #lids, lids...
// One script for the whole batch: one round trip, and the plans run in order with nothing between.
const UPSERT_MANY = new LuaScript(`${UPSERT_ONE}
local P, out, a = ARGV[1], {}, 3
for k = 1, tonumber(ARGV[2]) do
  local n = tonumber(ARGV[a + 6])
  local lids = {}
  for i = 1, n do lids[i] = ARGV[a + 6 + i] end
  out[k] = upsertOne(P, ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], lids)
  a = a + 7 + n
end
return out
`);

// ARGV: P, lid, keep, drop...
const MERGE = new LuaScript(`
local P, lid, keep = ARGV[1], ARGV[2], ARGV[3]
for i = 4, #ARGV do
  local pid = ARGV[i]
  if pid ~= keep then
    redis.call('HDEL', P .. ':b:' .. lid, pid)
    if redis.call('DEL', P .. ':d:' .. pid) == 1 then redis.call('HINCRBY', P .. ':stats', 'docs', -1) end
    redis.call('SET', P .. ':a:' .. pid, keep)
  end
end
return 1
`);

// ARGV: P, lid, pid, newLid, raw, alg
const MOVE = new LuaScript(`
local P, lid, pid, newLid, raw, alg = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
redis.call('HSET', P .. ':b:' .. lid, '!r', '1')
local dk = P .. ':d:' .. pid
local cur = redis.call('HGET', dk, 'lid')
if not cur or cur == newLid then return 0 end
redis.call('HDEL', P .. ':b:' .. lid, pid)
redis.call('HSET', P .. ':b:' .. newLid, pid, raw)
redis.call('HSET', dk, 'lid', newLid, 'alg', alg, 'x', '0')
redis.call('HDEL', dk, 'w')
return 1
`);

const ESCALATE = new LuaScript(`
local k = ARGV[1] .. ':cfg'
local active = redis.call('HGET', k, 'active') or ''
if active ~= ARGV[2] then
  redis.call('HSET', k, 'active', ARGV[2])
  redis.call('HINCRBY', k, 'epoch', 1)
end
return { redis.call('HGET', k, 'epoch'), redis.call('HGET', k, 'active') }
`);

function toOutcome(out: string[]): UpsertOutcome {
  const [status, a, b, rec] = out;
  if (status === 'stale') return { status, epoch: Number(a), active: b ?? '' };
  if (status === 'redirect') return { status };
  const o: UpsertOutcome = { status: status as 'new' | 'duplicate' | 'collision', physicalId: a as string, logicalId: b as string };
  if (rec) o.record = JSON.parse(rec) as CollisionRecord;
  return o;
}


export interface RedisIdStoreOptions {
  /** A standalone client or a Cluster (see the header: one slot per store). */
  client: Redis | Cluster;
  keyPrefix: string;
}

export class RedisIdStore implements IdStore {
  readonly kind = 'redis';
  private readonly r: Redis | Cluster;
  private readonly P: string;

  constructor(opts: RedisIdStoreOptions) {
    this.r = opts.client;
    const cluster = (opts.client as Cluster).isCluster === true;
    this.P = cluster && !/\{[^}]+\}/.test(opts.keyPrefix) ? `{${opts.keyPrefix}}` : opts.keyPrefix;
  }

  private async call<T>(op: string, f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (e) {
      throw new HashGateError(ErrorCodes.STORE, `ids ${op} failed: ${(e as Error).message}`, { cause: e });
    }
  }

  async upsert(p: UpsertPlan): Promise<UpsertOutcome> {
    const out = (await this.call('upsert', () =>
      runScript(this.r, UPSERT, 1, [this.P + ':cfg', this.P, String(p.epoch), p.raw, p.physicalId, p.collisionId, p.algorithm, String(p.now), String(p.lids.length), ...p.lids]),
    )) as string[];
    return toOutcome(out);
  }

  /**
   * One script call for the batch. All keys of a store share one hash slot (see the header), so
   * on a Cluster the batch is one slot, one master and one round trip too.
   */
  async upsertMany(plans: readonly UpsertPlan[]): Promise<UpsertOutcome[]> {
    if (plans.length === 0) return [];
    const args: string[] = [this.P, String(plans.length)];
    for (const p of plans) args.push(String(p.epoch), p.raw, p.physicalId, p.collisionId, p.algorithm, String(p.now), String(p.lids.length), ...p.lids);
    const out = (await this.call('upsert', () => runScript(this.r, UPSERT_MANY, 1, [this.P + ':cfg', ...args]))) as string[][];
    return out.map(toOutcome);
  }

  private toDoc(pid: string, h: Record<string, string>, raw: string): StoredDoc {
    const d: StoredDoc = {
      physicalId: pid, logicalId: h.lid ?? '', raw, algorithm: h.alg ?? '',
      createdAt: Number(h.c), updatedAt: Number(h.u), collision: h.x === '1',
    };
    if (h.w) d.collisionWith = h.w;
    return d;
  }

  async getDoc(physicalId: string): Promise<StoredDoc | undefined> {
    return this.call('get', async () => {
      const pid = (await this.r.get(`${this.P}:a:${physicalId}`)) ?? physicalId;
      const h = await this.r.hgetall(`${this.P}:d:${pid}`);
      if (!h.lid) return undefined;
      const raw = await this.r.hget(`${this.P}:b:${h.lid}`, pid);
      return raw === null ? undefined : this.toDoc(pid, h, raw);
    });
  }

  async bucket(lid: string): Promise<{ docs: StoredDoc[]; redirect: boolean }> {
    return this.call('bucket', async () => {
      const all = await this.r.hgetall(`${this.P}:b:${lid}`);
      const pids = Object.keys(all).filter((k) => k !== '!r');
      const pipe = this.r.pipeline();
      for (const p of pids) pipe.hgetall(`${this.P}:d:${p}`);
      const metas = pids.length ? ((await pipe.exec()) ?? []) : [];
      const docs = pids.map((p, i) => this.toDoc(p, (metas[i]?.[1] ?? {}) as Record<string, string>, all[p] as string));
      return { docs, redirect: all['!r'] === '1' };
    });
  }

  async collisions(): Promise<CollisionRecord[]> {
    return this.call('collisions', async () => Object.values(await this.r.hgetall(`${this.P}:col`)).map((j) => JSON.parse(j) as CollisionRecord));
  }

  async collidedLogicalIds(): Promise<string[]> {
    return this.call('collided', () => this.r.smembers(`${this.P}:collided`));
  }

  async merge(lid: string, keep: string, drop: string[]): Promise<void> {
    await this.call('merge', () => runScript(this.r, MERGE, 1, [this.P + ':cfg', this.P, lid, keep, ...drop]));
  }

  async move(lid: string, physicalId: string, newLid: string, raw: string, algorithm: string): Promise<void> {
    await this.call('move', () => runScript(this.r, MOVE, 1, [this.P + ':cfg', this.P, lid, physicalId, newLid, raw, algorithm]));
  }

  async resolveCollisions(lid: string, update: (r: CollisionRecord) => CollisionRecord | undefined): Promise<number> {
    let n = 0;
    for (const r of await this.collisions()) {
      if (r.hashId !== lid || r.status !== 'pending') continue;
      const u = update(r);
      if (u) {
        await this.call('resolve', () => this.r.hset(`${this.P}:col`, r.id, JSON.stringify(u)));
        n++;
      }
    }
    return n;
  }

  async clearCollided(lid: string): Promise<void> {
    await this.call('clear', () => this.r.srem(`${this.P}:collided`, lid));
  }

  async stats(): Promise<IdStoreStats> {
    const h = await this.call('stats', () => this.r.hgetall(`${this.P}:stats`));
    return { docs: Number(h.docs ?? 0), collisions: Number(h.collisions ?? 0) };
  }

  async config(): Promise<IdStoreConfig> {
    const h = await this.call('config', () => this.r.hgetall(`${this.P}:cfg`));
    return { epoch: Number(h.epoch ?? 0), active: h.active ?? '' };
  }

  async escalate(active: string): Promise<IdStoreConfig> {
    const [e, a] = (await this.call('escalate', () => runScript(this.r, ESCALATE, 1, [this.P + ':cfg', this.P, active]))) as string[];
    return { epoch: Number(e), active: a ?? '' };
  }

  async listLogicalIds(cursor: string | undefined, limit: number): Promise<IdPage> {
    const match = `${this.P.replace(/[\\*?[\]]/g, '\\$&')}:b:*`;
    const cut = this.P.length + 3;
    return this.call('list', async () => {
      if ((this.r as Cluster).isCluster !== true) {
        const [next, keys] = await (this.r as Redis).scan(cursor ?? '0', 'MATCH', match, 'COUNT', limit);
        return { ids: keys.map((k) => k.slice(cut)), cursor: next === '0' ? undefined : next };
      }
      const masters = (this.r as Cluster).nodes('master')
        .map((n) => ({ n, addr: `${n.options.host ?? ''}:${n.options.port ?? ''}` }))
        .sort((a, b) => (a.addr < b.addr ? -1 : a.addr > b.addr ? 1 : 0));
      let i = 0;
      let scanCursor = '0';
      if (cursor !== undefined) {
        const sep = cursor.lastIndexOf('|');
        const addr = cursor.slice(0, sep);
        scanCursor = cursor.slice(sep + 1);
        i = masters.findIndex((m) => m.addr === addr);
        if (i < 0) throw new Error(`master ${addr} left the cluster during the listing; list again from the start`);
      }
      const m = masters[i];
      if (!m) return { ids: [], cursor: undefined };
      const [next, keys] = await m.n.scan(scanCursor, 'MATCH', match, 'COUNT', limit);
      const after = next !== '0' ? `${m.addr}|${next}` : masters[i + 1] ? `${masters[i + 1]!.addr}|0` : undefined;
      return { ids: keys.map((k) => k.slice(cut)), cursor: after };
    });
  }

  async close(): Promise<void> {
    // the client belongs to the caller
  }
}
