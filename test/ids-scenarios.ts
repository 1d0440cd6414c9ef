// Shared weak-hash scenarios for test/ids.test.ts (memory) and test/integration/ids.test.ts
// (Redis, HBase): every store must give the same statuses, records and repair results.
import { expect } from 'vitest';
import { canonicalJson, murmur3_32 } from '../src/hash/index.js';
import { IdRegistry, logicalId, type CollisionRecord, type CustomIdHash, type UpsertResult } from '../src/ids/index.js';
import { BloomFilter } from '../src/bloom/bloom-filter.js';
import type { SharedGate } from '../src/bloom/shared-gate.js';

/** Deliberately weak: 16 bits, so a few hundred records collide for real. */
export const weak16: CustomIdHash = {
  name: 'murmur3_32/16',
  hash: (c) => (murmur3_32(c) & 0xffff).toString(16).padStart(4, '0'),
};

export const records = (n: number, tag = 'r'): Array<{ user: number; tag: string; tags: string[] }> =>
  Array.from({ length: n }, (_, i) => ({ user: i, tag, tags: [`t${i % 7}`] }));

/** Upserts `recs` and checks every status against an independent model of buckets. */
/** 12-bit variant: fewer records give as many collisions (for slow stores). */
export const weak12: CustomIdHash = {
  name: 'murmur3_32/12',
  hash: (c) => (murmur3_32(c) & 0xfff).toString(16).padStart(3, '0'),
};

export async function checkWeakHashScenario(reg: IdRegistry, hash: CustomIdHash = weak16, n = 1500): Promise<{ results: UpsertResult[]; events: CollisionRecord[] }> {
  const events: CollisionRecord[] = [];
  reg.on('collision', (r) => events.push(r));
  const recs = records(n);
  const firstInBucket = new Map<string, number>();
  const results: UpsertResult[] = [];
  for (let i = 0; i < recs.length; i++) {
    const c = canonicalJson(recs[i]);
    const lid = hash.hash(c);
    const res = await reg.upsert(recs[i]);
    results.push(res);
    expect(res.id).toBe(lid);
    expect(res.physicalId).not.toBe(lid);
    const first = firstInBucket.get(lid);
    if (first === undefined) {
      expect(res.status).toBe('new');
      firstInBucket.set(lid, i);
    } else {
      expect(res.status).toBe('collision');
      const rec = res.collision!;
      expect(rec.status).toBe('pending');
      expect(rec.hashId).toBe(lid);
      expect(rec.doc2Id).toBe(res.physicalId);
      expect(rec.doc1Id).toBe(results[first]!.physicalId);
      expect(rec.doc1Snapshot).toBe(canonicalJson(recs[first]));
      expect(rec.doc2Snapshot).toBe(c);
      expect(rec.resolvedAt).toBeNull();
    }
  }
  const collisions = results.filter((r) => r.status === 'collision');
  // 1500 records into 65536 buckets (or 400 into 4096): the birthday bound says ~17-19 collisions
  expect(collisions.length).toBeGreaterThan(3);
  expect(events.length).toBe(collisions.length);
  const stored = await reg.collisions('pending');
  expect(stored.map((r) => r.id).sort()).toEqual(events.map((r) => r.id).sort());
  const s = await reg.stats();
  expect(s.docs).toBe(n);
  expect(s.collisions).toBe(collisions.length);
  // re-upserting every record (keys reordered) is a duplicate of its own physical id
  for (let i = 0; i < recs.length; i++) {
    const r = recs[i]!;
    const res = await reg.upsert({ tags: r.tags, tag: r.tag, user: r.user });
    expect(res.status).toBe('duplicate');
    expect(res.physicalId).toBe(results[i]!.physicalId);
  }
  const colDoc = await reg.get(collisions[0]!.physicalId);
  expect(colDoc?.collision).toBe(true);
  expect(colDoc?.collisionWith).toBe(collisions[0]!.collision!.doc1Id);
  expect((await reg.byLogicalId(collisions[0]!.id)).length).toBeGreaterThan(1);
  return { results, events };
}

export async function checkRepair(reg: IdRegistry, results: UpsertResult[]): Promise<void> {
  const recs = records(results.length);
  const collidedLids = new Set(results.filter((r) => r.status === 'collision').map((r) => r.id));
  const report = await reg.repairCollisions();
  expect(report.logicalIds).toBe(collidedLids.size);
  expect(report.merged).toBe(0);
  const inCollided = results.filter((r) => collidedLids.has(r.id));
  expect(report.rehashed).toBe(inCollided.length);
  expect(await reg.collisions('pending')).toEqual([]);
  const resolved = await reg.collisions('resolved');
  expect(resolved.length).toBe(results.filter((r) => r.status === 'collision').length);
  for (const r of resolved) {
    expect(r.resolution).toBe('rehashed');
    expect(r.resolvedAt).not.toBeNull();
    expect(r.newIds![r.doc1Id]).toMatch(/^[0-9a-f]{64}$/);
    expect(r.newIds![r.doc2Id]).toMatch(/^[0-9a-f]{64}$/);
    expect(r.newIds![r.doc1Id]).not.toBe(r.newIds![r.doc2Id]);
  }
  for (const lid of collidedLids) {
    const b = await reg.byLogicalId(lid);
    expect(b).toEqual([]);
  }
  // every document is still found, under its SHA-256 id when it was in a collided bucket
  for (let i = 0; i < recs.length; i++) {
    const d = await reg.find(recs[i]);
    expect(d?.physicalId).toBe(results[i]!.physicalId);
    if (collidedLids.has(results[i]!.id)) {
      expect(d?.logicalId).toBe(logicalId(recs[i], 'sha256'));
      expect(d?.collision).toBe(false);
      const again = await reg.upsert(recs[i]);
      expect(again).toMatchObject({ status: 'duplicate', physicalId: results[i]!.physicalId, id: d?.logicalId });
    }
  }
  // idempotent
  expect(await reg.repairCollisions()).toEqual({ logicalIds: 0, merged: 0, rehashed: 0, resolvedRecords: 0 });
  expect((await reg.stats()).docs).toBe(results.length);
}


/** A gate only this process fills (a plain local Bloom filter): what a process that joined late holds. */
export function privateGate(expectedItems = 20_000): SharedGate & { loads: number } {
  const f = BloomFilter.create({ expectedItems, fpp: 0.001 });
  const g = {
    loads: 0,
    addAll: async (k: readonly string[]) => f.addAll(k as string[]),
    containsAll: async (k: readonly string[]) => f.mightContainAll(k as string[], new Uint8Array(k.length)),
    loadAll: async (k: readonly string[]) => {
      g.loads++;
      return f.addAll(k as string[]);
    },
  };
  return g;
}

/**
 * The gate-rebuild contract. `writer` (no gate) stored records(results.length) as `results`
 * (possibly repaired); `reader` shares its store but has a fresh private gate, as a process
 * started after the writes. Before rebuildGate() the reader's gate answers "not stored" (the
 * false negative); the paged listing returns exactly the stored logical ids; after the rebuild
 * every document is found.
 */
export async function checkGateRebuild(writer: IdRegistry, reader: IdRegistry, results: UpsertResult[], pageSize: number): Promise<void> {
  const recs = records(results.length);
  expect(await reader.find(recs[0])).toBeUndefined();
  expect(reader.gateShortCircuits).toBe(1);
  const expected = new Set<string>(results.map((r) => r.id));
  for (const rec of recs) expected.add((await writer.find(rec))!.logicalId);
  const listed = new Set<string>();
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await reader.store.listLogicalIds!(cursor, pageSize);
    for (const id of page.ids) listed.add(id);
    cursor = page.cursor;
    pages++;
  } while (cursor !== undefined);
  expect(pages).toBeGreaterThan(1);
  expect([...listed].sort()).toEqual([...expected].sort());
  expect(await reader.rebuildGate({ pageSize })).toBeGreaterThanOrEqual(expected.size);
  for (let i = 0; i < recs.length; i++) expect((await reader.find(recs[i]))?.physicalId).toBe(results[i]!.physicalId);
  expect(reader.gateShortCircuits).toBe(1);
}
