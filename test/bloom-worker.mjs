// Worker for test/bloom-concurrent.test.ts: attaches to a filter through its shared descriptor
// and adds the keys it is sent (built JS from dist/, as every hashgate worker runs).
import { parentPort } from 'node:worker_threads';
import { BloomFilter } from '../dist/src/bloom/index.js';

parentPort.on('message', (msg) => {
  try {
    const f = BloomFilter.fromShared(msg.descriptor);
    let changed = 0;
    const keys = msg.keys;
    // Mix of batch, packed and single-key adds so every write path races the other thread.
    const third = Math.floor(keys.length / 3);
    changed += f.addAll(keys.slice(0, third));
    const enc = new TextEncoder();
    const parts = keys.slice(third, 2 * third).map((k) => (typeof k === 'string' ? enc.encode(k) : k));
    const offsets = new Uint32Array(parts.length + 1);
    let total = 0;
    parts.forEach((p, i) => { offsets[i] = total; total += p.length; });
    offsets[parts.length] = total;
    const bytes = new Uint8Array(total);
    parts.forEach((p, i) => bytes.set(p, offsets[i]));
    changed += f.addAll({ bytes, offsets, count: parts.length });
    for (const k of keys.slice(2 * third)) if (f.add(k)) changed++;
    parentPort.postMessage({ ok: true, changed, engine: f.engine });
  } catch (e) {
    parentPort.postMessage({ ok: false, error: String(e && e.stack || e) });
  }
});
