// Resume state: per input file, the byte offset (and line number) up to which every row has been
// acknowledged by the store or written to the failed file. Saved atomically (tmp + fsync +
// rename) so a crash leaves either the old or the new checkpoint, never a torn one.
import { open, readFile, rename } from 'node:fs/promises';
import { ErrorCodes, HashGateError } from '../errors.js';

export interface FileProgress {
  size: number;
  /** The file as it was read: a resume reloads a file whose size, mtime or head/tail hash differ. */
  mtimeMs?: number;
  head?: string;
  tail?: string;
  offset: number;
  /** Lines before `offset`, so rejects keep true line numbers after a resume. */
  line: number;
  done: boolean;
  /** Rows of this file that went to the failed file, and where the first of them was read from:
   *  a resume reloads the file from there, so rows that never reached the store are not lost. */
  failed?: number;
  failedFrom?: { offset: number; line: number };
  /** Highest line of this file listed in the rejects file (a resume does not list it again). */
  rejectsLine?: number;
}

export interface CheckpointData {
  version: 1;
  /** Options that change what is written where; a resume with different ones is refused. */
  fingerprint: Record<string, unknown>;
  files: Record<string, FileProgress>;
  updatedAt: string;
}

export async function readCheckpoint(path: string): Promise<CheckpointData | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const data = JSON.parse(text) as CheckpointData;
    if (data.version !== 1 || typeof data.files !== 'object') throw new Error('unknown checkpoint version');
    return data;
  } catch (err) {
    throw new HashGateError(ErrorCodes.PARSE, `checkpoint ${path} is not a hashgate load checkpoint: ${(err as Error).message}`, {
      cause: err,
      details: { path },
    });
  }
}

export async function writeCheckpoint(path: string, data: CheckpointData | string): Promise<void> {
  const tmp = `${path}.tmp`;
  const fh = await open(tmp, 'w', 0o600);
  try {
    await fh.writeFile(typeof data === 'string' ? data : JSON.stringify(data, null, 1));
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, path);
}

/** Differences between two fingerprints, as `name: old -> new` strings. */
export function fingerprintDiff(a: Record<string, unknown>, b: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (JSON.stringify(a[k]) !== JSON.stringify(b[k])) out.push(`${k}: ${JSON.stringify(a[k])} -> ${JSON.stringify(b[k])}`);
  }
  return out;
}
