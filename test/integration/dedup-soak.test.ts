// Soak under faults: 256 concurrent single-key firstSeen callers, fail-open with a journal, while
// the test kills the real redis-server with SIGKILL and restarts it (AOF on). The gate must keep
// the event loop turning (the test's own kill/restart timers and a ticker run), reconnect and
// send keys to Redis again within seconds of each restart, replay its journal while serving, and
// end with an exact count and 0 for every key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireRedisOrSkip, startRedis, type RedisServer } from '../helpers/redis-server.js';
import { DedupService } from '../../src/entries/dedup.js';
import { HashGate, type RedisConfig } from '../../src/index.js';

const has = requireRedisOrSkip('dedup soak');
const NOW = Date.parse('2026-06-01T00:00:00Z');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
// CI runs a bounded soak; HG_SOAK_KILLS=6 HG_SOAK_EVERY_MS=20000 runs the long one (kill every 20 s).
const KILLS = Number(process.env.HG_SOAK_KILLS ?? 2);
const EVERY_MS = Number(process.env.HG_SOAK_EVERY_MS ?? 12_000);
// How long an outage's journal may take to replay while the 256 callers go on. It competes with
// them for the same two cores, and a busy box runs the whole soak at a fraction of its usual rate:
// the bound is generous, to tell a replay that stalled from one that is slow.
const REPLAY_PATIENCE_MS = 90_000;

describe.skipIf(!has)('dedup soak: kill -9 under 256 callers', () => {
  let srv: RedisServer;
  const dirs: string[] = [];
  beforeAll(async () => {
    srv = await startRedis({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  });
  afterAll(async () => {
    await srv?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const cases: Array<[string, () => RedisConfig, number]> = [
    [`URL client, ${KILLS} kills`, () => srv.url, KILLS],
    ['options client, 1 kill', () => ({ host: '127.0.0.1', port: srv.port }), 1],
  ];
  for (const [name, redis, kills] of cases) {
    it(`${name}: reconnects within seconds, replays while serving, exact afterwards, timers tick`, async () => {
      const jdir = mkdtempSync(join(tmpdir(), 'hg-soak-'));
      dirs.push(jdir);
      const prefix = name.startsWith('URL') ? 'soak-url' : 'soak-opt';
      const gate = await HashGate.open({
        threads: 0,
        redis: redis(),
        // the default replayIntervalMs: replay on reconnection is on
        dedup: { prefix, buckets: 64, journalDir: jdir, commandTimeoutMs: 1000 },
        now: () => NOW,
      });
      const svc = gate.dedup;
      let ticks = 0;
      const ticker = setInterval(() => ticks++, 100);
      const t0 = performance.now();
      let fresh = 0;
      let freshOnes = 0;
      let dupOnes = 0;
      let dups = 0;
      let errors = 0;
      let running = true;
      const caller = async (): Promise<void> => {
        let c = 0;
        while (running) {
          c++;
          const dup = c % 8 === 0 && fresh > 2000;
          const key = dup ? `s${fresh - 1000}` : `s${fresh++}`;
          try {
            const a = (await gate.firstSeen([key]))[0]!;
            if (dup) {
              dups++;
              dupOnes += a;
            } else freshOnes += a;
          } catch {
            errors++;
          }
        }
      };
      const callers = Array.from({ length: 256 }, caller);

      const outages: Array<{ resumeMs: number; replayedMs: number; journaledDuringOutage: number }> = [];
      for (let k = 0; k < kills; k++) {
        await sleep(t0 + 3000 + k * EVERY_MS - performance.now());
        await srv.kill('SIGKILL');
        const j0 = svc.counters.journaledKeys;
        await sleep(3000);
        const journaledDuringOutage = svc.counters.journaledKeys - j0;
        expect(journaledDuringOutage).toBeGreaterThan(0);
        await srv.restart();
        const restartedAt = performance.now();
        // resumed: a 200 ms span in which calls completed and none was answered from the journal
        let resumeMs = -1;
        let replayedMs = -1;
        let prevJ = svc.counters.journaledKeys;
        let prevK = svc.counters.storeKeys;
        // replay competes with the 256 callers for the same two cores: a few hundred thousand journaled
        // keys take seconds to tens of seconds on a loaded machine
        while (performance.now() - restartedAt < REPLAY_PATIENCE_MS && (resumeMs < 0 || replayedMs < 0)) {
          await sleep(200);
          const j = svc.counters.journaledKeys;
          const s = svc.counters.storeKeys;
          if (resumeMs < 0 && j === prevJ && s > prevK) resumeMs = performance.now() - restartedAt;
          if (replayedMs < 0 && resumeMs >= 0 && svc.journalBacklogBytes() === 0) replayedMs = performance.now() - restartedAt;
          prevJ = j;
          prevK = s;
        }
        outages.push({ resumeMs, replayedMs, journaledDuringOutage });
        expect(resumeMs, 'exact answers resumed after the restart').toBeGreaterThan(0);
        expect(replayedMs, `journal replayed while serving (${svc.journalBacklogBytes()} B of journal left, ${journaledDuringOutage} keys journaled in the outage)`).toBeGreaterThan(0);
      }
      await sleep(3000); // load goes on after the last recovery
      running = false;
      await Promise.all(callers);
      clearInterval(ticker);
      const elapsed = performance.now() - t0;
      const storeKeysAtEnd = svc.counters.storeKeys;
      // the journal is empty (replayed while serving) and nothing was quarantined
      const rep = await gate.recover();
      expect(rep.complete).toBe(true);
      expect(existsSync(jdir) ? readdirSync(jdir).filter((f) => f.startsWith('seg-')) : []).toEqual([]);
      await gate.close();

      console.log(JSON.stringify({ name, elapsedMs: Math.round(elapsed), calls: fresh + dups, fresh, storeKeysAtEnd, journaled: svc.counters.journaledKeys, ticks, outages }));
      expect(errors).toBe(0);
      expect(freshOnes).toBe(fresh); // every fresh key answered first-seen
      expect(dupOnes).toBe(0); // no duplicate answered first-seen, outage or not
      expect(ticks).toBeGreaterThanOrEqual(Math.floor((elapsed / 100) * 0.5)); // a starved loop ticks ~0 times

      // a fresh instance without cache: exact count, and 0 for every key
      const probe = new DedupService({ redis: srv.url, dedup: { prefix, buckets: 64, journalDir: jdir, replayIntervalMs: 0, cacheMaxEntries: 0 }, now: () => NOW });
      expect((await probe.stats('2026')).exact).toBe(fresh);
      let ones = 0;
      for (let s = 0; s < fresh; s += 10_000) {
        const batch = Array.from({ length: Math.min(10_000, fresh - s) }, (_, i) => `s${s + i}`);
        for (const a of await probe.firstSeen(batch)) ones += a;
      }
      expect(ones).toBe(0);
      await probe.close();
      const r = new Redis(srv.url);
      expect(await r.exists(`${prefix}:lock:recover`)).toBe(0);
      r.disconnect();
    }, 120_000 + KILLS * (EVERY_MS + REPLAY_PATIENCE_MS));
  }
});
