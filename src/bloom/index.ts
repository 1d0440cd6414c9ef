export { BloomFilter, DEFAULTS as BLOOM_DEFAULTS, parseGuavaHeader } from './bloom-filter.js';
export type { BloomFilterOptions, BloomSharedDescriptor, GuavaHeader } from './bloom-filter.js';
export { bloomShape, optimalNumOfBits, optimalNumOfHashFunctions, MAX_BIT_SIZE } from './sizing.js';
export type { BloomShape, BloomSizeOptions } from './sizing.js';
export type { Key, KeyBatch } from './keys.js';
