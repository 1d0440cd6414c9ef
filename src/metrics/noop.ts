// The default when metrics are off. Only the diagnostics_channel publishes survive (they are free
// without subscribers), so a user can trace batches without enabling Prometheus.

import { performance } from 'node:perf_hooks';
import { batchEndChannel, batchStartChannel, publishBatchEnd, publishBatchStart, publishStoreError } from './channels.js';
import type { BatchOp } from './channels.js';
import type { BloomStats, BusStatsView, CacheTierTotals, DedupCountersView, JournalStats, Metrics, PoolStats, Tier } from './types.js';

const unregister = (): void => {};

export class NoopMetrics implements Metrics {
  readonly enabled = false;
  /** Returns 0 (and reads no clock) when nobody listens on the batch channels. */
  batchStart(op: BatchOp, keys: number): number {
    if (!batchStartChannel.hasSubscribers && !batchEndChannel.hasSubscribers) return 0;
    const start = performance.now();
    publishBatchStart(op, keys, start);
    return start;
  }
  batchEnd(op: BatchOp, keys: number, start: number, error?: unknown): void {
    // start 0: nobody listened when the batch began, so there is no duration to report.
    if (start === 0 || !batchEndChannel.hasSubscribers) return;
    publishBatchEnd(op, keys, start, performance.now(), error);
  }
  observeBatch(_op: BatchOp, _keys: number, _seconds: number): void {}
  dedup(_firstSeen: number, _duplicates: number): void {}
  dedupFailOpen(_keys: number): void {}
  ids(_hashFunction: string, _created: number, _duplicates: number, _collisions: number): void {}
  collision(_hashFunction: string, _n?: number): void {}
  tier(_tier: Tier, _hits: number, _misses: number, _errors: number, _seconds: number): void {}
  storeError(store: string, kind: string, _n?: number, error?: unknown): void {
    publishStoreError(store, kind, error);
  }
  journalAppended(_records: number, _bytes: number): void {}
  journalReplayed(_records: number, _bytes: number): void {}
  journalBacklog(_records: number, _bytes: number): void {}
  loader(_rows: number, _bytes: number, _rejected?: number, _failed?: number): void {}
  bloomSample(_filter: string, _confirmedAbsent: number, _falsePositives: number): void {}
  bloomSource(_filter: string, _read: () => BloomStats): () => void {
    return unregister;
  }
  poolSource(_pool: string, _read: () => PoolStats): () => void {
    return unregister;
  }
  journalSource(_journal: string, _read: () => JournalStats): () => void {
    return unregister;
  }
  dedupSource(_name: string, _read: () => DedupCountersView): () => void {
    return unregister;
  }
  cacheSource(_name: string, _read: () => CacheTierTotals): () => void {
    return unregister;
  }
  busSource(_name: string, _read: () => BusStatsView): () => void {
    return unregister;
  }
}

/** Shared instance: stateless, so every component may hold the same one. */
export const noopMetrics: NoopMetrics = new NoopMetrics();
