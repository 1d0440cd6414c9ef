// Keys of a window that batches have sent to Redis and not yet had answered: a later call's copy of such a key waits for the earlier call's answer instead of racing it.
//
// Why: the Redis store sends one SADD per key and a batch may need a second round for some keys
// (a table split under it, a Cluster redirection), so two batches holding the same key can reach
// Redis in the other order than they were called. "The first call answers 1" must still hold:
// a key pending in an earlier batch is not sent by a later one; the later one waits for the
// earlier batch and answers 0 when the earlier one got an answer for it, or sends it itself when
// it did not (the earlier batch failed for that key).
//
// The waiting batch takes the key's cell over at once: a third batch with the key then waits for
// the second, not the first. Every batch claims only when it begins, when it is the newest, so
// each wait is for an older batch and waits never form a cycle. (Claiming a key when its holder
// ends instead let a newer batch take a key an older one waited for while the older one held a
// key the newer one needed: both waited for ever.) It also keeps call order: the older batch
// sends or answers the key first.
//
// A batch of one call claims nothing while every live batch belongs to that call (the chunks of
// one call never share a key): its keys are only recorded, and claimed at the moment a batch of
// another call begins. Sequential callers (a loader, a batch API called in a loop) then never
// touch the table, and a later call still finds every earlier key it could race.
//
// Open addressing over the full 128-bit digests; a cell belongs to a batch by its sequence number
// and is free again once that batch ended (no deletion pass per batch). When dead cells fill the
// table it is compacted in place to its live cells, and resized only when the keys live then
// need a table four times bigger or smaller: its size follows the keys in flight, never the keys
// ever claimed, and a compaction touches no new memory.

/** One batch of a window's keys, from claim to end. */
export class PendingBatch {
  /** Per position of the batch's claimed keys: 1 when the key got a final answer. */
  answered: Uint8Array | undefined;
  // made when a later batch first waits: most batches meet no waiter, and a promise made and
  // settled per batch showed in a one-key call's profile
  private waited: Promise<void> | undefined;
  private resolveDone: (() => void) | undefined;

  /** Cells of the table this batch owns (its claimed keys). */
  cells = 0;
  /** The call the batch belongs to (its chunks share one). */
  readonly call: object;
  /** Deferred keys: digests idx[0..count) of `d`, at positions 0..count - 1. */
  d: Uint32Array | undefined;
  idx: Uint32Array | undefined;
  count = 0;

  constructor(readonly seq: number, call: object | undefined) {
    this.call = call ?? this;
  }

  /** Settles once the batch ended (answered is set then). */
  get done(): Promise<void> {
    this.waited ??= this.answered !== undefined ? Promise.resolve() : new Promise<void>((r) => (this.resolveDone = r));
    return this.waited;
  }

  /** @internal */ finish(answered: Uint8Array): void {
    this.answered = answered;
    this.resolveDone?.();
  }
}

/**
 * Words per cell: the digest's four, then the owning batch's sequence number (low and high word;
 * 0: an empty cell) and the key's position in that batch. One array of 32-byte cells: a
 * claim reads and writes one cache line, where separate digest, owner and position arrays made
 * it three misses per key of a big batch.
 */
const CELL = 8;
const TWO32 = 2 ** 32;
/** `PendingKeys.call` while the live batches belong to more than one call. */
const MIXED = {};

export class PendingKeys {
  private cells: number;
  private mask: number;
  private t: Uint32Array;
  /** Cells in use (live or dead) since the last compaction. */
  private used = 0;
  /** Cells owned by live batches. */
  private liveCells = 0;
  private seq = 0;
  private readonly live = new Map<number, PendingBatch>();
  /** The call every live batch belongs to; MIXED once they belong to more than one, until idle. */
  private call: object | undefined;
  /** Live batches whose keys are recorded, not yet claimed (only while `call` is not MIXED). */
  private readonly deferred = new Set<PendingBatch>();

  /** `minCells` (a power of two): the smallest table, and the first. */
  constructor(private readonly minCells = 4096) {
    this.cells = minCells;
    this.mask = minCells - 1;
    this.t = new Uint32Array(minCells * CELL);
  }

  /** Cells of the table (four times the keys in flight at most, or its smallest size). */
  get tableCells(): number {
    return this.cells;
  }

  /** Batches claimed and not ended. */
  get liveBatches(): number {
    return this.live.size;
  }

  /**
   * A new batch of `call` (its chunks pass the same object; undefined: a call of one batch); its
   * keys are claimed with deferClaims() or claim() and released by end(). The deferred keys of
   * live batches are claimed here when the batch belongs to another call than theirs.
   */
  begin(call?: object): PendingBatch {
    const b = new PendingBatch(++this.seq, call);
    if (this.live.size === 0) this.call = b.call;
    else if (this.call !== b.call) {
      this.call = MIXED;
      this.claimDeferred();
    }
    this.live.set(b.seq, b);
    return b;
  }

  /**
   * Records keys idx[0..count) of `d` (4 words per digest) as `batch`'s, at positions 0..count - 1,
   * when every live batch belongs to its call: nothing can wait for them now, and a batch of
   * another call that begins while `batch` is live claims them first. False when a batch of
   * another call is live: then the caller claims them one by one with claim(). `d` and `idx` are
   * read until the batch ends.
   */
  deferClaims(batch: PendingBatch, d: Uint32Array, idx: Uint32Array, count: number): boolean {
    if (this.call !== batch.call) return false;
    batch.d = d;
    batch.idx = idx;
    batch.count = count;
    this.deferred.add(batch);
    return true;
  }

  /** Claims the keys of every deferred batch, oldest first (their keys are disjoint: one call's). */
  private claimDeferred(): void {
    for (const b of this.deferred) {
      const { d, idx } = b;
      for (let j = 0; j < b.count; j++) this.claim(d!, idx![j]!, b, j);
      b.d = b.idx = undefined;
    }
    this.deferred.clear();
  }

  /**
   * Claims digest i of `d` (4 words per digest) for `batch` at position `at`. Returns undefined
   * when claimed, or [owner, position] when a live earlier batch holds the key; then, given
   * `waitAt`, `batch` takes the key over at position `waitAt` (it waits for the owner's answer and
   * then answers the key or sends it itself), else the table is left as it was.
   */
  claim(d: Uint32Array, i: number, batch: PendingBatch, at: number, waitAt?: number): [PendingBatch, number] | undefined {
    if (2 * (this.used + 1) > this.cells) this.rebuild();
    const o = i << 2;
    const w0 = d[o]!;
    const w1 = d[o + 1]!;
    const w2 = d[o + 2]!;
    const w3 = d[o + 3]!;
    const t = this.t;
    let s = (w0 ^ w2) & this.mask;
    let free = -1;
    // a key has at most one cell: liveness is looked up only for that cell, and a dead cell of
    // the same key is reused (dead cells of other keys wait for the next rebuild)
    for (;;) {
      const p = s * CELL;
      const lo = t[p + 4]!;
      const hi = t[p + 5]!;
      if (lo === 0 && hi === 0) break;
      if (t[p] === w0 && t[p + 1] === w1 && t[p + 2] === w2 && t[p + 3] === w3) {
        const liveOwner = this.live.get(lo + hi * TWO32);
        if (liveOwner === batch) return undefined;
        if (liveOwner !== undefined) {
          const held: [PendingBatch, number] = [liveOwner, t[p + 6]!];
          if (waitAt !== undefined) {
            t[p + 4] = batch.seq >>> 0;
            t[p + 5] = Math.floor(batch.seq / TWO32);
            t[p + 6] = waitAt;
            liveOwner.cells--;
            batch.cells++;
          }
          return held;
        }
        free = s;
        break;
      }
      s = (s + 1) & this.mask;
    }
    if (free < 0) {
      free = s;
      this.used++;
    }
    const p = free * CELL;
    const seq = batch.seq;
    t[p] = w0;
    t[p + 1] = w1;
    t[p + 2] = w2;
    t[p + 3] = w3;
    t[p + 4] = seq >>> 0;
    t[p + 5] = Math.floor(seq / TWO32);
    t[p + 6] = at;
    batch.cells++;
    this.liveCells++;
    return undefined;
  }

  /** Ends `batch`: its cells are free, and waiters learn which of its keys were answered. */
  end(batch: PendingBatch, answered: Uint8Array): void {
    if (this.live.delete(batch.seq)) this.liveCells -= batch.cells;
    if (batch.d !== undefined) {
      this.deferred.delete(batch);
      batch.d = batch.idx = undefined;
    }
    batch.finish(answered);
    if (this.live.size === 0) {
      // not kept past its batches (the object is the call's answer array)
      this.call = undefined;
      // idle with many dead cells: start over (cheaper than probing past them)
      if (4 * this.used > this.cells) this.clear();
    }
  }

  private clear(): void {
    this.t.fill(0);
    this.used = 0;
  }

  /**
   * Keeps only the live cells: in a table sized for them at load 1/4 when that is four times
   * bigger or smaller than this one, else in place.
   */
  private rebuild(): void {
    let cells = this.minCells;
    while (cells < 4 * (this.liveCells + 1)) cells *= 2;
    if (cells > this.cells || 4 * cells < this.cells) this.move(cells);
    else this.compact();
  }

  /** Whether the cell at word p holds a key of a live batch. */
  private isLive(t: Uint32Array, p: number): boolean {
    const lo = t[p + 4]!;
    const hi = t[p + 5]!;
    return (lo !== 0 || hi !== 0) && this.live.has(lo + hi * TWO32);
  }

  /** The live cells into a new table of `cells` cells. */
  private move(cells: number): void {
    const old = this.t;
    this.cells = cells;
    this.mask = cells - 1;
    const t = (this.t = new Uint32Array(cells * CELL));
    this.used = 0;
    for (let p = 0; p < old.length; p += CELL) {
      if (!this.isLive(old, p)) continue;
      let s = (old[p]! ^ old[p + 2]!) & this.mask;
      while (t[s * CELL + 4] !== 0 || t[s * CELL + 5] !== 0) s = (s + 1) & this.mask;
      const q = s * CELL;
      for (let w = 0; w < CELL; w++) t[q + w] = old[p + w]!;
      this.used++;
    }
  }

  /**
   * Drops the dead cells where the table is. Every live cell is then placed again from its home
   * cell, in probe order from a cell that was empty before (no probe run crosses it), so each one
   * is placed after every cell its run put ahead of it and no run is left with a gap.
   */
  private compact(): void {
    const t = this.t;
    const mask = this.mask;
    let start = -1;
    for (let s = 0; s < this.cells; s++) {
      const p = s * CELL;
      if (t[p + 4] === 0 && t[p + 5] === 0) {
        if (start < 0) start = s;
      } else if (!this.isLive(t, p)) {
        t.fill(0, p, p + CELL);
      }
    }
    // the table is at most half full, so a cell that was never used exists
    this.used = 0;
    for (let k = 1; k <= this.cells; k++) {
      const s = (start + k) & mask;
      const p = s * CELL;
      if (t[p + 4] === 0 && t[p + 5] === 0) continue;
      this.used++;
      let h = (t[p]! ^ t[p + 2]!) & mask;
      while (h !== s && (t[h * CELL + 4] !== 0 || t[h * CELL + 5] !== 0)) h = (h + 1) & mask;
      if (h === s) continue;
      t.copyWithin(h * CELL, p, p + CELL);
      t.fill(0, p, p + CELL);
    }
  }
}
