// Compact buckets that split as they fill, on a real 3-master Redis Cluster with a small
// set-max-intset-entries: a bucket's sub-buckets and state share its slot, so the service's
// per-bucket scripts and the loader's per-master scripts split them atomically; answers and
// counts stay exact and every sub-bucket stays an intset.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Cluster } from 'ioredis';
import { HashGate } from 'hashgate';
import { requireClusterOrSkip, startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';

const HAVE = requireClusterOrSkip('bucket growth on a cluster');
const CLI = resolve(import.meta.dirname, '../../dist/src/cli/main.js');
const LIMIT = 16;
const ones = (a: ArrayLike<number>): number => Array.from(a).reduce((x, y) => x + y, 0);

describe.skipIf(!HAVE)('compact buckets split on a 3-master cluster', () => {
  let cl: RedisClusterHandle;
  let client: Cluster;
  let dir: string;
  beforeAll(async () => {
    cl = await startRedisCluster({ args: ['--set-max-intset-entries', String(LIMIT)] });
    client = new Cluster(cl.nodes);
    dir = mkdtempSync(join(tmpdir(), 'hg-growth-cluster-'));
  });
  afterAll(async () => {
    await client?.quit().catch(() => undefined);
    await cl?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Encoding and size of every set matching `pattern` on every master. */
  async function sets(pattern: string): Promise<Array<{ encoding: string; size: number }>> {
    const out: Array<{ encoding: string; size: number }> = [];
    for (const node of client.nodes('master')) {
      let cursor = '0';
      do {
        const [c, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000, 'TYPE', 'set');
        cursor = c;
        for (const k of keys) out.push({ encoding: String(await node.object('ENCODING', k)), size: await node.scard(k) });
      } while (cursor !== '0');
    }
    return out;
  }

  it('the service: batches, single keys and requestId retries answer exactly while buckets split', async () => {
    const gate = await HashGate.open({ threads: 0, redis: { cluster: cl.nodes }, dedup: { buckets: 8, prefix: 'gc', window: () => '2030', cacheMaxEntries: 0, journalDir: join(dir, 'j'), replayIntervalMs: 0 } });
    try {
      const keys = Array.from({ length: 6000 }, (_, i) => `李${i}|${510101199001010000 + i}`);
      for (let o = 0; o < 5000; o += 500) expect(ones(await gate.firstSeen(keys.slice(o, o + 500), o % 1000 === 0 ? { requestId: `r${o}` } : undefined))).toBe(500);
      for (let i = 5000; i < 5200; i++) expect(ones(await gate.firstSeen([keys[i]!]))).toBe(1);
      // a retry of the first call after the buckets split since: its original answers
      expect(ones(await gate.firstSeen(keys.slice(0, 500), { requestId: 'r0' }))).toBe(500);
      expect(ones(await gate.firstSeen(keys.slice(0, 5200)))).toBe(0);
      expect(ones(await gate.firstSeen(keys.slice(5200)))).toBe(800);
      const st = await gate.dedupStats('2030');
      expect(st.exact).toBe(6000);
      expect(st.subBuckets!).toBeGreaterThan(8 * 20);
      expect(st.largestBucket!).toBeLessThanOrEqual(LIMIT);
      const all = await sets('gc:2030:c{*');
      expect(all.length).toBeGreaterThan(8 * 20);
      expect(all.filter((s) => !(s.encoding === 'intset' && s.size <= LIMIT))).toEqual([]);
    } finally {
      await gate.close();
    }
  }, 120_000);

  it('hashgate load --cluster: exact new members, every key then seen, all intsets', async () => {
    const file = join(dir, 'export.txt');
    const rows = Array.from({ length: 30_000 }, (_, i) => `赵${i % 20_000}|${610101199001010000 + (i % 20_000)}`);
    writeFileSync(file, `${rows.join('\n')}\n`);
    const nodes = cl.nodes.map((n) => `${n.host}:${n.port}`).join(',');
    const run = spawnSync(process.execPath, [CLI, 'load', file, '--cluster', nodes, '--prefix', 'lc', '--window', '2030', '--buckets', '8', '--checkpoint', join(dir, 'load.cp'), '--json', '--quiet'], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout.trim())).toMatchObject({ rows: 30_000, failed: 0, newMembers: 20_000 });
    const all = await sets('lc:2030:c{*');
    expect(all.reduce((a, s) => a + s.size, 0)).toBe(20_000);
    expect(all.every((s) => s.encoding === 'intset' && s.size <= LIMIT)).toBe(true);
    const gate = await HashGate.open({ threads: 0, redis: { cluster: cl.nodes }, dedup: { prefix: 'lc', window: () => '2030', journalDir: join(dir, 'j2'), replayIntervalMs: 0 } });
    try {
      expect(ones(await gate.firstSeen(rows.slice(0, 20_000).map((l) => l.replace('|', ''))))).toBe(0);
      expect((await gate.dedupStats('2030')).exact).toBe(20_000);
    } finally {
      await gate.close();
    }
  }, 120_000);
});
