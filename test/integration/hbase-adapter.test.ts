// Real HBase 2.6 (services/hbase) through the adapter: data operations, multi-region scans, the
// HBase 2 compatibility fixes under a live client, column-family TTL, typed errors.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { ErrorCodes, HashGateError } from '../../src/errors.js';
import { HBaseStore } from '../../src/hbase/client.js';
import { hbaseConfigured, ensureHBase, type HBaseHarness } from '../helpers/hbase.js';
import { freePort } from '../helpers/redis-server.js';

const keys = (rows: { key: Buffer }[]): string[] => rows.map((r) => r.key.toString());

async function rejection(p: Promise<unknown>): Promise<HashGateError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(HashGateError);
  return err as HashGateError;
}

describe.skipIf(!hbaseConfigured('hbase adapter integration'))('HBase adapter (real HBase)', () => {
  let hb: HBaseHarness;
  let store: HBaseStore;
  // 3 regions: [..,g) [g,p) [p,..)
  let table: string;

  beforeAll(async () => {
    hb = await ensureHBase();
    store = hb.store();
    table = await hb.createTable('adapter', ['cf:versions=3', 'meta'], ['g', 'p']);
  });
  afterAll(async () => {
    await hb?.release();
  });

  it('put/get round trip with several columns and families', async () => {
    await store.put(table, 'alpha', { 'cf:a': 'A', 'cf:b': Buffer.from([0, 1, 2]), 'meta:m': 'M' });
    const row = await store.get(table, 'alpha');
    expect(row).not.toBeNull();
    expect(row!.key.toString()).toBe('alpha');
    expect(row!.columns['cf:a']!.toString()).toBe('A');
    expect([...row!.columns['cf:b']!]).toEqual([0, 1, 2]);
    expect(row!.columns['meta:m']!.toString()).toBe('M');
    expect(await store.get(table, 'absent-row')).toBeNull();
    const onlyMeta = await store.get(table, 'alpha', { columns: ['meta'] });
    expect(Object.keys(onlyMeta!.columns)).toEqual(['meta:m']);
  });

  it('keeps versions and explicit timestamps', async () => {
    await store.put(table, 'ver', { 'cf:v': 'one' }, { timestamp: 1000 });
    await store.put(table, 'ver', { 'cf:v': 'two' }, { timestamp: 2000 });
    const latest = await store.get(table, 'ver');
    expect(latest!.columns['cf:v']!.toString()).toBe('two');
    expect(latest!.cells[0]!.timestamp).toBe(2000);
    const all = await store.get(table, 'ver', { maxVersions: 3 });
    expect(all!.cells.map((c) => c.value.toString())).toEqual(['two', 'one']);
  });

  it('mput/mget across regions keep request order, null for absent rows', async () => {
    const rows = ['b1', 'h1', 'q1', 'c1', 'z1'];
    await store.mput(table, rows.map((r) => ({ row: r, values: { 'cf:x': `x-${r}` } })));
    const got = await store.mget(table, ['z1', 'nope', 'b1', 'h1', 'nada', 'q1', 'c1']);
    expect(got.map((r) => r?.columns['cf:x']?.toString() ?? null))
      .toEqual(['x-z1', null, 'x-b1', 'x-h1', null, 'x-q1', 'x-c1']);
    expect(await store.mget(table, [])).toEqual([]);
  });

  it('delete removes a row or single columns', async () => {
    await store.put(table, 'del', { 'cf:a': '1', 'cf:b': '2' });
    await store.delete(table, 'del', { columns: ['cf:a'] });
    expect(Object.keys((await store.get(table, 'del'))!.columns)).toEqual(['cf:b']);
    await store.delete(table, 'del');
    expect(await store.get(table, 'del')).toBeNull();
    await store.mput(table, [{ row: 'd1', values: { 'cf:a': '1' } }, { row: 'r1', values: { 'cf:a': '1' } }]);
    await store.mdelete(table, ['d1', 'r1']);
    expect(await store.mget(table, ['d1', 'r1'])).toEqual([null, null]);
  });

  it('checkAndPut: put-if-absent, compare-and-set, mismatch', async () => {
    expect(await store.checkAndPut(table, 'cas', { column: 'cf:s', value: null }, { 'cf:s': 'v1' })).toBe(true);
    expect(await store.checkAndPut(table, 'cas', { column: 'cf:s', value: null }, { 'cf:s': 'v2' })).toBe(false);
    expect(await store.checkAndPut(table, 'cas', { column: 'cf:s', value: 'wrong' }, { 'cf:s': 'v3' })).toBe(false);
    expect(await store.checkAndPut(table, 'cas', { column: 'cf:s', value: 'v1' }, { 'cf:s': 'v4', 'cf:t': 'extra' })).toBe(true);
    const row = await store.get(table, 'cas');
    expect(row!.columns['cf:s']!.toString()).toBe('v4');
    expect(row!.columns['cf:t']!.toString()).toBe('extra');
  });

  describe('scan over a 3-region table', () => {
    let st: string;
    // 6, 10 and 14 rows in the three regions; keys sort as strings
    const all = [...'abcdefhijk', ...'ghlmnostuv'.split('').map((c) => `${c}x`), ...'pqrwxyz'.split(''), 'p0', 'p1', 'p2']
      .sort();

    beforeAll(async () => {
      st = await hb.createTable('scan', ['cf'], ['g', 'p']);
      await store.mput(st, all.map((k) => ({ row: k, values: { 'cf:v': k } })));
    });

    it('full forward and reversed scans see every row once, in order', async () => {
      expect(keys(await store.scan(st))).toEqual(all);
      expect(keys(await store.scan(st, { reversed: true }))).toEqual([...all].reverse());
    });

    it('start/stop range is [start, stop) in both directions, across region boundaries', async () => {
      const expected = all.filter((k) => k >= 'e' && k < 'q');
      expect(keys(await store.scan(st, { startRow: 'e', stopRow: 'q' }))).toEqual(expected);
      expect(keys(await store.scan(st, { startRow: 'e', stopRow: 'q', reversed: true }))).toEqual([...expected].reverse());
      // bounds that are existing rows and region start keys
      const exact = all.filter((k) => k >= 'gx' && k < 'p0');
      expect(keys(await store.scan(st, { startRow: 'gx', stopRow: 'p0', reversed: true }))).toEqual([...exact].reverse());
      expect(await store.scan(st, { startRow: 'q', stopRow: 'e' })).toEqual([]);
    });

    it('prefix scans, forward and reversed', async () => {
      expect(keys(await store.scan(st, { prefix: 'p' }))).toEqual(['p', 'p0', 'p1', 'p2']);
      expect(keys(await store.scan(st, { prefix: 'p', reversed: true }))).toEqual(['p2', 'p1', 'p0', 'p']);
      expect(keys(await store.scan(st, { prefix: 'hx' }))).toEqual(['hx']);
      expect(await store.scan(st, { prefix: 'nothing' })).toEqual([]);
    });

    it('limit stops early (newest-first reads take one reversed scan)', async () => {
      expect(keys(await store.scan(st, { limit: 3 }))).toEqual(all.slice(0, 3));
      expect(keys(await store.scan(st, { reversed: true, limit: 2 }))).toEqual([...all].reverse().slice(0, 2));
      expect(keys(await store.scan(st, { prefix: 'p', reversed: true, limit: 1 }))).toEqual(['p2']);
      expect(await store.scan(st, { limit: 0 })).toEqual([]);
    });

    it('small batches (including a batch ending exactly at a region end) lose no rows', async () => {
      for (const batchSize of [1, 3, 6, 10, 14, 15]) {
        expect(keys(await store.scan(st, { batchSize }))).toEqual(all);
        expect(keys(await store.scan(st, { batchSize, reversed: true }))).toEqual([...all].reverse());
      }
    });

    it('scanIterator streams and can be abandoned early', async () => {
      const seen: string[] = [];
      for await (const row of store.scanIterator(st, { batchSize: 4 })) {
        seen.push(row.key.toString());
        if (seen.length === 5) break;
      }
      expect(seen).toEqual(all.slice(0, 5));
    });
  });

  it('large scans: HBase 2 short batches mid-region do not end the region early', async () => {
    // regression: HBase 2 returned 3 of 100 requested rows mid-region (more_results_in_region is
    // not in this client's proto), and treating a short batch as the region end lost rows
    const t = await hb.createTable('bigscan', ['cf'], ['5']);
    const all = Array.from({ length: 12_000 }, (_, i) => `${i % 10}k${i}`);
    for (let i = 0; i < all.length; i += 1000) {
      await store.mput(t, all.slice(i, i + 1000).map((k) => ({ row: k, values: { 'cf:v': 'x'.repeat(32) } })));
    }
    const sorted = [...all].sort();
    const fwd = await store.scan(t, { batchSize: 100 });
    expect(fwd.length).toBe(all.length);
    expect(keys(fwd)).toEqual(sorted);
    const rev = await store.scan(t, { batchSize: 1000, reversed: true });
    expect(keys(rev)).toEqual([...sorted].reverse());
  });

  it('HBase 2 fixes: table-state rows of a longer table name do not break lookups (prefix names)', async () => {
    // hbase-rpc-client's own meta prefetch crashes the process on exactly this layout
    const short = hb.uniqueName('pfx');
    const long = `${short}_more`;
    await hb.ddl(`create ${short} -f cf --replace`, `create ${long} -f cf --replace`);
    try {
      await store.put(short, 'k', { 'cf:q': 'short' });
      await store.put(long, 'k', { 'cf:q': 'long' });
      expect((await store.get(short, 'k'))!.columns['cf:q']!.toString()).toBe('short');
      expect((await store.get(long, 'k'))!.columns['cf:q']!.toString()).toBe('long');
      expect(keys(await store.scan(short))).toEqual(['k']);
    } finally {
      await hb.ddl(`drop ${short}`, `drop ${long}`);
    }
  });

  it('HBase 2 fixes: drop and recreate a table (new regions) under a live client', async () => {
    const t = await hb.createTable('recreate', ['cf'], ['m']);
    const live = hb.store();
    await live.mput(t, [{ row: 'a', values: { 'cf:q': 'old-a' } }, { row: 'x', values: { 'cf:q': 'old-x' } }]);
    expect((await live.get(t, 'a'))!.columns['cf:q']!.toString()).toBe('old-a');

    // same name, different region layout: every cached location of the live client is stale
    await hb.ddl(`create ${t} -f cf -s d,s --replace`);
    expect(await live.get(t, 'a')).toBeNull();
    await live.put(t, 'a', { 'cf:q': 'new-a' });
    await live.mput(t, [{ row: 'e', values: { 'cf:q': 'new-e' } }, { row: 'z', values: { 'cf:q': 'new-z' } }]);
    expect((await live.mget(t, ['z', 'a', 'e', 'x'])).map((r) => r?.columns['cf:q']?.toString() ?? null))
      .toEqual(['new-z', 'new-a', 'new-e', null]);
    expect(keys(await live.scan(t, { reversed: true }))).toEqual(['z', 'e', 'a']);
    // the lookups went through the reversed meta scan, not closest_row_before
    expect(live.callCounts().rpcs.metaScan).toBeGreaterThan(0);
  });

  it('HBase 2 fixes: a scan continues after its table is dropped and recreated mid-scan', async () => {
    const t = await hb.createTable('midscan', ['cf'], ['f']);
    const rows = 'abcdefghij'.split('');
    const fill = () => store.mput(t, rows.map((r) => ({ row: r, values: { 'cf:q': r } })));
    await fill();
    const it = store.scanIterator(t, { batchSize: 2 });
    const seen: string[] = [];
    for (let i = 0; i < 3; i++) {
      const n = await it.next();
      seen.push((n.value as { key: Buffer }).key.toString());
    }
    await hb.ddl(`create ${t} -f cf -s c,h --replace`);
    await fill();
    for await (const row of it) seen.push(row.key.toString());
    expect(seen).toEqual(rows);
  });

  it('call counters count operations and RPCs (a warm get is one Get RPC)', async () => {
    const s = hb.store();
    await s.get(table, 'alpha'); // warms the region cache
    s.resetCallCounts();
    await s.get(table, 'alpha');
    await s.mget(table, ['b1', 'h1', 'q1']); // 3 regions, one server -> one Multi
    const c = s.callCounts();
    expect(c.ops.get).toBe(1);
    expect(c.ops.mget).toBe(1);
    expect(c.rpcs.Get).toBe(1);
    expect(c.rpcs.Multi).toBe(1);
    expect(c.rpcs.Mutate + c.rpcs.Scan).toBe(0);
    const seen: string[] = [];
    const hooked = hb.store({ onRpc: (method, t) => seen.push(`${method}@${t}`) });
    await hooked.get(table, 'alpha');
    expect(seen).toContain(`Get@${table}`);
  });

  it('column-family TTL: HBase expires cells by itself (no delete issued)', async () => {
    const t = await hb.createTable('ttl', ['cold:ttl=2', 'keep'], []);
    await store.put(t, 'r', { 'cold:v': 'short-lived', 'keep:v': 'stays' });
    expect((await store.get(t, 'r'))!.columns['cold:v']!.toString()).toBe('short-lived');
    // a cell written with an old timestamp is already past its TTL (matters for cold migration)
    await store.put(t, 'old', { 'cold:v': 'x' }, { timestamp: Date.now() - 60_000 });
    expect(await store.get(t, 'old')).toBeNull();
    await new Promise((r) => setTimeout(r, 3_000));
    const after = await store.get(t, 'r');
    expect(after!.columns['cold:v']).toBeUndefined();
    expect(after!.columns['keep:v']!.toString()).toBe('stays');
    // and a major compaction drops the expired cells physically; the view stays the same
    await hb.ddl(`compact ${t}`);
    expect(Object.keys((await store.get(t, 'r'))!.columns)).toEqual(['keep:v']);
  });

  it('typed errors: unknown table, bad arguments, closed store', async () => {
    const missing = await rejection(store.get('hg_no_such_table_zz', 'k'));
    expect(missing.code).toBe(ErrorCodes.HBASE);
    expect(String(missing.details?.['exceptionClassName'])).toMatch(/TableNotFound/);
    await expect(store.put(table, '', { 'cf:a': '1' })).rejects.toMatchObject({ code: ErrorCodes.EMPTY_KEY });
    await expect(store.put(table, 'k', { nocolon: '1' })).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG });
    await expect(store.put(table, 'k', {})).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG });
    const closed = hb.store();
    await closed.close();
    await expect(closed.get(table, 'alpha')).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
  });

  it('typed errors: unreachable ZooKeeper rejects with HG_ERR_HBASE_UNAVAILABLE within the deadline', async () => {
    const port = await freePort();
    const dead = new HBaseStore({ zookeeper: `127.0.0.1:${port}`, operationTimeoutMs: 2_000, connectTimeoutMs: 1_000 });
    try {
      const err = await rejection(dead.get(table, 'alpha'));
      expect(err.code).toBe(ErrorCodes.HBASE_UNAVAILABLE);
      const err2 = await rejection(dead.mput(table, [{ row: 'a', values: { 'cf:a': '1' } }]));
      expect(err2.code).toBe(ErrorCodes.HBASE_UNAVAILABLE);
    } finally {
      await dead.close();
    }
  }, 20_000);
});
