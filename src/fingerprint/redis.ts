// Redis / Redis Cluster backend of FingerprintIndex.
//
// Cluster trade-off (document-partitioned index with hash tags): every device is assigned to one of
// `shards` partitions by murmur3_32(deviceId); all keys of a partition carry the tag `{N}`, so a
// device's record and every set it belongs to live in one slot. That buys per-device atomic
// updates (one Lua script) and server-side SINTER per partition; the price is that a query fans out
// to every partition (one script per partition, run in parallel, results concatenated). The
// alternative — term-partitioned keys without tags, intersected client-side — makes each query
// ship whole sets between nodes and cannot update a device atomically, so it was not chosen.
// Standalone Redis uses a single untagged partition, i.e. plain `idx:<attr>:<value>` keys other services can read.
import type { Cluster, Redis } from 'ioredis';
import { isCluster } from '../redis/client.js';
import { runScript, runScriptWire } from '../redis/scripts.js';
import { RespWriter } from '../redis/resp.js';
import { murmur3_128Hex, murmur3_32 } from '../hash/index.js';
import { HashGateError, ErrorCodes } from '../errors.js';
import type { IndexBackend } from './types.js';
import { ANY, MATCH, PUT, QUERY_MANY, REMOVE } from './redis-scripts.js';
import { Coalescer, type ResolvedCoalesce } from '../util/coalescer.js';

export interface RedisIndexBackendOptions {
  client: Redis | Cluster;
  keyPrefix: string;
  shards: number;
  /** Values longer than this many UTF-8 bytes (or starting with '#') are hashed into the key. */
  maxValueLength: number;
  /** Smallest-set size up to which the server's C SINTER/SUNION is used instead of the early-exit walk. */
  sinterThreshold?: number;
  /**
   * Skip the query script: send GET raw (hashed terms) and SINTER/SUNION together in one round
   * trip, truncating client-side. ~Naive-SINTER speed, but no smallest-first early exit: a query
   * whose every set is huge gets the whole intersection back. Use only when every query names a
   * selective attribute. Default false.
   */
  directQueries?: boolean;
  /**
   * Merge concurrent match/any calls into one script call per shard (`maxKeys` bounds the query
   * terms per merged call); false sends one script call per query. Writes (put/remove) first
   * send what is queued, so every query sees exactly the writes issued before it.
   */
  coalesce?: ResolvedCoalesce | false;
}

type Suffixes = ReadonlyArray<readonly [string, '0' | '1', string]>;

interface PendingQuery {
  kind: 'match' | 'any';
  suffixes: Suffixes;
  limit: number;
  resolve: (ids: string[]) => void;
  reject: (e: unknown) => void;
}


export class RedisIndexBackend implements IndexBackend {
  readonly kind = 'redis' as const;
  private readonly client: Redis | Cluster;
  private readonly shardPrefixes: string[];
  private readonly maxValueLength: number;
  private readonly small: string;
  private readonly direct: boolean;
  private readonly co: Coalescer<PendingQuery> | undefined;
  /** Merged queries go as one prebuilt RESP buffer (standalone Redis; a Cluster routes ioredis' own commands). */
  private readonly wire: boolean;

  constructor(opts: RedisIndexBackendOptions) {
    this.client = opts.client;
    this.maxValueLength = opts.maxValueLength;
    this.small = String(opts.sinterThreshold ?? 4096);
    this.direct = opts.directQueries === true;
    this.wire = !isCluster(opts.client);
    const tagged = opts.shards > 1 || isCluster(opts.client);
    this.shardPrefixes = Array.from({ length: opts.shards }, (_, i) =>
      tagged ? `${opts.keyPrefix}:{${opts.shards === 1 ? opts.keyPrefix : i}}` : opts.keyPrefix,
    );
    // directQueries sends plain commands that autopipelining already batches: nothing to merge
    const co = opts.coalesce ?? false;
    this.co = co === false || this.direct ? undefined : new Coalescer<PendingQuery>(co, (items) => this.runMerged(items));
  }

  private shardOf(deviceId: string): string {
    const n = this.shardPrefixes.length;
    return this.shardPrefixes[n === 1 ? 0 : murmur3_32(deviceId) % n] as string;
  }

  /** [base key suffix after the shard prefix, hashed flag]. */
  private termSuffix(attr: string, value: string): [string, '0' | '1'] {
    if (value.length * 3 > this.maxValueLength && Buffer.byteLength(value) > this.maxValueLength || value.startsWith('#')) {
      return [`:${attr}:#${murmur3_128Hex(value)}`, '1'];
    }
    return [`:${attr}:${value}`, '0'];
  }

  private wrap(e: unknown, op: string): HashGateError {
    return new HashGateError(ErrorCodes.STORE, `index ${op} failed: ${(e as Error).message}`, { cause: e });
  }

  async put(deviceId: string, attrs: ReadonlyArray<readonly [string, string]>, mode: 'replace' | 'merge'): Promise<void> {
    this.co?.flush(); // queries issued before this write must not see it
    const sp = this.shardOf(deviceId);
    const args: string[] = [`${sp}:~dev:${deviceId}`, deviceId, mode, String(attrs.length)];
    for (const [a, v] of attrs) {
      const [suffix, hashed] = this.termSuffix(a, v);
      args.push(a, v, sp + suffix, hashed);
    }
    try {
      await runScript(this.client, PUT, 1, args);
    } catch (e) {
      throw this.wrap(e, 'put');
    }
  }

  async remove(deviceId: string): Promise<boolean> {
    this.co?.flush(); // queries issued before this write must not see it
    try {
      return (await runScript(this.client, REMOVE, 1, [`${this.shardOf(deviceId)}:~dev:${deviceId}`, deviceId])) === 1;
    } catch (e) {
      throw this.wrap(e, 'remove');
    }
  }

  async get(deviceId: string): Promise<Record<string, string> | undefined> {
    let h: Record<string, string>;
    try {
      h = await this.client.hgetall(`${this.shardOf(deviceId)}:~dev:${deviceId}`);
    } catch (e) {
      throw this.wrap(e, 'get');
    }
    const out: Record<string, string> = {};
    let any = false;
    for (const [f, v] of Object.entries(h)) {
      if (f.startsWith('v:')) {
        out[f.slice(2)] = v;
        any = true;
      }
    }
    return any ? out : undefined;
  }

  private query(kind: 'match' | 'any', terms: ReadonlyArray<readonly [string, string]>, limit: number): Promise<string[]> {
    const suffixes = terms.map(([a, v]) => [...this.termSuffix(a, v), v] as const);
    const co = this.co;
    if (co === undefined || !co.accepts(suffixes.length)) {
      co?.flush(); // a big query goes alone, after what is queued
      return this.queryNow(kind, suffixes, limit);
    }
    return new Promise<string[]>((resolve, reject) => co.add({ kind, suffixes, limit, resolve, reject }, suffixes.length));
  }

  /** One script call per shard for every queued query; each caller gets its own reply. */
  private runMerged(items: PendingQuery[]): void {
    const co = this.co!;
    // a lone query goes as MATCH/ANY through ioredis, except on a standalone Redis: there the
    // prebuilt QUERY_MANY call costs Node less and, for a selective term, Redis less (one SCARD, no sort)
    if (items.length === 1 && !this.wire) {
      const it = items[0]!;
      this.queryNow(it.kind, it.suffixes, it.limit).then(
        (ids) => {
          co.done();
          it.resolve(ids);
        },
        (e: unknown) => {
          co.done();
          it.reject(e);
        },
      );
      return;
    }
    const shards = this.shardPrefixes;
    const calls: Array<Promise<string[][]>> = new Array(shards.length);
    for (let s = 0; s < shards.length; s++) {
      const sp = shards[s]!;
      calls[s] = this.wire ? this.mergedWire(sp, items) : (runScript(this.client, QUERY_MANY, 1, this.mergedArgs(sp, items)) as Promise<string[][]>);
    }
    Promise.all(calls).then(
      (parts) => {
        co.done();
        for (let i = 0; i < items.length; i++) {
          const it = items[i]!;
          if (parts.length === 1) {
            it.resolve(parts[0]![i]!);
            continue;
          }
          // shards in order, cut at the limit: what the one-query path answers
          const out: string[] = [];
          for (const p of parts) {
            for (const id of p[i]!) {
              if (out.length >= it.limit) break;
              out.push(id);
            }
          }
          it.resolve(out);
        }
      },
      (e: unknown) => {
        co.done();
        for (const it of items) it.reject(this.wrap(e, it.kind));
      },
    );
  }

  /** QUERY_MANY's arguments for queries `items` on shard `sp` (KEYS[1] first). */
  private mergedArgs(sp: string, items: readonly PendingQuery[]): string[] {
    const args: string[] = [`${sp}:~dev:`, String(items.length)];
    for (const it of items) {
      args.push(it.kind === 'match' ? 'm' : 'a', String(3 + 3 * it.suffixes.length), String(it.limit), String(it.suffixes.length), this.small);
      // the raw value only matters for a hashed key's collision check: not sent otherwise
      for (const [suffix, hashed, v] of it.suffixes) args.push(sp + suffix, hashed === '1' ? v : '', hashed);
    }
    return args;
  }

  /**
   * QUERY_MANY on a standalone Redis, its EVALSHA written straight into one buffer. Through
   * ioredis' own command (a Command per call that flattens, measures and re-encodes every
   * argument, and the garbage it leaves), a third of a merged query's Node CPU went there.
   */
  private async mergedWire(sp: string, items: readonly PendingQuery[]): Promise<string[][]> {
    const args = this.mergedArgs(sp, items);
    let size = 64;
    for (const a of args) size += 3 * a.length + 16;
    const w = new RespWriter(size);
    w.array(3 + args.length);
    w.str('EVALSHA');
    w.str(QUERY_MANY.sha);
    w.uintStr(1);
    for (const a of args) w.str(a);
    const reply = (await runScriptWire(this.client as Redis, QUERY_MANY, w.bytes())) as unknown as Buffer[][];
    const out: string[][] = new Array(reply.length);
    for (let i = 0; i < reply.length; i++) {
      const ids = reply[i]!;
      const strs: string[] = new Array(ids.length);
      for (let j = 0; j < ids.length; j++) strs[j] = ids[j]!.toString();
      out[i] = strs;
    }
    return out;
  }

  private async queryNow(kind: 'match' | 'any', suffixes: Suffixes, limit: number): Promise<string[]> {
    try {
      if (this.shardPrefixes.length === 1) return await this.queryShard(kind, this.shardPrefixes[0] as string, suffixes, limit);
      const parts = await Promise.all(this.shardPrefixes.map((sp) => this.queryShard(kind, sp, suffixes, limit)));
      const out: string[] = [];
      for (const p of parts) {
        for (const id of p) {
          out.push(id);
          if (out.length >= limit) return out;
        }
      }
      return out;
    } catch (e) {
      throw this.wrap(e, kind);
    }
  }

  /**
   * One EVALSHA per partition: the script reads a consistent snapshot, checks hashed values'
   * raw owners, orders sets smallest first and stops at `limit`. Measured against the
   * alternative of pipelined GET/SCARD + a second SINTER round trip, the single script was ~2x
   * faster per query (client command overhead dominates small-set queries).
   */
  private async queryShard(kind: 'match' | 'any', sp: string, suffixes: ReadonlyArray<readonly [string, '0' | '1', string]>, limit: number): Promise<string[]> {
    if (this.direct) {
      const raws: Array<Promise<string | null>> = [];
      const keys: string[] = [];
      for (const [suffix, hashed] of suffixes) {
        if (hashed === '1') raws.push(this.client.get(`${sp}${suffix}:raw`));
        keys.push(sp + suffix);
      }
      const setOp = kind === 'match' ? this.client.sinter(...keys) : this.client.sunion(...keys);
      const [owners, all] = await Promise.all([Promise.all(raws), setOp]);
      let h = 0;
      let missing = false;
      let collided = false;
      for (const [, hashed, v] of suffixes) {
        if (hashed !== '1') continue;
        const raw = owners[h++];
        if (raw === null) missing = true; // never indexed: no set under that key
        else if (raw !== v) collided = true; // slot 0 belongs to another value: the script walks the probe chain
      }
      if (!collided) {
        if (kind === 'match' && missing) return [];
        return all.length > limit ? all.slice(0, limit) : all;
      }
    }
    const args: string[] = [`${sp}:~dev:`, String(limit), String(suffixes.length), this.small];
    for (const [suffix, hashed, v] of suffixes) args.push(sp + suffix, v, hashed);
    return (await runScript(this.client, kind === 'match' ? MATCH : ANY, 1, args)) as string[];
  }

  match(terms: ReadonlyArray<readonly [string, string]>, limit: number): Promise<string[]> {
    return this.query('match', terms, limit);
  }

  any(terms: ReadonlyArray<readonly [string, string]>, limit: number): Promise<string[]> {
    return this.query('any', terms, limit);
  }

  async forEachValue(fn: (attr: string, value: string) => void): Promise<void> {
    const nodes: Redis[] = isCluster(this.client) ? this.client.nodes('master') : [this.client];
    const prefixes = new Set(this.shardPrefixes);
    for (const node of nodes) {
      for (const sp of prefixes) {
        let cursor = '0';
        do {
          const [next, keys] = await node.scan(cursor, 'MATCH', `${sp.replace(/[[\]*?\\{}]/g, '\\$&')}:~dev:*`, 'COUNT', 1000);
          cursor = next;
          for (const k of keys) {
            const h = await node.hgetall(k);
            for (const [f, v] of Object.entries(h)) if (f.startsWith('v:')) fn(f.slice(2), v);
          }
        } while (cursor !== '0');
      }
    }
  }

  async close(): Promise<void> {
    // the client belongs to the caller; queued queries still get their answers
    await this.co?.drain();
  }
}
