// Kernel entry: everything exported here becomes a WebAssembly export of wasm/hashgate.wasm, the
// only binary hashgate loads (hashing, Bloom filters and RedisBloom's HighwayHash instantiate the
// same Module).
export * from './murmur';
export * from './xxh64';
export * from './bloom';
export * from './highway';
export * from './utf16';
export * from './resp';
