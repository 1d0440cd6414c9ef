// Entry point `hashgate/fingerprint`: the device-fingerprint inverted index on its own (a gate
// opened with `index` holds one as `gate.index`) and its backends.
export * from '../fingerprint/index.js';
