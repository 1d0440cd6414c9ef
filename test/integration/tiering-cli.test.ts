// `hashgate migrate` (src/cli/commands/migrate.ts) against a real redis-server and a real HBase.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Redis } from 'ioredis';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { ensureHBase, hbaseConfigured, type HBaseHarness } from '../helpers/hbase.js';
import { run, parseDuration } from '../../src/cli/commands/migrate.js';
import { HotColdStore } from '../../src/tiering/index.js';
import { coldTableDdl } from '../../src/cache/index.js';

const hasRedis = requireRedisOrSkip('hashgate migrate');
const hasHBase = hbaseConfigured('hashgate migrate');

async function capture(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
  const error = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void err.push(a.join(' ')));
  try {
    const code = await run(argv);
    return { code, out: out.join('\n'), err: err.join('\n') };
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
}

describe('hashgate migrate: arguments', () => {
  it('parses durations and rejects bad flags with exit 2', async () => {
    expect(parseDuration('--threshold', '1h')).toBe(3_600_000);
    expect(parseDuration('--threshold', '90s')).toBe(90_000);
    expect(parseDuration('--threshold', '250')).toBe(250);
    expect(() => parseDuration('--threshold', 'soon')).toThrow(/--threshold/);
    expect((await capture([])).code).toBe(2);
    expect((await capture(['--redis', 'redis://127.0.0.1:1', '--bogus'])).code).toBe(2);
    // CI exports HBASE_ZK for every suite; this case is about a missing quorum.
    const saved = process.env.HBASE_ZK;
    delete process.env.HBASE_ZK;
    let noCold: Awaited<ReturnType<typeof capture>>;
    try {
      noCold = await capture(['--redis', 'redis://127.0.0.1:1']);
    } finally {
      if (saved !== undefined) process.env.HBASE_ZK = saved;
    }
    expect(noCold.code).toBe(2);
    expect(noCold.err).toMatch(/--hbase/);
  });
});

describe.skipIf(!hasRedis || !hasHBase)('hashgate migrate: Redis -> real HBase', () => {
  let srv: RedisServer;
  let redis: Redis;
  let hb: HBaseHarness;
  let table: string;
  beforeAll(async () => {
    srv = await startRedis();
    redis = new Redis(srv.url, { maxRetriesPerRequest: 1 });
    hb = await ensureHBase();
    table = hb.uniqueName('cli');
    await hb.ddl(coldTableDdl(table));
    const hot = new HotColdStore({ redis });
    await hot.write(table, Array.from({ length: 12 }, (_, i) => ({ key: `n${i}`, value: { i } })), { ttlSeconds: 300 });
    await hot.write(table, Array.from({ length: 20 }, (_, i) => ({ key: `f${i}`, value: { i } })));
  });
  afterAll(async () => {
    redis?.disconnect();
    await srv?.stop();
    if (table) await hb?.ddl(`drop ${table}`).catch(() => undefined);
    await hb?.release();
  });

  it('dry run counts, a held lock exits 3, a real run migrates exactly the near-expiry keys, a rerun none', async () => {
    const base = ['--redis', srv.url, '--hbase', hb.zookeeper, '--table', table, '--json', '--batch', '8'];
    const dry = await capture([...base, '--dry-run']);
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.out)).toMatchObject({ candidates: 12, migrated: 0, dryRun: true });

    await redis.set('hg:migrate:lock', 'someone-else', 'PX', 60_000);
    expect((await capture(base)).code).toBe(3);
    await redis.del('hg:migrate:lock');

    const r = await capture(base);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ complete: true, candidates: 12, migrated: 12 });
    const store = hb.store();
    const rows = await store.scan(table, { limit: 100 });
    expect(rows.map((x) => x.key.toString()).sort()).toEqual(Array.from({ length: 12 }, (_, i) => `n${i}`).sort());

    const again = await capture(base);
    expect(JSON.parse(again.out)).toMatchObject({ migrated: 0, alreadyArchived: 12 });
  });
});
