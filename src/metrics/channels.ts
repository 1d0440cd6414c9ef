// node:diagnostics_channel events, the undici/ioredis way: subscribers (APMs, tests, a user's
// logger) see every batch and store error; with nobody subscribed, publishing costs one boolean
// check because every publish is guarded by `hasSubscribers` and the message object is never built.

import * as diagnostics_channel from 'node:diagnostics_channel';

export const CHANNEL_BATCH_START = 'hashgate:batch:start';
export const CHANNEL_BATCH_END = 'hashgate:batch:end';
export const CHANNEL_STORE_ERROR = 'hashgate:store:error';

/** What a batch did: hashing, Bloom add/check, dedup firstSeen, a tier lookup, a loader flush, ... */
export type BatchOp = 'hash' | 'bloom_add' | 'bloom_check' | 'dedup' | 'lookup' | 'load' | 'index' | 'upsert' | 'replay' | (string & {});

export interface BatchStartMessage {
  op: BatchOp;
  keys: number;
  /** performance.now() at start. */
  start: number;
}

export interface BatchEndMessage {
  op: BatchOp;
  keys: number;
  start: number;
  durationMs: number;
  error?: unknown;
}

export interface StoreErrorMessage {
  /** 'redis' | 'hbase' | 'journal' | ... */
  store: string;
  /** Short, low-cardinality kind: 'timeout', 'connection', 'oom', 'failover', 'other', ... */
  kind: string;
  error?: unknown;
}

export const batchStartChannel = diagnostics_channel.channel(CHANNEL_BATCH_START);
export const batchEndChannel = diagnostics_channel.channel(CHANNEL_BATCH_END);
export const storeErrorChannel = diagnostics_channel.channel(CHANNEL_STORE_ERROR);

export function publishBatchStart(op: BatchOp, keys: number, start: number): void {
  if (batchStartChannel.hasSubscribers) batchStartChannel.publish({ op, keys, start } satisfies BatchStartMessage);
}

export function publishBatchEnd(op: BatchOp, keys: number, start: number, end: number, error?: unknown): void {
  if (!batchEndChannel.hasSubscribers) return;
  const msg: BatchEndMessage = { op, keys, start, durationMs: end - start };
  if (error !== undefined) msg.error = error;
  batchEndChannel.publish(msg);
}

export function publishStoreError(store: string, kind: string, error?: unknown): void {
  if (!storeErrorChannel.hasSubscribers) return;
  const msg: StoreErrorMessage = { store, kind };
  if (error !== undefined) msg.error = error;
  storeErrorChannel.publish(msg);
}

/**
 * Maps a store error to a low-cardinality kind label (never the message: label values must stay
 * bounded). Works on ioredis/node errors by code and message shape.
 */
export function errorKind(err: unknown): string {
  if (err === null || typeof err !== 'object') return 'other';
  const e = err as { code?: unknown; name?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  const msg = typeof e.message === 'string' ? e.message : '';
  if (code === 'HG_ERR_TIMEOUT' || code === 'ETIMEDOUT' || /timed? ?out/i.test(msg)) return 'timeout';
  if (/^OOM\b/.test(msg)) return 'oom';
  if (/^(MOVED|ASK|CLUSTERDOWN|TRYAGAIN)\b/.test(msg)) return 'cluster';
  if (/^(READONLY|LOADING|MASTERDOWN)\b/.test(msg)) return 'failover';
  if (
    ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'HG_ERR_STORE_UNAVAILABLE', 'HG_ERR_HBASE_UNAVAILABLE'].includes(code) ||
    /connection|closed|not connected|stream isn't writeable/i.test(msg)
  ) {
    return 'connection';
  }
  if (code === 'HG_ERR_JOURNAL' || code === 'HG_ERR_JOURNAL_CORRUPT' || code === 'ENOSPC' || code === 'EIO') return 'io';
  return 'other';
}
