import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../src/hash/index.js';
import { IdRegistry, MemoryIdStore, logicalId, type CustomIdHash, type IdStore, type UpsertResult } from '../src/ids/index.js';
import { checkGateRebuild, checkRepair, checkWeakHashScenario, privateGate, records, weak16 } from './ids-scenarios.js';

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

  it('rebuildGate(): a registry whose gate missed earlier writes finds them after a paged rebuild, repaired ids included', async () => {
    const store = new MemoryIdStore();
    const writer = new IdRegistry({ store, algorithm: weak16 });
    const { results } = await checkWeakHashScenario(writer);
    await checkRepair(writer, results);
    const gate = privateGate();
    const reader = new IdRegistry({ store, algorithm: weak16, gate });
    await checkGateRebuild(writer, reader, results, 97);
    // one loadAll per non-empty page: a rebuild re-publishes nothing through addAll
    expect(gate.loads).toBeGreaterThan(1);
  });

  it('rebuildGate(): options, no gate, gates without loadAll, stores that cannot list', async () => {
    expect(await new MemoryIdStore().listLogicalIds(undefined, 10)).toEqual({ ids: [], cursor: undefined });
    const store = new MemoryIdStore();
    const w = new IdRegistry({ store });
    for (const r of records(5)) await w.upsert(r);
    expect(await w.rebuildGate()).toBe(0);
    const keys: string[] = [];
    const addOnly = { addAll: async (k: readonly string[]) => keys.push(...k), containsAll: async (k: readonly string[]) => new Uint8Array(k.length).fill(1) };
    expect(await new IdRegistry({ store, gate: addOnly }).rebuildGate({ pageSize: 2 })).toBe(5);
    expect(keys.sort()).toEqual(records(5).map((r) => w.logicalId(r)).sort());
    await expect(new IdRegistry({ store, gate: addOnly }).rebuildGate({ pageSize: 0 })).rejects.toThrow(/options\.pageSize/);
    await expect(new IdRegistry({ store, gate: addOnly }).rebuildGate({ size: 1 } as never)).rejects.toThrow(/size/);
    const { listLogicalIds: _drop, ...rest } = Object.getOwnPropertyDescriptors(MemoryIdStore.prototype);
    void _drop;
    const legacy = Object.create(Object.prototype, rest) as IdStore;
    Object.defineProperty(legacy, 'kind', { value: 'legacy' });
    await expect(new IdRegistry({ store: legacy, gate: addOnly }).rebuildGate()).rejects.toMatchObject({ code: 'HG_ERR_INVALID_ARG' });
  });
});
