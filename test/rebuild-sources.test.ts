// Key sources of a shared-filter rebuild, without Redis: export files yield exactly the keys (and
// rejects, and refusals) `hashgate load` takes from the same files, whatever the lines; option
// errors name the option.
import { describe, it, expect, afterAll } from 'vitest';
import fc from 'fast-check';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { ExportFileKeys, HBaseScanKeys, RedisSetWindowKeys, rebuildRedisBloom } from 'hashgate/bloom';
import { ErrorCodes } from 'hashgate';
import { load } from '../src/loader/loader.js';

const dir = mkdtempSync(join(tmpdir(), 'hashgate-rebuild-src-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function collect(src: ExportFileKeys): Promise<string[]> {
  const out: string[] = [];
  for await (const batch of src) for (const k of batch) out.push(Buffer.from(k).toString('hex'));
  return out;
}

async function loaderKeys(inputs: string[], fields: number[] | null, readBufferBytes: number): Promise<{ keys: string[]; rejected: number; rows: number }> {
  const keys: string[] = [];
  const sum = await load(
    { inputs, dryRun: true, fields, window: '2026', buckets: 8, maxLineBytes: 64, readBufferBytes, rejectsFile: join(dir, 'rej.tsv') },
    {
      onKeys: (bytes, offsets, n) => {
        for (let i = 0; i < n; i++) keys.push(Buffer.from(bytes.subarray(offsets[i]!, offsets[i + 1]!)).toString('hex'));
      },
    },
  );
  return { keys, rejected: sum.rejected, rows: sum.rows };
}

describe('ExportFileKeys', () => {
  it('yields the keys and rejects hashgate load finds in the same files (property)', async () => {
    const field = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 8 }), fc.constantFrom('', '用户', 'a\r', 'x'.repeat(70)));
    const line = fc.array(field, { minLength: 1, maxLength: 4 }).map((f) => f.join('|'));
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(line, { maxLength: 40 }), { minLength: 1, maxLength: 3 }),
        fc.boolean(),
        fc.constantFrom(null, [1], [1, 0]),
        async (files, finalNewline, fields) => {
          const inputs = files.map((lines, i) => {
            const f = join(dir, `p${n}-${i}.txt`);
            writeFileSync(f, lines.join('\n') + (finalNewline && lines.length ? '\n' : ''));
            return f;
          });
          n++;
          const src = new ExportFileKeys({ inputs, fields, maxLineBytes: 64, readBufferBytes: 256 });
          // both refuse the same inputs (no field count most lines share, binary files) the same way
          const failure = (e: unknown) => ({ failed: (e as { code?: string }).code, reason: (e as { details?: { reason?: string } }).details?.reason });
          const ours = await collect(src).catch(failure);
          const theirs = await loaderKeys(inputs, fields, 256).catch(failure);
          if (!Array.isArray(ours) || !('keys' in theirs)) {
            expect(ours).toEqual(theirs);
            expect((ours as { failed?: string }).failed).toMatch(/^HG_ERR_/);
            return;
          }
          expect(ours).toEqual(theirs.keys);
          expect(src.rows).toBe(theirs.rows);
          expect(src.rejected).toBe(theirs.rejected);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('names rejected lines by file and line, never by content', async () => {
    const f = join(dir, 'named.txt');
    writeFileSync(f, 'alice|1\nbob|2|extra\n\ncarol|3\n' + 'z'.repeat(5000) + '|4\ndave|5');
    const src = new ExportFileKeys({ inputs: [f], maxLineBytes: 100, readBufferBytes: 1024 });
    const keys = (await collect(src)).map((h) => Buffer.from(h, 'hex').toString());
    expect(keys).toEqual(['alice1', 'carol3', 'dave5']);
    expect(src.rejects).toEqual([
      { file: f, line: 2, reason: 'field-count' },
      { file: f, line: 3, reason: 'empty' },
      { file: f, line: 5, reason: 'too-long' },
    ]);
    expect(JSON.stringify(src.rejects)).not.toContain('bob');
  });
});

describe('option errors name the option', () => {
  const redis = new Redis({ lazyConnect: true });
  afterAll(() => redis.disconnect());
  it('sources', () => {
    expect(() => new ExportFileKeys({ inputs: [] })).toThrow(/source\.inputs/);
    expect(() => new RedisSetWindowKeys({ redis, windows: [] })).toThrow(/source\.windows/);
    expect(() => new RedisSetWindowKeys({ redis, windows: ['2026'], buckets: 0 })).toThrow(/source\.buckets/);
    expect(() => new HBaseScanKeys({ store: {} as never, table: 't', column: 'nocolon' })).toThrow(/source\.column/);
  });
  it('rebuildRedisBloom rejects before touching Redis', async () => {
    await expect(rebuildRedisBloom({ redis, name: 'a{', keys: [] })).rejects.toMatchObject({ code: ErrorCodes.INVALID_OPTION });
    await expect(rebuildRedisBloom({ redis, name: 'ok', keys: 42 as never })).rejects.toThrow(/options\.keys/);
    await expect(rebuildRedisBloom({ redis, name: 'ok', keys: [], lockTtlMs: 5 })).rejects.toThrow(/options\.lockTtlMs/);
    await expect(rebuildRedisBloom({ redis, name: 'ok', keys: [], minKeys: -1 })).rejects.toThrow(/options\.minKeys/);
    expect(redis.status).toBe('wait'); // never connected
  });
});
