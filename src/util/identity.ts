// 0..n-1 as a view of one shared array, for batch code that needs "every member, in order" as an index list.

let ident = new Uint32Array(0);

/**
 * 0..n-1: a view of one array kept at the largest n asked for. Read-only by contract (every
 * caller shares it): a batch of 10k members took a fresh 40 KB array, zeroed and filled, per
 * write path it went through.
 */
export function identity(n: number): Uint32Array {
  if (ident.length < n) {
    ident = new Uint32Array(Math.max(n, 2 * ident.length));
    for (let i = 0; i < ident.length; i++) ident[i] = i;
  }
  return ident.subarray(0, n);
}
