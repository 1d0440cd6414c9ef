// Runs a CLI command's run() in-process and captures what it prints (console.log and console.error
// interleaved, in order), so tests can assert its exit code and its output together.
import { vi } from 'vitest';

export async function captureConsole(f: () => Promise<number>): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void lines.push(a.join(' ')));
  const err = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void lines.push(a.join(' ')));
  try {
    return { code: await f(), out: lines.join('\n') };
  } finally {
    log.mockRestore();
    err.mockRestore();
  }
}
