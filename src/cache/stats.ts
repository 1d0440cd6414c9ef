// Per-tier counters. Latency goes into a fixed log2 histogram (microsecond buckets) so stats stay
// bounded however long the process runs.

const BUCKETS = 32;

export class LatencyHistogram {
  readonly #buckets = new Uint32Array(BUCKETS);
  #count = 0;
  #totalMs = 0;
  #maxMs = 0;

  record(ms: number): void {
    const us = ms <= 0 ? 0 : Math.min(0xffff_ffff, Math.ceil(ms * 1000));
    const b = us === 0 ? 0 : 32 - Math.clz32(us);
    this.#buckets[b < BUCKETS ? b : BUCKETS - 1]!++;
    this.#count++;
    this.#totalMs += ms;
    if (ms > this.#maxMs) this.#maxMs = ms;
  }

  /** Upper bound of the bucket holding quantile q, in ms (log2 resolution). */
  quantile(q: number): number {
    if (this.#count === 0) return 0;
    const rank = Math.ceil(q * this.#count);
    let seen = 0;
    for (let b = 0; b < BUCKETS; b++) {
      seen += this.#buckets[b]!;
      if (seen >= rank) return b === 0 ? 0 : 2 ** b / 1000;
    }
    return this.#maxMs;
  }

  snapshot(): LatencySnapshot {
    return {
      calls: this.#count,
      meanMs: this.#count === 0 ? 0 : this.#totalMs / this.#count,
      p50Ms: this.quantile(0.5),
      p99Ms: this.quantile(0.99),
      maxMs: this.#maxMs,
    };
  }
}

export interface LatencySnapshot {
  calls: number;
  meanMs: number;
  /** Bucket upper bounds (powers of two microseconds), not exact percentiles. */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface TierError {
  tier: 'redis' | 'cold';
  code: string;
  message: string;
  at: number;
  /** The tier was not asked (its breaker was open); not counted in the tier's errors. */
  skipped?: boolean;
}

/** Counters of one remote tier (Redis or the cold store). */
export class RemoteTierStats {
  hits = 0;
  misses = 0;
  errors = 0;
  /** Keys not sent because the tier's breaker was open. */
  skipped = 0;
  backfills = 0;
  backfillErrors = 0;
  consecutiveErrors = 0;
  openUntil = 0;
  lastError: TierError | undefined;
  readonly latency = new LatencyHistogram();

  /** `connected` false: the client has lost its connection (no failed call need have shown it yet). */
  snapshot(now: number, connected = true): RemoteTierSnapshot {
    return {
      hits: this.hits,
      misses: this.misses,
      errors: this.errors,
      skipped: this.skipped,
      backfills: this.backfills,
      backfillErrors: this.backfillErrors,
      healthy: this.consecutiveErrors === 0 && connected,
      breakerOpen: this.openUntil > now,
      lastError: this.lastError,
      latency: this.latency.snapshot(),
    };
  }
}

export interface RemoteTierSnapshot {
  hits: number;
  misses: number;
  errors: number;
  skipped: number;
  backfills: number;
  backfillErrors: number;
  /** False after a failed call until the next successful one, and while the client is disconnected. */
  healthy: boolean;
  breakerOpen: boolean;
  lastError: TierError | undefined;
  latency: LatencySnapshot;
}

export interface CacheStats {
  lookups: number;
  keys: number;
  bloom: { rejected: number; passed: number };
  local: { hits: number; misses: number; negativeHits: number; entries: number; bytes: number };
  singleFlight: { shared: number; loads: number };
  redis: RemoteTierSnapshot | undefined;
  cold: RemoteTierSnapshot | undefined;
  /** True when any configured remote tier is failing or short-circuited. */
  degraded: boolean;
}
