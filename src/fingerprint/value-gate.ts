// The Bloom gate in front of the index: "definitely never indexed" answers
// cost no storage call. Values are never removed from it; removed values just become false
// positives that cost one storage call.
import { BloomFilter } from '../bloom/index.js';

export interface ValueGate {
  add(key: string): unknown;
  mightContain(key: string): boolean;
}

export function createValueGate(opts: { expectedItems: number; fpp: number }): ValueGate {
  return BloomFilter.create({ expectedItems: opts.expectedItems, fpp: opts.fpp });
}
