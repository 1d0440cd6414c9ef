// Child process for the two-process dedup test: runs the BUILT DedupService (dist/), submits its
// keys in its own shuffled order once the parent says go, prints the keys it was told are new.
import { createInterface } from 'node:readline';
const [, , distDir, url, prefix, nStr, seedStr] = process.argv;
const { DedupService } = await import(`${distDir}/src/dedup/index.js`);
const n = Number(nStr);
let seed = Number(seedStr);
const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
const keys = Array.from({ length: n }, (_, i) => `张${i}|1101${i}`);
for (let i = n - 1; i > 0; i--) {
  const j = Math.floor(rnd() * (i + 1));
  [keys[i], keys[j]] = [keys[j], keys[i]];
}
const svc = new DedupService({ redis: url, dedup: { prefix, buckets: 64, replayIntervalMs: 0, onStoreError: 'fail-closed' } });
await svc.firstSeen(['__warm__']);
process.stdout.write('ready\n');
const rl = createInterface({ input: process.stdin });
await new Promise((resolve) => rl.once('line', resolve));
const won = [];
for (let o = 0; o < n; o += 500) {
  // each batch also repeats its first key, and overlaps the previous batch by 100 keys
  const batch = keys.slice(Math.max(0, o - 100), o + 500);
  batch.push(batch[0]);
  const a = await svc.firstSeen(batch);
  a.forEach((v, i) => {
    if (v === 1) won.push(batch[i]);
  });
}
await svc.close();
process.stdout.write(JSON.stringify(won) + '\n');
rl.close();
