// Readers that turn live components into the stats the scrape-time gauges want. Structural types
// only, so metrics never imports a component (and a component never needs metrics to build).

import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { BloomStats, CacheTierTotals, JournalStats, PoolStats, TierTotals } from './types.js';

/** What BloomFilter (src/bloom) exposes; CountingBloomFilter too, if it has the same members. */
export interface BloomStatsSource {
  readonly bitSize: number;
  readonly hashFunctions: number;
  bitCount(): number;
  expectedFpp(): number;
  approximateElementCount?(): number;
}

/** `metrics.bloomSource('dedup', () => bloomStats(filter))`. bitCount() is O(bits/64), per scrape only. */
export function bloomStats(f: BloomStatsSource): BloomStats {
  const s: BloomStats = { bitSize: f.bitSize, bitsSet: f.bitCount(), hashFunctions: f.hashFunctions, expectedFpp: f.expectedFpp() };
  if (typeof f.approximateElementCount === 'function') s.approximateElements = f.approximateElementCount();
  return s;
}

/** What a piscina Pool exposes (threads, queueSize, utilization, completed). */
export interface PiscinaLike {
  readonly threads: readonly unknown[];
  readonly queueSize: number;
  readonly utilization: number;
  readonly completed?: number;
}

/** `metrics.poolSource('hash', () => piscinaStats(pool))`. */
export function piscinaStats(p: PiscinaLike): PoolStats {
  const s: PoolStats = { threads: p.threads.length, queueDepth: p.queueSize, utilization: p.utilization };
  if (typeof p.completed === 'number') s.completedTasks = p.completed;
  return s;
}

/**
 * Backlog of a fail-open journal directory, from the files alone: bytes of unreplayed segments
 * (`seg-*.open` being written, `seg-*.hgj` sealed; the names src/dedup/journal.ts uses) and the age
 * of the oldest one (records are not counted: that needs parsing). Replayed segments are deleted, so an empty directory means no backlog. Works
 * from another process too (the `hashgate metrics --journal-dir` sidecar).
 */
export function journalDirStats(dir: string, now: () => number = Date.now): JournalStats {
  if (!existsSync(dir)) return { bytes: 0, segments: 0, oldestAgeSeconds: 0 };
  let bytes = 0;
  let segments = 0;
  let oldest = Infinity;
  for (const f of readdirSync(dir)) {
    if (!/^seg-.*\.(open|hgj)$/.test(f)) continue;
    try {
      const st = statSync(join(dir, f));
      if (st.size === 0) continue;
      bytes += st.size;
      segments++;
      // Creation time where the filesystem records it (appends move mtime); else mtime.
      oldest = Math.min(oldest, st.birthtimeMs > 0 ? st.birthtimeMs : st.mtimeMs);
    } catch {
      // replayed and deleted between readdir and stat
    }
  }
  return { bytes, segments, oldestAgeSeconds: segments ? Math.max(0, (now() - oldest) / 1000) : 0 };
}

interface RemoteTierLike {
  hits: number;
  misses: number;
  errors: number;
  healthy: boolean;
  breakerOpen: boolean;
}

/** What TieredCache.stats() (src/cache) returns, structurally. */
export interface CacheStatsLike {
  bloom: { rejected: number; passed: number };
  local: { hits: number; misses: number; negativeHits: number };
  redis: RemoteTierLike | undefined;
  cold: RemoteTierLike | undefined;
}

/**
 * `metrics.cacheSource('lookup', () => cacheTierTotals(cache.stats()))`. The Bloom gate's "hit"
 * is a key answered absent without any I/O; a negative-cache hit counts as an LRU hit; the cold
 * tier is labelled `hbase` (the cold store the design uses).
 */
export function cacheTierTotals(s: CacheStatsLike): CacheTierTotals {
  const out: CacheTierTotals = {
    bloom: { hits: s.bloom.rejected, misses: s.bloom.passed, errors: 0 },
    lru: { hits: s.local.hits + s.local.negativeHits, misses: s.local.misses, errors: 0 },
  };
  const remote = (t: RemoteTierLike): TierTotals => ({ hits: t.hits, misses: t.misses, errors: t.errors, up: t.healthy && !t.breakerOpen });
  if (s.redis) out.redis = remote(s.redis);
  if (s.cold) out.hbase = remote(s.cold);
  return out;
}
