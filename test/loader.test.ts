import { describe, it, expect, vi, beforeAll, afterAll } from 'vitest';
import fc from 'fast-check';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChunkParser } from '../src/loader/parse.js';
import { RegionHasher } from '../src/loader/hasher.js';
import { bucketOf, murmur3_128 } from '../src/hash/index.js';
import { load } from '../src/loader/loader.js';
import { bucketsOfDigests } from '../src/dedup/layout.js';
import { encodeMembers, type LoadSink, type SinkBatch } from '../src/loader/sink.js';
import { RespWriter } from '../src/redis/resp.js';
import { makeWindowCoder } from '../src/loader/window.js';
import { FileChunkReader, isOversize } from '../src/loader/reader.js';
import { expandInputs } from '../src/loader/inputs.js';
import { generateExport, personLine } from '../src/loader/generate.js';
import { run } from '../src/cli/commands/load.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hg-loader-unit-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Collects batches in memory; `hold` keeps one bucket's acknowledgements back. */
class MemorySink implements LoadSink {
  readonly name = 'memory';
  readonly members = new Map<string, Set<string>>();
  held: (() => void)[] = [];
  constructor(private readonly hold?: (b: SinkBatch) => boolean) {}
  async add(b: SinkBatch): Promise<number> {
    const key = `${b.window}:${b.bucket}`;
    let set = this.members.get(key);
    if (!set) this.members.set(key, (set = new Set()));
    let added = 0;
    for (let i = 0; i < b.count; i++) {
      const m = Buffer.from(b.keys.subarray(b.keyOffsets[i], b.keyOffsets[i + 1])).toString();
      if (!set.has(m)) added++, set.add(m);
    }
    if (this.hold?.(b)) await new Promise<void>((r) => this.held.push(r));
    return added;
  }
  async close(): Promise<void> {}
  get size(): number {
    let n = 0;
    for (const s of this.members.values()) n += s.size;
    return n;
  }
}

describe('loader bucket assignment (property)', () => {
  it('the loader puts every key in bucketOf(key, n)', () => {
    const h = new RegionHasher(1 << 16, 1 << 12);
    const p = new ChunkParser({ delimiter: 124, fields: null, fieldCount: 0, maxLineBytes: 4096, windowField: -1 }, h, 1 << 12);
    const field = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }).filter((s) => !/[|\r\n]/.test(s));
    fc.assert(
      fc.property(fc.array(fc.tuple(field, field), { minLength: 1, maxLength: 50 }), fc.integer({ min: 1, max: 5_000_000 }), (rows, n) => {
        p.fieldCount = 0;
        const text = Buffer.from(rows.map(([a, b]) => `${a}|${b}\n`).join(''));
        p.parse(text, 0, text.length, false);
        expect(p.count).toBe(rows.length);
        const b = h.buckets(p.count, n);
        for (let i = 0; i < rows.length; i++) expect(b[i]).toBe(bucketOf(rows[i]![0] + rows[i]![1], n));
      }),
      { numRuns: 200 },
    );
  });

  it('compact buckets use digest bytes 8..15 and members are the signed int64 of bytes 0..7', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 30 }), fc.integer({ min: 1, max: 1 << 22 }), (k, n) => {
        const d = murmur3_128(k);
        const dv = new DataView(d.buffer, d.byteOffset, 16);
        const out = bucketsOfDigests(d, 'compact', n, new Uint32Array(1));
        expect(out[0]).toBe(Number(dv.getBigUint64(8, true) % BigInt(n)));
        const w = new RespWriter(1);
        encodeMembers({ window: 'w', bucket: 0, count: 1, keys: d, keyOffsets: Uint32Array.from([0, 8]) }, true, w);
        const v = dv.getBigInt64(0, true).toString();
        expect(w.bytes().toString()).toBe(`$${v.length}\r\n${v}\r\n`);
      }),
      { numRuns: 300 },
    );
    for (const v of [0n, -1n, 1n, 9223372036854775807n, -9223372036854775808n, 10000n, -10000n]) {
      const src = new Uint8Array(8);
      new DataView(src.buffer).setBigInt64(0, v, true);
      const w = new RespWriter(1);
      encodeMembers({ window: 'w', bucket: 0, count: 1, keys: src, keyOffsets: Uint32Array.from([0, 8]) }, true, w);
      expect(w.bytes().toString()).toBe(`$${v.toString().length}\r\n${v}\r\n`);
    }
  });

  it('RESP member encoding (sets and compact)', () => {
    const keys = Buffer.from('ab' + 'x'.repeat(60));
    const batch: SinkBatch = { window: 'w', bucket: 0, count: 2, keys, keyOffsets: Uint32Array.from([0, 2, 62]) };
    const w = new RespWriter(1);
    const offs = new Uint32Array(3);
    w.str('head'); // members go after what the writer already holds; offsets count from the first
    encodeMembers(batch, false, w, undefined, offs);
    expect(w.bytes().toString()).toBe(`$4\r\nhead\r\n$2\r\nab\r\n$60\r\n${'x'.repeat(60)}\r\n`);
    expect([...offs]).toEqual([0, 8, 75]);
    const d = new Uint8Array(16);
    new DataView(d.buffer).setBigInt64(0, -5n, true);
    const c = new RespWriter(1);
    encodeMembers({ window: 'w', bucket: 0, count: 1, keys: d, keyOffsets: Uint32Array.from([0, 8]) }, true, c);
    expect(c.bytes().toString()).toBe('$2\r\n-5\r\n');
  });
});

describe('window coder', () => {
  const t = (format: string, unit: 'year' | 'month' | 'day', s: string) =>
    makeWindowCoder({ format, unit, timeZone: 'Asia/Shanghai' })(Buffer.from(s), 0, s.length);
  it('positional formats and epoch in the configured zone', () => {
    expect(t('yyyyMMdd', 'year', '20260315')).toBe(20260000);
    expect(t('yyyy-MM-dd', 'month', '2026-03-15')).toBe(20260300);
    expect(t('yyyy-MM-dd HH:mm:ss', 'day', '2026-03-15 10:00:00')).toBe(20260315);
    expect(t('yyyyMMdd', 'year', '2026x315')).toBe(-1); // a malformed date is rejected, not guessed
    expect(t('yyyyMMdd', 'month', '20261315')).toBe(-1);
    expect(t('yyyyMMdd', 'year', 'abc')).toBe(-1);
    // 2025-12-31T16:30:00Z is already 2026-01-01 00:30 in Shanghai
    expect(t('epoch-s', 'year', String(Date.UTC(2025, 11, 31, 16, 30) / 1000))).toBe(20260000);
    expect(t('epoch-ms', 'year', String(Date.UTC(2025, 11, 31, 15, 30)))).toBe(20250000);
  });
});

describe('reader and inputs', () => {
  it('a line longer than the buffer is reported once and skipped to its newline', async () => {
    const f = join(dir, 'long.txt');
    writeFileSync(f, 'a|1\n' + 'z'.repeat(5000) + '\nb|2');
    const r = new FileChunkReader(f, 1024);
    await r.open();
    const seen: string[] = [];
    for (let x = await r.next(); x !== null; x = await r.next()) {
      if (isOversize(x)) seen.push(`long@${x.offset}->${x.next}`);
      else seen.push(x.buf.subarray(x.start, x.end).toString() + (x.final ? '<EOF' : ''));
    }
    await r.close();
    expect(seen).toEqual(['a|1\n', 'long@4->5005', 'b|2<EOF']);
  });

  it('dirs sorted by name, globs, missing inputs are errors', async () => {
    const d = join(dir, 'exp');
    mkdirSync(join(d, 'sub'), { recursive: true });
    for (const n of ['000001_0', '000000_0', '.hidden', 'sub/000002_0']) writeFileSync(join(d, n), 'x|1\n');
    expect((await expandInputs([d])).map((p) => p.slice(d.length + 1))).toEqual(['000000_0', '000001_0']);
    expect((await expandInputs([join(d, '**', '00000?_0')])).map((p) => p.slice(d.length + 1))).toEqual(['000000_0', '000001_0', 'sub/000002_0']);
    await expect(expandInputs([join(d, 'nope')])).rejects.toThrow(/does not exist/);
    await expect(expandInputs([join(d, '*.csv')])).rejects.toThrow(/no file matches/);
  });
});

describe('load() accounting', () => {
  it('checkpoint covers only acknowledged rows when batches complete out of order', async () => {
    const gen = generateExport({ dir: join(dir, 'ooo'), files: 1, rowsPerFile: 3000, seed: 3 });
    const file = gen.files[0]!;
    const slowBucket = 0;
    const sink = new MemorySink((b) => b.bucket === slowBucket);
    const cp = join(dir, 'ooo.cp');
    const ac = new AbortController();
    const first = personLine(0); // bucket of the first row decides the expected checkpoint
    const firstBucket = bucketOf(first.replace('|', ''), 4);
    const p = load(
      { inputs: [file], window: 'w', buckets: 4, batch: 50, concurrency: 64, readBufferBytes: 8192, checkpointFile: cp, checkpointIntervalMs: 0, failedFile: join(dir, 'ooo.failed') },
      {
        sink,
        signal: ac.signal,
        progress: {
          update(s) {
            if (s.rows > 2000) ac.abort();
          },
          stop() {},
        },
      },
    );
    // let the loader run until it waits for held batches, then inspect the checkpoint
    await vi.waitFor(() => expect(sink.held.length).toBeGreaterThan(0), { timeout: 10_000 });
    await new Promise((r) => setTimeout(r, 200));
    let off = 0;
    try {
      off = JSON.parse(readFileSync(cp, 'utf8')).files[file].offset as number;
    } catch {
      /* nothing acknowledged in order yet: no checkpoint written */
    }
    if (firstBucket === slowBucket) expect(off).toBe(0); // row 1 is unacknowledged: nothing is safe
    // release everything, the interrupted load then records a consistent offset
    const release = setInterval(() => sink.held.splice(0).forEach((r) => r()), 5);
    const sum = await p;
    clearInterval(release);
    expect(sum.interrupted).toBe(true);
    const after = JSON.parse(readFileSync(cp, 'utf8')).files[file];
    // rows before the offset are all in the sink (the checkpoint never runs ahead of acks)
    const text = readFileSync(file).subarray(0, after.offset).toString();
    const keys = text.split('\n').filter((l) => l !== '').map((l) => l.replace('|', ''));
    const all = new Set([...sink.members.values()].flatMap((s) => [...s]));
    expect(keys.length).toBe(after.line);
    for (const k of keys) expect(all.has(k)).toBe(true);
    expect(after.offset).toBeLessThan(gen.bytes);
  });

  it('dry run counts rows and buckets without a sink; --fields picks and orders fields', async () => {
    const f = join(dir, 'dry.txt');
    writeFileSync(f, 'n1|id1|x\nn2|id2|y\n\nbad\n');
    const sum = await load({ inputs: [f], dryRun: true, fields: [1, 0], buckets: 10, window: '2026' });
    expect(sum).toMatchObject({ rows: 2, rejected: 2, lines: 4, loaded: 0, fieldCount: 3, dryRun: true });
    expect(sum.rejectedByReason).toEqual({ empty: 1, 'field-count': 1 });
    expect(sum.bucketRows.mean).toBeCloseTo(0.2);
    const sink = new MemorySink();
    await load({ inputs: [f], fields: [1, 0], buckets: 10, window: '2026', checkpointFile: join(dir, 'dry.cp') }, { sink });
    const all = [...sink.members.values()].flatMap((s) => [...s]).sort();
    expect(all).toEqual(['id1n1', 'id2n2']);
  });

  it('window from a date field splits rows per year', async () => {
    const gen = generateExport({ dir: join(dir, 'win'), files: 2, rowsPerFile: 2000, dupRatio: 0.3, dateYears: [2025, 2026], seed: 9 });
    const sink = new MemorySink();
    const sum = await load({ inputs: gen.files, windowField: 2, fields: [0, 1], buckets: 16, checkpointFile: join(dir, 'win.cp') }, { sink });
    expect(sum.windows.sort()).toEqual(['2025', '2026']);
    const per: Record<string, number> = {};
    for (const [k, s] of sink.members) per[k.split(':')[0]!] = (per[k.split(':')[0]!] ?? 0) + s.size;
    expect(per).toEqual(gen.distinctByWindow);
  });

  it('refuses to write failed/rejected rows into an input file', async () => {
    const f = join(dir, 'in.txt');
    writeFileSync(f, 'a|1\n');
    await expect(load({ inputs: [f], window: 'w', failedFile: f }, { sink: new MemorySink() })).rejects.toThrow(/both an input and an output/);
  });
});

describe('hashgate load CLI flags', () => {
  it('errors name the bad flag and exit 2', async () => {
    const err = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      const cases: [string[], string][] = [
        [['x', '--batch', '0'], '--batch'],
        [['x', '--batch', 'ten'], '--batch'],
        [['x', '--layout', 'hash'], '--layout'],
        [['x', '--delimiter', '||'], '--delimiter'],
        [['x', '--fields', '0,a'], '--fields'],
        [['x', '--window', '2026', '--window-from-field', '2'], '--window'],
        [['x', '--time-zone', 'Mars/Base'], '--time-zone'],
        [['x', '--nope'], '--nope'],
        [[], 'no input'],
      ];
      for (const [i, [args, flag]] of cases.entries()) {
        expect(await run(args)).toBe(2);
        expect(String(err.mock.calls[i]![0])).toContain(flag);
      }
    } finally {
      err.mockRestore();
    }
  });

  it('--dry-run --json end to end', async () => {
    const gen = generateExport({ dir: join(dir, 'cli'), files: 2, rowsPerFile: 1000, malformedEvery: 100, seed: 4 });
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    try {
      expect(await run([join(dir, 'cli'), '--dry-run', '--json', '--quiet', '--rejects-file', join(dir, 'cli.rej')])).toBe(0);
      const s = JSON.parse(String(log.mock.calls[0]![0]));
      expect(s.rows).toBe(gen.rows);
      expect(s.rejected).toBe(gen.rejects.length);
    } finally {
      log.mockRestore();
    }
  });
});

describe('progress reporting', () => {
  it('plain periodic lines when not a TTY, plus a final line', async () => {
    const { createProgress } = await import('../src/loader/progress.js');
    const out: string[] = [];
    const stream = { write: (s: string) => (out.push(s), true) } as unknown as NodeJS.WriteStream;
    const p = createProgress({ tty: false, intervalMs: 1000, stream });
    const snap = { elapsedMs: 0, bytesDone: 0, bytesTotal: 2 << 20, filesDone: 0, filesTotal: 2, rows: 0, loaded: 0, failed: 0, rejected: 0, inFlight: 0 };
    p.update({ ...snap, elapsedMs: 500 });
    p.update({ ...snap, elapsedMs: 1500, bytesDone: 1 << 20, rows: 30000, loaded: 25000, failed: 5, rejected: 2 });
    p.update({ ...snap, elapsedMs: 1700 });
    p.stop({ ...snap, elapsedMs: 3000, bytesDone: 2 << 20, filesDone: 2, rows: 60000, loaded: 60000 });
    expect(out.length).toBe(2);
    expect(out[0]).toMatch(/^load 50\.0% 1\.0 MiB\/2\.0 MiB files 0\/2 rows 30000 \(20\.0k\/s\) loaded 25000 failed 5 rejected 2 eta \d+s\n$/);
    expect(out[1]).toContain('load 100.0%');
  });
});

describe('compact layout keys', () => {
  it('digests (plain and HMAC secret) and buckets match src/dedup/layout.ts encodeKeys', async () => {
    const { encodeKeys } = await import('./helpers/layout.js');
    const f = join(dir, 'compact.txt');
    const keys = Array.from({ length: 500 }, (_, i) => personLine(i));
    writeFileSync(f, keys.join('\n') + '\n');
    for (const secret of [undefined, new TextEncoder().encode('s3cret')]) {
      class CompactSink extends MemorySink {
        readonly layout = 'compact' as const;
        override async add(b: SinkBatch): Promise<number> {
          const key = `${b.window}:${b.bucket}`;
          let set = this.members.get(key);
          if (!set) this.members.set(key, (set = new Set()));
          for (let i = 0; i < b.count; i++) {
            const o = b.keyOffsets[i]!;
            set.add(Buffer.from(b.keys.subarray(o, o + 8)).readBigInt64LE(0).toString());
          }
          return b.count;
        }
      }
      const sink = new CompactSink();
      await load({ inputs: [f], window: 'w', buckets: 256, checkpointFile: join(dir, 'compact.cp'), ...(secret ? { secret } : {}) }, { sink });
      const enc = encodeKeys(keys.map((k) => k.replace('|', '')), { layout: 'compact', prefix: 'p', buckets: 256, secret });
      const expected = new Set(enc.members.map((m, i) => `w:${enc.buckets[i]}:${m}`));
      const got = new Set([...sink.members].flatMap(([k, s]) => [...s].map((m) => `${k}:${m}`)));
      expect(got).toEqual(expected);
    }
  });
});
