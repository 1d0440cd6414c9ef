// An output file of raw rows (failed rows, rejects) that the loader appends to.
// Opened on first use, owner-only, one write at a time in call order.
import { open, type FileHandle } from 'node:fs/promises';

export class AppendFile {
  private fh: FileHandle | undefined;
  private chain: Promise<void> = Promise.resolve();
  constructor(readonly path: string, private readonly truncate: boolean) {}

  write(data: Buffer): Promise<void> {
    const p = this.chain.then(async () => {
      if (!this.fh) {
        // raw rows (names, ID numbers): owner-only, also when the file already existed
        this.fh = await open(this.path, this.truncate ? 'w' : 'a', 0o600);
        await this.fh.chmod(0o600);
      }
      await this.fh.write(data);
    });
    this.chain = p.catch(() => undefined);
    return p;
  }

  /** Waits for the writes so far and makes them durable. */
  async flush(): Promise<void> {
    await this.chain;
    await this.fh?.sync();
  }

  async close(): Promise<void> {
    await this.chain;
    await this.fh?.close();
    this.fh = undefined;
  }
}
