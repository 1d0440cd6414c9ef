// hashgate load against a real 3-master Redis Cluster: bucket keys spread over all slots, every
// batch routed to the node owning its key, exact count in both layouts.
import { describe, it, expect, beforeAll, afterAll, vi } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { startRedisCluster, requireClusterOrSkip, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { generateExport } from '../../src/loader/generate.js';
import { run as runLoad } from '../../src/cli/commands/load.js';
import { bucketKey } from '../../src/dedup/layout.js';

const HAVE = requireClusterOrSkip('loader cluster');

describe.skipIf(!HAVE)('hashgate load --cluster (real 3-master cluster)', () => {
  let cl: RedisClusterHandle;
  let client: Cluster;
  let dir: string;
  beforeAll(async () => {
    cl = await startRedisCluster();
    client = new Cluster(cl.nodes);
    dir = mkdtempSync(join(tmpdir(), 'hg-loader-cluster-'));
  });
  afterAll(async () => {
    await client?.quit().catch(() => undefined);
    await cl?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const [layout, nb] of [['sets', 1000], ['compact', 4096]] as const) {
    it(`${layout} layout, ${nb} buckets: exact count across the nodes`, async () => {
      const gen = generateExport({ dir: join(dir, layout), files: 2, rowsPerFile: 5000, dupRatio: 0.25, seed: 31 });
      const nodes = cl.nodes.map((n) => `${n.host}:${n.port}`).join(',');
      const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
      let code: number;
      let printed = '';
      try {
        code = await runLoad([
          join(dir, layout), '--cluster', nodes, '--layout', layout, '--prefix', `cl-${layout}`, '--window', '2026', '--buckets', String(nb),
          '--checkpoint', join(dir, `${layout}.cp`), '--failed-file', join(dir, `${layout}.failed`), '--json', '--quiet',
        ]);
        printed = String(log.mock.calls[0]?.[0]);
      } finally {
        log.mockRestore();
      }
      expect(code).toBe(0);
      expect(JSON.parse(printed)).toMatchObject({ rows: gen.rows, loaded: gen.rows, failed: 0, newMembers: gen.distinct });
      const spec = { layout, prefix: `cl-${layout}` };
      const counts = await Promise.all(Array.from({ length: nb }, (_, b) => client.scard(bucketKey(spec, '2026', b))));
      expect(counts.reduce((a, b) => a + b, 0)).toBe(gen.distinct);
      // the buckets really are spread: every master holds some of them
      const perNode = await Promise.all(client.nodes('master').map((n) => n.dbsize()));
      expect(perNode.every((n) => n > 0)).toBe(true);
    });
  }
});
