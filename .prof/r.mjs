import { redissonSlices, redissonIndexBlob } from '/work/wt/bloom/dist/src/bloom/redisson.js';
import { guavaSlices, guavaIndexBlob } from '/work/wt/bloom/dist/src/bloom/redis-guava.js';
const P = 100000;
const keys = Array.from({length: P}, (_, i) => `p${i}user`);
const out = new Uint16Array(8192);
for (let r = 0; r < 4; r++) {
  let t = performance.now(); for (let f = 0; f < P; f += 8192) redissonSlices(keys, f, Math.min(8192, P - f), 4, out); const a = performance.now() - t;
  t = performance.now(); for (let f = 0; f < P; f += 8192) redissonIndexBlob(keys, f, Math.min(8192, P - f), 7, 119813); const b = performance.now() - t;
  t = performance.now(); for (let f = 0; f < P; f += 8192) guavaSlices(keys, f, Math.min(8192, P - f), 4, out); const c = performance.now() - t;
  t = performance.now(); for (let f = 0; f < P; f += 8192) guavaIndexBlob(keys, f, Math.min(8192, P - f), 7, 119808); const d = performance.now() - t;
  console.log({ redissonRoute: a.toFixed(1), redissonBlob: b.toFixed(1), guavaRoute: c.toFixed(1), guavaBlob: d.toFixed(1) });
}
