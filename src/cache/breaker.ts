// How TieredCache guards a remote tier: a per-call timeout, and a circuit breaker that skips the
// tier for a cool-down after too many consecutive failures. Every failure is counted in the
// tier's RemoteTierStats, reported to the caller, published on diagnostics_channel and handed to
// onTierError.
import { ErrorCodes, HashGateError } from '../errors.js';
import { errorKind, publishStoreError } from '../metrics/channels.js';
import type { RemoteTierStats, TierError } from './stats.js';

const noop = (): void => undefined;

/** ioredis rejects a command its commandTimeout expired with exactly this message (no code). */
const IOREDIS_COMMAND_TIMEOUT = 'Command timed out';

/** `p`, or HG_ERR_TIMEOUT naming `what` once `ms` have passed (p's own rejection is then ignored). */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  p.catch(noop);
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new HashGateError(ErrorCodes.TIMEOUT, `${what} did not answer within ${ms} ms`)),
      ms,
    );
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

export type RemoteTier = 'redis' | 'cold';

export interface BreakerOptions {
  /** Consecutive failures that open the breaker. */
  failures: number;
  cooldownMs: number;
  now: () => number;
  onTierError: ((err: TierError, cause: unknown) => void) | undefined;
  /** The cold store's kind for the store-error channel ('cold' when it has none). */
  coldKind: () => string;
}

/** The breaker rules, shared by both remote tiers; each tier's state lives in its RemoteTierStats. */
export class TierBreaker {
  constructor(private readonly o: BreakerOptions) {}

  isOpen(s: RemoteTierStats): boolean {
    return s.openUntil > this.o.now();
  }

  ok(s: RemoteTierStats): void {
    s.consecutiveErrors = 0;
    s.openUntil = 0;
  }

  /** Counts a failure of `tier`, adds it to `errors` (this call's report) and opens the breaker past the limit. */
  fail(s: RemoteTierStats, tier: RemoteTier, e: unknown, errors: TierError[] | undefined): void {
    s.errors++;
    s.consecutiveErrors++;
    const at = this.o.now();
    const code =
      typeof (e as { code?: unknown })?.code === 'string'
        ? (e as { code: string }).code
        : e instanceof Error && e.message === IOREDIS_COMMAND_TIMEOUT
          ? ErrorCodes.TIMEOUT // the client's commandTimeout bounded the MGET: same code as our own timer
          : tier === 'redis'
          ? ErrorCodes.STORE_UNAVAILABLE
          : ErrorCodes.HBASE_UNAVAILABLE;
    const err: TierError = { tier, code, message: e instanceof Error ? e.message : String(e), at };
    s.lastError = err;
    errors?.push(err);
    publishStoreError(tier === 'redis' ? 'redis' : this.o.coldKind(), errorKind(e), e);
    const onTierError = this.o.onTierError;
    if (onTierError) {
      try {
        onTierError(err, e);
      } catch {
        // a throwing observer must not turn a degraded lookup into a failed one
      }
    }
    if (s.consecutiveErrors >= this.o.failures) s.openUntil = at + this.o.cooldownMs;
  }

  /** Reported (not counted as a tier error) when an open breaker made a load skip a tier. */
  skipped(tier: RemoteTier, s: RemoteTierStats): TierError {
    const now = this.o.now();
    return {
      tier,
      code: tier === 'redis' ? ErrorCodes.STORE_UNAVAILABLE : ErrorCodes.HBASE_UNAVAILABLE,
      message: `${tier} tier skipped: circuit breaker open for another ${Math.max(0, s.openUntil - now)} ms`,
      at: now,
      skipped: true,
    };
  }
}
