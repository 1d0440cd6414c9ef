// Undo for a constructor that opens several resources: each is registered as it is created, and a
// failure part-way closes the ones already open, newest first, so nothing is left connected.

export interface Closable {
  close(): Promise<unknown>;
}

export class Rollback {
  private readonly opened: Closable[] = [];

  /** Registers `r` (or nothing, for an optional resource) and returns it. */
  add<T extends Closable | undefined>(r: T): T {
    if (r !== undefined) this.opened.push(r);
    return r;
  }

  /** Closes every registered resource in reverse order; close errors are dropped (the cause is already being thrown). */
  undo(): void {
    for (const r of this.opened.reverse()) void r.close().catch(() => undefined);
    this.opened.length = 0;
  }
}
