// HBaseStore pieces that need no server: option validation, key ranges, meta row parsing.
import { describe, it, expect } from 'vitest';
import { HBaseStore } from '../src/hbase/client.js';
import { prefixEnd } from '../src/hbase/scanner.js';
import { parseMetaRow, isRelocateException, RegionCache } from '../src/hbase/regions.js';
import { proto } from '../src/hbase/wire.js';
import { ErrorCodes } from '../src/errors.js';

describe('HBaseStore options', () => {
  it('needs a ZooKeeper quorum from options or HBASE_ZK', () => {
    const saved = process.env['HBASE_ZK'];
    delete process.env['HBASE_ZK'];
    try {
      expect(() => new HBaseStore()).toThrow(/options\.zookeeper/);
    } finally {
      if (saved !== undefined) process.env['HBASE_ZK'] = saved;
    }
  });

  it('rejects bad timeouts and batch sizes naming the option', () => {
    expect(() => new HBaseStore({ zookeeper: 'h:1', operationTimeoutMs: 0 })).toThrow(/options\.operationTimeoutMs/);
    expect(() => new HBaseStore({ zookeeper: 'h:1', maxBatch: 1.5 })).toThrow(RangeError);
  });

  it('validates arguments before any I/O (no server at this address)', async () => {
    const s = new HBaseStore({ zookeeper: '127.0.0.1:1' });
    await expect(s.get('t', '')).rejects.toMatchObject({ code: ErrorCodes.EMPTY_KEY });
    await expect(s.put('t', 'r', { 'no-family': 'v' })).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARG });
    await expect(s.put('t', 'r', { 'cf:q': 5 as unknown as string })).rejects.toBeInstanceOf(TypeError);
    await expect(s.scan('t', { limit: -1 })).rejects.toBeInstanceOf(RangeError);
    expect(s.callCounts().rpcs).toEqual({ Get: 0, Mutate: 0, Multi: 0, Scan: 0, metaScan: 0 });
    await s.close();
    await expect(s.get('t', 'r')).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
  });
});

describe('prefixEnd', () => {
  it('is the smallest key above every key with the prefix', () => {
    expect(prefixEnd(Buffer.from('abc')).toString()).toBe('abd');
    expect([...prefixEnd(Buffer.from([0x61, 0xff, 0xff]))]).toEqual([0x62]);
    expect(prefixEnd(Buffer.from([0xff, 0xff])).length).toBe(0);
  });
});

describe('hbase:meta parsing (HBase 2 compatibility)', () => {
  const cell = (row: string, family: string, qualifier: string, value: Buffer) =>
    ({ row: Buffer.from(row), family: Buffer.from(family), qualifier: Buffer.from(qualifier), value });
  const regionInfo = (ns: string, table: string, start: string, end: string, extra: Record<string, unknown> = {}) =>
    Buffer.concat([Buffer.from('PBUF'), new (proto().RegionInfo)({
      regionId: 1, tableName: { namespace: Buffer.from(ns), qualifier: Buffer.from(table) },
      startKey: Buffer.from(start), endKey: Buffer.from(end), ...extra,
    }).toBuffer()]);

  it('reads a region row', () => {
    const r = parseMetaRow({ cell: [
      cell('t,m,1.abc.', 'info', 'regioninfo', regionInfo('default', 't', 'm', 'x')),
      cell('t,m,1.abc.', 'info', 'server', Buffer.from('127.0.0.1:16120')),
    ] });
    expect(r).toMatchObject({ table: 't', server: '127.0.0.1:16120' });
    expect(r!.startKey.toString()).toBe('m');
    expect(r!.endKey.toString()).toBe('x');
    expect(r!.name.toString()).toBe('t,m,1.abc.');
  });

  it('skips table-state rows, split parents and offline regions; keeps namespaces', () => {
    expect(parseMetaRow({ cell: [cell('t', 'table', 'state', Buffer.from([8, 0]))] })).toBeNull();
    expect(parseMetaRow({ cell: [cell('t,,1.a.', 'info', 'regioninfo', regionInfo('default', 't', '', '', { split: true }))] })).toBeNull();
    expect(parseMetaRow({ cell: [cell('t,,1.a.', 'info', 'regioninfo', regionInfo('default', 't', '', '', { offline: true }))] })).toBeNull();
    expect(parseMetaRow({ cell: [cell('ns:t,,1.a.', 'info', 'regioninfo', regionInfo('ns', 't', '', ''))] })!.table).toBe('ns:t');
  });

  it('classifies stale-location exceptions as retryable, others not', () => {
    expect(isRelocateException('org.apache.hadoop.hbase.NotServingRegionException')).toBe(true);
    expect(isRelocateException('org.apache.hadoop.hbase.exceptions.RegionMovedException')).toBe(true);
    expect(isRelocateException('org.apache.hadoop.hbase.TableNotFoundException')).toBe(false);
    expect(isRelocateException('org.apache.hadoop.hbase.DoNotRetryIOException')).toBe(false);
  });

  it('region cache finds the region holding a row by start key', async () => {
    const cache = new RegionCache({
      metaConnection: () => Promise.reject(new Error('no meta in a unit test')),
      invalidateMeta: () => undefined, countRpc: () => undefined, metaTimeoutMs: () => 1000,
    });
    const reg = (start: string, end: string) => ({ table: 't', name: Buffer.from(`t,${start},1.`), startKey: Buffer.from(start), endKey: Buffer.from(end), server: 's:1' });
    // store() is private: reach it the way lookups do
    (cache as unknown as { store(r: unknown): void }).store(reg('', 'g'));
    (cache as unknown as { store(r: unknown): void }).store(reg('g', 'p'));
    (cache as unknown as { store(r: unknown): void }).store(reg('p', ''));
    expect(cache.cached('t', Buffer.from('a'))!.startKey.toString()).toBe('');
    expect(cache.cached('t', Buffer.from('g'))!.startKey.toString()).toBe('g');
    expect(cache.cached('t', Buffer.from('ozz'))!.startKey.toString()).toBe('g');
    expect(cache.cached('t', Buffer.from('zz'))!.startKey.toString()).toBe('p');
    expect(cache.cached('other', Buffer.from('a'))).toBeUndefined();
    // a recreated table's region replaces the overlapping cached ones
    (cache as unknown as { store(r: unknown): void }).store({ ...reg('', ''), name: Buffer.from('t,,2.') });
    expect(cache.cached('t', Buffer.from('zz'))!.name.toString()).toBe('t,,2.');
  });
});
