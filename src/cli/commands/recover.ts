// `hashgate recover`: replay the fail-open journal into Redis (idempotent, under the recover lock).
import { existsSync, statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DEFAULTS } from '../../dedup/options.js';
import { DedupService } from '../../dedup/service.js';
import { ErrorCodes, HashGateError } from '../../errors.js';
import type { RedisClient } from '../../redis/client.js';
import { LOCK_FLAGS, LOCK_HELP, REDIS_STORE_FLAGS, REDIS_STORE_HELP, connectStore, storeOptions, usageError } from './dedup-flags.js';
import { redact } from '../../util/redact.js';
import { flagError } from '../flags.js';
import { fail, wantsJson } from '../output.js';

export const HELP = `usage: hashgate recover [flags]

Replays journaled keys (written while Redis failed under onStoreError 'fail-open') into Redis,
each placed in the bucket count its window recorded. Idempotent; one instance at a time (Redis
lock); a segment is deleted only after Redis acknowledged all of its keys. Segments still being
written by a live process are left alone; only files named seg-<pid>-<time>-<seq>.open|.hgj are
touched. A damaged segment has its intact records replayed and is then renamed <name>.corrupt
(kept for inspection); only the crash-torn end of a dead writer's .open segment is dropped.

${REDIS_STORE_HELP}
${LOCK_HELP}
Exit codes:
  0  done: the journal is empty and nothing is quarantined
  1  error (Redis unreachable, journal directory missing or unreadable)
  2  usage
  3  run again: another instance holds the recover lock, or Redis failed on some segments
  4  damaged segments are quarantined (*.corrupt in the journal directory): keys in their
     damaged ranges may be lost; inspect, re-feed from the source if needed, then move the
     .corrupt files out of the journal directory`;

const FLAGS = { ...REDIS_STORE_FLAGS, ...LOCK_FLAGS } as const;

export async function run(argv: string[]): Promise<number> {
  const json = wantsJson(argv);
  let values: Record<string, string | boolean | undefined>;
  let opts: ReturnType<typeof storeOptions>;
  try {
    try {
      ({ values } = parseArgs({ args: argv, strict: true, allowPositionals: false, options: FLAGS }));
    } catch (err) {
      // the embedded store keeps every key itself: there is no journal to replay into it
      if (argv.some((a) => a === '--store' || a.startsWith('--store='))) {
        throw usageError('--store: the embedded store has no fail-open journal; recover replays a journal into Redis (--redis or --cluster)');
      }
      throw flagError(err, FLAGS);
    }
    if (values.help) {
      console.log(HELP);
      return 0;
    }
    opts = storeOptions(values);
  } catch (err) {
    return fail('recover', err, 2, { json, help: HELP });
  }
  // A mistyped directory must not read as "nothing to replay": that would hide a real backlog.
  const dir = opts.dedup.journalDir ?? DEFAULTS.journalDir;
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    return fail('recover', new HashGateError(ErrorCodes.JOURNAL, `journal directory ${dir} does not exist (--journal-dir)`, { details: { dir } }), 1, { json });
  }
  let svc: DedupService | undefined;
  let redis: RedisClient | undefined;
  try {
    redis = await connectStore(opts.redis!);
    svc = new DedupService({ redis, dedup: opts.dedup });
    const rep = await svc.recover();
    if (values.json) console.log(JSON.stringify(rep));
    else if (rep.lockHeld) console.log(`another instance holds the recover lock; ${rep.remainingSegments} segment(s) left for it`);
    else {
      console.log(`replayed ${rep.segments} segment(s), ${rep.records} record(s), ${rep.keys} key(s) (${rep.added} new to Redis)`);
      for (const t of rep.tornTails) console.log(`  crash-torn end dropped: ${t.file} at byte ${t.offset}`);
      for (const q of rep.quarantined) {
        console.log(`  DAMAGED: ${q.file}: ${q.damagedBytes} byte(s) in ${q.ranges.length} range(s); intact records replayed; kept as ${q.movedTo}`);
      }
      for (const f of rep.failed) console.log(`  not replayed: ${f.file}: ${redact(f.error)}`);
    }
    if (rep.quarantinedFiles.length > 0) {
      console.error(`hashgate recover: ${rep.quarantinedFiles.length} quarantined segment(s) in ${dir} need attention:`);
      for (const f of rep.quarantinedFiles) console.error(`  ${f}`);
      return 4;
    }
    return rep.lockHeld || rep.failed.length > 0 ? 3 : 0;
  } catch (err) {
    return fail('recover', err, 1, { json });
  } finally {
    await svc?.close().catch(() => undefined);
    redis?.disconnect();
  }
}
