// `hashgate stats --window 2026`: exact (an atomic count per table of the window's sub-buckets) and
// approximate (the window count writers keep) member counts of a dedup window; `--purge` deletes
// the window (SCAN + UNLINK).
// With `--store PATH` the same for the durable embedded store (exact = approximate there).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { DedupService } from '../../dedup/service.js';
import { ErrorCodes, HashGateError } from '../../errors.js';
import type { RedisClient } from '../../redis/client.js';
import { STORE_FLAGS, STORE_HELP, connectStore, storeOptions, usageError } from './dedup-flags.js';
import { flagError } from '../flags.js';
import { fail, wantsJson } from '../output.js';

export const HELP = `usage: hashgate stats [--window ID] [flags]

Prints the exact and approximate (the window count writers keep) member counts of a dedup window.

  --window ID               window id, e.g. 2026 (default: the current window in --time-zone)
  --purge                   delete every key of that window instead (the yearly cleanup)
${STORE_HELP}
Exit codes: 0 ok, 1 error, 2 usage.`;

const FLAGS = { ...STORE_FLAGS, window: { type: 'string' }, purge: { type: 'boolean' } } as const;

export async function run(argv: string[]): Promise<number> {
  const json = wantsJson(argv);
  let values: Record<string, string | boolean | undefined>;
  let opts: ReturnType<typeof storeOptions>;
  try {
    try {
      ({ values } = parseArgs({ args: argv, strict: true, allowPositionals: false, options: FLAGS }));
    } catch (err) {
      throw flagError(err, FLAGS);
    }
    if (values.help) {
      console.log(HELP);
      return 0;
    }
    opts = storeOptions(values);
    if (values.purge && typeof values.window !== 'string') throw usageError('--purge needs an explicit --window');
  } catch (err) {
    return fail('stats', err, 2, { json, help: HELP });
  }
  let svc: DedupService | undefined;
  let redis: RedisClient | undefined;
  try {
    const path = opts.dedup.path;
    // reading a store must not create an empty one where the user mistyped its path
    if (path !== undefined && !existsSync(join(path, 'data.mdb'))) throw new HashGateError(ErrorCodes.INVALID_OPTION, `--store: no store at ${path} (no data.mdb)`, { details: { name: '--store' } });
    if (opts.redis !== undefined) redis = await connectStore(opts.redis);
    svc = new DedupService({ redis, dedup: opts.dedup });
    const window = typeof values.window === 'string' ? values.window : svc.windowOf();
    if (values.purge) {
      const before = await svc.storeMemory();
      const n = await svc.purgeWindow(window);
      const after = await svc.storeMemory(true);
      const freed = before && after ? { usedMemoryBefore: before.used, usedMemoryAfter: after.used, rssBefore: before.rss, rssAfter: after.rss } : {};
      if (values.json) console.log(JSON.stringify({ window, deletedKeys: n, ...freed }));
      else {
        console.log(`window ${window}: deleted ${n} key(s)`);
        if (before && after) {
          const mib = (b: number): string => `${(b / 2 ** 20).toFixed(1)} MiB`;
          console.log(`Redis used_memory ${mib(before.used)} -> ${mib(after.used)} (freed ${mib(before.used - after.used)}), RSS ${mib(before.rss)} -> ${mib(after.rss)}`);
          // jemalloc keeps freed pages for reuse; the next window's keys fill them first
          if (before.rss - after.rss < (before.used - after.used) / 2) console.log('RSS comes back as the allocator releases pages: MEMORY PURGE, or activedefrag yes, returns it sooner');
        }
      }
      return 0;
    }
    const st = await svc.stats(window);
    if (values.json) {
      const grown = st.subBuckets === undefined ? {} : { subBuckets: st.subBuckets, largestBucket: st.largestBucket, bucketLimit: st.bucketLimit };
      console.log(JSON.stringify({ window: st.window, store: st.store, layout: st.layout, buckets: st.buckets, ...grown, exact: st.exact, approximate: st.approximate, journalBytes: st.journalBytes }));
    } else {
      const grown = st.subBuckets === undefined ? '' : ` split into ${st.subBuckets} sub-buckets, the largest ${st.largestBucket} of ${st.bucketLimit} intset entries`;
      console.log(`window ${st.window} (${st.layout}, ${st.buckets} buckets${grown}): exact ${st.exact}, approximate ${st.approximate}; journal ${st.journalBytes} B pending`);
    }
    return 0;
  } catch (err) {
    return fail('stats', err, 1, { json });
  } finally {
    await svc?.close().catch(() => undefined);
    redis?.disconnect();
  }
}
