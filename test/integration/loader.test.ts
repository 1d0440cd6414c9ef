import { describe, it, expect, beforeAll, afterAll, vi } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startRedis, requireRedisOrSkip, type RedisServer, scardSum } from '../helpers/redis-server.js';
import { generateExport, personLine } from '../../src/loader/generate.js';
import { run as runLoad } from '../../src/cli/commands/load.js';
import { metaField, metaKey } from '../../src/dedup/layout.js';
import { encodeKeys, memberKey } from '../helpers/layout.js';
import { BloomFilter } from '../../src/bloom/index.js';
import { load } from '../../src/loader/loader.js';
import { RedisLayoutSink } from '../../src/loader/sink.js';
import { bucketOf } from '../../src/hash/index.js';

const HAVE = requireRedisOrSkip('loader integration');


describe.skipIf(!HAVE)('loader -> real redis-server (sets layout)', () => {
  let srv: RedisServer;
  let redis: Redis;
  let dir: string;
  beforeAll(async () => {
    srv = await startRedis();
    redis = new Redis(srv.url);
    dir = mkdtempSync(join(tmpdir(), 'hg-loader-'));
  });
  afterAll(async () => {
    redis?.disconnect();
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('multi-file export with duplicates, CRLF, malformed, invalid UTF-8, empty file: exact count, rejects, summary', async () => {
    const gen = generateExport({
      dir: join(dir, 'export'),
      files: 4,
      rowsPerFile: 5000,
      dupRatio: 0.3,
      crlfRatio: 0.2,
      malformedEvery: 997,
      invalidUtf8Every: 1499,
      emptyEvery: 2003,
      emptyFile: true,
      noFinalNewline: true,
      seed: 7,
    });
    const rejectsFile = join(dir, 'rejects.tsv');
    const failedFile = join(dir, 'failed.txt');
    const sink = new RedisLayoutSink(new Redis(srv.url), { layout: 'sets', prefix: 't1', buckets: 1000 });
    const sum = await load(
      {
        inputs: [join(dir, 'export')],
        window: '2026',
        batch: 100,
        concurrency: 4,
        rejectsFile,
        failedFile,
        checkpointFile: join(dir, 'cp1.json'),
        readBufferBytes: 64 * 1024,
      },
      { sink },
    );
    await sink.close();
    expect(await scardSum(redis, 't1:2026:[0-9]*')).toBe(gen.distinct);
    expect(sum.rows).toBe(gen.rows);
    expect(sum.loaded).toBe(gen.rows);
    expect(sum.failed).toBe(0);
    expect(sum.newMembers).toBe(gen.distinct);
    expect(sum.rejected).toBe(gen.rejects.length);
    expect(sum.files).toBe(5);
    const lines = readFileSync(rejectsFile, 'utf8').trimEnd().split('\n').map((l) => l.split('\t'));
    expect(lines.map(([f, n, r]) => `${f}:${n}:${r}`).sort()).toEqual(gen.rejects.map((x) => `${x.file}:${x.line}:${x.reason}`).sort());
    // every member sits in the bucket bucketOf says
    const members = await redis.smembers('t1:2026:7');
    expect(members.length).toBeGreaterThan(0);
    for (const m of members) expect(bucketOf(m, 1000)).toBe(7);
    const cp = JSON.parse(readFileSync(join(dir, 'cp1.json'), 'utf8'));
    expect(Object.values(cp.files).every((f) => (f as { done: boolean }).done)).toBe(true);
  });
});

describe.skipIf(!HAVE)('loader -> real redis-server: many buckets, about one row per bucket per batch', () => {
  let srv: RedisServer;
  let redis: Redis;
  let dir: string;
  beforeAll(async () => {
    srv = await startRedis();
    redis = new Redis(srv.url);
    dir = mkdtempSync(join(tmpdir(), 'hg-loader-many-'));
  });
  afterAll(async () => {
    redis?.disconnect();
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('1,000,000 buckets: every row lands in its bucket, one plain SADD per bucket of a batch', async () => {
    const gen = generateExport({ dir: join(dir, 'export'), files: 2, rowsPerFile: 15_000, dupRatio: 0.2, seed: 11 });
    const buckets = 1_000_000;
    const client = new Redis(srv.url);
    const sent = vi.spyOn(client, 'sendCommand');
    const sink = new RedisLayoutSink(client, { layout: 'sets', prefix: 'many', buckets });
    await redis.config('RESETSTAT');
    const sum = await load({ inputs: [join(dir, 'export')], window: '2026', buckets, batch: 1000, concurrency: 4, checkpointFile: join(dir, 'cp.json') }, { sink });
    await sink.close();
    expect(sum).toMatchObject({ rows: gen.rows, loaded: gen.rows, failed: 0, newMembers: gen.distinct });
    // the rows went out over the sink's own connection as SADDs, never more than one per row,
    // and no script: the ioredis client only set the window up
    const stats = await redis.info('commandstats');
    const sadds = Number(/cmdstat_sadd:calls=(\d+)/.exec(stats)?.[1]);
    expect(sadds).toBeGreaterThan(0);
    expect(sadds).toBeLessThanOrEqual(gen.rows);
    expect(/cmdstat_evalsha/.test(stats)).toBe(false);
    expect(sent.mock.calls.length).toBeLessThan(10);
    // every key is a member of the bucket bucketOf names, and nothing else was added
    const keys = Array.from({ length: gen.distinct }, (_, i) => personLine(i).replace('|', ''));
    const p = redis.pipeline();
    for (const k of keys) p.sismember(`many:2026:${bucketOf(k, buckets)}`, k);
    expect(((await p.exec()) ?? []).filter(([, v]) => v === 1).length).toBe(keys.length);
    expect(await scardSum(redis, 'many:2026:[0-9]*')).toBe(gen.distinct);
    expect(Number(await redis.get('many:2026:count'))).toBe(gen.distinct);
  });

  it('keys of every length from 1 to 300 bytes, ASCII and CJK, land byte for byte in their buckets', async () => {
    const keys: string[] = [];
    for (let len = 1; len <= 300; len++) {
      keys.push('k'.repeat(len - 1) + String.fromCharCode(65 + (len % 26)));
      // three bytes a character: 1 to 100 characters
      if (len <= 100) keys.push('张'.repeat(len - 1) + '三');
    }
    const file = join(dir, 'lengths.txt');
    // the key is the two fields joined: split each key in two
    writeFileSync(file, keys.map((k) => `${k.slice(0, 1)}|${k.slice(1)}\n`).join(''), { mode: 0o600 });
    for (const buckets of [3, 100_000]) {
      const client = new Redis(srv.url);
      const prefix = `len${buckets}`;
      const sink = new RedisLayoutSink(client, { layout: 'sets', prefix, buckets });
      const sum = await load({ inputs: [file], window: '2026', buckets, batch: 64, checkpointFile: join(dir, `len${buckets}.json`) }, { sink });
      await sink.close();
      expect(sum).toMatchObject({ rows: keys.length, loaded: keys.length, failed: 0, newMembers: keys.length });
      const p = redis.pipeline();
      for (const k of keys) p.sismember(`${prefix}:2026:${bucketOf(k, buckets)}`, k);
      expect(((await p.exec()) ?? []).filter(([, v]) => v === 1).length).toBe(keys.length);
      expect(await scardSum(redis, `${prefix}:2026:[0-9]*`)).toBe(keys.length);
    }
  });
});

describe.skipIf(!HAVE)('hashgate load CLI -> real redis-server: layouts readable by the dedup store', () => {
  let srv: RedisServer;
  let redis: Redis;
  let dir: string;
  beforeAll(async () => {
    srv = await startRedis();
    redis = new Redis(srv.url);
    dir = mkdtempSync(join(tmpdir(), 'hg-loader-cli-'));
  });
  afterAll(async () => {
    redis?.disconnect();
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const layout of ['compact', 'sets'] as const) {
    it(`${layout}: exact count, members where src/dedup/layout.ts looks, window count, meta, Bloom output`, async () => {
      // compact with 4096 buckets exercises grouped batches (more buckets than DEFAULTS.maxGroups)
      const nb = layout === 'compact' ? 4096 : 64;
      const gen = generateExport({ dir: join(dir, layout), files: 3, rowsPerFile: 3000, dupRatio: 0.3, crlfRatio: 0.5, seed: 21 });
      const bloomOut = join(dir, `${layout}.bloom`);
      const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
      let code: number;
      let printed = '';
      try {
        code = await runLoad([
          join(dir, layout), '--redis', srv.url, '--layout', layout, '--prefix', `cli-${layout}`, '--window', '2026',
          '--buckets', String(nb), '--checkpoint', join(dir, `${layout}.cp`), '--failed-file', join(dir, `${layout}.failed`),
          '--bloom', bloomOut, '--json', '--quiet',
        ]);
        printed = String(log.mock.calls[0]?.[0]);
      } finally {
        log.mockRestore();
      }
      expect(code).toBe(0);
      const summary = JSON.parse(printed);
      expect(summary).toMatchObject({ rows: gen.rows, loaded: gen.rows, failed: 0, newMembers: gen.distinct, layout });
      const spec = { layout, prefix: `cli-${layout}`, buckets: nb };
      // every generated key is where the dedup store's layout code says it is
      const keys = Array.from({ length: gen.distinct }, (_, i) => personLine(i).replace('|', ''));
      const enc = encodeKeys(keys, spec);
      const p = redis.pipeline();
      for (let i = 0; i < keys.length; i++) p.sismember(await memberKey(redis, spec, '2026', enc.buckets[i]!, enc.members[i]!), enc.members[i]!);
      const res = (await p.exec())!;
      expect(res.filter(([, v]) => v === 1).length).toBe(keys.length);
      expect(await scardSum(redis, layout === 'compact' ? `${spec.prefix}:2026:c{*` : `${spec.prefix}:2026:[0-9]*`)).toBe(gen.distinct);
      expect(await redis.hget(metaKey(spec.prefix, '2026'), metaField(layout))).toBe(String(nb));
      expect(Number(await redis.get(layout === 'compact' ? `${spec.prefix}:2026:c:count` : `${spec.prefix}:2026:count`))).toBe(gen.distinct);
      const bloom = BloomFilter.readFrom(readFileSync(bloomOut));
      expect(keys.every((k) => bloom.mightContain(k))).toBe(true);
      // a second load into the same window with another bucket count is refused, naming --buckets
      const err = vi.spyOn(console, 'error').mockImplementation(() => undefined);
      try {
        expect(await runLoad([join(dir, layout), '--redis', srv.url, '--layout', layout, '--prefix', `cli-${layout}`, '--window', '2026', '--buckets', '32', '--checkpoint', join(dir, `${layout}.cp2`), '--quiet'])).toBe(2);
        expect(err.mock.calls.map((c) => String(c[0])).join('\n')).toContain('--buckets');
        err.mockClear();
      } finally {
        err.mockRestore();
      }
    });
  }
});
