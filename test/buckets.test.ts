import { describe, it, expect, vi } from 'vitest';
import { bucketStats, chiSquareSurvival, logGamma } from '../src/analysis/stats.js';
import { analyseSynthetic } from '../src/analysis/balance.js';
import { HashRing } from '../src/analysis/ring.js';
import { run } from '../src/cli/commands/buckets.js';

describe('chi-square and stats', () => {
  it('matches textbook critical values', () => {
    expect(chiSquareSurvival(3.841, 1)).toBeCloseTo(0.05, 3);
    expect(chiSquareSurvival(18.307, 10)).toBeCloseTo(0.05, 3);
    expect(chiSquareSurvival(1074.7, 999)).toBeCloseTo(0.05, 2);
    expect(chiSquareSurvival(0, 5)).toBe(1);
    expect(logGamma(10)).toBeCloseTo(Math.log(362880), 6);
    expect(logGamma(0.5)).toBeCloseTo(Math.log(Math.sqrt(Math.PI)), 6);
  });

  it('bucketStats: mean, stddev, min/max, chi-square of a known vector', () => {
    const s = bucketStats([10, 10, 10, 10]);
    expect(s).toMatchObject({ mean: 10, stddev: 0, min: 10, max: 10, maxOverMean: 1, chiSquare: 0, pValue: 1, keys: 40 });
    const t = bucketStats([0, 20]);
    expect(t.stddev).toBe(10);
    expect(t.chiSquare).toBe(20);
    expect(t.pValue).toBeLessThan(1e-4);
  });
});

describe('balance analysis', () => {
  const r = analyseSynthetic(50_000, { buckets: 1000, resizeTo: 2000, vnodes: 100 });
  const by = Object.fromEntries(r.methods.map((m) => [m.method, m]));

  it('counts every key once per method', () => {
    for (const m of r.methods) expect(m.stats.keys).toBe(50_000);
    expect(r.keys).toBe(50_000);
  });

  it('mod and jump are uniform (not rejected at 0.1%), the ring is visibly worse', () => {
    expect(by.mod!.stats.pValue).toBeGreaterThan(0.001);
    expect(by.jump!.stats.pValue).toBeGreaterThan(0.001);
    expect(by.ring!.stats.stddev).toBeGreaterThan(by.mod!.stats.stddev);
  });

  it('keys moved: ~half on doubling for all; adding one bucket moves ~all keys under mod, ~1/1001 under jump/ring', () => {
    for (const m of r.methods) expect(m.resize.fraction).toBeGreaterThan(0.45), expect(m.resize.fraction).toBeLessThan(0.55);
    expect(by.mod!.addOne.fraction).toBeGreaterThan(0.99);
    expect(by.jump!.addOne.fraction).toBeLessThan(0.01);
    expect(by.ring!.addOne.fraction).toBeLessThan(0.01);
    expect(by.mod!.resize.minimumFraction).toBe(0.5);
  });

  it('ring lookup wraps around the circle', () => {
    const ring = new HashRing(4, 8);
    expect(ring.lookup(0xffffffff)).toBe(ring.owners[0]);
    expect(ring.lookup(0)).toBe(ring.owners[0]);
  });
});

describe('hashgate buckets CLI', () => {
  it('--json report', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    try {
      expect(await run(['--synthetic', '5000', '--buckets', '50', '--json'])).toBe(0);
      const rep = JSON.parse(String(log.mock.calls[0]![0]));
      expect(rep.keys).toBe(5000);
      expect(rep.methods.map((m: { method: string }) => m.method)).toEqual(['mod', 'jump', 'ring']);
    } finally {
      log.mockRestore();
    }
  });

  it('bad flags exit 2 naming the flag', async () => {
    const err = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      expect(await run(['--synthetic', 'lots'])).toBe(2);
      expect(String(err.mock.calls[0]![0])).toContain('--synthetic');
      expect(await run(['--synthetic', '10', '--buckets', '0'])).toBe(2);
      expect(String(err.mock.calls[1]![0])).toContain('--buckets');
      expect(await run(['--bogus'])).toBe(2);
      expect(String(err.mock.calls[2]![0])).toContain('--bogus');
    } finally {
      err.mockRestore();
    }
  });
});
