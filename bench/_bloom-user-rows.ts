// Rows and targets of the user's bloomCheck case (bench/_bloom-user.ts) for the bloom suite
// (inline) and the pool suite (2 workers): warm passes and each process's first pass, both sides
// in the same run, ratio to bloomfilter, load average beside them.
import { spread, type Suite } from './common.js';
import { userCase, type UserSide } from './_bloom-user.js';

const NAME = 'check shape A, flat new keys, fresh process';

export async function userCaseRows(s: Suite, sides: [UserSide, 'bloomfilter'], quick: boolean): Promise<void> {
  const n = quick ? 20_000 : 1_000_000;
  const passes = quick ? 2 : 4;
  const reps = quick ? 1 : 3;
  const ours = sides[0];
  const label = ours === 'hashgate inline' ? 'bloomCheck inline' : 'bloomCheck, pool of 2 workers';
  let uc;
  try {
    uc = await userCase(sides, n, passes, reps);
  } catch (err) {
    for (const side of sides) {
      s.addRow({ name: `${NAME} (warm)`, impl: side, role: side === 'bloomfilter' ? 'peer' : 'hashgate', opsPerSec: 0, ok: false, error: String(err) });
    }
    return;
  }
  const impl = (side: UserSide) => (side === 'bloomfilter' ? 'bloomfilter' : `hashgate ${label}`);
  const cpuPerKey: Record<string, number> = {};
  for (const side of sides) {
    const runs = uc.runs.get(side)!;
    const warm = runs.flatMap((r) => r.passes.slice(1));
    const cold = runs.map((r) => r.passes[0]!);
    const w = spread(warm.map((p) => p.keysPerSec));
    const c = spread(cold.map((p) => p.keysPerSec));
    const cpu = warm.reduce((a, p) => a + p.cpuSec, 0) / (warm.length * n);
    cpuPerKey[side] = cpu;
    const extra = {
      processes: runs.length, keysPerPass: n, cpuNsPerKey: Math.round(cpu * 1e9),
      load1m: `${uc.load[0].toFixed(1)} -> ${uc.load[1].toFixed(1)}`,
    };
    const role = side === 'bloomfilter' ? 'peer' : 'hashgate';
    s.addRow({ name: `${NAME} (warm)`, impl: impl(side), role, opsPerSec: w.median ?? 0, ...w, ok: true, unit: 'keys/s', extra });
    s.addRow({ name: `${NAME} (first pass)`, impl: impl(side), role, opsPerSec: c.median ?? 0, ...c, ok: true, unit: 'keys/s', extra });
    console.log(`[${s.suite}] ${NAME} | ${impl(side)}: warm ${((w.median ?? 0) / 1e6).toFixed(2)} M keys/s, first pass ${((c.median ?? 0) / 1e6).toFixed(2)} M keys/s`);
  }
  s.note(
    `"${NAME}" rows: ${n} shape-A keys per pass as flat strings from JSON.parse, half of them added, all new string objects each pass; ` +
      `${reps} processes per side, sides alternating, ${passes} passes each (the first is the process's cold pass, reported apart); ` +
      `one gate.bloomCheck of the whole array (hashgate) vs test() per key (bloomfilter); two minor GCs after each parse, before the clock, on every side ` +
      `(else the parse's due scavenge lands in whichever side first yields to the event loop: the pool's); 1-min load ${uc.load[0].toFixed(1)} -> ${uc.load[1].toFixed(1)} on this 2-core box.`,
  );
  const warm = s.ratio(`${NAME} (warm)`, impl(ours), 'bloomfilter');
  const cold = s.ratio(`${NAME} (first pass)`, impl(ours), 'bloomfilter');
  const cpuRatio = cpuPerKey.bloomfilter! / cpuPerKey[ours]!;
  const want = ours === 'hashgate inline' ? 1.0 : 1.5;
  const note = `first pass ${cold?.toFixed(2) ?? 'n/a'}x; ${ours === 'hashgate inline' ? `CPU-time ratio ${cpuRatio.toFixed(2)}x; ` : ''}load ${uc.load[0].toFixed(1)} -> ${uc.load[1].toFixed(1)}`;
  s.target(`${label} vs bloomfilter, shape A flat new keys, fresh process`, '>=', want, warm, 'x', note);
}
