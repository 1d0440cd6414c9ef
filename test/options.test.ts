// One option-validation rule for HashGate.open at every nesting level: unknown keys are refused by
// their full path, every option error carries HG_ERR_INVALID_OPTION and is a TypeError or RangeError.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { HashGate, DEDUP_DEFAULTS, GATE_DEFAULTS, ErrorCodes, type HashGateOptions } from '../src/index.js';

async function optionError(options: unknown): Promise<{ name: string; code: string; message: string; path: unknown; type: boolean; range: boolean }> {
  try {
    const gate = await HashGate.open(options as HashGateOptions);
    await gate.close();
  } catch (err) {
    const e = err as Error & { code: string; details?: { name?: unknown } };
    return { name: e.name, code: e.code, message: e.message, path: e.details?.name, type: err instanceof TypeError, range: err instanceof RangeError };
  }
  throw new Error(`HashGate.open accepted ${JSON.stringify(options)}`);
}

// [options, full path the error must name, RangeError (true) or TypeError (false)]
const CASES: Array<[unknown, string, boolean]> = [
  [{ nope: 1 }, 'options.nope', false],
  [{ threads: -1 }, 'options.threads', true],
  [{ threads: 1.5 }, 'options.threads', false],
  [{ idleTimeoutMs: -5 }, 'options.idleTimeoutMs', true],
  [{ bloom: { expected: 10 } }, 'options.bloom.expected', false],
  [{ bloom: { expectedItems: 10, fpp: 2 } }, 'options.bloom.fpp', true],
  [{ bloom: 'yes' }, 'options.bloom', false],
  [{ dedup: { window: 'week' } }, 'options.dedup.window', false],
  [{ dedup: { windowSize: 1 } }, 'options.dedup.windowSize', false],
  [{ dedup: { maxBatchKeys: 0 } }, 'options.dedup.maxBatchKeys', true],
  [{ dedup: { replaySliceKeys: 10_001 } }, 'options.dedup.replaySliceKeys', true],
  [{ dedup: { replaySliceKeys: 1.5 } }, 'options.dedup.replaySliceKeys', false],
  [{ redis: 42 }, 'options.redis', false],
  [{ now: 5 }, 'options.now', false],
  [{ cache: { lru: 1 } }, 'options.cache.lru', false],
  [{ cache: { local: { max: 1 } } }, 'options.cache.local.max', false],
  [{ cache: { local: { maxEntries: 0 } } }, 'options.cache.local.maxEntries', true],
  [{ cache: { breaker: { failures: 1, cooldown: 5 } } }, 'options.cache.breaker.cooldown', false],
  [{ index: { prefix: 'x' } }, 'options.index.prefix', false],
  [{ index: { keyPrefix: '' } }, 'options.index.keyPrefix', false],
  [{ ids: { algo: 'md5' } }, 'options.ids.algo', false],
  [{ metrics: { prefx: 'a_' } }, 'options.metrics.prefx', false],
  [{ metrics: 7 }, 'options.metrics', false],
];

describe('HashGate option errors', () => {
  for (const [options, path, range] of CASES) {
    it(`${JSON.stringify(options)} -> ${path}`, async () => {
      const e = await optionError({ threads: 0, ...(options as object) });
      expect(e.code).toBe(ErrorCodes.INVALID_OPTION);
      expect(e.path).toBe(path);
      expect(e.message.startsWith(path)).toBe(true);
      expect(range ? e.range : e.type && !e.range).toBe(true);
    });
  }

  it('an unknown key next to a similar known one suggests it', async () => {
    const e = await optionError({ threads: 0, bloom: { expected: 10 } });
    expect(e.message).toMatch(/did you mean expectedItems\?/);
    expect(e.message).not.toMatch(/expectedItems must be/);
  });

  it('any unknown key at any level is refused by its full path (property)', async () => {
    const reserved = new Set(['__proto__', 'constructor', 'prototype']);
    const key = fc.string({ minLength: 1, maxLength: 12 }).filter((k) => /^[a-z]+$/i.test(k) && !reserved.has(k));
    const levels: Array<[string, (k: string) => object, readonly string[]]> = [
      ['options', (k) => ({ [k]: 1 }), Object.keys({ threads: 0, maxQueue: 0, inlineThreshold: 0, chunkKeys: 0, chunkBytes: 0, lanes: 0, idleTimeoutMs: 0, bloom: 0, firstSeenBloom: 0, redis: 0, dedup: 0, cache: 0, index: 0, ids: 0, metrics: 0, now: 0, coalesce: 0 })],
      ['options.dedup', (k) => ({ dedup: { [k]: 1 } }), Object.keys(DEDUP_DEFAULTS).concat(['buckets', 'expectedKeys', 'secret'])],
      ['options.cache', (k) => ({ cache: { [k]: 1 } }), ['local', 'negativeTtlMs', 'redis', 'cold', 'coldOptions', 'bloom', 'breaker', 'maxKeysPerLookup', 'onTierError', 'now']],
      ['options.bloom', (k) => ({ bloom: { expectedItems: 10, fpp: 0.1, [k]: 1 } }), ['expectedItems', 'fpp', 'seed', 'engine']],
    ];
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...levels), key, async ([prefix, build, known], k) => {
        fc.pre(!known.includes(k));
        const e = await optionError({ threads: 0, ...build(k) });
        expect(e.code).toBe(ErrorCodes.INVALID_OPTION);
        expect(e.path).toBe(`${prefix}.${k}`);
      }),
      { numRuns: 80 },
    );
  });

  it('lanes sets the shared transfer buffers; the old names slots and testHooks are not options', async () => {
    for (const [options, lanes] of [[{ lanes: 5 }, 5], [{}, 2]] as const) {
      const gate = await HashGate.open({ threads: 0, ...options });
      expect(gate.options.lanes).toBe(lanes);
      expect('slots' in gate.options).toBe(false);
      await gate.close();
    }
    expect((await optionError({ threads: 0, lanes: 0 })).path).toBe('options.lanes');
    for (const old of ['slots', 'testHooks']) {
      const e = await optionError({ threads: 0, [old]: old === 'slots' ? 3 : true });
      expect(e.code).toBe(ErrorCodes.INVALID_OPTION);
      expect(e.path).toBe(`options.${old}`);
    }
  });

  it('exports the dedup defaults next to the gate defaults', () => {
    expect(DEDUP_DEFAULTS.journalDir).toBe('./hashgate-journal');
    expect(DEDUP_DEFAULTS.maxBatchKeys).toBe(200_000);
    expect(GATE_DEFAULTS.idleTimeoutMs).toBe(30_000);
  });
});
