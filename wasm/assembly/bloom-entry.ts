// Entry of wasm/bloom.wasm (built by wasm/build-bloom.mjs): the Bloom kernels alone, so the
// Bloom filter never depends on which kernels wasm/hashgate.wasm was last built with.
export * from './bloom';
