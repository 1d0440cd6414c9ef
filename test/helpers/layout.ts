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
