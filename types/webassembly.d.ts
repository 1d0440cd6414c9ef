// The WebAssembly types hashgate's public declarations mention (a shared memory, the compiled
// kernel module, its globals). Node projects without the DOM lib have no WebAssembly types, so the
// package brings the subset it needs. Interfaces only, with methods only: they merge cleanly with
// lib.dom's WebAssembly declarations when a consumer loads those too.
declare namespace WebAssembly {
  interface Module {}
  interface Memory {
    grow(delta: number): number;
  }
  interface Global {
    valueOf(): any; // eslint-disable-line @typescript-eslint/no-explicit-any
  }
}
