// Loader reliability on real files: the loader's own files are never data, the field count comes
// from the majority of a sample, too many rejects or a binary file fail the load, day windows are
// not capped at 64, --resume reloads replaced files, raw-row files are 0600, keys longer than the
// library accepts are rejected, and credentials never reach printed URLs.
import { describe, it, expect, vi, beforeAll, afterAll } from 'vitest';
import fc from 'fast-check';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { load } from '../src/loader/loader.js';
import { dryRunThreads } from '../src/loader/options.js';
import { expandInputs } from '../src/loader/inputs.js';
import { sampleFieldCount, notTextReason } from '../src/loader/inspect.js';
import { run } from '../src/cli/commands/load.js';
import { redact, redactTarget } from '../src/util/redact.js';
import { MAX_KEY_BYTES } from '../src/util/limits.js';
import { DEFAULTS as DEDUP_DEFAULTS } from '../src/dedup/options.js';
import type { LoadSink, SinkBatch } from '../src/loader/sink.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hg-loader-rel-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

class MemorySink implements LoadSink {
  readonly name = 'memory';
  readonly keys = new Set<string>();
  failing = false;
  async add(b: SinkBatch): Promise<number> {
    if (this.failing) throw new Error('connect ECONNREFUSED 127.0.0.1:1');
    let added = 0;
    for (let i = 0; i < b.count; i++) {
      const k = `${b.window}:${Buffer.from(b.keys.subarray(b.keyOffsets[i], b.keyOffsets[i + 1])).toString()}`;
      if (!this.keys.has(k)) added++, this.keys.add(k);
    }
    return added;
  }
  async close(): Promise<void> {}
}

const rows = (n: number, tag = 'r'): string => Array.from({ length: n }, (_, i) => `${tag}${i}|${100000 + i}\n`).join('');

async function quietRun(args: string[]): Promise<{ code: number; err: string; out: string }> {
  const e = vi.spyOn(console, 'error').mockImplementation(() => undefined);
  const l = vi.spyOn(console, 'log').mockImplementation(() => undefined);
  try {
    const code = await run(args);
    return { code, err: e.mock.calls.map((c) => String(c[0])).join('\n'), out: l.mock.calls.map((c) => String(c[0])).join('\n') };
  } finally {
    e.mockRestore();
    l.mockRestore();
  }
}

describe("the loader's own files are never inputs", () => {
  it('a directory loaded twice with its checkpoint, failed and rejects files inside loads only the data', async () => {
    const d = join(dir, 'own');
    mkdirSync(d);
    writeFileSync(join(d, 'part-00000'), rows(2000));
    // files a default-named earlier run left behind, and this run's own names, all inside the dir
    writeFileSync(join(d, 'hashgate-load.failed.txt'), 'x|1|2|3\n');
    writeFileSync(join(d, 'hashgate-load.checkpoint.json'), '{"version":1}\n');
    const opts = {
      inputs: [d],
      window: 'w',
      checkpointFile: join(d, 'a.checkpoint.json'),
      failedFile: join(d, 'b.failed'),
      rejectsFile: join(d, 'c.rejects'),
    };
    for (let i = 0; i < 2; i++) {
      const sink = new MemorySink();
      const s = await load(opts, { sink });
      expect(s.files).toBe(1);
      expect(s.rejected).toBe(0);
      expect(s.rows).toBe(2000);
      expect(s.fieldCount).toBe(2);
      expect(sink.keys.size).toBe(2000);
    }
    // named explicitly it is an error, not data
    await expect(load({ ...opts, inputs: [opts.checkpointFile] }, { sink: new MemorySink() })).rejects.toMatchObject({ code: 'HG_ERR_INVALID_ARG' });
  });

  it('a glob skips them too; a glob whose directory is missing is a coded error naming the input', async () => {
    const d = join(dir, 'ownglob');
    mkdirSync(d);
    writeFileSync(join(d, 'part-1.txt'), rows(10));
    writeFileSync(join(d, 'hashgate-load.rejects.tsv'), 'junk\n');
    const got = await expandInputs([join(d, '*')], { own: [] });
    expect(got).toEqual([join(d, 'part-1.txt')]);
    const missing = join(dir, 'no-such-dir', 'part-*');
    const err = await expandInputs([missing]).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'HG_ERR_INVALID_ARG', details: { input: missing } });
    expect(String((err as Error).message)).not.toMatch(/scandir/);
    expect(String((err as Error).message)).toContain('does not exist');
    const r = await quietRun([missing, '--dry-run', '--quiet']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('HG_ERR_INVALID_ARG');
    expect(r.err).not.toContain('scandir');
  });
});

describe('field count and rejects', () => {
  it('a malformed first line no longer decides the field count (majority of a sample)', async () => {
    const f = join(dir, 'badfirst.txt');
    writeFileSync(f, 'garbage-header-without-delimiters\n' + rows(1000));
    const sink = new MemorySink();
    const s = await load({ inputs: [f], window: 'w', checkpointFile: join(dir, 'badfirst.cp'), rejectsFile: join(dir, 'badfirst.rej') }, { sink });
    expect(s.fieldCount).toBe(2);
    expect(s.rows).toBe(1000);
    expect(s.rejected).toBe(1);
    expect(readFileSync(join(dir, 'badfirst.rej'), 'utf8')).toMatch(/\t1\tfield-count\t/);
  });

  it('no field count with a majority: refused with a coded error asking for --field-count; --field-count overrides', async () => {
    const f = join(dir, 'mixed.txt');
    writeFileSync(f, 'a|b\nc|d|e\nf\ng|h|i|j\n');
    await expect(load({ inputs: [f], dryRun: true, window: 'w' })).rejects.toMatchObject({ code: 'HG_ERR_PARSE', details: { reason: 'field-count' } });
    const s = await load({ inputs: [f], dryRun: true, window: 'w', fieldCount: 3, maxRejectRatio: 1 });
    expect(s.rows).toBe(1);
    expect(sampleFieldCount([Buffer.from('a|b\n|\nx\n')], 124)).toMatchObject({ fieldCount: 2, sampled: 3 });
  });

  it('more rejects than --max-reject-ratio: ok false, exit 4, and the threshold is the default 1%', async () => {
    const f = join(dir, 'rejecty.txt');
    writeFileSync(f, rows(900) + 'bad line\n'.repeat(100));
    const s = await load({ inputs: [f], dryRun: true, window: 'w' });
    expect(s.rejected).toBe(100);
    expect(s.rejectRatio).toBeCloseTo(0.1);
    expect(s.maxRejectRatio).toBe(0.01);
    expect(s.rejectRatioExceeded).toBe(true);
    expect(s.ok).toBe(false);
    const r = await quietRun([f, '--dry-run', '--quiet', '--json', '--rejects-file', join(dir, 'rejecty.rej')]);
    expect(r.code).toBe(4);
    expect(JSON.parse(r.out)).toMatchObject({ rejected: 100, rejectRatioExceeded: true });
    // under a looser ratio the same input exits 0 and the summary still says what was rejected
    const ok = await quietRun([f, '--dry-run', '--quiet', '--max-reject-ratio', '0.2', '--rejects-file', join(dir, 'rejecty.rej')]);
    expect(ok.code).toBe(0);
    expect(ok.err).toContain('rejected 100');
    expect((await quietRun([f, '--dry-run', '--max-reject-ratio', '1.5'])).code).toBe(2);
  });
});

describe('files that are not text are refused before anything loads', () => {
  it('random bytes, gzip and NUL-laced files: HG_ERR_PARSE not-text, exit 4, nothing written', async () => {
    const good = join(dir, 'ok-part.txt');
    writeFileSync(good, rows(100));
    const rnd = join(dir, 'random.bin');
    let x = 12345;
    const bytes = Buffer.alloc(70_000, 0).map(() => ((x = (x * 1103515245 + 12345) >>> 0), x >>> 24));
    writeFileSync(rnd, bytes);
    const gz = join(dir, 'part.gz');
    writeFileSync(gz, gzipSync(Buffer.from(rows(5000))));
    const nul = join(dir, 'nul.txt');
    // text head, binary tail: the tail is checked too
    writeFileSync(nul, Buffer.concat([Buffer.from(rows(10000)), Buffer.alloc(100, 0)]));
    for (const [f, why] of [[rnd, /NUL|control|UTF-8/], [gz, /gzip/], [nul, /NUL/]] as const) {
      const sink = new MemorySink();
      const err = await load({ inputs: [good, f], window: 'w', checkpointFile: join(dir, 'bin.cp') }, { sink }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'HG_ERR_PARSE', details: { file: f, reason: 'not-text' } });
      expect(String((err as Error).message)).toMatch(why);
      expect(sink.keys.size).toBe(0);
    }
    const r = await quietRun([good, gz, '--dry-run', '--quiet']);
    expect(r.code).toBe(4);
    expect(r.err).toContain('gzip');
  });

  it("Hive's default ^A delimiter and a few invalid UTF-8 rows are still text", async () => {
    const f = join(dir, 'ctrl-a.txt');
    writeFileSync(f, rows(1000).replaceAll('|', '\x01'));
    const s = await load({ inputs: [f], window: 'w', dryRun: true, delimiter: 1 });
    expect(s.rows).toBe(1000);
    expect(notTextReason(Buffer.from(rows(1000).replaceAll('|', '\x01')), 124, true)).toMatch(/control/);
    const bad = Buffer.concat([Buffer.from(rows(500)), Buffer.from([0xff, 0xfe, 0x7c, 0x31, 0x0a]), Buffer.from(rows(500))]);
    expect(notTextReason(bad, 124, true)).toBeUndefined();
  });
});

describe('day windows', () => {
  it('100 day windows load every row (no silent 64-window cap); past --max-windows rows are rejected with a reason', async () => {
    const f = join(dir, 'days.txt');
    const start = Date.UTC(2026, 0, 1);
    let text = '';
    for (let d = 0; d < 100; d++) {
      const ymd = new Date(start + d * 86_400_000).toISOString().slice(0, 10).replaceAll('-', '');
      for (let i = 0; i < 5; i++) text += `n${d}_${i}|${i}|${ymd}\n`;
    }
    writeFileSync(f, text);
    const sink = new MemorySink();
    const s = await load({ inputs: [f], windowField: 2, fields: [0, 1], windowUnit: 'day', timeZone: 'UTC', checkpointFile: join(dir, 'days.cp') }, { sink });
    expect(s.windows.length).toBe(100);
    expect(s.rejected).toBe(0);
    expect(sink.keys.size).toBe(500);
    // many (window, bucket) buffers under a small buffer cap: flushed early, nothing lost
    const small = new MemorySink();
    await load(
      { inputs: [f], windowField: 2, fields: [0, 1], windowUnit: 'day', timeZone: 'UTC', buckets: 1000, maxBufferedBytes: 32 * 1024, checkpointFile: join(dir, 'days2.cp') },
      { sink: small },
    );
    expect(small.keys.size).toBe(500);
    const capped = await load({ inputs: [f], windowField: 2, fields: [0, 1], windowUnit: 'day', timeZone: 'UTC', dryRun: true, maxWindows: 10, maxRejectRatio: 1 });
    expect(capped.windows.length).toBe(10);
    expect(capped.rejectedByReason).toEqual({ 'too-many-windows': 450 });
  });
});

describe('--resume and changed files', () => {
  it('a file replaced by one of the same size and mtime is reloaded (head/tail hash), not skipped', async () => {
    const d = join(dir, 'replace');
    mkdirSync(d);
    const f = join(d, 'part-0');
    writeFileSync(f, rows(3000, 'a'));
    const cp = join(dir, 'replace.cp');
    const sink = new MemorySink();
    const first = await load({ inputs: [d], window: 'w', checkpointFile: cp }, { sink });
    expect(first.rows).toBe(3000);
    const st = statSync(f);
    // same length, different keys, same mtime: only the content hash can tell
    writeFileSync(f, rows(3000, 'b'));
    utimesSync(f, st.atime, st.mtime);
    expect(statSync(f).size).toBe(st.size);
    const second = await load({ inputs: [d], window: 'w', checkpointFile: cp, resume: true }, { sink });
    expect(second.filesSkipped).toBe(0);
    expect(second.filesReloaded).toBe(1);
    expect(second.rows).toBe(3000);
    expect(sink.keys.size).toBe(6000);
    // unchanged now: a further resume skips it
    const third = await load({ inputs: [d], window: 'w', checkpointFile: cp, resume: true }, { sink });
    expect(third).toMatchObject({ filesSkipped: 1, filesReloaded: 0, rows: 0 });
    // a grown file (new mtime and size) is reloaded as well
    writeFileSync(f, rows(3000, 'b') + rows(10, 'c'));
    const fourth = await load({ inputs: [d], window: 'w', checkpointFile: cp, resume: true }, { sink });
    expect(fourth).toMatchObject({ filesReloaded: 1, rows: 3010 });
    expect(sink.keys.size).toBe(6010);
  });

  it('rows that went to the failed file are reloaded by --resume (library, in-memory store)', async () => {
    const d = join(dir, 'failresume');
    mkdirSync(d);
    // one malformed line per file: listed once in the rejects file however often it is re-read
    for (let i = 0; i < 4; i++) writeFileSync(join(d, `part-${i}`), rows(1000, `f${i}_`) + 'malformed\n' + rows(1000, `g${i}_`));
    const cp = join(dir, 'failresume.cp');
    const failedFile = join(dir, 'failresume.failed');
    const rejectsFile = join(dir, 'failresume.rej');
    const sink = new MemorySink();
    sink.failing = true;
    const first = await load({ inputs: [d], window: 'w', checkpointFile: cp, failedFile, rejectsFile, retries: 0 }, { sink });
    expect(first.failed).toBe(8000);
    expect(first.ok).toBe(false);
    // the store is still down: resume must not report success
    const again = await load({ inputs: [d], window: 'w', checkpointFile: cp, failedFile, rejectsFile, retries: 0, resume: true }, { sink });
    expect(again.failed).toBe(8000);
    expect(again.filesSkipped).toBe(0);
    sink.failing = false;
    const resumed = await load({ inputs: [d], window: 'w', checkpointFile: cp, failedFile, rejectsFile, resume: true }, { sink });
    expect(resumed).toMatchObject({ ok: true, failed: 0, filesReloaded: 4, rows: 8000 });
    expect(sink.keys.size).toBe(8000);
    // the failed file no longer lists rows that are now loaded
    expect(existsSync(failedFile) ? readFileSync(failedFile, 'utf8') : '').toBe('');
    const listed = readFileSync(rejectsFile, 'utf8').trim().split('\n');
    expect(listed.length).toBe(4);
    expect(listed.every((l) => /\t1001\tfield-count\tmalformed$/.test(l))).toBe(true);
  });
});

describe('files holding raw rows are 0600', () => {
  it('failed and rejects files are created owner-only, also when they existed with wider modes', async () => {
    const f = join(dir, 'modes.txt');
    writeFileSync(f, rows(50) + 'bad\n');
    const failedFile = join(dir, 'modes.failed');
    const rejectsFile = join(dir, 'modes.rej');
    writeFileSync(rejectsFile, '');
    chmodSync(rejectsFile, 0o644);
    const sink = new MemorySink();
    sink.failing = true;
    const s = await load({ inputs: [f], window: 'w', checkpointFile: join(dir, 'modes.cp'), failedFile, rejectsFile, retries: 0, maxRejectRatio: 1 }, { sink });
    expect(s.failed).toBe(50);
    expect(statSync(failedFile).mode & 0o777).toBe(0o600);
    expect(statSync(rejectsFile).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'modes.cp')).mode & 0o777).toBe(0o600);
  });

  it('fail-open journal segments (raw keys) are created owner-only', async () => {
    const { DedupService } = await import('../src/dedup/index.js');
    const { freePort } = await import('./helpers/redis-server.js');
    const jdir = join(dir, 'journal-mode');
    // nothing listens on the port: every call fails open and journals its keys
    const svc = new DedupService({ redis: `redis://127.0.0.1:${await freePort()}`, dedup: { journalDir: jdir, replayIntervalMs: 0, onStoreError: 'fail-open' } });
    try {
      expect([...(await svc.firstSeen(['k1', 'k2']))]).toEqual([1, 1]);
    } finally {
      await svc.close();
    }
    const segs = readdirSync(jdir).filter((f) => f.startsWith('seg-'));
    expect(segs.length).toBeGreaterThan(0);
    for (const f of segs) expect(statSync(join(jdir, f)).mode & 0o777).toBe(0o600);
  });
});

describe('one key-length limit for loader and library', () => {
  it('MAX_KEY_BYTES is the library default; longer keys go to the rejects file as key-too-long', async () => {
    expect(MAX_KEY_BYTES).toBe(1024);
    expect(DEDUP_DEFAULTS.maxKeyBytes).toBe(MAX_KEY_BYTES);
    const f = join(dir, 'longkeys.txt');
    const atLimit = `${'n'.repeat(MAX_KEY_BYTES - 6)}|123456`;
    const over = `${'m'.repeat(MAX_KEY_BYTES - 5)}|123456`; // key 1025 bytes, line 1026: under --max-line-bytes
    writeFileSync(f, `${atLimit}\n${over}\n` + rows(200));
    const rej = join(dir, 'longkeys.rej');
    const sink = new MemorySink();
    const s = await load({ inputs: [f], window: 'w', checkpointFile: join(dir, 'longkeys.cp'), rejectsFile: rej }, { sink });
    expect(s.rows).toBe(201);
    expect(s.rejectedByReason).toEqual({ 'key-too-long': 1 });
    expect(readFileSync(rej, 'utf8')).toMatch(new RegExp(`^${f.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\\t2\\tkey-too-long\\t`));
    expect(sink.keys.has(`w:${atLimit.replace('|', '')}`)).toBe(true);
    // the selected-fields path applies the same limit
    const s2 = await load({ inputs: [f], window: 'w', dryRun: true, fields: [1, 0] });
    expect(s2.rejectedByReason).toEqual({ 'key-too-long': 1 });
  });
});

describe('credentials never reach printed URLs', () => {
  it('redact masks user-info passwords and password query items, keeps the rest', () => {
    expect(redact('redis://user:S3cret@host:6379/0')).toBe('redis://user:***@host:6379/0');
    expect(redact('cannot connect to rediss://:p%40ss@h:1: boom')).toBe('cannot connect to rediss://:***@h:1: boom');
    expect(redact('redis://onlypass@h')).toBe('redis://***@h');
    expect(redact('redis://h:1/2?db=2&password=hunter2&family=6')).toBe('redis://h:1/2?db=2&password=***&family=6');
    expect(redact('redis://u:a@b@h:1')).toBe('redis://u:***@h:1');
    expect(redact('no url here: a=b')).toBe('no url here: a=b');
    expect(redactTarget({ cluster: ['redis://x:y@h1:1', 'h2:2'] })).toBe('cluster redis://x:***@h1:1,h2:2');
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9]{6,20}$/), fc.stringMatching(/^[a-z]{1,8}$/), (pw, user) => {
        const text = `error at redis://${user}:${pw}@10.0.0.1:6379/0 and redis://h?password=${pw}`;
        expect(redact(text)).not.toContain(pw);
      }),
    );
  });

  it('load --redis with a password: the cannot-connect error shows the URL without it (exit 1)', async () => {
    const f = join(dir, 'pw.txt');
    writeFileSync(f, rows(5));
    const r = await quietRun([f, '--redis', 'redis://admin:Sup3rS3cretPW@127.0.0.1:1', '--quiet', '--checkpoint', join(dir, 'pw.cp')]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('redis://admin:***@127.0.0.1:1');
    expect(r.err).not.toContain('Sup3rS3cretPW');
  });
});

describe('parallel dry run (worker threads per file region)', () => {
  it('picks its thread count from the input size and the cores', () => {
    const MiB = 2 ** 20;
    expect(dryRunThreads(0, 2)).toBe(0);
    // the 10.5M-line export (270 MiB): the main thread alone
    expect(dryRunThreads(270 * MiB, 2)).toBe(0);
    expect(dryRunThreads(1024 * MiB - 1, 64)).toBe(0);
    expect(dryRunThreads(100 * 1024 * MiB, 1)).toBe(0);
    expect(dryRunThreads(1024 * MiB, 2)).toBe(2);
    expect(dryRunThreads(1024 * MiB, 8)).toBe(2);
    expect(dryRunThreads(1536 * MiB, 8)).toBe(3);
    expect(dryRunThreads(100 * 1024 * MiB, 8)).toBe(8);
    expect(dryRunThreads(100 * 1024 * MiB, 2)).toBe(2);
  });

  it('gives the single-threaded answer: rows, lines, rejects with file:line, bucket histogram', async () => {
    const { generateExport } = await import('../src/loader/generate.js');
    const d = join(dir, 'par');
    const gen = generateExport({ dir: d, files: 3, rowsPerFile: 30_000, dupRatio: 0.2, crlfRatio: 0.1, malformedEvery: 997, invalidUtf8Every: 1499, emptyEvery: 2003, emptyFile: true, noFinalNewline: true, seed: 77 });
    // one line longer than the read buffer, in the middle of a file
    const f0 = gen.files[0]!;
    const raw = readFileSync(f0);
    let at = 0;
    for (let i = 0; i < 5000; i++) at = raw.indexOf(10, at) + 1;
    writeFileSync(f0, Buffer.concat([raw.subarray(0, at), Buffer.from('x'.repeat(70_000) + '|1\n'), raw.subarray(at)]));
    const common = { inputs: [d], dryRun: true, window: '2026', buckets: 997, readBufferBytes: 64 * 1024, maxRejectRatio: 1 };
    // threads unset: a small input runs on the main thread
    const one = await load({ ...common, rejectsFile: join(dir, 'par1.rej') });
    const many = await load({ ...common, threads: 2, regionBytes: 100_000, rejectsFile: join(dir, 'par2.rej') });
    expect(one.rejected).toBe(gen.rejects.length + 1);
    expect(one.threads).toBe(0);
    expect(many.threads).toBe(2);
    // the whole summary but what measures the run (time, CPU, memory), the thread count and the
    // rejects file's name
    const answer = (s: Record<string, unknown>): Record<string, unknown> => {
      const { elapsedMs, rowsPerSec, cpuMs, rowsPerCpuSec, peakRssBytes, threads, rejectsFile, ...rest } = s;
      return rest;
    };
    expect(answer({ ...many })).toEqual(answer({ ...one }));
    expect(one.bucketRows.max).toBeGreaterThan(one.bucketRows.min);
    expect(readFileSync(join(dir, 'par2.rej'), 'utf8')).toBe(readFileSync(join(dir, 'par1.rej'), 'utf8'));
    // the CLI flag reaches it, and the CLI's summary is the same with and without workers (on
    // more than two 8 MiB regions: below that the CLI never starts workers)
    const d2 = join(dir, 'par-cli');
    generateExport({ dir: d2, files: 2, rowsPerFile: 350_000, dupRatio: 0.2, crlfRatio: 0.1, malformedEvery: 9973, invalidUtf8Every: 14_983, emptyEvery: 20_011, seed: 78 });
    const cli = async (threads: string, rej: string): Promise<Record<string, unknown>> => {
      const r = await quietRun([d2, '--dry-run', '--quiet', '--json', '--threads', threads, '--buckets', '997', '--window', '2026', '--max-reject-ratio', '1', '--rejects-file', join(dir, rej)]);
      expect(r.code).toBe(0);
      return JSON.parse(r.out) as Record<string, unknown>;
    };
    const c2 = await cli('2', 'par3.rej');
    const c0 = await cli('0', 'par4.rej');
    expect(c2.threads).toBe(2);
    expect(c0.threads).toBe(0);
    expect(answer(c2)).toEqual(answer(c0));
    expect(c0.rejected).toBeGreaterThan(0);
    expect(readFileSync(join(dir, 'par3.rej'), 'utf8')).toBe(readFileSync(join(dir, 'par4.rej'), 'utf8'));
    expect((await cli('auto', 'par5.rej')).threads).toBe(0);

    // a dry run counts the buckets of the layout it is given: compact buckets come from digest
    // bytes 8..15, as in a load into a compact store, on the main thread and on workers alike
    const compactSink = new (class extends MemorySink {
      readonly layout = 'compact' as const;
    })();
    const loaded = await load({ ...common, rejectsFile: join(dir, 'par6.rej') }, { sink: compactSink });
    const dryCompact = await load({ ...common, layout: 'compact', rejectsFile: join(dir, 'par7.rej') });
    const dryCompactMany = await load({ ...common, layout: 'compact', threads: 2, regionBytes: 100_000, rejectsFile: join(dir, 'par8.rej') });
    expect(dryCompactMany.threads).toBe(2);
    expect(loaded.rows).toBe(one.rows);
    expect(dryCompact.bucketRows).toEqual(loaded.bucketRows);
    expect(dryCompactMany.bucketRows).toEqual(loaded.bucketRows);
    expect(dryCompact.bucketRows).not.toEqual(one.bucketRows);
  });

  it('interrupted on workers: the bucket counts cover exactly the rows the summary reports', async () => {
    const { generateExport } = await import('../src/loader/generate.js');
    const d = join(dir, 'par-stop');
    generateExport({ dir: d, files: 2, rowsPerFile: 60_000, dupRatio: 0.2, seed: 79 });
    const ac = new AbortController();
    const buckets = 4099;
    const s = await load(
      { inputs: [d], dryRun: true, window: '2026', buckets, threads: 2, regionBytes: 50_000, readBufferBytes: 64 * 1024, rejectsFile: join(dir, 'par-stop.rej') },
      {
        signal: ac.signal,
        progress: {
          update(p) {
            if (p.rows > 20_000) ac.abort();
          },
          stop() {},
        },
      },
    );
    expect(s.interrupted).toBe(true);
    expect(s.threads).toBe(2);
    expect(s.rows).toBeGreaterThan(20_000);
    expect(s.rows).toBeLessThan(120_000);
    // the workers had regions past the abort in flight: those are counted on both sides or neither
    expect(Math.round(s.bucketRows.mean * buckets)).toBe(s.rows);
  });
});
