// Error messages never carry key contents (personal data) or connection secrets: every public
// entry point that takes keys is fed bad input holding a recognisable marker, and src/ is scanned
// for error constructions that interpolate key-like variables. Bad Redis URLs give a coded error
// naming the option instead of Node's raw ERR_INVALID_URL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BloomFilter, CountingBloomFilter } from '../src/entries/bloom.js';
import { DedupService } from '../src/entries/dedup.js';
import { HashGate, hashBatch, murmur3_128Hex, bucketOf } from '../src/index.js';
import { HBaseStore, RiskCheck } from '../src/entries/hbase.js';
import { TieredCache } from '../src/entries/cache.js';
import { describe as describeValue } from '../src/errors.js';
import { redactServerMessage } from '../src/hbase/wire.js';
import { ensureHBase, hbaseConfigured, type HBaseHarness } from './helpers/hbase.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
/** A key a user must never find in a log line: a name and a (made-up) ID number. */
const NAME = '张三丰';
const ID = '110101199003077777';
const KEY_STR = `${NAME}|${ID}`;
const KEY_NUM = 110101199003077;

/** Runs `fn`, which must throw or reject, and returns the error. */
async function failure(fn: () => unknown): Promise<Error & { code?: string; details?: Record<string, unknown> }> {
  try {
    await fn();
  } catch (e) {
    return e as Error & { code?: string };
  }
  throw new Error('expected a failure');
}

function expectNoKey(e: Error): void {
  expect(e.message).not.toContain(NAME);
  expect(e.message).not.toContain(ID);
  expect(e.message).not.toContain(String(KEY_NUM));
  expect(e.message).not.toContain('7777'); // no fragment of the ID either
}

describe('error messages carry no key contents', () => {
  it('firstSeen(a string) says it got a string and how long, not what it said', async () => {
    const gate = await HashGate.open({});
    try {
      const e = await failure(() => gate.firstSeen(KEY_STR as unknown as string[]));
      expect(e.code).toBe('HG_ERR_INVALID_ARG');
      expect(e.message).toContain(`got a string of ${KEY_STR.length} chars`);
      expect(e.message).toMatch(/^keys must be/);
      expectNoKey(e);
      const short = await failure(() => gate.firstSeen('one string' as unknown as string[]));
      expect(short.message).not.toContain('one string');
      for (const bad of [KEY_NUM, ['ok', KEY_NUM], ['ok', { id: ID }], ['ok', BigInt(KEY_NUM)]]) {
        const err = await failure(() => gate.firstSeen(bad as unknown as string[]));
        expect(err.code).toBe('HG_ERR_INVALID_ARG');
        expectNoKey(err);
      }
      expect((await failure(() => gate.firstSeen(['ok', KEY_NUM] as unknown as string[]))).message).toContain('keys[1]');
    } finally {
      await gate.close();
    }
  });

  it('every key-taking entry point, fed a bad key, names the argument and hides the value', async () => {
    const bloom = BloomFilter.create({ expectedItems: 100, fpp: 0.01 });
    const counting = CountingBloomFilter.create({ expectedItems: 100, fpp: 0.01 });
    const cache = new TieredCache({});
    const dedup = new DedupService({});
    const hb = new HBaseStore({ zookeeper: '127.0.0.1:1' }); // never connects: arguments are checked first
    const risk = new RiskCheck({ store: hb });
    const calls: [string, () => unknown][] = [
      ['hashBatch(string)', () => hashBatch(KEY_STR as unknown as string[])],
      ['hashBatch([.., number])', () => hashBatch(['a', KEY_NUM] as unknown as string[])],
      ['murmur3_128Hex(number)', () => murmur3_128Hex(KEY_NUM as unknown as string)],
      ['bucketOf(number)', () => bucketOf(KEY_NUM as unknown as string, 16)],
      ['bloom.add(number)', () => bloom.add(KEY_NUM as unknown as string)],
      ['bloom.mightContainAll(string)', () => bloom.mightContainAll(KEY_STR as unknown as string[])],
      ['bloom.addAll([.., number])', () => bloom.addAll(['a', KEY_NUM] as unknown as string[])],
      ['counting.addAll(string)', () => counting.addAll(KEY_STR as unknown as string[])],
      ['cache.lookup(string)', () => cache.lookup('t', KEY_STR as unknown as string[])],
      ['cache.lookup([.., number])', () => cache.lookup('t', ['a', KEY_NUM] as unknown as string[])],
      ['dedup.firstSeen([.., number])', () => dedup.firstSeen(['a', KEY_NUM] as unknown as string[])],
      ['hbase.get(number)', () => hb.get('t', KEY_NUM as unknown as string)],
      ['hbase.mget(string)', () => hb.mget('t', KEY_STR as unknown as string[])],
      ['hbase.mput(row number)', () => hb.mput('t', [{ row: KEY_NUM as unknown as string, values: { 'c:q': 'x' } }])],
      ['risk.latestRisk(userId number)', () => risk.latestRisk('login', KEY_NUM as unknown as string)],
    ];
    try {
      for (const [what, fn] of calls) {
        const e = await failure(fn);
        expect(typeof e.code, what).toBe('string');
        expect(e.code, what).toMatch(/^HG_ERR_/);
        expect(e.message, what).not.toContain(NAME);
        expect(e.message, what).not.toContain(ID);
        expect(e.message, what).not.toContain(String(KEY_NUM));
      }
    } finally {
      await cache.close();
      await dedup.close();
      await hb.close();
    }
  });

  it('describe(): type and size only for strings; numbers hidden for data arguments', () => {
    expect(describeValue(KEY_STR)).toBe(`a string of ${KEY_STR.length} chars`);
    expect(describeValue(KEY_NUM, true)).toBe('a number');
    expect(describeValue(3.5)).toBe('3.5'); // option values (not data) still show what was wrong
    expect(describeValue(['a', 'b'])).toBe('array(2)');
  });

  it('no error construction in src/ interpolates a key, row, member or raw value', () => {
    const files: string[] = [];
    const walk = (d: string): void => {
      for (const f of readdirSync(d)) {
        const p = join(d, f);
        if (statSync(p).isDirectory()) walk(p);
        else if (p.endsWith('.ts')) files.push(p);
      }
    };
    walk(join(repo, 'src'));
    expect(files.length).toBeGreaterThan(50);
    // an error being built on this line, with a ${...} that names user data
    const errorLine = /(throw |Error\(|invalidType\(|outOfRange\(|reject\()/;
    const dataInterp = /\$\{[^}]*\b(key|keys|rowKey|row|member|members|raw|userId|doc|line|input)\b(?!\.length|\.byteLength|s?\.count)[^}]*\}/;
    // describe() of a key argument must hide numbers too
    const keyDescribe = /keys?\[\$\{\w+\}\][^;]*describe\(\w+\)/;
    const offenders: string[] = [];
    for (const f of files) {
      const lines = readFileSync(f, 'utf8').split('\n');
      lines.forEach((l, i) => {
        if (l.trimStart().startsWith('//') || l.trimStart().startsWith('*')) return;
        if ((errorLine.test(l) && dataInterp.test(l)) || keyDescribe.test(l)) offenders.push(`${relative(repo, f)}:${i + 1}: ${l.trim()}`);
      });
    }
    // the counter shard row 's:<n>' of the ids store is ours, not user data
    expect(offenders.filter((o) => !o.includes('ids: counter ${row}'))).toEqual([]);
  });
});

describe('bad Redis URLs give a coded error naming the option, without the URL', () => {
  const secretUrl = 'redis://app:s3cr3t-pw@not a host:6379';

  it('TieredCache redis.url', () => {
    for (const url of ['not a url', secretUrl]) {
      let e: (Error & { code?: string; details?: Record<string, unknown> }) | undefined;
      try {
        new TieredCache({ redis: { url } });
      } catch (err) {
        e = err as typeof e;
      }
      expect(e).toBeInstanceOf(TypeError);
      expect(e!.code).toBe('HG_ERR_INVALID_OPTION');
      expect(e!.details).toMatchObject({ name: 'redis.url' });
      expect(e!.message).toMatch(/^redis\.url must be a redis:\/\/ URL/);
      expect(e!.message).not.toContain('s3cr3t');
      expect(e!.message).not.toContain('not a');
    }
  });

  it('HashGate.open({ redis }) and DedupService rejects/throws HG_ERR_INVALID_OPTION naming redis', async () => {
    const e = await failure(() => HashGate.open({ redis: secretUrl }));
    expect(e.code).toBe('HG_ERR_INVALID_OPTION');
    expect(e.details).toMatchObject({ name: 'options.redis' });
    expect(e.message).not.toContain('s3cr3t');
    const d = await failure(() => new DedupService({ redis: 'not a url' }));
    expect(d.code).toBe('HG_ERR_INVALID_OPTION');
    expect(d.message).toMatch(/^redis must be a redis:\/\/ URL/);
    const c = await failure(() => HashGate.open({ cache: { redis: { url: 'not a url' } } }));
    expect(c.code).toBe('HG_ERR_INVALID_OPTION');
  });
});

describe('HBase server messages lose their row keys', () => {
  it('row=, region boundaries and region names are redacted', () => {
    const wrong = "org.apache.hadoop.hbase.regionserver.WrongRegionException: Requested row out of range for Get on HRegion bl,user3,1732950000000.0123456789abcdef0123456789abcdef., startKey='user3', getEndKey()='user7', row='user9|110101199003077777'";
    const out = redactServerMessage(wrong);
    expect(out).not.toContain('110101199003077777');
    expect(out).not.toContain('user3');
    expect(out).not.toContain('user7');
    expect(out).toContain("row=<redacted>");
    expect(out).toContain('bl,<redacted>,1732950000000.0123456789abcdef0123456789abcdef.');
    expect(out).toMatch(/^org\.apache\.hadoop\.hbase\.regionserver\.WrongRegionException: Requested row out of range/);
    const plain = 'org.apache.hadoop.hbase.TableNotFoundException: blacklist';
    expect(redactServerMessage(plain)).toBe(plain);
  });
});

describe.skipIf(!hbaseConfigured('error messages (HBase)'))('HBase server errors on a real HBase', () => {
  let hb: HBaseHarness;
  beforeAll(async () => {
    hb = await ensureHBase();
  });
  afterAll(async () => {
    await hb?.release();
  });

  it('a write to a missing family in a pre-split region names neither the row nor the region start key', async () => {
    const table = await hb.createTable('redact', ['base'], ['u3zz']);
    const store = hb.store();
    await store.ready(table);
    const e = await failure(() => store.mput(table, [{ row: `u5|${ID}`, values: { 'nope:q': 'x' } }]));
    expect(e.code).toBe('HG_ERR_HBASE');
    expect(e.message).toMatch(/NoSuchColumnFamily/);
    expect(e.message).not.toContain(ID);
    expect(e.message).not.toContain('u3zz');
  });
});
