// `hashgate demo`: the main job end to end on an embedded gate (no servers): a deterministic
// stream of name+ID transactions with a known duplicate rate goes through HashGate.firstSeen with
// the shared Bloom filter in front, and every answer is checked against the generator's truth.
import { parseArgs } from 'node:util';
import { HashGate } from '../../gate.js';
import { transactions } from '../../demo/generator.js';
import { checkInt, checkNumber } from '../../errors.js';

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
}

export async function runDemo(opts: { items: number; duplicateRate: number; batch: number; threads?: number; seed: number; redis?: string; layout?: 'compact' | 'sets' }): Promise<DemoResult> {
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

export async function run(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      items: { type: 'string', default: '1000000' },
      'duplicate-rate': { type: 'string', default: '0.3' },
      batch: { type: 'string', default: '8192' },
      threads: { type: 'string' },
      seed: { type: 'string', default: '20260101' },
      redis: { type: 'string' },
      layout: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(`usage: hashgate demo [--items N] [--duplicate-rate R] [--batch N] [--threads N] [--seed N] [--redis URL --layout compact|sets] [--json]

Generates N name+ID transactions over the natural year 2026 (Asia/Shanghai) where a fraction R
repeats an earlier identity, runs HashGate.firstSeen against the exact store (embedded in
memory unless --redis is given) and checks every answer against the truth. A Bloom filter
beside it (firstSeenBloom) reports its measured false-positive rate.`);
    return 0;
  }
  const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
  const items = checkInt('--items', num(values.items), 1, 50_000_000);
  const duplicateRate = checkNumber('--duplicate-rate', num(values['duplicate-rate']), 0, 0.99);
  const batch = checkInt('--batch', num(values.batch), 1, 1_000_000);
  const seed = checkInt('--seed', num(values.seed), 0, 0xffff_ffff);
  const threads = values.threads === undefined ? undefined : checkInt('--threads', Number(values.threads), 0, 256);
  const layout = values.layout === undefined ? undefined : (values.layout as 'compact' | 'sets');
  const r = await runDemo({ items, duplicateRate, batch, seed, ...(threads === undefined ? {} : { threads }), ...(values.redis === undefined ? {} : { redis: values.redis }), ...(layout === undefined ? {} : { layout }) });
  if (values.json) {
    console.log(JSON.stringify(r));
  } else {
    const pct = (x: number) => `${(x * 100).toFixed(3)}%`;
    console.log(`hashgate demo: ${r.items.toLocaleString('en')} transactions, batch ${r.batch}, ${r.threads} worker thread(s), store ${values.redis ?? 'embedded'}`);
    console.log(`  first seen this year   ${r.firstSeen.toLocaleString('en')}`);
    console.log(`  duplicates             ${r.duplicates.toLocaleString('en')} (expected ${r.expectedDuplicates.toLocaleString('en')})`);
    console.log(`  mismatches vs truth    ${r.mismatches}`);
    console.log(`  throughput             ${r.keysPerSec.toLocaleString('en')} keys/s`);
    console.log(`  bloom                  ${r.bloom.bitSize.toLocaleString('en')} bits, k=${r.bloom.hashFunctions}, FPP expected at final fill ${pct(r.bloom.expectedFpp)}, measured over the run ${r.bloom.measuredFpp === null ? 'n/a' : pct(r.bloom.measuredFpp)}`);
    console.log(r.mismatches === 0 && r.duplicates === r.expectedDuplicates ? 'OK: every answer matches the ground truth' : 'FAIL: answers differ from the ground truth');
  }
  return r.mismatches === 0 && r.duplicates === r.expectedDuplicates ? 0 : 1;
}
