// Fail-open journal under faults, against a real redis-server: a gate that never learnt the
// window's bucket count, corrupted record headers and payloads, crash-torn segments, foreign files
// in the journal directory, and segments written in the old record format.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Packr } from 'msgpackr';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { freePort, requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { captureConsole } from '../helpers/console.js';
import { DedupService } from '../../src/dedup/index.js';
import { run as recoverCli } from '../../src/cli/commands/recover.js';
import { bucketOf } from '../../src/hash/index.js';

const has = requireRedisOrSkip('dedup journal fault tests');
const NOW = Date.parse('2026-06-01T00:00:00Z');
const now = () => NOW;

/** Offsets of the records of a format-2 segment (header: magic, length, crc). */
function recordOffsets(buf: Buffer): number[] {
  const out: number[] = [];
  for (let off = 0; off < buf.length; off += 12 + buf.readUInt32LE(off + 4)) out.push(off);
  return out;
}

const deadPid = (): number => spawnSync(process.execPath, ['-e', '']).pid!;

const quietCli = (argv: string[]): Promise<{ code: number; out: string }> => captureConsole(() => recoverCli(argv));

describe.skipIf(!has)('dedup journal under faults', () => {
  let srv: RedisServer;
  let r: Redis;
  let deadUrl: string;
  const dirs: string[] = [];
  const tmp = (name: string): string => {
    const d = mkdtempSync(join(tmpdir(), `hg-jf-${name}-`));
    dirs.push(d);
    return d;
  };

  beforeAll(async () => {
    srv = await startRedis({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    r = new Redis(srv.url);
    r.on('error', () => undefined);
    deadUrl = `redis://127.0.0.1:${await freePort()}`;
  });
  afterAll(async () => {
    r?.disconnect();
    await srv?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** A sealed segment of `calls` records of `per` keys each, journaled by a service whose Redis never answered. */
  async function journalOffline(dir: string, prefix: string, calls: number, per: number, layout: 'compact' | 'sets' = 'compact'): Promise<{ file: string; keys: string[][] }> {
    const svc = new DedupService({ redis: deadUrl, dedup: { prefix, layout, buckets: 64, journalDir: dir, replayIntervalMs: 0, connectTimeoutMs: 50 }, now });
    const keys: string[][] = [];
    for (let c = 0; c < calls; c++) {
      const k = Array.from({ length: per }, (_, i) => `${prefix}-${c}-${i}`);
      keys.push(k);
      expect((await svc.firstSeen(k)).every((a) => a === 1)).toBe(true);
    }
    expect(svc.counters.journaledKeys).toBe(calls * per);
    await svc.close();
    const segs = readdirSync(dir).filter((f) => f.endsWith('.hgj'));
    expect(segs).toHaveLength(1);
    return { file: join(dir, segs[0]!), keys };
  }

  const fresh = (prefix: string, dir: string) =>
    new DedupService({ redis: srv.url, dedup: { prefix, buckets: 64, journalDir: dir, replayIntervalMs: 0, cacheMaxEntries: 0 }, now });

  it('a gate that never learnt the window bucket count journals digests; replay places them in the recorded count', async () => {
    const ja = tmp('bk-a');
    const jb = tmp('bk-b');
    const A = new DedupService({ redis: srv.url, dedup: { prefix: 'bk', buckets: 1000, journalDir: ja, replayIntervalMs: 0 }, now });
    const keysA = Array.from({ length: 10_000 }, (_, i) => `a${i}|id${i}`);
    expect((await A.firstSeen(keysA)).reduce((x, y) => x + y, 0)).toBe(10_000);
    await A.close();
    await srv.kill('SIGKILL');
    // B: default bucket count (1024), opened while Redis is down
    const B = new DedupService({ redis: srv.url, dedup: { prefix: 'bk', journalDir: jb, replayIntervalMs: 0, connectTimeoutMs: 200 }, now });
    expect(B.options.buckets).toBe(1024);
    const keysB = Array.from({ length: 10_000 }, (_, i) => `b${i}|id${i}`);
    expect((await B.firstSeen(keysB)).reduce((x, y) => x + y, 0)).toBe(10_000);
    expect(B.counters.journaledKeys).toBe(10_000);
    await srv.restart(); // AOF: A's keys and the window's meta (1000 buckets) survive
    await B.recover();
    for (let i = 0; i < 50 && readdirSync(jb).length > 0; i++) await new Promise((res) => setTimeout(res, 100));
    expect(readdirSync(jb)).toEqual([]);
    const F = fresh('bk', jb);
    const st = await F.stats('2026');
    expect(st.buckets).toBe(1000);
    expect(st.exact).toBe(20_000);
    expect((await F.firstSeen(keysB)).reduce((x, y) => x + y, 0)).toBe(0);
    expect((await F.firstSeen(keysA)).reduce((x, y) => x + y, 0)).toBe(0);
    await B.close();
    await F.close();
  });

  const corruptions: Array<[string, (buf: Buffer, off: number) => void, { records: number; repaired: boolean }]> = [
    ['length set to 0x7fffffff', (b, o) => b.writeUInt32LE(0x7fffffff, o + 4), { records: 8, repaired: true }],
    ['length + 1', (b, o) => b.writeUInt32LE(b.readUInt32LE(o + 4) + 1, o + 4), { records: 8, repaired: true }],
    ['a payload byte flipped', (b, o) => (b[o + 40] = b[o + 40]! ^ 0xff), { records: 7, repaired: false }],
    ['header and payload overwritten', (b, o) => b.fill(0x5a, o, o + 64), { records: 7, repaired: false }],
  ];
  for (const [name, damage, want] of corruptions) {
    it(`sealed segment with ${name} in record 3 of 8: intact records replayed, segment quarantined, not complete`, async () => {
      const dir = tmp('corrupt');
      const prefix = `cr${corruptions.findIndex((c) => c[0] === name)}`;
      const { file, keys } = await journalOffline(dir, prefix, 8, 1000);
      const buf = readFileSync(file);
      const offs = recordOffsets(buf);
      expect(offs).toHaveLength(8);
      damage(buf, offs[2]!);
      writeFileSync(file, buf);
      const svc = fresh(prefix, dir);
      const rep = await svc.recover();
      expect(rep.records).toBe(want.records);
      expect(rep.keys).toBe(want.records * 1000);
      expect(rep.complete).toBe(false);
      expect(rep.tornTails).toEqual([]);
      expect(rep.quarantined).toHaveLength(1);
      expect(rep.quarantined[0]!.ranges.every((x) => (x.repaired === true) === want.repaired)).toBe(true);
      expect(readdirSync(dir)).toEqual([`${file.split('/').pop()}.corrupt`]);
      expect(readFileSync(`${file}.corrupt`).equals(buf)).toBe(true); // kept byte for byte
      // every key of an intact record is in Redis
      for (let c = 0; c < 8; c++) {
        const lost = c === 2 && !want.repaired;
        expect((await svc.firstSeen(keys[c]!)).reduce((x, y) => x + y, 0)).toBe(lost ? 1000 : 0);
      }
      expect((await svc.stats('2026')).exact).toBe(8000);
      await svc.close();
    });
  }

  it('hashgate recover exits 4 while a quarantined segment is in the journal directory, 0 once it is moved out', async () => {
    const dir = tmp('cli');
    const { file } = await journalOffline(dir, 'crcli', 4, 500);
    const buf = readFileSync(file);
    const offs = recordOffsets(buf);
    buf.writeUInt32LE(0x7fffffff, offs[1]! + 4); // repairable
    buf[offs[2]! + 30]! ^= 0xff; // lost
    writeFileSync(file, buf);
    const flags = ['--redis', srv.url, '--prefix', 'crcli', '--buckets', '64', '--journal-dir', dir];
    const first = await quietCli([...flags, '--json']);
    expect(first.code).toBe(4);
    const rep = JSON.parse(first.out.split('\n')[0]!);
    expect(rep).toMatchObject({ records: 3, keys: 1500, complete: false });
    expect(rep.quarantined).toHaveLength(1);
    const again = await quietCli(flags);
    expect(again.code).toBe(4);
    expect(again.out).toMatch(/quarantined segment/);
    const aside = tmp('aside');
    renameSync(`${file}.corrupt`, join(aside, 'inspected.corrupt'));
    expect((await quietCli(flags)).code).toBe(0);
    expect((await quietCli(['--redis', srv.url, '--journal-dir', join(dir, 'missing')])).code).toBe(1);
  });

  it("only the crash-torn end of a dead writer's .open segment is dropped; damage inside it is quarantined", async () => {
    const dir = tmp('torn');
    const { file, keys } = await journalOffline(dir, 'torn', 8, 100);
    const pid = deadPid();
    const open = join(dir, `seg-${pid}-000000000000001-000000.open`);
    renameSync(file, open);
    const len = readFileSync(open).length;
    truncateSync(open, len - 7); // a write cut short by the crash
    const svc = fresh('torn', dir);
    const rep = await svc.recover();
    expect(rep).toMatchObject({ records: 7, keys: 700, complete: true, quarantined: [] });
    expect(rep.tornTails).toHaveLength(1);
    expect(readdirSync(dir)).toEqual([]);
    expect((await svc.firstSeen(keys[6]!)).reduce((x, y) => x + y, 0)).toBe(0);
    // the same dead writer's segment damaged in the middle: not a crash tear
    const dir2 = tmp('torn2');
    const j2 = await journalOffline(dir2, 'torn2', 8, 100);
    const open2 = join(dir2, `seg-${pid}-000000000000002-000000.open`);
    renameSync(j2.file, open2);
    const buf = readFileSync(open2);
    buf[recordOffsets(buf)[3]! + 20]! ^= 0xff;
    writeFileSync(open2, buf);
    const svc2 = new DedupService({ redis: srv.url, dedup: { prefix: 'torn2', buckets: 64, journalDir: dir2, replayIntervalMs: 0 }, now });
    const rep2 = await svc2.recover();
    expect(rep2).toMatchObject({ records: 7, complete: false });
    expect(rep2.quarantined).toHaveLength(1);
    expect(readdirSync(dir2)).toEqual([`seg-${pid}-000000000000002-000000.open.corrupt`]);
    await svc.close();
    await svc2.close();
  });

  it('recover touches only files named like its own segments', async () => {
    const dir = tmp('foreign');
    await journalOffline(dir, 'fo', 2, 10);
    const foreign: Record<string, string> = {
      'important.open': 'do not delete',
      'design.hgj': 'mine',
      'seg-notes.hgj': 'not a segment',
      'seg-1.open': 'nor this',
      'seg-1-2-3.open': 'nor this one',
      'notes.txt': 'hello',
    };
    for (const [f, c] of Object.entries(foreign)) writeFileSync(join(dir, f), c);
    mkdirSync(join(dir, 'sub'));
    const svc = fresh('fo', dir);
    const rep = await svc.recover();
    expect(rep).toMatchObject({ segments: 1, records: 2, keys: 20, complete: true, tornTails: [], quarantined: [] });
    expect(readdirSync(dir).sort()).toEqual([...Object.keys(foreign), 'sub'].sort());
    for (const [f, c] of Object.entries(foreign)) expect(readFileSync(join(dir, f), 'utf8')).toBe(c);
    await svc.close();
  });

  it('segments written in the previous record format still replay', async () => {
    const dir = tmp('v1');
    const packr = new Packr({ useRecords: false, moreTypes: false });
    const keys = ['old-1', 'old-2', 'old-3'];
    const groups = new Map<string, string[]>();
    for (const k of keys) {
      const key = `v1p:2026:${bucketOf(k, 16)}`;
      groups.set(key, [...(groups.get(key) ?? []), k]);
    }
    const payload = packr.pack({ v: 1, t: NOW, w: '2026', mk: 'v1p:2026:meta', mf: 'sets.buckets', b: 16, hk: 'v1p:2026:hll', g: [...groups] });
    const head = Buffer.alloc(8);
    head.writeUInt32LE(payload.length, 0);
    head.writeUInt32LE(crc32(payload), 4);
    writeFileSync(join(dir, `seg-${deadPid()}-000000000000001-000000.hgj`), Buffer.concat([head, payload]));
    const svc = new DedupService({ redis: srv.url, dedup: { prefix: 'v1p', layout: 'sets', buckets: 16, journalDir: dir, replayIntervalMs: 0 }, now });
    const rep = await svc.recover();
    expect(rep).toMatchObject({ records: 1, keys: 3, added: 3, complete: true });
    expect([...(await svc.firstSeen([...keys, 'new']))]).toEqual([0, 0, 0, 1]);
    expect(readdirSync(dir)).toEqual([]);
    await svc.close();
  });

  it('sets layout journals raw members with digests; replay writes the Java-readable sets', async () => {
    const dir = tmp('sets');
    const { keys } = await journalOffline(dir, 'js', 2, 50, 'sets');
    const svc = new DedupService({ redis: srv.url, dedup: { prefix: 'js', layout: 'sets', buckets: 64, journalDir: dir, replayIntervalMs: 0 }, now });
    const rep = await svc.recover();
    expect(rep).toMatchObject({ keys: 100, added: 100, complete: true });
    const k = keys[1]![7]!;
    expect(await r.sismember(`js:2026:${bucketOf(k, 64)}`, k)).toBe(1);
    await svc.close();
  });

  it('keeps copying aside harmless: a copied segment replays idempotently', async () => {
    const dir = tmp('copy');
    const { file } = await journalOffline(dir, 'cp', 1, 10);
    copyFileSync(file, file.replace(/-\d{6}\.hgj$/, '-999999.hgj'));
    const svc = fresh('cp', dir);
    const rep = await svc.recover();
    expect(rep).toMatchObject({ segments: 2, keys: 20, added: 10, complete: true });
    await svc.close();
  });
});
