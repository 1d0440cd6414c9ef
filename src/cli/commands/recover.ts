// `hashgate recover`: replay the fail-open journal into Redis (idempotent, under the recover lock).
import { existsSync, statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DEFAULTS } from '../../dedup/options.js';
import { DedupService } from '../../dedup/service.js';
import { LOCK_FLAGS, LOCK_HELP, STORE_FLAGS, STORE_HELP, storeOptions } from './dedup-flags.js';

export const HELP = `usage: hashgate recover [flags]

Replays journaled keys (written while Redis failed under onStoreError 'fail-open') into Redis.
Idempotent; one instance at a time (Redis lock); a segment is deleted only after Redis
acknowledged all of its keys. Segments still being written by a live process are left alone.

${STORE_HELP}
${LOCK_HELP}
Exit codes: 0 done (journal empty), 1 error, 2 usage (also: --journal-dir does not exist), 3 another instance holds the lock or some
segments could not be replayed (run again).`;

export async function run(argv: string[]): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  let opts: ReturnType<typeof storeOptions>;
  try {
    ({ values } = parseArgs({ args: argv, strict: true, allowPositionals: false, options: { ...STORE_FLAGS, ...LOCK_FLAGS } }));
    if (values.help) {
      console.log(HELP);
      return 0;
    }
    opts = storeOptions(values);
  } catch (err) {
    console.error(`hashgate recover: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }
  // A mistyped directory must not read as "nothing to replay": that would hide a real backlog.
  const dir = opts.dedup.journalDir ?? DEFAULTS.journalDir;
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    console.error(`hashgate recover: --journal-dir ${dir} does not exist or is not a directory`);
    return 2;
  }
  let svc: DedupService | undefined;
  try {
    svc = new DedupService({ redis: opts.redis, dedup: opts.dedup });
    const rep = await svc.recover();
    if (values.json) console.log(JSON.stringify(rep));
    else if (rep.lockHeld) console.log(`another instance holds the recover lock; ${rep.remainingSegments} segment(s) left for it`);
    else {
      console.log(`replayed ${rep.segments} segment(s), ${rep.records} record(s), ${rep.keys} key(s) (${rep.added} new to Redis)`);
      for (const t of rep.tornTails) console.log(`  torn tail skipped: ${t.file} at byte ${t.offset}`);
      if (rep.corruptRecords > 0) console.log(`  ${rep.corruptRecords} corrupt record(s) skipped`);
      for (const f of rep.failed) console.log(`  not replayed: ${f.file}: ${f.error}`);
    }
    return rep.lockHeld || rep.failed.length > 0 ? 3 : 0;
  } catch (err) {
    console.error(`hashgate recover: ${(err as Error).message}`);
    return 1;
  } finally {
    await svc?.close().catch(() => undefined);
  }
}
