// Child process for the LMDB store's multi-process tests: runs the BUILT DedupService (dist/) on
// dedup.path. Modes:
//   crash PATH        submit 20k-key batches forever; print "done <from> <to>" only after a
//                     batch's promise resolved (the parent kill -9s it mid-batch)
//   race PATH N SEED  after "go" on stdin, submit N overlapping keys in a shuffled order, print
//                     the keys answered 1 as JSON
//   small PATH C      C callers, each awaiting one-key calls of new keys forever (the calls that
//                     share a group commit); print "a <caller> <i>" only after the call resolved
// HG_CHILD_BUCKETS sets dedup.buckets (default 256); HG_CHILD_SYNC=false sets dedup.sync false.
import { writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
const [, , distDir, mode, path, nStr, seedStr] = process.argv;
const { DedupService } = await import(`${distDir}/src/dedup/index.js`);
const at = new Date('2026-06-01T00:00:00Z');
// the seen-cache is off so every answer comes from the shared store
const svc = new DedupService({ dedup: { path, buckets: Number(process.env.HG_CHILD_BUCKETS ?? 256), cacheMaxEntries: 0, sync: process.env.HG_CHILD_SYNC !== 'false' } });
// unbuffered: a line is on the pipe before the next batch starts
const say = (s) => writeSync(1, `${s}\n`);

if (mode === 'crash') {
  say('ready');
  const B = 20_000;
  for (let from = 0; ; from += B) {
    const keys = Array.from({ length: B }, (_, i) => `王${from + i}|4401${from + i}`);
    const a = await svc.firstSeen(keys, { at });
    if (!a.every((v) => v === 1)) say(`bad ${from}`);
    say(`done ${from} ${from + B}`);
  }
} else if (mode === 'small') {
  say('ready');
  await Promise.all(Array.from({ length: Number(nStr) }, async (_, c) => {
    for (let i = 0; ; i++) {
      const a = await svc.firstSeen([`李${c}-${i}|5101${i}`], { at });
      if (a[0] !== 1) say(`bad ${c} ${i}`);
      say(`a ${c} ${i}`);
    }
  }));
} else {
  const n = Number(nStr);
  let seed = Number(seedStr);
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const keys = Array.from({ length: n }, (_, i) => `张${i}|1101${i}`);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [keys[i], keys[j]] = [keys[j], keys[i]];
  }
  await svc.firstSeen(['__warm__'], { at });
  say('ready');
  const rl = createInterface({ input: process.stdin });
  await new Promise((resolve) => rl.once('line', resolve));
  const won = [];
  for (let o = 0; o < n; o += 700) {
    // each batch overlaps the previous one by 100 keys and repeats its first key
    const batch = keys.slice(Math.max(0, o - 100), o + 700);
    batch.push(batch[0]);
    const a = await svc.firstSeen(batch, { at });
    a.forEach((v, i) => {
      if (v === 1) won.push(batch[i]);
    });
  }
  await svc.close();
  say(JSON.stringify(won));
  rl.close();
}
