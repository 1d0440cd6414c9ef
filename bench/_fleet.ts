// Parent side of the multi-process bus test and bench: forks instances of dist/bench/_bus-child.js,
// sends them commands over IPC and collects their eviction reports.
import { fork, type ChildProcess } from 'node:child_process';

export interface Evicted {
  table: string;
  keys: string[];
  at: number;
}

export interface Instance {
  readonly proc: ChildProcess;
  readonly evicted: Evicted[];
  readonly resyncs: number[];
  call<T = Record<string, unknown>>(cmd: string, args?: Record<string, unknown>): Promise<T>;
  /** Resolves with the time `key` of `table` was evicted here (or rejects after timeoutMs). */
  evictionOf(table: string, key: string, timeoutMs?: number): Promise<number>;
  kill(): void;
}

/** `zookeeper`: the HBase quorum a blacklist instance connects to (default: the HBASE_ZK it inherits). */
export async function startInstance(childFile: string, url: string, channel: string, blacklistTable?: string, replay = false, zookeeper?: string): Promise<Instance> {
  const proc = fork(childFile, [url, channel, blacklistTable ?? ''], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, HG_BUS_REPLAY: replay ? '1' : '', ...(zookeeper !== undefined ? { HBASE_ZK: zookeeper } : {}) },
  });
  const evicted: Evicted[] = [];
  const resyncs: number[] = [];
  const waiting = new Map<number, { resolve: (v: never) => void; reject: (e: Error) => void }>();
  const watchers = new Set<() => void>();
  let next = 1;
  const ready = new Promise<void>((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`instance exited with ${code} before ready`)));
    proc.on('message', (m: { type?: string; id?: number; error?: string } & Partial<Evicted>) => {
      if (m.type === 'ready') return resolve();
      if (m.type === 'evicted') {
        evicted.push({ table: m.table!, keys: m.keys!, at: m.at! });
        for (const w of watchers) w();
        return;
      }
      if (m.type === 'resync') {
        resyncs.push(m.at!);
        for (const w of watchers) w();
        return;
      }
      const p = m.id === undefined ? undefined : waiting.get(m.id);
      if (!p) return;
      waiting.delete(m.id!);
      if (m.error) p.reject(new Error(m.error));
      else p.resolve(m as never);
    });
  });
  await ready;
  return {
    proc,
    evicted,
    resyncs,
    call<T>(cmd: string, args: Record<string, unknown> = {}): Promise<T> {
      const id = next++;
      return new Promise<T>((resolve, reject) => {
        waiting.set(id, { resolve: resolve as (v: never) => void, reject });
        proc.send({ id, cmd, ...args });
      });
    },
    evictionOf(table: string, key: string, timeoutMs = 5_000): Promise<number> {
      const find = (): number | undefined => evicted.find((e) => e.table === table && e.keys.includes(key))?.at;
      const at = find();
      if (at !== undefined) return Promise.resolve(at);
      return new Promise<number>((resolve, reject) => {
        const w = (): void => {
          const t = find();
          if (t === undefined) return;
          watchers.delete(w);
          clearTimeout(timer);
          resolve(t);
        };
        const timer = setTimeout(() => {
          watchers.delete(w);
          reject(new Error(`no eviction of ${table}/${key} within ${timeoutMs} ms`));
        }, timeoutMs);
        watchers.add(w);
      });
    },
    kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    },
  };
}
