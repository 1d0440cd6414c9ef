// Entry point `hashgate/bloom`: Bloom filters on their own — in-process (BloomFilter, counting,
// snapshots, background rebuilds, sharing with workers) and Redis-held (RedisBloom, readable by
// Redisson; RedisBloomReplica for local reads; rebuildRedisBloom and its key sources).
export * from '../bloom/index.js';
