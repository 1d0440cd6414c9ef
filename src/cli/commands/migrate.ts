// `hashgate migrate`: one migrateCold() pass from Redis (hot) to HBase (cold). Safe to run from
// cron on several hosts at once: a Redis lock lets one run work while the others exit 3, and an
// interrupted run resumes from its SCAN cursor checkpoint next time.
import { parseArgs } from 'node:util';
import { checkInt, outOfRange } from '../../errors.js';
import { HotColdStore, TIERING_DEFAULTS, type MigrateResult } from '../../tiering/index.js';
import { HBaseColdStore } from '../../cache/hbase-cold.js';
import { HBaseStore } from '../../hbase/client.js';
import { CONNECT_TIMEOUT_FLAG, REDIS_HELP, connectTimeoutMs, defaultRedisUrl } from '../redis-url.js';
import { abortOnSignals, connectCliRedis } from '../redis-client.js';
import { CLI_CONNECT_TIMEOUT_MS, type RedisClient } from '../../redis/client.js';
import { ErrorCodes, HashGateTypeError } from '../../errors.js';
import { flagError } from '../flags.js';
import { fail, wantsJson } from '../output.js';

export const EXIT = { ok: 0, error: 1, usage: 2, locked: 3 } as const;

const USAGE = `usage: hashgate migrate --redis URL [--connect-timeout-ms MS] [--hbase HOST:PORT] [--threshold 1h] [--batch ${TIERING_DEFAULTS.batchSize}]
                        [--max-batches N] [--table T]... [--prefix ${TIERING_DEFAULTS.prefix}] [--family c]
                        [--hbase-table-prefix P] [--fresh] [--dry-run] [--json] [--quiet]
${REDIS_HELP.replace('Redis URL', 'hot tier')}
  --connect-timeout-ms MS  wait at most MS for Redis to answer the first connection, then exit 1
                     (default ${CLI_CONNECT_TIMEOUT_MS})
  --hbase Q          cold tier ZooKeeper quorum (default env HBASE_ZK); not needed with --dry-run
  --threshold D      archive keys whose remaining TTL is below D (ms, or 90s/30m/1h/2d; default 1h)
  --batch N          SCAN COUNT and keys per HBase multi-put
  --max-batches N    stop after N SCAN batches (checkpointed; the next run resumes)
  --table T          only this logical table (repeatable; default every table under the prefix)
  --prefix P         Redis key prefix of cached values (as the TieredCache's redis.prefix)
  --hbase-table-prefix P  HBase table = P + logical table (default: same name)
  --fresh            ignore the saved cursor and start a new pass
  --dry-run          count candidates, write nothing
  --family F         HBase column family of archived values
  --json             print the result as one line of JSON (lockHeld: true when another run holds
                     the lock)
  --quiet            no progress output
exit: 0 done (or stopped at --max-batches), 1 error, 2 usage, 3 another run holds the lock`;

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(name: string, s: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(s.trim());
  if (!m) throw outOfRange(name, 'a duration like 3600000, 90s, 30m, 1h or 2d', s);
  const ms = Math.round(Number(m[1]) * UNITS[m[2] ?? 'ms']!);
  return checkInt(name, ms, 1);
}

function summary(r: MigrateResult): string {
  return (
    `${r.dryRun ? 'dry run: ' : ''}${r.complete ? 'pass complete' : `stopped at cursor ${r.cursor} (resumable)`}; ` +
    `batches ${r.batches}, scanned ${r.scanned}, candidates ${r.candidates}, migrated ${r.migrated}, ` +
    `already archived ${r.alreadyArchived}, no TTL ${r.noTtl}, foreign ${r.foreign}, raced ${r.raced}` +
    (r.resumedFrom !== '0' ? `, resumed from ${r.resumedFrom}` : '') +
    (r.lockLost ? '; LOCK LOST (another run may continue)' : '') +
    (r.aborted ? '; interrupted (checkpoint saved, rerun to resume)' : '')
  );
}

const FLAGS = {
  redis: { type: 'string' },
  ...CONNECT_TIMEOUT_FLAG,
  hbase: { type: 'string' },
  threshold: { type: 'string' },
  batch: { type: 'string' },
  'max-batches': { type: 'string' },
  table: { type: 'string', multiple: true },
  prefix: { type: 'string' },
  family: { type: 'string' },
  'hbase-table-prefix': { type: 'string' },
  fresh: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  json: { type: 'boolean' },
  quiet: { type: 'boolean', short: 'q' },
  help: { type: 'boolean', short: 'h' },
} as const;

export async function run(argv: string[]): Promise<number> {
  const json = wantsJson(argv);
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: FLAGS, strict: true, allowPositionals: false }));
  } catch (err) {
    return fail('migrate', flagError(err, FLAGS), EXIT.usage, { json, help: USAGE });
  }
  if (values.help) {
    console.log(USAGE);
    return EXIT.ok;
  }
  let redisUrl: string;
  const zk = values.hbase ?? process.env.HBASE_ZK;
  const dryRun = values['dry-run'] === true;
  let thresholdMs: number;
  let batchSize: number;
  let maxBatches: number | undefined;
  let connectMs: number;
  try {
    redisUrl = values.redis ?? defaultRedisUrl();
    connectMs = connectTimeoutMs(values['connect-timeout-ms']);
    if (!zk && !dryRun) throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, '--hbase HOST:PORT (or env HBASE_ZK) is required unless --dry-run', { name: '--hbase' });
    thresholdMs = values.threshold === undefined ? TIERING_DEFAULTS.thresholdMs : parseDuration('--threshold', values.threshold);
    batchSize = values.batch === undefined ? TIERING_DEFAULTS.batchSize : checkInt('--batch', Number(values.batch), 1, 100_000);
    maxBatches = values['max-batches'] === undefined ? undefined : checkInt('--max-batches', Number(values['max-batches']), 1);
  } catch (err) {
    return fail('migrate', err, EXIT.usage, { json, help: USAGE });
  }

  let redis: RedisClient;
  try {
    redis = await connectCliRedis({ url: redisUrl, commandTimeoutMs: 30_000, connectTimeoutMs: connectMs });
  } catch (err) {
    return fail('migrate', err, EXIT.error, { json });
  }
  const hbase = zk && !dryRun ? new HBaseStore({ zookeeper: zk }) : undefined;
  const tablePrefix = values['hbase-table-prefix'] ?? '';
  const cold = hbase
    ? new HBaseColdStore({ store: hbase, ...(values.family ? { family: values.family } : {}), tableName: (t) => tablePrefix + t })
    : undefined;
  // Ctrl-C / SIGTERM: finish the current batch, save the checkpoint, release the lock
  const stop = abortOnSignals();
  try {
    const store = new HotColdStore({ redis, ...(cold ? { cold } : {}), ...(values.prefix !== undefined ? { prefix: values.prefix } : {}) });
    const r = await store.migrateCold({
      thresholdMs,
      batchSize,
      dryRun,
      resume: values.fresh !== true,
      signal: stop.signal,
      ...(maxBatches !== undefined ? { maxBatches } : {}),
      ...(values.table ? { tables: values.table } : {}),
      onBatch: values.quiet || values.json ? undefined : (p) => process.stderr.write(`\r  batch ${p.batches}: scanned ${p.scanned}, migrated ${p.migrated}`),
    });
    if (!values.quiet && !values.json && r.batches > 0) process.stderr.write('\n');
    const { acquired, ...report } = r;
    if (!acquired) {
      if (values.json) console.log(JSON.stringify({ ...report, lockHeld: true }));
      else console.error('hashgate migrate: another migration holds the lock; nothing done');
      return EXIT.locked;
    }
    if (values.json) console.log(JSON.stringify({ ...report, lockHeld: false }));
    else if (!values.quiet) console.log(summary(r));
    return r.lockLost ? EXIT.error : EXIT.ok;
  } catch (err) {
    return fail('migrate', err, EXIT.error, { json });
  } finally {
    stop.dispose();
    redis.disconnect();
    await hbase?.close();
  }
}
