// Prometheus gauges for RedisBloomReplica instances (lag, staleness, resyncs, gaps) and the last
// fleet-wide rebuild, read from their stats() on each scrape: nothing is updated per check.
import { Gauge } from 'prom-client';
import { invalidType } from '../errors.js';
import { asRegistry, isRegistry, type RegistryLike } from '../metrics/registry.js';
import type { RedisBloomReplica, RedisBloomReplicaStats } from './redis-replica.js';
import type { RedisBloomRebuildResult } from './redis-rebuild.js';

export interface RedisBloomMetrics {
  /** Follow this replica (label filter = its name); returns a function that stops following it. */
  addReplica(replica: RedisBloomReplica): () => void;
  /** Record a finished rebuild (e.g. from the process that ran rebuildRedisBloom). */
  recordRebuild(name: string, result: RedisBloomRebuildResult, at?: number): void;
}

export function redisBloomMetrics(registryLike: RegistryLike, options: { prefix?: string } = {}): RedisBloomMetrics {
  if (!isRegistry(registryLike)) throw invalidType('registry', 'a prom-client Registry', registryLike);
  const registry = asRegistry(registryLike);
  const p = options.prefix ?? 'hashgate_';
  const replicas = new Set<RedisBloomReplica>();
  const rebuilds = new Map<string, { at: number; r: RedisBloomRebuildResult }>();
  // One gauge per figure, labelled by filter, filled from `rows` on each scrape.
  const perFilter = <T>(name: string, help: string, rows: () => Iterable<readonly [string, T]>, pick: (x: T) => number) =>
    new Gauge({
      name: p + name,
      help,
      labelNames: ['filter'],
      registers: [registry],
      collect(this: Gauge<'filter'>) {
        this.reset();
        for (const [filter, x] of rows()) this.set({ filter }, pick(x));
      },
    });
  const replicaRows = function* (): Iterable<readonly [string, RedisBloomReplicaStats]> {
    for (const r of replicas) yield [r.name, r.stats()];
  };
  const fromReplicas = (name: string, help: string, pick: (s: RedisBloomReplicaStats) => number) => perFilter(name, help, replicaRows, pick);
  fromReplicas('bloom_replica_staleness_seconds', 'Time since the replica last knew it had every published add', (s) => s.stalenessMs / 1000);
  fromReplicas('bloom_replica_full_load_age_seconds', 'Time since the replica last loaded the whole bitmap (bounds how long adds by non-publishing writers such as Redisson stay invisible)', (s) => s.sinceFullLoadMs / 1000);
  fromReplicas('bloom_replica_lag_p99_seconds', 'p99 of change-stream entry time to applied on this replica', (s) => s.lagP99Ms / 1000);
  fromReplicas('bloom_replica_resyncs', 'Full reloads after the first (gaps, reconnects, period, new generation)', (s) => s.resyncs);
  fromReplicas('bloom_replica_gaps', 'Change-stream sequence gaps seen', (s) => s.gaps);
  fromReplicas('bloom_replica_reconnects', 'Reconnects of the replica stream connection', (s) => s.reconnects);
  fromReplicas('bloom_replica_entries_applied', 'Change-stream entries applied', (s) => s.entriesApplied);
  const rebuildGauge = (name: string, help: string, pick: (x: { at: number; r: RedisBloomRebuildResult }) => number) =>
    perFilter(name, help, () => rebuilds, pick);
  rebuildGauge('bloom_last_rebuild_timestamp_seconds', 'Unix time the last rebuild swapped a new generation in', (x) => x.at / 1000);
  rebuildGauge('bloom_last_rebuild_keys', 'Keys in the last rebuilt generation', (x) => x.r.keys);
  rebuildGauge('bloom_last_rebuild_duration_seconds', 'Duration of the last rebuild', (x) => x.r.durationMs / 1000);
  return {
    addReplica(replica) {
      replicas.add(replica);
      return () => void replicas.delete(replica);
    },
    recordRebuild(name, result, at = Date.now()) {
      rebuilds.set(name, { at, r: result });
    },
  };
}
