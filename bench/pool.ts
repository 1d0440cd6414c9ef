// Pool suite: the HashGate facade dispatching to piscina workers over shared slots, against the
// same work inline on the main thread and against `bloomfilter` (the fastest JS filter), at
// n = 1M, p = 0.001, shape-A keys. Thread-count sweep (inline, 1..cores workers) for
// hashBatch(murmur3_128) and bloomCheck, and a batch-size sweep for bloomCheck on 1 worker.
import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { Suite, makeKeys, size, equalBytes } from './common.js';
import type { SuiteOptions, SuiteResult, SweepSeries } from './common.js';
import { HashGate } from '../src/gate.js';
import { BloomFilter } from '../src/bloom/index.js';
import { hashBatch, packKeys } from '../src/hash/index.js';
import { userCaseRows } from './_bloom-user-rows.js';

const P = 0.001;

interface PeerFilter {
  add(key: string): void;
  test(key: string): boolean;
}
// bloomfilter ships no types; this is the slice of its API the peer rows use.
const Bf = (createRequire(import.meta.url)('bloomfilter') as { BloomFilter: new (bits: number, k: number) => PeerFilter }).BloomFilter;

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('pool', opts);
  const n = size(opts, 1_000_000, 20_000);
  const runs = opts.quick ? 2 : 4;
  const cores = availableParallelism();
  const keys = makeKeys(n, 'A', 21);
  const absent = makeKeys(n, 'A', 22).map((k) => `${k}#`);
  const mix = keys.map((k, i) => (i % 2 === 0 ? k : absent[i]!));
  const packedMix = packKeys(mix);
  const expectedHash = hashBatch(keys);
  s.note(`n = ${n} shape-A keys (Chinese name + 18-digit ID), p = ${P}; ${cores} cores; ${runs} timed runs after 1 warm-up.`);
  s.note('Pool rows run through HashGate: the calling thread encodes keys into shared lanes (string keys of Bloom calls as UTF-16 code units, in the filter memory), workers hash/probe them there; while every lane is busy the calling thread answers a slice itself.');

  // Peer: bloomfilter with Guava's shape for the same (n, p).
  const shape = BloomFilter.create({ expectedItems: n, fpp: P });
  const peer = new Bf(Math.ceil(shape.bitSize / 32) * 32, shape.hashFunctions);
  for (const k of keys) peer.add(k);
  const peerPresent = mix.reduce((c, k) => c + (peer.test(k) ? 1 : 0), 0);
  await s.sample({
    name: 'bloom check', impl: 'bloomfilter', role: 'peer', runs, unit: 'keys/s',
    fn: () => {
      let c = 0;
      for (let i = 0; i < mix.length; i++) if (peer.test(mix[i]!)) c++;
      if (c !== peerPresent) throw new Error('bloomfilter answers changed between runs');
      return n;
    },
  });

  const threadCounts = [0, ...Array.from({ length: Math.max(2, cores) }, (_, i) => i + 1)];
  const hashSeries: SweepSeries = { name: 'hashBatch murmur3_128', points: [] };
  const checkSeries: SweepSeries = { name: 'bloomCheck (string keys)', points: [] };
  const packedSeries: SweepSeries = { name: 'bloomCheck (packed keys)', points: [] };
  for (const threads of threadCounts) {
    const label = threads === 0 ? 'hashgate inline' : `hashgate pool of ${threads}`;
    const gate = await HashGate.open({ threads, bloom: { expectedItems: n, fpp: P }, inlineThreshold: threads === 0 ? Number.MAX_SAFE_INTEGER : 0 });
    try {
      await gate.bloomAdd(keys);
      const truth = gate.bloom!.mightContainAll(mix);
      const hashRow = await s.sample({
        name: 'hashBatch murmur3_128', impl: label, role: 'hashgate', runs, unit: 'keys/s', extra: { threads },
        check: async () => equalBytes(await gate.hashBatch(keys), expectedHash),
        fn: async () => (await gate.hashBatch(keys)).length / 16,
      });
      const checkRow = await s.sample({
        name: 'bloom check', impl: `${label} (string keys)`, role: 'hashgate', runs, unit: 'keys/s', extra: { threads },
        check: async () => equalBytes(await gate.bloomCheck(mix), truth),
        fn: async () => (await gate.bloomCheck(mix)).length,
      });
      const packedRow = await s.sample({
        name: 'bloom check', impl: `${label} (packed keys)`, role: 'hashgate', runs, unit: 'keys/s', extra: { threads },
        check: async () => equalBytes(await gate.bloomCheck(packedMix), truth),
        fn: async () => (await gate.bloomCheck(packedMix)).length,
      });
      hashSeries.points.push({ x: threads, y: hashRow.opsPerSec });
      checkSeries.points.push({ x: threads, y: checkRow.opsPerSec });
      packedSeries.points.push({ x: threads, y: packedRow.opsPerSec });
    } finally {
      await gate.close();
    }
  }
  s.sweep({ name: 'throughput vs worker threads (0 = inline)', xLabel: 'worker threads', yLabel: 'keys/s', series: [hashSeries, checkSeries, packedSeries] });

  // Batch size: one worker, bloomCheck of string keys, per-call batch from 512 to 64k keys.
  const batchSeries: SweepSeries = { name: 'pool of 1, bloomCheck strings', points: [] };
  const inlineSeries: SweepSeries = { name: 'inline, bloomCheck strings', points: [] };
  for (const [series, threads] of [[batchSeries, 1], [inlineSeries, 0]] as const) {
    const gate = await HashGate.open({ threads, bloom: { expectedItems: n, fpp: P }, inlineThreshold: threads === 0 ? Number.MAX_SAFE_INTEGER : 0 });
    try {
      for (const batch of opts.quick ? [1024, 8192] : [512, 2048, 8192, 32768, 65536]) {
        const slices: string[][] = [];
        for (let i = 0; i < n; i += batch) slices.push(mix.slice(i, i + batch));
        const row = await s.sample({
          name: `bloom check batch ${batch}`, impl: threads === 0 ? 'hashgate inline' : 'hashgate pool of 1', role: 'hashgate', runs: 2, unit: 'keys/s', extra: { batch, threads },
          fn: async () => {
            let c = 0;
            for (const sl of slices) c += (await gate.bloomCheck(sl)).length;
            return c;
          },
        });
        series.points.push({ x: batch, y: row.opsPerSec });
      }
    } finally {
      await gate.close();
    }
  }
  s.sweep({ name: 'throughput vs batch size', xLabel: 'keys per call', yLabel: 'keys/s', logX: true, series: [batchSeries, inlineSeries] });

  const best = (impl: string) => s.ratio('bloom check', impl, 'bloomfilter');
  // What a user sees: flat strings from JSON.parse, never seen before, one fresh process per side.
  await userCaseRows(s, ['hashgate pool of 2', 'bloomfilter'], opts.quick);
  s.target('pool of 2 bloom checks (packed keys) vs bloomfilter', '>=', 2.0, best('hashgate pool of 2 (packed keys)'), 'x');
  return s.finish();
}
