import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../src/hash/index.js';
import { IdRegistry, MemoryIdStore, logicalId, type CustomIdHash, type IdStore, type UpsertResult } from '../src/ids/index.js';
import { checkRepair, checkWeakHashScenario, records, weak16 } from './ids-scenarios.js';

describe('logicalId', () => {
  it('canonicalizes: {a:1,b:2} and {b:2,a:1} get one logical id, 32 hex digits', () => {
    const a = logicalId({ a: 1, b: 2 });
    expect(a).toBe(logicalId({ b: 2, a: 1 }));
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(a).not.toBe(logicalId({ a: 1, b: 3 }));
    expect(new IdRegistry().logicalId({ b: 2, a: 1 })).toBe(a);
  });
  it('documents the mmh3+length and sha256 variants', () => {
    const c = canonicalJson({ a: 1, b: 'é' });
    expect(logicalId({ b: 'é', a: 1 }, 'murmur3_128+len')).toBe(`${logicalId({ a: 1, b: 'é' })}_${Buffer.byteLength(c)}`);
    expect(logicalId({ a: 1 }, 'sha256')).toMatch(/^[0-9a-f]{64}$/);
    expect(() => logicalId({ a: 1 }, 'md5' as never)).toThrow(TypeError);
  });
});

describe('IdRegistry (in-memory)', () => {
  it('new / duplicate / collision with a weak 16-bit hash, collision records and events, then repair', async () => {
    const reg = new IdRegistry({ algorithm: weak16 });
    const { results } = await checkWeakHashScenario(reg);
    await checkRepair(reg, results);
    // a fresh record landing on a repaired (redirected) logical id goes straight to SHA-256
    const lids = new Set(results.filter((r) => r.status === 'collision').map((r) => r.id));
    let i = 10_000;
    let rec: unknown;
    for (;; i++) {
      rec = { user: i, tag: 'fresh' };
      if (lids.has(weak16.hash(canonicalJson(rec)))) break;
    }
    const res = await reg.upsert(rec);
    expect(res.status).toBe('new');
    expect(res.id).toBe(logicalId(rec, 'sha256'));
  });

  it('same record upserted concurrently: exactly one new', async () => {
    const reg = new IdRegistry();
    const out = await Promise.all(Array.from({ length: 20 }, () => reg.upsert({ x: 1, y: [1, 2] })));
    expect(out.filter((o) => o.status === 'new').length).toBe(1);
    expect(new Set(out.map((o) => o.physicalId)).size).toBe(1);
  });

  it('repair merges pseudo-collisions written by a non-canonical serializer', async () => {
    const store: IdStore = new MemoryIdStore();
    const constHash: CustomIdHash = { name: 'const', hash: () => 'k' };
    let t = 1000;
    const sloppy = new IdRegistry({ store, algorithm: constHash, canonicalize: (v) => JSON.stringify(v), now: () => t++ });
    const a = await sloppy.upsert({ a: 1, b: 2 });
    const b = await sloppy.upsert({ b: 2, a: 1 });
    const c = await sloppy.upsert({ z: 1 });
    expect([a.status, b.status, c.status]).toEqual(['new', 'collision', 'collision']);
    const good = new IdRegistry({ store, algorithm: constHash, now: () => t++ });
    const rep = await good.repairCollisions();
    expect(rep).toMatchObject({ logicalIds: 1, merged: 1, rehashed: 2, resolvedRecords: 2 });
    const recs = await good.collisions('resolved');
    expect(recs.map((r) => r.resolution).sort()).toEqual(['merged', 'rehashed']);
    expect((await good.get(b.physicalId))?.physicalId).toBe(a.physicalId);
    expect((await good.find({ b: 2, a: 1 }))?.physicalId).toBe(a.physicalId);
    expect((await good.stats()).docs).toBe(2);
    expect((await good.repairCollisions()).logicalIds).toBe(0);
  });

  it('escalates to SHA-256 past the collision-rate threshold and still finds old documents', async () => {
    const store = new MemoryIdStore();
    const reg = new IdRegistry({ store, algorithm: weak16, escalation: { threshold: 0.002, minDocuments: 200 } });
    const other = new IdRegistry({ store, algorithm: weak16 }); // a second process, not yet aware
    const escalations: unknown[] = [];
    reg.on('escalated', (e) => escalations.push(e));
    const recs = records(3000, 'esc');
    const before: UpsertResult[] = [];
    let i = 0;
    for (; i < recs.length && escalations.length === 0; i++) before.push(await reg.upsert(recs[i]));
    expect(escalations.length).toBe(1);
    expect(reg.activeAlgorithm).toBe('sha256');
    expect((await reg.stats()).activeAlgorithm).toBe('sha256');
    const next = await reg.upsert(recs[i]);
    expect(next.status).toBe('new');
    expect(next.id).toBe(logicalId(recs[i], 'sha256'));
    for (let j = 0; j < before.length; j++) {
      const d = await reg.upsert(recs[j]);
      expect(d.status).toBe('duplicate');
      expect(d.physicalId).toBe(before[j]!.physicalId);
      expect(d.id).toBe(before[j]!.id); // found under its old weak id
    }
    // the stale process learns the new epoch from the store and writes SHA-256 ids too
    const o = await other.upsert(recs[i + 1]);
    expect(o.id).toBe(logicalId(recs[i + 1], 'sha256'));
    expect((await other.upsert(recs[i])).physicalId).toBe(next.physicalId);
  });

  it('validates options, naming them', () => {
    expect(() => new IdRegistry({ algorithm: 'crc' as never })).toThrow(/ids\.algorithm/);
    expect(() => new IdRegistry({ escalation: { threshold: 2 } })).toThrow(/ids\.escalation\.threshold/);
    expect(() => new IdRegistry({ now: 5 as never })).toThrow(/ids\.now/);
  });

  it('rejects records canonicalJson refuses', async () => {
    await expect(new IdRegistry().upsert({ a: NaN })).rejects.toMatchObject({ code: 'HG_ERR_CANONICAL_JSON' });
  });
});
