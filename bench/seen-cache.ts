// The dedup seen-cache alone (the local answer firstSeen gives for keys this process saw) against
// lru-cache keyed by the digest as a 16-character latin1 string, the cache a user would put in front
// of Redis instead. Two shapes, each run on a new cache:
// - all-new digests, as a stream of new keys sends them: a 2,500-key batch looked up, 24 MiB of other
//   memory traffic (the work of a Redis round trip evicts the CPU's caches meanwhile), then added;
// - repeat traffic: 200k cached digests looked up five times over, in a scattered order.
// Only the cache calls are timed; the other traffic and the digests' making are not.
import { randomFillSync } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { Suite, spread, type SuiteOptions, type SuiteResult } from './common.js';
import { SeenCache } from '../src/dedup/cache.js';

const MAX = 1 << 20;
const BATCH = 2_500;

interface Cache {
  has(d: Uint32Array, bytes: Buffer, i: number): boolean;
  add(d: Uint32Array, bytes: Buffer, i: number): void;
  /** How many of digests idx[0..n) it holds, asked as a batch's lookups are. */
  hasBatch(d: Uint32Array, bytes: Buffer, idx: Uint32Array, n: number): number;
  /** Adds digests idx[0..n), as a batch's answers are. */
  addBatch(d: Uint32Array, bytes: Buffer, idx: Uint32Array, n: number): void;
}

// hashgate as firstSeen calls it: a batch's tag words read in one pass before its lookups, and
// its adds in one call that reads their lines first
const ours = (): Cache => {
  const c = new SeenCache(MAX);
  return {
    has: (d, _b, i) => c.has(d, i),
    add: (d, _b, i) => c.add(d, i),
    hasBatch: (d, _b, idx, n) => {
      c.warm(d, idx, n, false);
      let held = 0;
      for (let j = 0; j < n; j++) if (c.has(d, idx[j]!)) held++;
      return held;
    },
    addBatch: (d, _b, idx, n) => c.addAll(d, idx, n),
  };
};

const latin1 = (b: Buffer, i: number): string => b.toString('latin1', i << 4, (i << 4) + 16);
const peer = (): Cache => {
  const c = new LRUCache<string, true>({ max: MAX });
  return {
    has: (_d, b, i) => c.has(latin1(b, i)),
    add: (_d, b, i) => void c.set(latin1(b, i), true),
    hasBatch: (_d, b, idx, n) => {
      let held = 0;
      for (let j = 0; j < n; j++) if (c.has(latin1(b, idx[j]!))) held++;
      return held;
    },
    addBatch: (_d, b, idx, n) => {
      for (let j = 0; j < n; j++) c.set(latin1(b, idx[j]!), true);
    },
  };
};

const IMPLS = [
  { impl: 'hashgate SeenCache', role: 'hashgate' as const, make: ours },
  { impl: 'lru-cache, 16-byte latin1 key', role: 'peer' as const, make: peer },
];

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const s = new Suite('seen-cache', opts);
  const runs = opts.quick ? 1 : 5;
  const n = opts.quick ? 100_000 : 1_000_000;
  const d = new Uint32Array(n * 4);
  randomFillSync(d);
  const bytes = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  const junk = new Uint32Array(6 << 20);
  const idx = new Uint32Array(BATCH);
  let sink = 0;

  const passes = new Map<string, { rates: number[]; error?: string }>();

  const record = (name: string, im: (typeof IMPLS)[number], rate: number, error: string | undefined): void => {
    const k = `${name}\u0000${im.impl}`;
    const p = passes.get(k) ?? { rates: [] };
    p.rates.push(rate);
    if (error !== undefined) p.error ??= error;
    passes.set(k, p);
    console.log(`[seen-cache] ${name} | ${im.impl}: ${Math.round(rate / 1000)}k ops/s${error ? ` WRONG: ${error}` : ''}`);
  };

  const finishRow = (name: string, im: (typeof IMPLS)[number]): void => {
    const p = passes.get(`${name}\u0000${im.impl}`);
    if (p === undefined) return;
    if (p.error !== undefined) {
      s.addRow({ name, impl: im.impl, role: im.role, opsPerSec: 0, ok: false, error: p.error, unit: 'ops/s' });
      return;
    }
    const med = [...p.rates].sort((a, b) => a - b)[Math.floor(p.rates.length / 2)]!;
    s.addRow({ name, impl: im.impl, role: im.role, opsPerSec: med, ...spread(p.rates), ok: true, unit: 'ops/s' });
  };

  const newName = `${n} new digests: lookups of a ${BATCH}-key batch, 24 MiB of other traffic, its adds`;
  const repeat = Math.min(n, 200_000);
  const hitName = `${repeat} cached digests looked up 5 times (hits)`;
  for (let pass = 0; pass < runs; pass++) {
    for (const im of IMPLS) {
      // all-new digests
      const c = im.make();
      let t = 0n;
      let wrong = 0;
      for (let s0 = 0; s0 < n; s0 += BATCH) {
        const e = Math.min(n, s0 + BATCH);
        for (let i = s0; i < e; i++) idx[i - s0] = i;
        const a = process.hrtime.bigint();
        wrong += c.hasBatch(d, bytes, idx, e - s0);
        t += process.hrtime.bigint() - a;
        for (let i = 0; i < junk.length; i += 16) sink += junk[i]!;
        const b = process.hrtime.bigint();
        c.addBatch(d, bytes, idx, e - s0);
        t += process.hrtime.bigint() - b;
      }
      record(newName, im, n / (Number(t) / 1e9), wrong === 0 ? undefined : `${wrong} new digests answered as cached`);
      // repeat traffic on a cache holding `repeat` digests
      const r = im.make();
      for (let i = 0; i < repeat; i++) r.add(d, bytes, i);
      let hits = 0;
      const h0 = process.hrtime.bigint();
      for (let k = 0; k < 5; k++) for (let i = 0; i < repeat; i++) if (r.has(d, bytes, (i * 7919 + k) % repeat)) hits++;
      const secs = Number(process.hrtime.bigint() - h0) / 1e9;
      // a 4-way set keeps a key while fewer than four newer keys went into its set: at a fifth of
      // its capacity nearly every key; an exact LRU keeps all of them
      const least = im.role === 'hashgate' ? 0.995 : 1;
      record(hitName, im, (5 * repeat) / secs, hits >= least * 5 * repeat ? undefined : `${hits} hits of ${5 * repeat} lookups`);
    }
  }
  if (sink === -1) console.log('');
  for (const name of [newName, hitName]) for (const im of IMPLS) finishRow(name, im);
  s.target('seen-cache, new digests: hashgate vs lru-cache', '>=', 4, s.ratio(newName, IMPLS[0]!.impl, IMPLS[1]!.impl), 'x');
  s.target('seen-cache, hits: hashgate vs lru-cache', '>=', 3, s.ratio(hitName, IMPLS[0]!.impl, IMPLS[1]!.impl), 'x');
  s.notes.push(
    `${runs} passes of each shape, the two caches alternating, a new cache every pass (its table's memory faulted in as it fills); a row is the median pass. Only the cache calls are timed. ` +
      'The peer keys lru-cache by the digest as a 16-character latin1 string (made per call, as a user keying by the digest would) and holds the same 2^20 entries; hashgate keeps the digests in typed arrays, 17 B an entry. ' +
        "New digests: hashgate is called as firstSeen calls it, a batch at a time (the batch's tag words read in one pass before its lookups, its lines before its adds); the peer one key at a time, as it has no batch call.",
  );
  return s.finish();
}
