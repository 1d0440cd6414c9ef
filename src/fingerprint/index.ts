export { FingerprintIndex, DEFAULTS as INDEX_DEFAULTS } from './fingerprint-index.js';
export type { FingerprintIndexOptions, IndexStats } from './fingerprint-index.js';
export { MemoryIndexBackend } from './memory.js';
export { RedisIndexBackend } from './redis.js';
export type { RedisIndexBackendOptions } from './redis.js';
export type { ValueGate } from './value-gate.js';
export type { AttrValue, Attributes, IndexBackend, QueryOptions } from './types.js';
