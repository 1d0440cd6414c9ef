// MurmurHash3 x64_128's block constants and 64-bit finalizer, for murmur.ts and utf16.ts alike.
// A module of its own because index.ts re-exports all of murmur.ts: exported from there, these
// would become WebAssembly exports too. Nothing imports this into index.ts.

export const C1: u64 = 0x87c37b91114253d5;
export const C2: u64 = 0x4cf5ad432745937f;

// @ts-ignore: decorator
@inline export function fmix64(k: u64): u64 {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccd;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53;
  k ^= k >> 33;
  return k;
}
