// `hashgate demo`: the main job end to end on an embedded gate (no servers): a deterministic
// stream of name+ID transactions with a known duplicate rate goes through HashGate.firstSeen with
// the shared Bloom filter in front, and every answer is checked against the generator's truth.
// With --concurrency the same stream also runs in the service pattern (many callers in flight,
// a few keys per call, merged by the gate) next to the batch pattern, with latency percentiles.
import { parseArgs } from 'node:util';
import { createHistogram } from 'node:perf_hooks';
import { HashGate } from '../../gate.js';
import { transactions } from '../../demo/generator.js';
import { ErrorCodes, HashGateRangeError, checkInt, checkNumber } from '../../errors.js';
import { redact } from '../../util/redact.js';
import { connectCliRedis, type RedisClient } from '../../redis/client.js';
import { CONNECT_TIMEOUT_FLAG, connectTimeoutMs } from '../redis-url.js';
import { flagError } from '../flags.js';
import { fail, wantsJson } from '../output.js';

export interface DemoResult {
  items: number;
  firstSeen: number;
  duplicates: number;
  expectedDuplicates: number;
  mismatches: number;
  keysPerSec: number;
  bloom: { expectedFpp: number; measuredFpp: number | null; bitSize: number; hashFunctions: number };
  threads: number;
  batch: number;
  /** The service pattern over the same stream (only with --concurrency). */
  service?: ServiceResult;
}

export interface ServiceResult {
  concurrency: number;
  keysPerCall: number;
  calls: number;
  /** Store batches the gate sent: calls / batches is how many calls it merged per batch. */
  batches: number;
  mismatches: number;
  keysPerSec: number;
  p50Us: number;
  p99Us: number;
  p999Us: number;
}

/** `concurrency` callers, each awaiting firstSeen on the next `keysPerCall` transactions. */
async function runService(opts: { items: number; duplicateRate: number; seed: number; threads?: number; redis?: string | RedisClient; layout?: 'compact' | 'sets'; concurrency: number; keysPerCall: number }): Promise<ServiceResult> {
  const gate = await HashGate.open({
    ...(opts.threads === undefined ? {} : { threads: opts.threads }),
    ...(opts.redis === undefined ? {} : { redis: opts.redis }),
    dedup: { window: 'year', timeZone: 'Asia/Shanghai', replayIntervalMs: 0, prefix: 'hg:demo-service', ...(opts.layout === undefined ? {} : { layout: opts.layout }) },
  });
  try {
    const stream = transactions({ items: opts.items, duplicateRate: opts.duplicateRate, seed: opts.seed }, opts.keysPerCall)[Symbol.iterator]();
    const seen = new Uint8Array(opts.items);
    const h = createHistogram();
    let mismatches = 0;
    let calls = 0;
    const caller = async (): Promise<void> => {
      for (;;) {
        const nx = stream.next();
        if (nx.done === true) return;
        const batch = nx.value;
        // the truth in call order: merged calls must answer as if run one after another
        const expected = new Uint8Array(batch.length);
        const keys = new Array<string>(batch.length);
        for (let i = 0; i < batch.length; i++) {
          const id = batch[i]!.identity;
          expected[i] = seen[id] === 0 ? 1 : 0;
          seen[id] = 1;
          keys[i] = batch[i]!.key;
        }
        calls++;
        const t = process.hrtime.bigint();
        const answers = await gate.firstSeen(keys, { at: new Date(batch[0]!.at) });
        h.record(Number(process.hrtime.bigint() - t) || 1);
        for (let i = 0; i < batch.length; i++) if (answers[i] !== expected[i]) mismatches++;
      }
    };
    const t0 = performance.now();
    await Promise.all(Array.from({ length: opts.concurrency }, caller));
    const seconds = (performance.now() - t0) / 1000;
    const us = (q: number) => Math.round(h.percentile(q) / 100) / 10;
    return {
      concurrency: opts.concurrency,
      keysPerCall: opts.keysPerCall,
      calls,
      batches: gate.dedup.counters.batches,
      mismatches,
      keysPerSec: Math.round(opts.items / seconds),
      p50Us: us(50),
      p99Us: us(99),
      p999Us: us(99.9),
    };
  } finally {
    await gate.close();
  }
}

export async function runDemo(opts: { items: number; duplicateRate: number; batch: number; threads?: number; seed: number; redis?: string | RedisClient; layout?: 'compact' | 'sets'; concurrency?: number; keysPerCall?: number }): Promise<DemoResult> {
  const batchResult = await runBatch(opts);
  if (opts.concurrency === undefined) return batchResult;
  const service = await runService({ ...opts, concurrency: opts.concurrency, keysPerCall: opts.keysPerCall ?? 1 });
  return { ...batchResult, service };
}

async function runBatch(opts: { items: number; duplicateRate: number; batch: number; threads?: number; seed: number; redis?: string | RedisClient; layout?: 'compact' | 'sets' }): Promise<DemoResult> {
  const gate = await HashGate.open({
    ...(opts.threads === undefined ? {} : { threads: opts.threads }),
    firstSeenBloom: { expectedItems: Math.max(1000, opts.items), fpp: 0.01 },
    ...(opts.redis === undefined ? {} : { redis: opts.redis }),
    dedup: { window: 'year', timeZone: 'Asia/Shanghai', replayIntervalMs: 0, ...(opts.layout === undefined ? {} : { layout: opts.layout }) },
  });
  try {
    // Ground truth from identity indices: independent of every hash and store under test.
    const seen = new Uint8Array(opts.items);
    let firstSeen = 0;
    let expectedDuplicates = 0;
    let mismatches = 0;
    const t0 = performance.now();
    for (const batch of transactions({ items: opts.items, duplicateRate: opts.duplicateRate, seed: opts.seed }, opts.batch)) {
      const keys = batch.map((t) => t.key);
      const answers = await gate.firstSeen(keys, { at: new Date(batch[0]!.at) });
      for (let i = 0; i < batch.length; i++) {
        const id = batch[i]!.identity;
        const expected = seen[id] === 0 ? 1 : 0;
        seen[id] = 1;
        if (expected === 0) expectedDuplicates++;
        if (answers[i] !== expected) mismatches++;
        firstSeen += answers[i]!;
      }
    }
    const seconds = (performance.now() - t0) / 1000;
    const s = gate.stats();
    return {
      items: opts.items,
      firstSeen,
      duplicates: opts.items - firstSeen,
      expectedDuplicates,
      mismatches,
      keysPerSec: Math.round(opts.items / seconds),
      bloom: {
        expectedFpp: s.firstSeenBloom!.expectedFpp,
        measuredFpp: s.firstSeenBloom!.measuredFpp ?? null,
        bitSize: s.firstSeenBloom!.bitSize,
        hashFunctions: s.firstSeenBloom!.hashFunctions,
      },
      threads: gate.options.threads,
      batch: opts.batch,
    };
  } finally {
    await gate.close();
  }
}

const FLAGS = {
  items: { type: 'string', default: '1000000' },
  'duplicate-rate': { type: 'string', default: '0.3' },
  batch: { type: 'string', default: '8192' },
  threads: { type: 'string' },
  seed: { type: 'string', default: '20260101' },
  redis: { type: 'string' },
  ...CONNECT_TIMEOUT_FLAG,
  layout: { type: 'string' },
  concurrency: { type: 'string' },
  'keys-per-call': { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

export async function run(argv: string[]): Promise<number> {
  const json = wantsJson(argv);
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: FLAGS, strict: true }));
  } catch (err) {
    return fail('demo', flagError(err, FLAGS), 2, { json });
  }
  if (values.help) {
    console.log(`usage: hashgate demo [--items N] [--duplicate-rate R] [--batch N] [--threads N] [--seed N] [--redis URL --layout compact|sets]
                     [--connect-timeout-ms MS] [--concurrency C [--keys-per-call K]] [--json]

Generates N name+ID transactions over the natural year 2026 (Asia/Shanghai) where a fraction R
repeats an earlier identity, runs HashGate.firstSeen against the exact store (embedded in
memory unless --redis is given) and checks every answer against the truth. A Bloom filter
beside it (firstSeenBloom) reports its measured false-positive rate.
--concurrency C also runs the service pattern on the same stream: C callers in flight, each
sending K keys per call (default 1); the gate merges their calls into store batches.
--connect-timeout-ms MS: with --redis, wait at most MS for Redis to answer the first connection.
Exit codes: 0 every answer matches, 1 a mismatch or an error (Redis unreachable), 2 usage.`);
    return 0;
  }
  let items: number, duplicateRate: number, batch: number, seed: number, threads: number | undefined, keysPerCall: number, concurrency: number | undefined, connectMs: number;
  let layout: 'compact' | 'sets' | undefined;
  try {
    const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
    items = checkInt('--items', num(values.items), 1, 50_000_000);
    duplicateRate = checkNumber('--duplicate-rate', num(values['duplicate-rate']), 0, 0.99);
    batch = checkInt('--batch', num(values.batch), 1, 1_000_000);
    seed = checkInt('--seed', num(values.seed), 0, 0xffff_ffff);
    threads = values.threads === undefined ? undefined : checkInt('--threads', Number(values.threads), 0, 256);
    layout = values.layout === undefined ? undefined : (values.layout as 'compact' | 'sets');
    concurrency = values.concurrency === undefined ? undefined : checkInt('--concurrency', Number(values.concurrency), 1, 100_000);
    if (values['keys-per-call'] !== undefined && concurrency === undefined) throw new HashGateRangeError(ErrorCodes.INVALID_ARG, '--keys-per-call needs --concurrency', { name: '--keys-per-call' });
    keysPerCall = values['keys-per-call'] === undefined ? 1 : checkInt('--keys-per-call', Number(values['keys-per-call']), 1, 1_000_000);
    connectMs = connectTimeoutMs(values['connect-timeout-ms']);
  } catch (err) {
    return fail('demo', err, 2, { json });
  }
  let redis: RedisClient | undefined;
  let r: DemoResult;
  try {
    if (values.redis !== undefined) redis = await connectCliRedis({ url: values.redis, commandTimeoutMs: 30_000, connectTimeoutMs: connectMs });
    r = await runDemo({
      items, duplicateRate, batch, seed, ...(threads === undefined ? {} : { threads }), ...(redis === undefined ? {} : { redis }), ...(layout === undefined ? {} : { layout }),
      ...(concurrency === undefined ? {} : { concurrency, keysPerCall }),
    });
  } catch (err) {
    return fail('demo', err, 1, { json });
  } finally {
    redis?.disconnect();
  }
  const sv = r.service;
  const ok = r.mismatches === 0 && r.duplicates === r.expectedDuplicates && (sv === undefined || sv.mismatches === 0);
  if (values.json) {
    console.log(JSON.stringify(r));
  } else {
    const pct = (x: number) => `${(x * 100).toFixed(3)}%`;
    console.log(`hashgate demo: ${r.items.toLocaleString('en')} transactions, batch ${r.batch}, ${r.threads} worker thread(s), store ${values.redis === undefined ? 'embedded' : redact(values.redis)}`);
    console.log(`  first seen this year   ${r.firstSeen.toLocaleString('en')}`);
    console.log(`  duplicates             ${r.duplicates.toLocaleString('en')} (expected ${r.expectedDuplicates.toLocaleString('en')})`);
    console.log(`  mismatches vs truth    ${r.mismatches}`);
    console.log(`  throughput             ${r.keysPerSec.toLocaleString('en')} keys/s`);
    console.log(`  bloom                  ${r.bloom.bitSize.toLocaleString('en')} bits, k=${r.bloom.hashFunctions}, FPP expected at final fill ${pct(r.bloom.expectedFpp)}, measured over the run ${r.bloom.measuredFpp === null ? 'n/a' : pct(r.bloom.measuredFpp)}`);
    if (sv !== undefined) {
      console.log(`service pattern: ${sv.concurrency} concurrent callers x ${sv.keysPerCall} key(s) per call, same stream`);
      console.log(`  calls                  ${sv.calls.toLocaleString('en')} merged into ${sv.batches.toLocaleString('en')} store batches (${(sv.calls / Math.max(1, sv.batches)).toFixed(1)} calls per batch)`);
      console.log(`  mismatches vs truth    ${sv.mismatches}`);
      console.log(`  throughput             ${sv.keysPerSec.toLocaleString('en')} keys/s (batch pattern above: ${r.keysPerSec.toLocaleString('en')})`);
      console.log(`  latency per call       p50 ${sv.p50Us} us, p99 ${sv.p99Us} us, p999 ${sv.p999Us} us`);
    }
    console.log(ok ? 'OK: every answer matches the ground truth' : 'FAIL: answers differ from the ground truth');
  }
  return ok ? 0 : 1;
}
