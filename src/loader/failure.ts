// Holds the first error that ends a load.
// Batches, checkpoint saves and rejects writes run detached from the read loop, so whichever part
// fails records it here and the loop stops at its next check.
export class LoadFailure {
  error: unknown = undefined;
  failed = false;

  /** Keeps the first error: later ones are usually consequences of it. */
  readonly record = (err: unknown): void => {
    if (this.failed) return;
    this.failed = true;
    this.error = err;
  };

  throwIfFailed(): void {
    if (this.failed) throw this.error;
  }
}
