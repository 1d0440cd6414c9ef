// Writes a dedup store in the embedded store's first on-disk format (compact members as one LMDB
// duplicate each, sub-database `c:${window}`), with lmdb-js directly, as an earlier version did:
// the conversion tests open such a store with the current code.
import { open as lmdbOpen } from 'lmdb';
import { bucketsOfDigests, digestKeys } from '../../src/dedup/layout.js';

export async function writeFirstFormatStore(path: string, keys: string[], buckets: number, window = '2026'): Promise<void> {
  const d = digestKeys(keys);
  const bk = bucketsOfDigests(d, 'compact', buckets);
  const env = lmdbOpen({ path, maxDbs: 8 });
  const meta = env.openDB<number, string>({ name: 'hg:meta', encoding: 'json' });
  const c = env.openDB<Buffer, number>({ name: `c:${window}`, keyEncoding: 'uint32', encoding: 'binary', dupSort: true, ...{ dupFixed: true } });
  await c.transaction(() => {
    meta.putSync(`w:compact:${window}`, buckets);
    keys.forEach((_, i) => c.putSync(bk[i]!, Buffer.from(d.subarray(i * 16, i * 16 + 8))));
  });
  await env.close();
}
