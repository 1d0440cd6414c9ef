// Library behaviour the README and OPERATIONS promise: health() names the store dedupStats()
// names, bloomCheck without a filter is an option error (a TypeError subclass), and the service's
// journal gauges carry the label `hashgate metrics --journal-dir` gives the same directory.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HashGate, createMetrics } from 'hashgate';
import { freePort } from './helpers/redis-server.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hg-documented-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('health().tiers.dedup.store', () => {
  it('is lmdb for the durable embedded store, as dedupStats().store says', async () => {
    const gate = await HashGate.open({ threads: 0, dedup: { path: join(dir, 'store') } });
    try {
      const stats = await gate.dedupStats();
      expect(stats.store).toBe('lmdb');
      const h = await gate.health();
      expect(h.tiers.dedup.store).toBe(stats.store);
    } finally {
      await gate.close();
    }
  });

  it('is memory for the in-memory store, as dedupStats().store says', async () => {
    const gate = await HashGate.open({ threads: 0 });
    try {
      expect((await gate.health()).tiers.dedup.store).toBe((await gate.dedupStats()).store);
      expect((await gate.health()).tiers.dedup.store).toBe('memory');
    } finally {
      await gate.close();
    }
  });
});

describe('bloomAdd / bloomCheck on a gate opened without options.bloom', () => {
  it('reject with a TypeError subclass carrying HG_ERR_INVALID_OPTION and naming options.bloom', async () => {
    const gate = await HashGate.open({ threads: 0 });
    try {
      for (const call of [() => gate.bloomCheck(['a']), () => gate.bloomAdd(['a'])]) {
        const err = await call().then(() => undefined, (e: unknown) => e);
        expect(err).toBeInstanceOf(TypeError);
        expect(err).toMatchObject({ code: 'HG_ERR_INVALID_OPTION', details: { name: 'options.bloom' } });
        expect((err as Error).message).toMatch(/needs a Bloom filter: open the gate with options\.bloom/);
      }
    } finally {
      await gate.close();
    }
  });
});

describe('journal gauges: the service and the sidecar label a directory the same way', () => {
  it('journal="<absolute dir>" in both, for the same directory', async () => {
    const journalDir = join(dir, 'journal');
    const metrics = createMetrics();
    // a Redis store is what has a journal; lazyConnect: the gauges do not need Redis to answer
    const gate = await HashGate.open({
      threads: 0,
      redis: `redis://127.0.0.1:${await freePort()}`,
      dedup: { journalDir, lazyConnect: true, replayIntervalMs: 0 },
      metrics,
    });
    let inProcess: string[];
    try {
      inProcess = [...(await metrics.text()).matchAll(/^hashgate_journal_backlog_bytes\{journal="([^"]*)"\}/gm)].map((m) => m[1]!);
    } finally {
      await gate.close();
    }
    const { mkdirSync } = await import('node:fs');
    mkdirSync(journalDir, { recursive: true });
    // the sidecar given the directory relative to its working directory
    const side = spawnSync(process.execPath, [join(process.cwd(), 'dist/src/cli/main.js'), 'metrics', '--once', '--no-process', '--journal-dir', 'journal'], { cwd: dir, encoding: 'utf8' });
    expect(side.status, side.stderr).toBe(0);
    const sidecar = [...side.stdout.matchAll(/^hashgate_journal_backlog_bytes\{journal="([^"]*)"\}/gm)].map((m) => m[1]!);
    expect(inProcess).toEqual([journalDir]);
    expect(sidecar).toEqual(inProcess);
  });
});
