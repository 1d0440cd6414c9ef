// Contracts between the tiered cache and the stores behind it. The cold tier is an interface so the
// tier logic can run against an in-process store (embedded default, unit tests) and against HBase.

/**
 * What a lookup returns for a present key. Values are msgpack-encoded on their way into Redis and
 * HBase (msgpackr, records extension off so any msgpack reader can decode them); binary values come
 * back as Buffer (a Uint8Array).
 */
export type CacheValue = Uint8Array | { [field: string]: unknown };

/** One cold-tier cell: the msgpack payload plus the time the value was first written (epoch ms). */
export interface ColdCell {
  value: Uint8Array;
  ts: number;
}

export interface ColdEntry extends ColdCell {
  key: string;
}

/**
 * The cold tier (HBase in production). `mget` answers in key order with undefined for absent keys
 * and rejects when the store cannot answer; the cache counts that as a tier error and degrades.
 */
export interface ColdStore {
  /** Store label for metrics ('hbase', 'memory', ...); default 'cold'. */
  readonly kind?: string;
  mget(table: string, keys: readonly string[]): Promise<(ColdCell | undefined)[]>;
  mput(table: string, entries: readonly ColdEntry[]): Promise<void>;
  close?(): Promise<void>;
}

/** The slice of src/bloom's BloomFilter the gate needs. */
export interface BloomLike {
  mightContain(key: string): boolean;
  /** Batch form (src/bloom's BloomFilter has it): one byte per key, 0 = definitely absent. */
  mightContainAll?(keys: string[], out?: Uint8Array): Uint8Array;
}

export interface BloomWritable extends BloomLike {
  add(key: string): unknown;
}
