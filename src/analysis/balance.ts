// Bucket balance of a key set under three bucketings: murmur3_128 mod N (bucketOf, what
// the Java services use), jump consistent hash (jumpBucket) and a virtual-node hash ring; plus how many keys move when the bucket count changes.
// Keys are counted once however often a row repeats: a bucket is a set, and an export's duplicates
// would otherwise look like imbalance to the chi-square test.
import { ChunkParser } from '../loader/parse.js';
import { RegionHasher } from '../loader/hasher.js';
import { FileChunkReader, isOversize } from '../loader/reader.js';
import { expandInputs } from '../loader/inputs.js';
import { personLine } from '../loader/generate.js';
import { HashRing, MAX_RING_POINTS } from './ring.js';
import { DigestSet } from '../hash/digest-set.js';
import { DigestSpill } from './spill.js';
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
  /** Memory bound of the distinct-key set, MiB; over it, keys are de-duplicated through temporary
   *  partition files (whose per-partition set may take as much again). Default 1024. */
  maxMemoryMB?: number;
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
  /** Rows read (keys with their duplicates). */
  rows: number;
  /** Distinct keys: what every figure below counts (a set holds a duplicate once). */
  keys: number;
  buckets: number;
  vnodes: number;
  methods: MethodReport[];
  /** Methods left out, and why (a ring too large to hold in memory). */
  skipped: { method: Method; reason: string }[];
  /** Whether the distinct keys were counted through temporary partition files (over --max-memory-mb). */
  spilled: boolean;
}

const REGION = 1 << 20;
const MAX_ROWS = REGION / 2 + 1;
/** Default memory bound of the distinct-key sets, MiB (the spill partitions' set gets as much again). */
const DEFAULT_MAX_MEMORY_MB = 1024;
// spill record: 16 digest bytes, then mod and jump buckets for n, m and n + 1 (uint32 LE each)
const RECORD = 16 + 6 * 4;

export class BalanceAnalyzer {
  private readonly n: number;
  private readonly m: number;
  private readonly vnodes: number;
  private readonly hasher = new RegionHasher(REGION, MAX_ROWS);
  readonly parser: ChunkParser;
  private readonly counts: Record<Method, Float64Array>;
  private readonly movedM: Record<Method, number> = { mod: 0, jump: 0, ring: 0 };
  private readonly movedOne: Record<Method, number> = { mod: 0, jump: 0, ring: 0 };
  /** One ring of max(n, m, n + 1) buckets answers for all three counts (see HashRing), or null when too big. */
  private readonly ring: HashRing | null;
  private readonly ringSkipped: string | null;
  /** mod n, m, n+1 then jump n, m, n+1 of the current region's rows. */
  private readonly tmp: Uint32Array[] = [0, 1, 2, 3, 4, 5].map(() => new Uint32Array(MAX_ROWS));
  private readonly digestWords: Uint32Array;
  private readonly setBytes: number;
  private seen = new DigestSet(1024);
  private spill: DigestSpill | null = null;
  private done = false;
  rows = 0;
  keys = 0;

  constructor(opts: BalanceOptions = {}) {
    this.n = opts.buckets ?? DEFAULTS.buckets;
    this.m = opts.resizeTo ?? this.n * 2;
    this.vnodes = opts.vnodes ?? DEFAULTS.vnodes;
    this.setBytes = Math.max(1, opts.maxMemoryMB ?? DEFAULT_MAX_MEMORY_MB) * 1048576;
    this.parser = new ChunkParser(
      { delimiter: opts.delimiter ?? DEFAULTS.delimiter, fields: opts.fields ?? null, fieldCount: 0, maxLineBytes: 4096, windowField: -1 },
      this.hasher,
      MAX_ROWS,
    );
    this.counts = { mod: new Float64Array(this.n), jump: new Float64Array(this.n), ring: new Float64Array(this.n) };
    const ringBuckets = Math.max(this.n, this.m, this.n + 1);
    if (ringBuckets * this.vnodes <= MAX_RING_POINTS) {
      this.ring = new HashRing(ringBuckets, this.vnodes);
      this.ringSkipped = null;
    } else {
      this.ring = null;
      this.ringSkipped = `${ringBuckets} buckets x ${this.vnodes} virtual nodes exceed the ${MAX_RING_POINTS} ring points held in memory; --vnodes ${Math.max(1, Math.floor(MAX_RING_POINTS / ringBuckets))} or less includes it`;
    }
    const d = this.hasher.digestOut;
    this.digestWords = new Uint32Array(d.buffer, d.byteOffset, d.byteLength >>> 2);
  }

  /** Parses buf[start, end) (complete lines) and counts its distinct keys. */
  addRegion(buf: Uint8Array, start: number, end: number, final: boolean): void {
    this.parser.parse(buf, start, end, final);
    this.countParsed(this.parser.count);
  }

  private countParsed(c: number): void {
    if (c === 0) return;
    if (this.done) throw new Error('BalanceAnalyzer: addRegion after report()');
    const h = this.hasher;
    const [a, b, d, ja, jb, jd] = this.tmp as [Uint32Array, Uint32Array, Uint32Array, Uint32Array, Uint32Array, Uint32Array];
    a.set(h.buckets(c, this.n).subarray(0, c));
    b.set(h.buckets(c, this.m).subarray(0, c));
    d.set(h.buckets(c, this.n + 1).subarray(0, c));
    h.jump(c, this.n, ja);
    h.jump(c, this.m, jb);
    h.jump(c, this.n + 1, jd);
    const dg = h.digests(c);
    const dw = this.digestWords;
    this.rows += c;
    for (let i = 0; i < c; i++) {
      const o = i << 2;
      if (this.spill === null) {
        if (!this.seen.full || this.seen.grownBytes <= this.setBytes) {
          if (this.seen.add(dw, o)) this.tally(a[i]!, b[i]!, d[i]!, ja[i]!, jb[i]!, jd[i]!, dw[o + 2]!);
          continue;
        }
        // the set may not grow: keys it holds are counted; every other row goes to the partitions
        this.spill = new DigestSpill(RECORD);
      }
      if (this.seen.has(dw, o)) continue;
      const sp = this.spill;
      const { buf, offset } = sp.slot(dg[(i << 4) + 15]!);
      buf.set(dg.subarray(i << 4, (i << 4) + 16), offset);
      buf.writeUInt32LE(a[i]!, offset + 16);
      buf.writeUInt32LE(b[i]!, offset + 20);
      buf.writeUInt32LE(d[i]!, offset + 24);
      buf.writeUInt32LE(ja[i]!, offset + 28);
      buf.writeUInt32LE(jb[i]!, offset + 32);
      buf.writeUInt32LE(jd[i]!, offset + 36);
    }
  }

  /** Counts one distinct key; `pos` is its ring position (digest bytes 8..11, independent of the bits mod/jump use). */
  private tally(mn: number, mm: number, m1: number, jn: number, jm: number, j1: number, pos: number): void {
    this.keys++;
    this.counts.mod[mn]!++;
    if (mm !== mn) this.movedM.mod++;
    if (m1 !== mn) this.movedOne.mod++;
    this.counts.jump[jn]!++;
    if (jm !== jn) this.movedM.jump++;
    if (j1 !== jn) this.movedOne.jump++;
    const ring = this.ring;
    if (ring !== null) {
      const r0 = ring.lookup(pos, this.n);
      this.counts.ring[r0]!++;
      if (ring.lookup(pos, this.m) !== r0) this.movedM.ring++;
      if (ring.lookup(pos, this.n + 1) !== r0) this.movedOne.ring++;
    }
  }

  /** De-duplicates and counts each spill partition on its own, then removes the files. */
  private drainSpill(): void {
    const sp = this.spill;
    if (sp === null) return;
    try {
      for (let p = 0; p < sp.partitions; p++) {
        const rows = sp.rowsIn(p);
        if (rows === 0) continue;
        const set = new DigestSet(Math.min(rows, Math.floor(this.setBytes / 64)));
        sp.read(p, (buf, count) => {
          const words = new Uint32Array(buf.buffer, buf.byteOffset, (count * RECORD) >>> 2);
          for (let r = 0; r < count; r++) {
            const o = (r * RECORD) >>> 2;
            if (set.full && set.grownBytes > this.setBytes) {
              throw new RangeError(`maxMemoryMB: more distinct keys than ${sp.partitions} partitions of ${Math.round(this.setBytes / 1048576)} MiB hold; raise it`);
            }
            if (set.add(words, o)) this.tally(words[o + 4]!, words[o + 5]!, words[o + 6]!, words[o + 7]!, words[o + 8]!, words[o + 9]!, words[o + 2]!);
          }
        });
      }
    } finally {
      sp.dispose();
    }
  }

  /** Ends the analysis (counting any spilled keys) and returns the report; call once. */
  report(): BalanceReport {
    if (!this.done) {
      this.done = true;
      this.drainSpill();
    }
    const mv = (moved: number, to: number): MoveStats => ({
      from: this.n,
      to,
      moved,
      fraction: this.keys > 0 ? moved / this.keys : 0,
      minimumFraction: Math.abs(to - this.n) / Math.max(to, this.n),
    });
    return {
      rows: this.rows,
      keys: this.keys,
      buckets: this.n,
      vnodes: this.vnodes,
      methods: METHODS.filter((method) => method !== 'ring' || this.ring !== null).map((method) => ({
        method,
        stats: bucketStats(this.counts[method]),
        resize: mv(this.movedM[method], this.m),
        addOne: mv(this.movedOne[method], this.n + 1),
      })),
      skipped: this.ringSkipped === null ? [] : [{ method: 'ring', reason: this.ringSkipped }],
      spilled: this.spill !== null,
    };
  }

  /** Removes spill files of an analysis abandoned before report(). */
  dispose(): void {
    this.done = true;
    this.spill?.dispose();
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
  try {
    return a.report();
  } finally {
    a.dispose();
  }
}

/** Keys read from export files, parsed like `hashgate load` does. */
export async function analyseFiles(inputs: string[], opts: BalanceOptions = {}): Promise<BalanceReport> {
  const a = new BalanceAnalyzer(opts);
  try {
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
  } finally {
    a.dispose();
  }
}
