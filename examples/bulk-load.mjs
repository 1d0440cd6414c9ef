// A bulk-load job: reads a pipe-delimited export (name|idNo per line), marks every key as seen in
// its window through firstSeen in batches, with a bounded number of batches in flight, and prints
// one JSON summary line. Re-running it is harmless: already-seen keys answer 0.
//
//   HASHGATE_REDIS_URL=redis://127.0.0.1:6379 node examples/bulk-load.mjs export.txt
//
// For multi-GB Hive exports use `hashgate load` (checkpoints, resume, failed-row files, 600k rows/s).
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { HashGate } from 'hashgate';

const file = process.argv[2];
if (!file) {
  console.error('usage: node examples/bulk-load.mjs <file>');
  process.exit(2);
}
const BATCH = 10_000;
const IN_FLIGHT = 4; // bounded memory: at most IN_FLIGHT * BATCH keys waiting

const redisUrl = process.env.HASHGATE_REDIS_URL || undefined;
const gate = await HashGate.open({
  ...(redisUrl ? { redis: redisUrl } : {}),
  // a batch job must not answer from a journal: if Redis fails, stop and report
  dedup: { onStoreError: 'fail-closed', replayIntervalMs: 0 },
});

let rows = 0;
let fresh = 0;
let rejected = 0;
const pending = new Set();
let batch = [];

async function flush(keys) {
  const answers = await gate.firstSeen(keys);
  for (const a of answers) fresh += a;
}

const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
for await (const line of lines) {
  const fields = line.split('|');
  if (fields.length !== 2 || fields[0] === '' || fields[1] === '') {
    rejected++;
    continue;
  }
  rows++;
  batch.push(fields[0] + fields[1]);
  if (batch.length === BATCH) {
    const p = flush(batch).finally(() => pending.delete(p));
    pending.add(p);
    batch = [];
    if (pending.size >= IN_FLIGHT) await Promise.race(pending); // back-pressure
  }
}
if (batch.length > 0) pending.add(flush(batch));
let failed = false;
try {
  await Promise.all(pending);
} catch (err) {
  failed = true;
  console.error(`bulk-load: ${err.message} [${err.code}]`);
}
const stats = await gate.dedupStats().catch(() => undefined);
await gate.close();
console.log(JSON.stringify({ rows, firstSeen: fresh, duplicates: rows - fresh, rejected, window: stats?.window, windowKeys: stats?.exact }));
process.exitCode = failed ? 1 : rejected > 0 ? 3 : 0;
