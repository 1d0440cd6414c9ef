// hashgate load against a real 3-master Redis Cluster: bucket keys spread over all slots, every
// batch routed to the node owning its key, exact count in both layouts.
import { describe, it, expect, beforeAll, afterAll, vi } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { startRedisCluster, requireClusterOrSkip, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { generateExport } from '../../src/loader/generate.js';
import { run as runLoad } from '../../src/cli/commands/load.js';
import { scardSum } from '../helpers/redis-server.js';
import { load } from '../../src/loader/loader.js';
import { RedisLayoutSink } from '../../src/loader/sink.js';
import { bucketOf } from '../../src/hash/index.js';
import { personLine } from '../../src/loader/generate.js';
import calculateSlot from 'cluster-key-slot';

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
      // every set of the window on every master (compact: the sub-buckets of each table)
      let total = 0;
      for (const node of client.nodes('master')) total += await scardSum(node, layout === 'compact' ? `cl-${layout}:2026:c{*` : `cl-${layout}:2026:[0-9]*`);
      expect(total).toBe(gen.distinct);
      // the buckets really are spread: every master holds some of them
      const perNode = await Promise.all(client.nodes('master').map((n) => n.dbsize()));
      expect(perNode.every((n) => n > 0)).toBe(true);
    });
  }

  /** Loads an export at 200,000 buckets through `client`; checks every key is where a fresh client finds it. */
  async function loadMany(tag: string, prepare: (c: Cluster) => void): Promise<{ sent: string[] }> {
    const buckets = 200_000;
    const gen = generateExport({ dir: join(dir, tag), files: 2, rowsPerFile: 6000, dupRatio: 0.2, seed: 41 });
    const c = new Cluster(cl.nodes);
    await new Promise<void>((r) => c.once('ready', () => r()));
    prepare(c);
    const sent: string[] = [];
    for (const n of c.nodes('master')) {
      const orig = n.sendCommand.bind(n);
      n.sendCommand = ((cmd: { name: string }, ...rest: unknown[]) => (sent.push(cmd.name), (orig as (...a: unknown[]) => unknown)(cmd, ...rest))) as typeof n.sendCommand;
    }
    const sink = new RedisLayoutSink(c, { layout: 'sets', prefix: tag, buckets });
    const sum = await load({ inputs: [join(dir, tag)], window: '2026', buckets, batch: 1000, concurrency: 4, checkpointFile: join(dir, `${tag}.cp`) }, { sink });
    await sink.close();
    expect(sum).toMatchObject({ rows: gen.rows, loaded: gen.rows, failed: 0 });
    const keys = Array.from({ length: gen.distinct }, (_, i) => personLine(i).replace('|', ''));
    const found = await Promise.all(keys.map((k) => client.sismember(`${tag}:2026:${bucketOf(k, buckets)}`, k)));
    expect(found.filter((v) => v === 1).length).toBe(keys.length);
    // nothing was stored on a node that does not own its slot: each master holds only keys of its own slots
    const ranges = (await client.cluster('SLOTS')) as [number, number, [string, number]][];
    const ownerPort = (slot: number): number => ranges.find(([a, b]) => slot >= a && slot <= b)![2][1];
    for (const n of cl.nodes) {
      const r = new Redis(n.port, n.host);
      try {
        const stored = await r.keys(`${tag}:2026:[0-9]*`);
        for (const k of stored) if (ownerPort(calculateSlot(k)) !== n.port) throw new Error(`${k} stored on ${n.port}, not on its slot's owner`);
      } finally {
        r.disconnect();
      }
    }
    await c.quit();
    return { sent };
  }

  it("200,000 buckets: each master gets the SADDs of its own buckets over the sink's connection, every key lands on its owner", async () => {
    for (const n of cl.nodes) {
      const r = new Redis(n.port, n.host);
      await r.config('RESETSTAT');
      r.disconnect();
    }
    const { sent } = await loadMany('many', () => undefined);
    // the members went over the sink's own pipes, one per master, never through the Cluster client
    expect(sent.filter((n) => n === 'sadd' || n === 'evalsha').length).toBe(0);
    for (const n of cl.nodes) {
      const r = new Redis(n.port, n.host);
      try {
        expect(Number(/cmdstat_sadd:calls=(\d+)/.exec(await r.info('commandstats'))?.[1] ?? 0)).toBeGreaterThan(0);
      } finally {
        r.disconnect();
      }
    }
  });

  it('a stale slot map (every slot pointing at the wrong master): the nodes refuse the SADDs, the Cluster client sends them again following MOVED, nothing lands on a wrong node', async () => {
    const { sent } = await loadMany('stale', (c) => {
      const slots = (c as unknown as { slots: string[][] }).slots;
      const owners = [...new Set(slots.map((x) => x[0]!))];
      for (let s = 0; s < slots.length; s++) slots[s] = [owners[(owners.indexOf(slots[s]![0]!) + 1) % owners.length]!];
      // keep it stale: no background refresh repairs the whole map (a MOVED still fixes its own slot)
      (c as unknown as { refreshSlotsCache: (cb?: () => void) => void }).refreshSlotsCache = (cb) => cb?.();
    });
    // the refused SADDs' rows went again through the Cluster client
    expect(sent.filter((n) => n === 'sadd').length).toBeGreaterThan(0);
  });
});
