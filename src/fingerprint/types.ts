/** Attribute values as callers hand them in; numbers and booleans are indexed by their String(). */
export type AttrValue = string | number | boolean;
export type Attributes = Record<string, AttrValue>;

export interface QueryOptions {
  /** At most this many device ids are returned (default: the index's `defaultLimit`). */
  limit?: number;
}

/**
 * Storage behind FingerprintIndex. Values arrive already stringified and validated; the backend
 * owns key layout and atomicity. Every method that mutates one device must be atomic per device.
 */
export interface IndexBackend {
  readonly kind: 'memory' | 'redis';
  /** `mode: 'replace'` makes `attrs` the device's whole attribute set; 'merge' keeps unnamed ones. */
  put(deviceId: string, attrs: ReadonlyArray<readonly [string, string]>, mode: 'replace' | 'merge'): Promise<void>;
  remove(deviceId: string): Promise<boolean>;
  get(deviceId: string): Promise<Record<string, string> | undefined>;
  match(terms: ReadonlyArray<readonly [string, string]>, limit: number): Promise<string[]>;
  any(terms: ReadonlyArray<readonly [string, string]>, limit: number): Promise<string[]>;
  /** Every (attr, value) currently indexed, for rebuilding the local Bloom gate. */
  forEachValue(fn: (attr: string, value: string) => void): Promise<void>;
  close(): Promise<void>;
}
