// `hashgate metrics --port P`: a Prometheus endpoint for what can be observed from outside a
// service process: the fail-open journal directory (backlog bytes, segments, oldest age), Redis
// (up, memory, keys, dedup window sizes are left to `hashgate stats`), and this process. Services
// that embed hashgate expose their in-process metrics with `metricsHandler()` instead.
//
// --once prints the exposition text to stdout and exits (node_exporter textfile collector, cron);
// it exits 1 when a watched journal directory is missing, whose gauges have no sample then: a
// mistyped path must not read as "backlog 0". /healthz answers while the process serves; /readyz
// is 503 while the probed Redis is down or a watched journal directory is missing.
//
// Unknown values are omitted, never printed: a Redis that does not answer has no memory sample
// (rather than NaN), and the event-loop lag gauges have no sample before the loop was measured
// (prom-client reports an empty histogram's minimum as 2^63 ns = 9223372036 s).

import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { createProbeRedis } from '../../redis/client.js';
import { checkInt } from '../../errors.js';
import { journalDirStats, serveMetrics } from '../../metrics/index.js';
import type { MetricsServer } from '../../metrics/index.js';
import { invalidType } from '../../errors.js';
import { ErrorCodes, HashGateError } from '../../errors.js';
import { flagError } from '../flags.js';
import { fail } from '../output.js';
import { CONNECT_TIMEOUT_FLAG, connectTimeoutMs } from '../redis-url.js';

export const DEFAULTS = {
  port: 9464,
  host: '127.0.0.1',
  path: '/metrics',
  /** The Redis probe's connect and command timeout (a scrape must answer quickly). */
  redisTimeoutMs: 1000,
} as const;

export const HELP = `usage: hashgate metrics [--port ${DEFAULTS.port}] [--host ${DEFAULTS.host}] [--path ${DEFAULTS.path}]
                        [--journal-dir DIR]... [--redis URL [--connect-timeout-ms MS]] [--bloom NAME]...
                        [--prefix hashgate_] [--no-process] [--once]

Serves Prometheus metrics at --path, liveness at /healthz (200 while serving) and readiness at
/readyz (503 while the --redis probe fails or a --journal-dir is missing).

  --port P          listen port (0 = any free port; printed on start)
  --host H          listen address (default loopback; 0.0.0.0 to expose)
  --path P          metrics path (default ${DEFAULTS.path})
  --journal-dir D   fail-open journal directory to watch (repeatable): journal_backlog_bytes{journal=D}, ...
                    labelled with D's absolute path, as the service labels its own journal
  --redis URL       Redis to probe on each scrape: redis_up, redis_used_memory_bytes, redis_keys
                    (no default: without it Redis is not probed)
  --connect-timeout-ms MS  the probe's connect and command timeout (default ${DEFAULTS.redisTimeoutMs}):
                    a scrape while Redis does not answer reports redis_up 0 after at most MS
  --bloom NAME      shared filter whose last rebuild to report, read from Redis (repeatable; needs
                    --redis): bloom_last_rebuild_timestamp_seconds{filter=NAME}, ..._duration_seconds, ..._keys
  --prefix P        metric name prefix (default hashgate_)
  --no-process      omit process metrics (CPU, memory, event loop)
  --once            print the metrics once to stdout and exit
Exit codes: 0 ok, 1 --once: a --journal-dir does not exist (its gauges have no sample), 2 usage.`;

/** Drops samples whose value is unknown (NaN) or prom-client's empty-histogram sentinel. */
function omitUnknownSamples(registry: Registry): void {
  type Values = { values: Array<{ value: number }> };
  for (const metric of registry.getMetricsAsArray() as unknown as Array<{ name: string; get(): Promise<Values> }>) {
    const lag = metric.name.includes('eventloop_lag');
    const get = metric.get.bind(metric);
    metric.get = async () => {
      const m = await get();
      return { ...m, values: m.values.filter((v) => !Number.isNaN(v.value) && !(lag && v.value >= 9e9)) };
    };
  }
}

export interface MetricsCommand {
  /** Only what the sidecar observes (no empty in-process families that would add to a service's). */
  registry: Registry;
  server?: MetricsServer;
  close(): Promise<void>;
}

/** Parses flags and starts serving (or prepares --once); `run` wraps it with signal handling. */
const FLAGS = {
  port: { type: 'string' },
  host: { type: 'string' },
  path: { type: 'string' },
  'journal-dir': { type: 'string', multiple: true },
  redis: { type: 'string' },
  ...CONNECT_TIMEOUT_FLAG,
  bloom: { type: 'string', multiple: true },
  prefix: { type: 'string' },
  'no-process': { type: 'boolean' },
  once: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export async function start(argv: string[]): Promise<MetricsCommand & { once: boolean; help: boolean; missingJournalDirs: () => string[] }> {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: FLAGS, strict: true, allowPositionals: false }));
  } catch (err) {
    throw flagError(err, FLAGS);
  }
  const noop = async (): Promise<void> => {};
  if (values.help) return { registry: new Registry(), close: noop, once: false, help: true, missingJournalDirs: () => [] };
  const probeMs = values['connect-timeout-ms'] === undefined ? DEFAULTS.redisTimeoutMs : connectTimeoutMs(values['connect-timeout-ms']);
  const port = values.port === undefined ? DEFAULTS.port : checkInt('--port', Number(values.port), 0, 65535);
  const path = values.path ?? DEFAULTS.path;
  if (!path.startsWith('/')) throw new TypeError(`--path must start with '/', got ${JSON.stringify(path)}`);
  const p = values.prefix ?? 'hashgate_';
  if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(p)) throw invalidType('--prefix', 'a Prometheus name prefix', p);
  const registry = new Registry();
  const reg = [registry];
  if (!values['no-process']) collectDefaultMetrics({ register: registry, prefix: p });
  const closers: (() => Promise<void> | void)[] = [];
  const readiness: Array<() => Promise<Record<string, unknown>>> = [];

  // Same names and labels as the in-process journal gauges, so one alert rule covers both.
  const dirs = values['journal-dir'] ?? [];
  const missingJournalDirs = (): string[] => dirs.filter((d) => !existsSync(d));
  if (dirs.length) {
    const journalGauge = (name: string, help: string, pick: (s: ReturnType<typeof journalDirStats>) => number | undefined) =>
      new Gauge({
        name: p + name,
        help,
        labelNames: ['journal'],
        registers: reg,
        collect() {
          this.reset();
          for (const dir of dirs) {
            if (!existsSync(dir)) continue; // unknown, not 0
            const v = pick(journalDirStats(dir));
            if (v !== undefined) this.set({ journal: resolve(dir) }, v);
          }
        },
      });
    journalGauge('journal_backlog_bytes', 'Journaled bytes not yet replayed (alert: > 0 for more than 1 h)', (s) => s.bytes);
    journalGauge('journal_backlog_segments', 'Journal segment files not yet replayed', (s) => s.segments);
    journalGauge('journal_oldest_record_age_seconds', 'Age of the oldest unreplayed journal segment', (s) => s.oldestAgeSeconds);
    readiness.push(async () => {
      const missing = missingJournalDirs();
      return { journalDirs: missing.length === 0 ? 'up' : 'down', ...(missing.length ? { missingJournalDirs: missing } : {}) };
    });
  }

  if (values.redis !== undefined) {
    const redis = createProbeRedis(values.redis, probeMs);
    redis.on('error', () => {}); // reported as redis_up 0 on the next scrape
    closers.push(() => redis.disconnect());
    let info: { up: number; used: number; keys: number } = { up: 0, used: NaN, keys: NaN };
    // Down: memory and keys read NaN (unknown), not 0. One probe per scrape, shared by the three gauges (prom-client collects them in sequence).
    let probe: Promise<void> | undefined;
    const refresh = () =>
      (probe ??= (async () => {
        try {
          if (redis.status === 'wait' || redis.status === 'end') await redis.connect().catch(() => undefined);
          const [mem, keys] = await Promise.all([redis.info('memory'), redis.dbsize()]);
          const used = /used_memory:(\d+)/.exec(mem);
          info = { up: 1, used: used ? Number(used[1]) : NaN, keys };
        } catch {
          info = { up: 0, used: NaN, keys: NaN };
        } finally {
          setImmediate(() => (probe = undefined));
        }
      })());
    readiness.push(async () => {
      await refresh();
      return { redis: info.up === 1 ? 'up' : 'down' };
    });
    new Gauge({ name: `${p}redis_up`, help: 'Whether the probed Redis answered the last scrape', registers: reg, async collect() { await refresh(); this.set(info.up); } });
    new Gauge({ name: `${p}redis_used_memory_bytes`, help: 'INFO memory used_memory of the probed Redis', registers: reg, async collect() { await refresh(); this.set(info.up ? info.used : NaN); } });
    new Gauge({ name: `${p}redis_keys`, help: 'DBSIZE of the probed Redis', registers: reg, async collect() { await refresh(); this.set(info.up ? info.keys : NaN); } });
    // Same names as redisBloomMetrics().recordRebuild() sets in-process; here read from the swap record in Redis, so a scraper sees rebuilds run by the CLI on another host.
    const blooms = values.bloom ?? [];
    if (blooms.length) {
      const { readRebuildStatus } = await import('../../bloom/redis-rebuild.js');
      type Status = Awaited<ReturnType<typeof readRebuildStatus>>;
      const read = async (): Promise<Map<string, Status>> => {
        const out = new Map<string, Status>();
        for (const b of blooms) out.set(b, await readRebuildStatus(redis, b).catch(() => null));
        return out;
      };
      const rebuildGauge = (name: string, help: string, pick: (s: NonNullable<Status>) => number) =>
        new Gauge({
          name: p + name,
          help,
          labelNames: ['filter'],
          registers: reg,
          async collect() {
            this.reset();
            await refresh(); // connects (the probe is shared with the redis_* gauges)
            for (const [f, st] of await read()) if (st) this.set({ filter: f }, pick(st));
          },
        });
      rebuildGauge('bloom_last_rebuild_timestamp_seconds', 'Unix time the last rebuilt generation of a shared filter was swapped in', (st) => st.at / 1000);
      rebuildGauge('bloom_last_rebuild_duration_seconds', 'How long the last rebuild of a shared filter took, lock to swap', (st) => st.durationMs / 1000);
      rebuildGauge('bloom_last_rebuild_keys', 'Keys read from the source by the last rebuild of a shared filter', (st) => st.keys);
    }
  } else if (values.bloom?.length) {
    throw new TypeError('--bloom needs --redis');
  }

  const close = async () => {
    for (const c of closers.splice(0).reverse()) await c();
  };
  omitUnknownSamples(registry);
  if (values.once) {
    // give the event-loop delay monitor a few samples, so the lag gauges are measured, not empty
    if (!values['no-process']) await sleep(50);
    return { registry, close, once: true, help: false, missingJournalDirs };
  }
  const ready = async (): Promise<{ ready: boolean } & Record<string, unknown>> => {
    const parts = await Promise.all(readiness.map((r) => r()));
    const merged = Object.assign({}, ...parts) as Record<string, unknown>;
    return { ready: !Object.values(merged).includes('down'), ...merged };
  };
  const server = await serveMetrics(registry, { port, host: values.host ?? DEFAULTS.host, path, readiness: ready });
  closers.unshift(() => server.close());
  return { registry, server, close, once: false, help: false, missingJournalDirs };
}

export async function run(argv: string[]): Promise<number> {
  let cmd: Awaited<ReturnType<typeof start>>;
  try {
    cmd = await start(argv);
  } catch (err) {
    return fail('metrics', err, 2, { json: false, help: HELP });
  }
  if (cmd.help) {
    console.log(HELP);
    return 0;
  }
  if (cmd.once) {
    try {
      process.stdout.write(await cmd.registry.metrics());
    } finally {
      await cmd.close();
    }
    const missing = cmd.missingJournalDirs();
    if (missing.length > 0) {
      const err = new HashGateError(ErrorCodes.JOURNAL, `journal director${missing.length > 1 ? 'ies' : 'y'} ${missing.join(', ')} do${missing.length > 1 ? '' : 'es'} not exist (--journal-dir): no backlog reported for ${missing.length > 1 ? 'them' : 'it'}`, { details: { missing } });
      return fail('metrics', err, 1, { json: false });
    }
    return 0;
  }
  console.log(`hashgate metrics: serving ${cmd.server!.url} (Ctrl-C to stop)`);
  await new Promise<void>((resolveStop) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolveStop();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  await cmd.close();
  return 0;
}
