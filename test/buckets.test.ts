import { describe, it, expect, vi, afterAll } from 'vitest';
import fc from 'fast-check';
import { mkdtempSync, rmSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bucketStats, chiSquareSurvival, logGamma } from '../src/analysis/stats.js';
import { analyseFiles, analyseSynthetic, type BalanceReport } from '../src/analysis/balance.js';
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

  it("a ring's lookup for its first k buckets equals the ring built with k buckets", () => {
    const big = new HashRing(40, 7);
    const rings = new Map<number, HashRing>();
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 0xffffffff }), (k, pos) => {
        let r = rings.get(k);
        if (r === undefined) rings.set(k, (r = new HashRing(k, 7)));
        expect(big.lookup(pos, k)).toBe(r.lookup(pos));
      }),
      { numRuns: 500 },
    );
    // points stay sorted, so binary search finds the first point clockwise
    for (let i = 1; i < big.points.length; i++) expect(big.points[i]!).toBeGreaterThanOrEqual(big.points[i - 1]!);
  });
});

describe('distinct keys', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hg-buckets-test-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  let files = 0;
  const file = (lines: string[]): string => {
    const f = join(dir, `e${files++}.txt`);
    writeFileSync(f, lines.map((l) => `${l}\n`).join(''));
    return f;
  };
  const line = (id: number): string => `name${id}|${String(id).padStart(18, '0')}`;
  /** Everything but the row count, which is the one figure duplicates change. */
  const figures = (r: BalanceReport): Omit<BalanceReport, 'rows' | 'spilled'> => {
    const { rows: _rows, spilled: _spilled, ...rest } = r;
    return rest;
  };
  // deterministic shuffle, so a failure reproduces
  const shuffle = <T>(a: T[]): T[] => {
    let x = 12345;
    for (let i = a.length - 1; i > 0; i--) {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      const j = x % (i + 1);
      [a[i], a[j]] = [a[j]!, a[i]!];
    }
    return a;
  };

  it('duplicate rows change neither the key count nor any figure (a bucket is a set)', async () => {
    const ids = Array.from({ length: 20_000 }, (_, i) => i);
    const distinct = await analyseFiles([file(ids.map(line))], { buckets: 100, vnodes: 20 });
    // every key three times, shuffled: the old analysis saw 60,000 keys and a skewed spread
    const dup = await analyseFiles([file(shuffle([...ids, ...ids, ...ids].map(line)))], { buckets: 100, vnodes: 20 });
    expect(dup.rows).toBe(60_000);
    expect(dup.keys).toBe(20_000);
    expect(distinct.rows).toBe(20_000);
    expect(figures(dup)).toEqual(figures(distinct));
    for (const m of dup.methods) expect(m.stats.keys).toBe(20_000);
  });

  it('property: the report of rows with duplicates equals the report of their distinct rows', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 0, max: 300 }), { minLength: 1, maxLength: 600 }), fc.integer({ min: 1, max: 40 }), async (ids, buckets) => {
        const opts = { buckets, vnodes: 5 };
        const withDup = await analyseFiles([file(ids.map(line))], opts);
        const unique = await analyseFiles([file([...new Set(ids)].sort((a, b) => a - b).map(line))], opts);
        expect(withDup.rows).toBe(ids.length);
        expect(figures(withDup)).toEqual(figures(unique));
      }),
      { numRuns: 25 },
    );
  });

  it('over the memory bound, keys are de-duplicated through partition files with the same result, and the files are removed', async () => {
    const ids = Array.from({ length: 120_000 }, (_, i) => i);
    const f = file(shuffle([...ids, ...ids.slice(0, 60_000)].map(line)));
    const inMemory = await analyseFiles([f], { buckets: 500, vnodes: 10 });
    const before = readdirSync(tmpdir()).filter((n) => n.startsWith('hashgate-buckets-')).length;
    // 1 MiB holds 65,536 slots: about 49,000 keys before the set must stop growing
    const spilled = await analyseFiles([f], { buckets: 500, vnodes: 10, maxMemoryMB: 1 });
    expect(inMemory.spilled).toBe(false);
    expect(spilled.spilled).toBe(true);
    expect(spilled.keys).toBe(120_000);
    expect(spilled.rows).toBe(180_000);
    expect(figures(spilled)).toEqual(figures(inMemory));
    expect(readdirSync(tmpdir()).filter((n) => n.startsWith('hashgate-buckets-')).length).toBe(before);
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

  it('takes 4,194,304 buckets; a ring too big to hold is left out with the reason, not built', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    try {
      expect(await run(['--synthetic', '3000', '--buckets', '4194304', '--json'])).toBe(0);
      const rep = JSON.parse(String(log.mock.calls[0]![0]));
      expect(rep.keys).toBe(3000);
      expect(rep.buckets).toBe(4194304);
      expect(rep.methods.map((m: { method: string }) => m.method)).toEqual(['mod', 'jump']);
      expect(rep.skipped).toEqual([{ method: 'ring', reason: expect.stringContaining('--vnodes') }]);
      expect(await run(['--synthetic', '3000', '--buckets', '4194304'])).toBe(0);
      expect(String(log.mock.calls[1]![0])).toContain('ring: left out');
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

  it('with --json a failure is one JSON line on stdout; a misspelt flag is named with a suggestion', async () => {
    const err = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    try {
      expect(await run(['--synthetic', '10', '--buckets', '0', '--json'])).toBe(2);
      expect(JSON.parse(String(log.mock.calls[0]![0]))).toMatchObject({ ok: false, code: 'HG_ERR_INVALID_OPTION', exitCode: 2 });
      expect(await run(['--synthetic', '10', '--bucket', '8', '--json'])).toBe(2);
      const line = JSON.parse(String(log.mock.calls[1]![0])) as { message: string };
      expect(line.message).toMatch(/--bucket\b.*did you mean --buckets/);
    } finally {
      err.mockRestore();
      log.mockRestore();
    }
  });
});
