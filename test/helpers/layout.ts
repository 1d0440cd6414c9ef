// Test model of what the dedup layouts write per key: digest, bucket and member, built from the
// exported layout primitives one step at a time (the stores compute the same in their own loops).
import { bucketsOfDigests, compactMember, digestKeys, setsMember, type LayoutSpec } from '../../src/dedup/layout.js';
import type { Member } from '../../src/redis/resp.js';
import type { Keys } from '../../src/hash/keys.js';

export interface EncodedKeys {
  digests: Uint8Array;
  buckets: Uint32Array;
  members: Member[];
}

export function encodeKeys(keys: Keys, spec: LayoutSpec): EncodedKeys {
  const digests = digestKeys(keys, spec.layout === 'compact' ? spec.secret : undefined);
  const buckets = bucketsOfDigests(digests, spec.layout, spec.buckets);
  const members: Member[] = [];
  for (let i = 0; i < buckets.length; i++) members.push(spec.layout === 'compact' ? compactMember(digests, i) : setsMember(keys, i));
  return { digests, buckets, members };
}

/** Every live set of a compact window (SCAN with TYPE set: tombstones are strings): its key, encoding and size. */
export async function compactSets(r: import('ioredis').Redis, prefix: string, window: string): Promise<Array<{ key: string; encoding: string; size: number }>> {
  const out: Array<{ key: string; encoding: string; size: number }> = [];
  let cursor = '0';
  do {
    const [c, keys] = await r.scan(cursor, 'MATCH', `${prefix}:${window}:c{*`, 'COUNT', 1000, 'TYPE', 'set');
    cursor = c;
    for (const key of keys) {
      // a split that ran since the SCAN left a tombstone (a string) at this name: not a live set
      try {
        const encoding = String(await r.object('ENCODING', key));
        out.push({ key, encoding, size: await r.scard(key) });
      } catch {
        // WRONGTYPE: a tombstone now
      }
    }
  } while (cursor !== '0');
  return out;
}

/**
 * Members of a compact window's sets that are not in the sub-bucket growth.ts's rule gives them
 * (by each table's recorded count), plus sets that are not live sub-buckets at all. Throws when
 * there is nothing to check.
 */
export async function misplaced(r: import('ioredis').Redis, prefix: string, window: string): Promise<number> {
  const { addressOf, depthOf, subBucketOf } = await import('../../src/dedup/growth.js');
  let bad = 0;
  let checked = 0;
  for (const { key } of await compactSets(r, prefix, window)) {
    const m = /\{(\d+)\}(\d+)\.(\d+)$/.exec(key);
    if (m === null) {
      bad++;
      continue;
    }
    const t = Number(m[1]);
    const state = await r.get(`${prefix}:${window}:c{${t}}n`);
    const n = state === null ? 1 : Number(state);
    let members: string[];
    try {
      members = await r.smembers(key);
    } catch {
      continue; // split since: a tombstone now
    }
    for (const member of members) {
      checked++;
      const s = subBucketOf(addressOf(BigInt(member)), n);
      if (`${s}.${n <= 1 ? 0 : depthOf(s, n)}` !== `${m[2]}.${m[3]}`) bad++;
    }
  }
  if (checked === 0) throw new Error(`no members under ${prefix}:${window}`);
  return bad;
}

/** The Redis set that holds `member` of bucket `bucket` now ('sets': the bucket; 'compact': its table's sub-bucket by the table's count). */
export async function memberKey(r: import('ioredis').Redis, spec: Pick<LayoutSpec, 'layout' | 'prefix'>, window: string, bucket: number, member: Member): Promise<string> {
  if (spec.layout === 'sets') return `${spec.prefix}:${window}:${bucket}`;
  const { addressOf, depthOf, subBucketOf } = await import('../../src/dedup/growth.js');
  const tp = `${spec.prefix}:${window}:c{${bucket}}`;
  const state = await r.get(`${tp}n`);
  const n = state === null ? 1 : Number(state);
  const s = subBucketOf(addressOf(BigInt(member as string)), n);
  return `${tp}${s}.${n <= 1 ? 0 : depthOf(s, n)}`;
}
