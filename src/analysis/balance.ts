// Bucket balance of a key set under three bucketings: murmur3_128 mod N (bucketOf, what
// the Java services use), jump consistent hash (jumpBucket) and a virtual-node hash ring; plus how many keys move when the bucket count changes.
import { ChunkParser } from '../loader/parse.js';
import { RegionHasher } from '../loader/hasher.js';
import { FileChunkReader, isOversize } from '../loader/reader.js';
import { expandInputs } from '../loader/inputs.js';
import { personLine } from '../loader/generate.js';
import { HashRing } from './ring.js';
import { bucketStats, type BucketStats } from './stats.js';

export type Method = 'mod' | 'jump' | 'ring';
export const METHODS: readonly Method[] = ['mod', 'jump', 'ring'];

export const DEFAULTS = { buckets: 1000, resizeTo: 2000, vnodes: 160, delimiter: 124 } as const;

export interface BalanceOptions {
  buckets?: number;
  /** Second bucket count for the "keys moved" figure (default 2 x buckets, e.g. 1000 -> 2000). */
  resizeTo?: number;
  vnodes?: number;
  delimiter?: number;
  fields?: number[] | null;
}

export interface MoveStats {
  from: number;
  to: number;
  moved: number;
  fraction: number;
  /** The least any scheme can move: keys that must reach the new buckets, |to - from| / max. */
  minimumFraction: number;
}

export interface MethodReport {
  method: Method;
  stats: BucketStats;
  resize: MoveStats;
  /** Adding a single bucket (N -> N+1): where mod hashing falls apart. */
  addOne: MoveStats;
}

export interface BalanceReport {
  keys: number;
  buckets: number;
  vnodes: number;
  methods: MethodReport[];
}

const REGION = 1 << 20;

export class BalanceAnalyzer {
  private readonly n: number;
  private readonly m: number;
  private readonly vnodes: number;
  private readonly hasher = new RegionHasher(REGION, REGION / 2 + 1);
  readonly parser: ChunkParser;
  private readonly counts: Record<Method, Float64Array>;
  private readonly movedM: Record<Method, number> = { mod: 0, jump: 0, ring: 0 };
  private readonly movedOne: Record<Method, number> = { mod: 0, jump: 0, ring: 0 };
  private readonly rings: [HashRing, HashRing, HashRing];
  private readonly tmp: Uint32Array[] = [0, 1, 2].map(() => new Uint32Array(REGION / 2 + 1));
  keys = 0;

  constructor(opts: BalanceOptions = {}) {
    this.n = opts.buckets ?? DEFAULTS.buckets;
    this.m = opts.resizeTo ?? this.n * 2;
    this.vnodes = opts.vnodes ?? DEFAULTS.vnodes;
    this.parser = new ChunkParser(
      { delimiter: opts.delimiter ?? DEFAULTS.delimiter, fields: opts.fields ?? null, fieldCount: 0, maxLineBytes: 4096, windowField: -1 },
      this.hasher,
      REGION / 2 + 1,
    );
    this.counts = { mod: new Float64Array(this.n), jump: new Float64Array(this.n), ring: new Float64Array(this.n) };
    this.rings = [new HashRing(this.n, this.vnodes), new HashRing(this.m, this.vnodes), new HashRing(this.n + 1, this.vnodes)];
  }

  /** Parses buf[start, end) (complete lines) and counts its keys. */
  addRegion(buf: Uint8Array, start: number, end: number, final: boolean): void {
    this.parser.parse(buf, start, end, final);
    this.countParsed(this.parser.count);
  }

  private countParsed(c: number): void {
    if (c === 0) return;
    const h = this.hasher;
    const [a, b, d] = this.tmp as [Uint32Array, Uint32Array, Uint32Array];
    const tally = (method: Method, x: Uint32Array, y: Uint32Array, z: Uint32Array): void => {
      const cnt = this.counts[method];
      let mm = 0;
      let mo = 0;
      for (let i = 0; i < c; i++) {
        cnt[x[i]!]!++;
        if (y[i] !== x[i]) mm++;
        if (z[i] !== x[i]) mo++;
      }
      this.movedM[method] += mm;
      this.movedOne[method] += mo;
    };
    a.set(h.buckets(c, this.n).subarray(0, c));
    b.set(h.buckets(c, this.m).subarray(0, c));
    d.set(h.buckets(c, this.n + 1).subarray(0, c));
    tally('mod', a, b, d);
    h.jump(c, this.n, a);
    h.jump(c, this.m, b);
    h.jump(c, this.n + 1, d);
    tally('jump', a, b, d);
    // ring position: digest bytes 8..11, independent of the bits mod/jump use
    const dg = h.digests(c);
    const [r0, r1, r2] = this.rings;
    for (let i = 0; i < c; i++) {
      const o = (i << 4) + 8;
      const pos = (dg[o]! | (dg[o + 1]! << 8) | (dg[o + 2]! << 16) | (dg[o + 3]! << 24)) >>> 0;
      a[i] = r0.lookup(pos);
      b[i] = r1.lookup(pos);
      d[i] = r2.lookup(pos);
    }
    tally('ring', a, b, d);
    this.keys += c;
  }

  report(): BalanceReport {
    const mv = (moved: number, to: number): MoveStats => ({
      from: this.n,
      to,
      moved,
      fraction: this.keys > 0 ? moved / this.keys : 0,
      minimumFraction: Math.abs(to - this.n) / Math.max(to, this.n),
    });
    return {
      keys: this.keys,
      buckets: this.n,
      vnodes: this.vnodes,
      methods: METHODS.map((method) => ({
        method,
        stats: bucketStats(this.counts[method]),
        resize: mv(this.movedM[method], this.m),
        addOne: mv(this.movedOne[method], this.n + 1),
      })),
    };
  }
}

/** Synthetic name+ID keys (the generator's people 0..count-1). */
export function analyseSynthetic(count: number, opts: BalanceOptions = {}): BalanceReport {
  const a = new BalanceAnalyzer({ ...opts, delimiter: 124, fields: null });
  const buf = Buffer.allocUnsafe(REGION);
  let i = 0;
  while (i < count) {
    let p = 0;
    while (i < count && p < REGION - 256) {
      p += buf.write(personLine(i), p);
      buf[p++] = 10;
      i++;
    }
    a.addRegion(buf, 0, p, false);
  }
  return a.report();
}

/** Keys read from export files, parsed like `hashgate load` does. */
export async function analyseFiles(inputs: string[], opts: BalanceOptions = {}): Promise<BalanceReport> {
  const a = new BalanceAnalyzer(opts);
  for (const f of await expandInputs(inputs)) {
    const r = new FileChunkReader(f, REGION);
    await r.open();
    try {
      for (let x = await r.next(); x !== null; x = await r.next()) if (!isOversize(x)) a.addRegion(x.buf, x.start, x.end, x.final);
    } finally {
      await r.close();
    }
  }
  return a.report();
}
