// gate.health() against a real redis-server that is killed (-9) and restarted: per-tier status,
// readiness and the fail-open journal backlog, as a /readyz probe would see them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HashGate, type GateHealth } from '../../src/index.js';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';

const has = requireRedisOrSkip('gate.health()');

async function until(gate: HashGate, pred: (h: GateHealth) => boolean, ms = 15_000): Promise<GateHealth> {
  const end = Date.now() + ms;
  for (;;) {
    const h = await gate.health({ timeoutMs: 500 });
    if (pred(h)) return h;
    if (Date.now() > end) throw new Error(`health never matched: ${JSON.stringify(h)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('gate.health() (embedded)', () => {
  it('is up and ready, then not ready once closed', async () => {
    const gate = await HashGate.open({ threads: 1 });
    const h = await gate.health();
    expect(h).toMatchObject({ status: 'up', ready: true, tiers: { dedup: { store: 'memory', status: 'up' } }, pool: { threads: 1 } });
    expect(h.journal).toBeUndefined();
    await gate.close();
    expect(await gate.health()).toMatchObject({ status: 'down', ready: false });
  });
});

describe.skipIf(!has)('gate.health() (Redis killed and restarted)', () => {
  let srv: RedisServer;
  let dir: string;
  beforeAll(async () => {
    srv = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'hg-health-'));
  });
  afterAll(async () => {
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('fail-open: degraded while Redis is down and while the journal waits; up after recover()', async () => {
    const gate = await HashGate.open({ threads: 0, redis: srv.url, dedup: { journalDir: join(dir, 'open'), replayIntervalMs: 0, commandTimeoutMs: 300 } });
    try {
      await gate.firstSeen(['a']);
      const up = await until(gate, (h) => h.status === 'up');
      expect(up).toMatchObject({ ready: true, tiers: { dedup: { store: 'redis', status: 'up' } }, journal: { backlogBytes: 0 } });

      await srv.kill('SIGKILL');
      expect([...(await gate.firstSeen(['b', 'c']))]).toEqual([1, 1]); // answered by fail-open, journaled
      const down = await until(gate, (h) => h.tiers.dedup.status !== 'up');
      expect(down.tiers.dedup.status).toBe('degraded');
      expect(down.ready).toBe(true);
      expect(down.journal!.backlogBytes).toBeGreaterThan(0);

      await srv.restart();
      const back = await until(gate, (h) => !/connection|PING/.test(h.tiers.dedup.reason ?? ''));
      // Redis answers again, but the journaled keys are not in it yet
      expect(back.tiers.dedup).toMatchObject({ status: 'degraded', reason: expect.stringMatching(/journal/) });
      const rep = await gate.recover();
      expect(rep.keys).toBe(2);
      expect(await until(gate, (h) => h.status === 'up')).toMatchObject({ ready: true, journal: { backlogBytes: 0 } });
    } finally {
      await gate.close();
    }
  });

  it('fail-closed: down and not ready while Redis is down', async () => {
    const gate = await HashGate.open({ threads: 0, redis: srv.url, dedup: { onStoreError: 'fail-closed', journalDir: join(dir, 'closed'), replayIntervalMs: 0, commandTimeoutMs: 300 } });
    try {
      await gate.firstSeen(['x']);
      await until(gate, (h) => h.status === 'up');
      await srv.kill('SIGKILL');
      const h = await until(gate, (x) => x.tiers.dedup.status !== 'up');
      expect(h).toMatchObject({ status: 'down', ready: false, tiers: { dedup: { status: 'down' } } });
      await srv.restart();
      expect(await until(gate, (x) => x.ready)).toMatchObject({ status: 'up' });
    } finally {
      await gate.close();
    }
  });

  it('reports online replicas and their lag (INFO replication on the primary)', async () => {
    const replica = await startRedis({ args: ['--replicaof', '127.0.0.1', String(srv.port)] });
    const gate = await HashGate.open({ threads: 0, redis: srv.url, dedup: { journalDir: join(dir, 'replica'), replayIntervalMs: 0 } });
    try {
      await gate.firstSeen(['r']);
      const h = await until(gate, (x) => x.tiers.dedup.replicas === 1, 30_000);
      expect(h.tiers.dedup).toMatchObject({ status: 'up', replicas: 1, replicaLagSeconds: expect.any(Number) });
      expect(h.tiers.dedup.replicaLagSeconds!).toBeLessThan(5);
      await replica.kill('SIGKILL');
      const gone = await until(gate, (x) => x.tiers.dedup.replicas === undefined, 30_000);
      expect(gone.tiers.dedup.status).toBe('up');
    } finally {
      await gate.close();
      await replica.stop().catch(() => undefined);
    }
  }, 90_000);
});
