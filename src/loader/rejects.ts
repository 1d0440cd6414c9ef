// Rejected lines: counted by reason, listed in the rejects file, and the reject-ratio verdict.
// A line is listed once (file, line, reason, the line's head), also across resumes.
import type { AppendFile } from './append-file.js';
import type { Checkpointer } from './checkpointer.js';
import type { LoadFailure } from './failure.js';
import { REJECT_NAMES, type RejectName } from './parse.js';

/** Bytes of a rejected line kept in the rejects file: enough to find it, not a copy of the input. */
const HEAD_BYTES = 256;

export interface RejectRatio {
  /** rejected / lines of this run. */
  rejectRatio: number;
  maxRejectRatio: number;
  rejectRatioExceeded: boolean;
}

export class RejectWriter {
  rejected = 0;
  readonly byReason: Partial<Record<RejectName, number>> = {};
  /** Per file, the last line an earlier run already listed. Rejects of one region are not
   *  written in line order (parse rejects first, then window rejects), so this is taken once,
   *  before this run lists anything. */
  private readonly listedBefore = new Map<string, number>();

  constructor(
    private readonly out: AppendFile | undefined,
    private readonly checkpointer: Checkpointer,
    files: readonly string[],
    private readonly failure: LoadFailure,
  ) {
    for (const f of files) {
      const n = checkpointer.progress(f).rejectsLine;
      if (n !== undefined) this.listedBefore.set(f, n);
    }
  }

  /** Line `line` (1-based) of `file` was rejected for `reason` (a parse.ts R_* code). */
  reject(file: string, line: number, reason: number, content: Uint8Array): void {
    this.rejected++;
    const name = REJECT_NAMES[reason] as RejectName;
    this.byReason[name] = (this.byReason[name] ?? 0) + 1;
    if (this.out === undefined) return;
    // a resumed region re-reads lines whose rejects an earlier run already wrote: count them
    // again (this run read them) but do not list them twice
    if (line <= (this.listedBefore.get(file) ?? 0)) return;
    const fp = this.checkpointer.progress(file);
    if (line > (fp.rejectsLine ?? 0)) fp.rejectsLine = line;
    const head = content.length > HEAD_BYTES ? content.subarray(0, HEAD_BYTES) : content;
    void this.out.write(Buffer.concat([Buffer.from(`${file}\t${line}\t${name}\t`), head, Buffer.from('\n')])).catch(this.failure.record);
  }

  ratio(lines: number, maxRejectRatio: number): RejectRatio {
    const rejectRatio = lines > 0 ? this.rejected / lines : 0;
    return { rejectRatio, maxRejectRatio, rejectRatioExceeded: rejectRatio > maxRejectRatio };
  }
}
