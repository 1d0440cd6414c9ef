// The user's bloomCheck case, one side per fresh process: shape-A keys (Chinese name + 18-digit
// ID) as flat strings, the way JSON.parse of a user's rows hands them over (the bench's own keys
// are template-literal concatenations: cons strings until first read), every pass on strings
// this process has never seen (a fresh parse of new keys), answers counted.
//
// Parent side (bench/bloom.ts, bench/pool.ts): userCase() writes the key files once, then starts
// one child per side and repetition, sides alternating, and returns per-pass keys/s.
// Child side: `node _bloom-user.js <dir> <side> <passes>` prints one JSON line.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeKeys } from './common.js';
import { HashGate } from '../src/gate.js';
import { isMainModule } from '../src/util/main-module.js';

export type UserSide = 'hashgate inline' | 'hashgate pool of 2' | 'bloomfilter';

export interface UserPass {
  /** keys/s of the pass (wall clock). */
  keysPerSec: number;
  /** CPU seconds of the whole process (every thread) during the pass. */
  cpuSec: number;
  hits: number;
}

export interface UserRun {
  side: UserSide;
  passes: UserPass[];
}

const P = 0.001;

interface Bf {
  add(v: string): void;
  test(v: string): boolean;
}

async function child(dir: string, side: UserSide, passes: number): Promise<UserRun> {
  const meta = JSON.parse(readFileSync(join(dir, 'meta.json'), 'utf8')) as { n: number };
  const n = meta.n;
  // The added keys, as a user's rows: one parse, flat strings.
  const present = JSON.parse(readFileSync(join(dir, 'present.json'), 'utf8')) as string[];
  let check: (keys: string[]) => Promise<number>;
  let close = async (): Promise<void> => undefined;
  if (side === 'bloomfilter') {
    const Bf = (createRequire(import.meta.url)('bloomfilter') as { BloomFilter: new (m: number, k: number) => Bf }).BloomFilter;
    // Guava's shape for (n, p), as the other sides use.
    const g = await HashGate.open({ threads: 0, bloom: { expectedItems: n, fpp: P } });
    const f = new Bf(g.bloom!.bitSize, g.bloom!.hashFunctions);
    await g.close();
    for (let i = 0; i < present.length; i++) f.add(present[i]!);
    check = async (keys) => {
      let c = 0;
      for (let i = 0; i < keys.length; i++) if (f.test(keys[i]!)) c++;
      return c;
    };
  } else {
    const threads = side === 'hashgate pool of 2' ? 2 : 0;
    const gate = await HashGate.open({ threads, bloom: { expectedItems: n, fpp: P } });
    await gate.bloomAdd(present);
    check = async (keys) => {
      const r = await gate.bloomCheck(keys);
      let c = 0;
      for (let i = 0; i < r.length; i++) c += r[i]!;
      return c;
    };
    close = () => gate.close();
  }
  const out: UserPass[] = [];
  for (let p = 0; p < passes; p++) {
    // New strings for every pass, parsed before the clock starts. Then two minor GCs, for every
    // side: the parse leaves a scavenge due, which runs at the process's next event-loop turn.
    // A synchronous check loop (bloomfilter's) never takes one and a pooled check waits for its
    // workers in one, so without this the parse's GC is charged to whichever side yields. One
    // is not enough: it only moves the parse's surviving strings within the young generation,
    // and the scavenge that promotes them is then due (--trace-gc shows it inside the pass).
    const keys = JSON.parse(readFileSync(join(dir, `check-${p}.json`), 'utf8')) as string[];
    const gc = (globalThis as { gc?: (o?: { type: 'minor' | 'major' }) => void }).gc;
    gc?.({ type: 'minor' });
    gc?.({ type: 'minor' });
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const hits = await check(keys);
    const sec = (performance.now() - t0) / 1000;
    const cu = process.cpuUsage(c0);
    out.push({ keysPerSec: keys.length / sec, cpuSec: (cu.user + cu.system) / 1e6, hits });
  }
  await close();
  return { side, passes: out };
}

/** Writes the key files: n added keys, and per pass n keys, half of them added ones. */
function writeKeys(dir: string, n: number, passes: number): number[] {
  const present = makeKeys(n, 'A', 31);
  writeFileSync(join(dir, 'meta.json'), JSON.stringify({ n }));
  writeFileSync(join(dir, 'present.json'), JSON.stringify(present));
  const expected: number[] = [];
  for (let p = 0; p < passes; p++) {
    // Never-added keys: another seed and a '#' (shape-A keys never hold one).
    const absent = makeKeys(n, 'A', 1000 + p);
    const keys = new Array<string>(n);
    for (let i = 0; i < n; i++) keys[i] = (i + p) % 2 === 0 ? present[i]! : `${absent[i]!}#`;
    writeFileSync(join(dir, `check-${p}.json`), JSON.stringify(keys));
    expected.push(Math.ceil(n / 2));
  }
  return expected;
}

function runChild(dir: string, side: UserSide, passes: number): Promise<UserRun> {
  const file = fileURLToPath(import.meta.url);
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--expose-gc', file, dir, side, String(passes)], { maxBuffer: 1 << 20, timeout: 600_000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${side}: ${err.message}\n${stderr}`));
      const line = stdout.trim().split('\n').pop() ?? '';
      try {
        resolve(JSON.parse(line) as UserRun);
      } catch {
        reject(new Error(`${side}: no result line in ${JSON.stringify(stdout.slice(-200))}`));
      }
    });
  });
}

export interface UserCaseResult {
  /** Per side: every pass of every process (pass 0 of each is that process's cold pass). */
  runs: Map<UserSide, UserRun[]>;
  /** Added keys per pass that a correct filter must find (it may add false positives). */
  presentPerPass: number;
  n: number;
  passes: number;
  reps: number;
  load: [number, number];
}

/**
 * Runs each side in `reps` fresh processes, sides alternating (so a load burst on this shared
 * box hits every side alike), `passes` passes each over new keys.
 */
export async function userCase(sides: UserSide[], n: number, passes: number, reps: number): Promise<UserCaseResult> {
  const dir = mkdtempSync(join(tmpdir(), 'hg-bloom-user-'));
  const load0 = loadavg()[0]!;
  try {
    const expected = writeKeys(dir, n, passes);
    const runs = new Map<UserSide, UserRun[]>(sides.map((s) => [s, []]));
    for (let r = 0; r < reps; r++) {
      for (const side of sides) {
        const run = await runChild(dir, side, passes);
        run.passes.forEach((p, i) => {
          if (p.hits < expected[i]!) throw new Error(`${side}: pass ${i} found ${p.hits} of ${expected[i]} added keys (false negatives)`);
          if (p.hits > expected[i]! + n * 0.01) throw new Error(`${side}: pass ${i} found ${p.hits}, expected ~${expected[i]}`);
        });
        runs.get(side)!.push(run);
      }
    }
    return { runs, presentPerPass: expected[0]!, n, passes, reps, load: [load0, loadavg()[0]!] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (isMainModule(import.meta.url)) {
  const [dir, side, passes] = process.argv.slice(2);
  const r = await child(dir!, side as UserSide, Number(passes));
  process.stdout.write(`${JSON.stringify(r)}\n`);
}
