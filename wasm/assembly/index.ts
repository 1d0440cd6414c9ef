// Kernel entry: everything exported here becomes a WebAssembly export of wasm/hashgate.wasm.
export * from './murmur';
export * from './xxh64';
export * from './bloom';
