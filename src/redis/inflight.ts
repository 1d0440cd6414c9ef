// Bounds the commands a component keeps in flight on its Redis connection and times each one from when Redis can start on it.
//
// Why: a command's reply comes after the replies of everything sent before it on the same
// connection. Timing a command from when it was queued (ioredis' commandTimeout) made a burst of
// big calls time out behind our own earlier commands while Redis was perfectly healthy. Here at
// most `max` commands are sent; the rest wait locally, untimed, in order. The clock of a command
// starts when it is the oldest one in flight, i.e. when the commands ahead of it have answered:
// `timeoutMs` without any reply to the oldest command means the connection (or Redis) stalled.
// Then every command in flight is failed as outcome-unknown, every waiting one as not sent, and
// `onStall` runs (the owner may reconnect).

/** The command was never sent: nothing was applied. */
export class NotSentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotSentError';
  }
}

/** The command was sent but no reply came: it may or may not have been applied. */
export class OutcomeUnknownError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'OutcomeUnknownError';
  }
}

const RESOLVED = Promise.resolve();

interface Entry {
  /** Sends the command (run): a promise of its reply. */
  send: (() => Promise<unknown>) | undefined;
  /** Sends the command (runWith): it reports through the two callbacks; resolve and reject are then the caller's, run synchronously. */
  sendWith: ((ok: () => void, fail: (e: unknown) => void) => void) | undefined;
  /** Its share of the lane (see InFlightLimit's `unit`). */
  weight: number;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  done: boolean;
}

export class InFlightLimit {
  private waiting: Entry[] = [];
  private waitHead = 0;
  private flying: Entry[] = [];
  /** Set from a stall until the commands then in flight settled: new commands fail at once meanwhile. */
  private stalled = false;
  /**
   * One watchdog timer for the whole lane rather than one per command: re-arming a timer on every
   * reply cost more than the rest of the bookkeeping of a single-key call. `headSince` is when the
   * oldest command in flight became the oldest (when Redis could start on it).
   */
  private watchdog: NodeJS.Timeout | undefined;
  private headSince = 0;
  /** Sum of the weights in flight. */
  private flyingWeight = 0;

  /**
   * At most `max` commands of weight `unit` in flight, or as many lighter ones as add up to
   * max x unit (a weight above the unit counts as one unit). A dedup lane's unit is a full
   * send's keys: sends of a few keys each (many small concurrent calls) then keep as many keys
   * in flight as `max` full sends do. Counted as whole sends, `max` 100-key sends would give
   * Redis a few hundred keys per round trip, and cost a write, a wake-up and a read each.
   */
  constructor(
    private readonly max: number,
    private readonly timeoutMs: number,
    private readonly onStall: () => void = () => undefined,
    private readonly unit = 1,
  ) {}

  /** Commands sent and not answered yet. */
  get inFlight(): number {
    return this.flying.length;
  }

  /** Commands waiting locally to be sent. */
  get queued(): number {
    return this.waiting.length - this.waitHead;
  }

  /**
   * Sends `send()` once the lane has room for `weight` (default: a full unit) after the commands
   * before it; settles with its reply, or NotSentError / OutcomeUnknownError.
   */
  run<T>(send: () => Promise<T>, weight = this.unit): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.stalled) {
        reject(new NotSentError(`the Redis connection stalled (no reply within ${this.timeoutMs} ms)`));
        return;
      }
      const e: Entry = { send, sendWith: undefined, weight: Math.min(this.unit, Math.max(1, weight)), resolve: resolve as (v: unknown) => void, reject, done: false };
      if (this.queued === 0 && this.fits(e)) this.start(e);
      else this.waiting.push(e);
    });
  }

  /**
   * run() with callbacks, for a one-key call that settles its caller from them instead of
   * through a promise per layer. `send` reports through its two arguments (a pipe's sendWith);
   * `resolve` and `reject` run when the lane settles the command, never before runWith returns,
   * and must not throw.
   */
  runWith(send: (ok: () => void, fail: (e: unknown) => void) => void, weight: number, resolve: () => void, reject: (e: unknown) => void): void {
    if (this.stalled) {
      const err = new NotSentError(`the Redis connection stalled (no reply within ${this.timeoutMs} ms)`);
      RESOLVED.then(() => reject(err));
      return;
    }
    const e: Entry = { send: undefined, sendWith: send, weight: Math.min(this.unit, Math.max(1, weight)), resolve, reject, done: false };
    if (this.queued === 0 && this.fits(e)) this.start(e);
    else this.waiting.push(e);
  }

  /** Whether `e` has room (one always has on an idle lane: its weight is at most a unit). */
  private fits(e: Entry): boolean {
    return this.flyingWeight + e.weight <= this.max * this.unit;
  }

  /**
   * The connection closed: replies of commands in flight will never come (ioredis may even resend
   * them after a reconnect; their late answers are ignored). Waiting commands stay queued.
   */
  connectionLost(why: string): void {
    const lost = this.flying;
    this.flying = [];
    this.flyingWeight = 0;
    for (const e of lost) this.fail(e, new OutcomeUnknownError(`the Redis connection closed before the reply came (${why})`));
    this.stalled = false;
    this.pump();
  }

  /** Fails every waiting command as not sent (the store is closing or unavailable). */
  rejectWaiting(why: string): void {
    const w = this.waiting.slice(this.waitHead);
    this.waiting = [];
    this.waitHead = 0;
    for (const e of w) this.fail(e, new NotSentError(why));
  }

  private start(e: Entry): void {
    this.flying.push(e);
    this.flyingWeight += e.weight;
    if (this.flying.length === 1) {
      this.headSince = performance.now();
      this.arm(this.timeoutMs);
    }
    if (e.sendWith !== undefined) {
      try {
        e.sendWith(
          () => this.settle(e, false, undefined),
          (err: unknown) => this.settle(e, true, err),
        );
      } catch (err) {
        RESOLVED.then(() => this.settle(e, true, err));
      }
      return;
    }
    let p: Promise<unknown>;
    try {
      p = e.send!();
    } catch (err) {
      p = Promise.reject(err);
    }
    p.then(
      (v) => this.settle(e, false, v),
      (err: unknown) => this.settle(e, true, err),
    );
  }

  private arm(ms: number): void {
    if (this.watchdog !== undefined) return;
    // unref: a command in flight keeps its socket (and so the process) alive anyway
    this.watchdog = setTimeout(() => this.check(), Math.max(1, Math.ceil(ms))).unref();
  }

  private check(): void {
    this.watchdog = undefined;
    const head = this.flying[0];
    if (head === undefined || this.stalled) return;
    const since = this.headSince;
    const left = since + this.timeoutMs - performance.now();
    if (left > 0) {
      this.arm(left);
      return;
    }
    // Our own event loop may have been busy (hashing a big batch) while the reply sat in the
    // socket: timers run before I/O is read, setImmediate after. Only a reply still missing
    // once the socket was read is a stall.
    setImmediate(() => {
      if (!head.done && this.flying[0] === head && this.headSince === since) this.stall();
      else if (this.flying.length > 0) this.arm(Math.max(1, this.headSince + this.timeoutMs - performance.now()));
    });
  }

  private fail(e: Entry, err: unknown): void {
    if (e.done) return;
    e.done = true;
    // a runWith caller's callback may send again: not from inside a stall or a connection loss
    if (e.sendWith !== undefined) RESOLVED.then(() => e.reject(err));
    else e.reject(err);
  }

  private settle(e: Entry, failed: boolean, v: unknown): void {
    const f = this.flying;
    const i = f[0] === e ? 0 : f.indexOf(e);
    if (i === 0) f.shift();
    else if (i > 0) f.splice(i, 1);
    if (i >= 0) this.flyingWeight -= e.weight;
    // an idle lane leaves its watchdog to fire once and lapse (cheaper than clearing it per reply)
    if (f.length === 0) this.stalled = false;
    // the next command's predecessors all answered: Redis can start on it now
    else if (i === 0 && !this.stalled) {
      this.headSince = performance.now();
      this.arm(this.timeoutMs);
    }
    this.pump();
    // last: a runWith callback runs synchronously and may send again, on a lane already settled
    // (a promise's reactions ran after pump() anyway)
    if (!e.done) {
      e.done = true;
      if (failed) e.reject(v);
      else e.resolve(v);
    }
  }

  private pump(): void {
    while (!this.stalled && this.queued > 0 && this.fits(this.waiting[this.waitHead]!)) {
      const e = this.waiting[this.waitHead++]!;
      if (this.waitHead > 1024 && this.waitHead * 2 > this.waiting.length) {
        this.waiting = this.waiting.slice(this.waitHead);
        this.waitHead = 0;
      }
      this.start(e);
    }
  }

  private stall(): void {
    this.stalled = true;
    const msg = `no reply from Redis within ${this.timeoutMs} ms`;
    for (const e of this.flying) this.fail(e, new OutcomeUnknownError(msg));
    this.rejectWaiting(`the Redis connection stalled (${msg})`);
    this.onStall();
  }
}
