// Child for the gate lifecycle test: opens a gate on the BUILT package (dist/), makes calls,
// closes it, and reports how long the process lingered after close() resolved.
const [, , distDir, url, mode, journalDir] = process.argv;
const { HashGate } = await import(`${distDir}/src/index.js`);
const gate = await HashGate.open({
  threads: 0,
  redis: url,
  dedup: { prefix: 'linger', buckets: 8, journalDir, lazyConnect: mode !== 'eager', connectTimeoutMs: 3000, replayIntervalMs: 60_000 },
});
const calls = Array.from({ length: 200 }, (_, i) => gate.firstSeen([`linger-${i}`]).then(() => 'ok', (e) => e.code));
if (mode === 'close-early') {
  await gate.close();
} else {
  await Promise.all(calls);
  await gate.close();
}
const outcomes = await Promise.all(calls);
const closedAt = performance.now();
process.on('exit', () => {
  process.stdout.write(JSON.stringify({ lingerMs: performance.now() - closedAt, outcomes: [...new Set(outcomes)] }) + '\n');
});
