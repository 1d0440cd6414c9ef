// Loader sink for the durable embedded store (`hashgate load --store PATH`): one LMDB write
// transaction per batch, the same sub-databases and members as DedupService with dedup.path.
import { ErrorCodes, HashGateError } from '../errors.js';
import { LmdbStore } from '../dedup/lmdb-store.js';
import type { LoadSink, LoaderLayout, SinkBatch } from './sink.js';

export interface LmdbLoadSinkOptions {
  path: string;
  layout: LoaderLayout;
  buckets: number;
  /** fsync each batch before acknowledging it (default true). */
  sync?: boolean;
}

export class LmdbLoadSink implements LoadSink {
  readonly name: string;
  readonly layout: LoaderLayout;
  readonly store: LmdbStore;
  private readonly prepared = new Map<string, Promise<void>>();

  constructor(readonly opts: LmdbLoadSinkOptions) {
    this.layout = opts.layout;
    this.name = `lmdb-${opts.layout}`;
    this.store = new LmdbStore({ path: opts.path, sync: opts.sync ?? true, maxWindows: 500 });
  }

  recordedBuckets(window: string): number | undefined {
    return this.store.recordedBuckets(window, this.layout);
  }

  /** Records our bucket count for `window`, refusing to mix two bucketings in one window. */
  prepareWindow(window: string): Promise<void> {
    let p = this.prepared.get(window);
    if (!p) {
      p = this.store.resolveBuckets(window, this.layout, this.opts.buckets).then((v) => {
        if (v !== this.opts.buckets) {
          throw new HashGateError(
            ErrorCodes.INVALID_OPTION,
            `--buckets: window ${window} in ${this.opts.path} already uses ${v} ${this.layout} buckets; load it with --buckets ${v}`,
            { details: { window, recorded: v, requested: this.opts.buckets } },
          );
        }
      });
      this.prepared.set(window, p);
    }
    return p;
  }

  add(batch: SinkBatch): Promise<number> {
    const rb = batch.rowBuckets;
    const b = batch.bucket;
    return this.store.addRows(batch.window, this.layout, this.opts.buckets, batch.count, rb ? (i) => rb[i]! : () => b, batch.keys, batch.keyOffsets);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}
