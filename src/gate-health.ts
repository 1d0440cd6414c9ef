// HashGate.health(): the status of every tier (dedup store and its fail-open journal, the lookup
// cache's remote tiers, the worker pool) for readiness probes and dashboards.
import { isCluster } from './redis/client.js';
import type { BucketFill, DedupService } from './dedup/service.js';
import type { RemoteTierSnapshot, TieredCache } from './cache/index.js';
import type { KernelPoolStats } from './pool/pool.js';
import { journalDirStats } from './metrics/adapters.js';

/** up: answering normally; degraded: answering, but not from where it should (fail-open journal,
 * a cache tier skipped, a connection still being made); down: calls to it fail. */
export type HealthStatus = 'up' | 'degraded' | 'down';

export interface TierHealth {
  status: HealthStatus;
  /** Why it is not up (connection state, breaker open, journal backlog, ...). */
  reason?: string;
}

export interface GateHealth {
  /** The worst status of any tier. */
  status: HealthStatus;
  /** False when the gate is closed or first-seen answers cannot be given (a readiness probe). */
  ready: boolean;
  tiers: {
    dedup: TierHealth & {
      /** Where first-seen answers come from: the same name as `dedupStats().store`. */
      store: 'memory' | 'redis' | 'lmdb';
      /** Standalone Redis with replicas: how many are online, and the largest lag INFO reports. */
      replicas?: number;
      replicaLagSeconds?: number;
      /** Compact layout on Redis: how full the current window's buckets are (degraded from a ratio of 0.9). */
      bucketFill?: BucketFill;
    };
    cacheRedis?: TierHealth;
    cacheCold?: TierHealth;
  };
  /** Fail-open journal waiting to be replayed into Redis (only with a Redis dedup store). */
  journal?: { dir: string; backlogBytes: number; segments: number; oldestAgeSeconds: number };
  pool?: { threads: number; queued: number };
}

const RANK: Record<HealthStatus, number> = { up: 0, degraded: 1, down: 2 };

/** Bucket fill ratio from which health reports the dedup tier degraded: early enough to resize. */
const FILL_WARN = 0.9;

/** Online replicas and their largest lag from INFO replication (master side); {} when none. */
function replication(info: string): { replicas?: number; replicaLagSeconds?: number } {
  let replicas = 0;
  let lag = 0;
  for (const m of info.matchAll(/^slave\d+:.*?state=(\w+).*?lag=(\d+)/gm)) {
    if (m[1] !== 'online') continue;
    replicas++;
    lag = Math.max(lag, Number(m[2]));
  }
  return replicas === 0 ? {} : { replicas, replicaLagSeconds: lag };
}

function remoteTierHealth(t: RemoteTierSnapshot): TierHealth {
  if (t.breakerOpen) return { status: 'down', reason: `breaker open${t.lastError ? ` after ${t.lastError.code}` : ''}` };
  if (!t.healthy) return { status: 'degraded', reason: `last call failed${t.lastError ? `: ${t.lastError.code}` : ''}` };
  return { status: 'up' };
}

/** What the report reads from the gate; `closed` and `pool` are read after the PING answers. */
export interface HealthSources {
  dedup: DedupService;
  cache: TieredCache | undefined;
  closed: () => boolean;
  pool: () => KernelPoolStats | undefined;
}

export async function gateHealth(g: HealthSources, timeoutMs: number): Promise<GateHealth> {
  const dedup = await dedupHealth(g.dedup, timeoutMs);
  const tiers: GateHealth['tiers'] = { dedup };
  let journal: GateHealth['journal'];
  if (g.dedup.redis !== undefined) {
    const dir = g.dedup.options.journalDir;
    const j = journalDirStats(dir);
    journal = { dir, backlogBytes: j.bytes, segments: j.segments ?? 0, oldestAgeSeconds: j.oldestAgeSeconds ?? 0 };
    if (j.bytes > 0 && dedup.status === 'up') {
      // keys answered by fail-open are not in Redis yet: other instances can answer them 1 again
      tiers.dedup = { ...dedup, status: 'degraded', reason: `${j.bytes} B of fail-open journal not replayed yet` };
    }
  }
  const c = g.cache?.stats();
  if (c?.redis !== undefined) tiers.cacheRedis = remoteTierHealth(c.redis);
  if (c?.cold !== undefined) tiers.cacheCold = remoteTierHealth(c.cold);
  if (g.closed()) tiers.dedup = { ...tiers.dedup, status: 'down', reason: 'gate closed' };
  const worst = Object.values(tiers).reduce<HealthStatus>((w, t) => (RANK[t.status] > RANK[w] ? t.status : w), 'up');
  const p = g.pool();
  return {
    status: worst,
    ready: !g.closed() && tiers.dedup.status !== 'down',
    tiers,
    ...(journal === undefined ? {} : { journal }),
    ...(p === undefined ? {} : { pool: { threads: p.threads, queued: p.queued } }),
  };
}

async function dedupHealth(dedup: DedupService, timeoutMs: number): Promise<GateHealth['tiers']['dedup']> {
  const redis = dedup.redis;
  if (redis === undefined) return { store: dedup.storeKind === 'lmdb' ? 'lmdb' : 'memory', status: 'up' };
  const failOpen = dedup.options.onStoreError === 'fail-open';
  // while Redis cannot answer, fail-open still answers (journaled): degraded; fail-closed rejects: down
  const notUp = (reason: string): TierHealth & { store: 'redis' } => ({ store: 'redis', status: failOpen ? 'degraded' : 'down', reason });
  if (redis.status !== 'ready') return notUp(`redis connection is ${redis.status}`);
  let timer: NodeJS.Timeout | undefined;
  try {
    // a Cluster client sends INFO to one arbitrary node, so replication is reported for standalone only
    const standalone = !isCluster(redis);
    const [, info, bucketFill] = await Promise.race([
      Promise.all([
        redis.ping(),
        standalone ? redis.info('replication') : Promise.resolve(undefined),
        dedup.bucketFill().catch(() => undefined),
      ]),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no PONG within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    const base = { store: 'redis' as const, ...(info === undefined ? {} : replication(info)), ...(bucketFill === undefined ? {} : { bucketFill }) };
    if (bucketFill !== undefined && bucketFill.ratio >= FILL_WARN) {
      const reason = `window ${bucketFill.window}: largest bucket expected at ${bucketFill.predictedLargest} of ${bucketFill.limit} intset members; size dedup.buckets for the year before buckets turn into hashtables (about 8x the memory)`;
      return { ...base, status: 'degraded', reason };
    }
    return { ...base, status: 'up' };
  } catch (err) {
    return notUp(`redis PING failed: ${(err as Error).message}`);
  } finally {
    clearTimeout(timer);
  }
}
