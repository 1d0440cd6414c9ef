// Key sources for rebuilding a Redis-held filter: export files (parsed with the bulk loader's own
// reader and parser, so a rebuild accepts and rejects exactly the lines `hashgate load` does), the
// members of a dedup window in the 'sets' layout, and the row keys of an HBase table scan. Each
// yields arrays of keys; a batch is only valid until the next one is pulled (the file source reuses
// its buffers), which suits a consumer that awaits each batch's write before asking for more.
import type { Cluster, Redis } from 'ioredis';
import { ErrorCodes, HashGateError, checkInt, invalidType } from '../errors.js';
import { bucketKey, metaField, metaKey } from '../dedup/layout.js';
import { expandInputs } from '../loader/inputs.js';
import { ChunkParser, REJECT_NAMES, R_TOO_LONG, type RejectName } from '../loader/parse.js';
import { FileChunkReader, isOversize } from '../loader/reader.js';
import { inspectFile, sampleFieldCount } from '../loader/inspect.js';
import { DEFAULTS as LOADER_DEFAULTS } from '../loader/loader.js';
import { DEFAULTS as DEDUP_DEFAULTS } from '../dedup/options.js';
import type { HBaseStore } from '../hbase/client.js';

/** Keys per yielded batch for the Redis and HBase sources (the file source yields one read region). */
export const SOURCE_BATCH_KEYS = 8192;

export interface KeySource extends AsyncIterable<Uint8Array[]> {
  /** Short description recorded with the rebuild (no key contents). */
  readonly description: string;
  /** Rows or members the source could not turn into keys (the rebuild reports them). */
  readonly rejected: number;
}

export interface ExportFileOptions {
  /** Files, directories (their files in name order) or globs, as `hashgate load` takes them. */
  inputs: string[];
  /** Field delimiter byte (default '|'). */
  delimiter?: number;
  /** Fields forming the key, in order; null/undefined = all fields concatenated. */
  fields?: number[] | null;
  /** Expected fields per line; 0/undefined = the count most sampled lines share (as `hashgate load`). */
  fieldCount?: number;
  maxLineBytes?: number;
  readBufferBytes?: number;
  /** How many rejected lines to list (file, line, reason; never their content). Default 20. */
  maxRejectsListed?: number;
}

export interface RejectedLine {
  file: string;
  line: number;
  reason: RejectName;
}

/** Keys of pipe-delimited export files, one batch per read region. */
export class ExportFileKeys implements KeySource {
  readonly description: string;
  rejected = 0;
  lines = 0;
  rows = 0;
  files = 0;
  readonly rejectedByReason: Partial<Record<RejectName, number>> = {};
  /** The first rejected lines (file:line and reason only: lines may hold personal data). */
  readonly rejects: RejectedLine[] = [];
  readonly #o: Required<Omit<ExportFileOptions, 'fields'>> & { fields: number[] | null };

  constructor(options: ExportFileOptions) {
    if (typeof options !== 'object' || options === null) throw invalidType('source', 'an options object', options);
    if (!Array.isArray(options.inputs) || options.inputs.length === 0) throw invalidType('source.inputs', 'a non-empty array of paths', options.inputs);
    const maxLineBytes = checkInt('source.maxLineBytes', options.maxLineBytes ?? LOADER_DEFAULTS.maxLineBytes, 1, 1 << 24);
    this.#o = {
      inputs: options.inputs,
      delimiter: checkInt('source.delimiter', options.delimiter ?? LOADER_DEFAULTS.delimiter.charCodeAt(0), 0, 255),
      fields: options.fields ?? null,
      fieldCount: checkInt('source.fieldCount', options.fieldCount ?? 0, 0, 256),
      maxLineBytes,
      readBufferBytes: Math.max(2 * maxLineBytes, checkInt('source.readBufferBytes', options.readBufferBytes ?? LOADER_DEFAULTS.readBufferBytes, 16)),
      maxRejectsListed: checkInt('source.maxRejectsListed', options.maxRejectsListed ?? 20, 0),
    };
    this.description = `files:${options.inputs.length}`;
  }

  #reject(file: string, line: number, reason: number): void {
    const name = REJECT_NAMES[reason] as RejectName;
    this.rejected++;
    this.rejectedByReason[name] = (this.rejectedByReason[name] ?? 0) + 1;
    if (this.rejects.length < this.#o.maxRejectsListed) this.rejects.push({ file, line, reason: name });
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array[]> {
    const o = this.#o;
    const files = await expandInputs(o.inputs);
    // the same checks as `hashgate load` before reading a row: every file is text, and the field
    // count is the one most sampled lines share (one malformed first line cannot decide it)
    let fieldCount = o.fieldCount;
    const heads: Uint8Array[] = [];
    for (const [i, f] of files.entries()) {
      const inspected = await inspectFile(f, o.delimiter);
      if (i < 16) heads.push(inspected.headBytes);
    }
    if (fieldCount === 0) {
      const smp = sampleFieldCount(heads, o.delimiter);
      if (smp.sampled > 0 && smp.fieldCount === 0) {
        throw new HashGateError(
          ErrorCodes.PARSE,
          `no field count is shared by most sampled lines (${smp.sampled} lines, the commonest count on ${Math.round(smp.share * 100)}%); give the field count`,
          { details: { reason: 'field-count', sampled: smp.sampled } },
        );
      }
      fieldCount = smp.fieldCount;
    }
    const maxRows = Math.ceil(o.readBufferBytes / 2) + 1;
    const keyBytes = new Uint8Array(o.readBufferBytes);
    const keyOffsets = new Uint32Array(maxRows + 1);
    const parser = new ChunkParser(
      { delimiter: o.delimiter, fields: o.fields, fieldCount, maxLineBytes: o.maxLineBytes, windowField: -1 },
      { keyBytes, keyOffsets },
      maxRows,
    );
    for (const file of files) {
      const reader = new FileChunkReader(file, o.readBufferBytes);
      await reader.open();
      let lineNo = 0;
      try {
        for (;;) {
          const r = await reader.next();
          if (r === null) break;
          if (isOversize(r)) {
            this.#reject(file, ++lineNo, R_TOO_LONG);
            this.lines++;
            continue;
          }
          parser.parse(r.buf, r.start, r.end, r.final);
          for (let j = 0; j < parser.rejReason.length; j++) this.#reject(file, lineNo + parser.rejLine[j]! + 1, parser.rejReason[j]!);
          lineNo += parser.lines;
          this.lines += parser.lines;
          const n = parser.count;
          this.rows += n;
          if (n === 0) continue;
          const batch = new Array<Uint8Array>(n);
          for (let i = 0; i < n; i++) batch[i] = keyBytes.subarray(keyOffsets[i]!, keyOffsets[i + 1]!);
          yield batch;
        }
      } finally {
        await reader.close();
      }
      this.files++;
    }
  }
}

export interface RedisSetWindowOptions {
  redis: Redis | Cluster;
  /** Key prefix of the dedup store (default the dedup store's, `dedup.prefix`'s default). */
  prefix?: string;
  /** Window ids to read, e.g. ['2026'] or ['2025', '2026']. */
  windows: string[];
  /** Buckets of the window; default the count recorded in the window's meta hash. */
  buckets?: number;
  /** SSCAN COUNT hint (default 1000). */
  scanCount?: number;
}

/** Members of dedup windows stored in the 'sets' layout (members are the raw key bytes). */
export class RedisSetWindowKeys implements KeySource {
  readonly description: string;
  readonly rejected = 0;
  members = 0;
  bucketsRead = 0;
  readonly #o: RedisSetWindowOptions & { prefix: string; scanCount: number };

  constructor(options: RedisSetWindowOptions) {
    if (typeof options !== 'object' || options === null) throw invalidType('source', 'an options object', options);
    if (typeof options.redis !== 'object' || options.redis === null) throw invalidType('source.redis', 'an ioredis client', options.redis);
    if (!Array.isArray(options.windows) || options.windows.length === 0 || options.windows.some((w) => typeof w !== 'string' || w === '')) {
      throw invalidType('source.windows', 'a non-empty array of window ids', options.windows);
    }
    if (options.buckets !== undefined) checkInt('source.buckets', options.buckets, 1, 1 << 26);
    this.#o = { ...options, prefix: options.prefix ?? DEDUP_DEFAULTS.prefix, scanCount: checkInt('source.scanCount', options.scanCount ?? 1000, 1, 100_000) };
    this.description = `sets:${this.#o.prefix}:${options.windows.join(',')}`;
  }

  async #bucketsOf(window: string): Promise<number> {
    if (this.#o.buckets !== undefined) return this.#o.buckets;
    const v = await this.#o.redis.hget(metaKey(this.#o.prefix, window), metaField('sets'));
    if (v === null || !/^\d+$/.test(v) || Number(v) < 1) {
      throw new HashGateError(
        ErrorCodes.INVALID_ARG,
        `window ${window} under prefix ${this.#o.prefix} has no recorded 'sets' bucket count (${metaKey(this.#o.prefix, window)}); pass buckets`,
        { details: { window, prefix: this.#o.prefix } },
      );
    }
    return Number(v);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array[]> {
    const { redis, prefix, scanCount } = this.#o;
    let batch: Uint8Array[] = [];
    for (const window of this.#o.windows) {
      const buckets = await this.#bucketsOf(window);
      for (let b = 0; b < buckets; b++) {
        const key = bucketKey({ layout: 'sets', prefix }, window, b);
        let cursor = '0';
        do {
          const [next, members] = await redis.sscanBuffer(key, cursor, 'COUNT', scanCount);
          cursor = next.toString();
          for (const m of members) batch.push(m);
          this.members += members.length;
          if (batch.length >= SOURCE_BATCH_KEYS) {
            yield batch;
            batch = [];
          }
        } while (cursor !== '0');
        this.bucketsRead++;
      }
    }
    if (batch.length > 0) yield batch;
  }
}

export interface HBaseScanOptions {
  store: HBaseStore;
  table: string;
  prefix?: string;
  startRow?: string;
  stopRow?: string;
  /** Only rows holding this 'family:qualifier' count (e.g. 'base:status'). */
  column?: string;
  /** Rows per Scan RPC (default 1000). */
  batchSize?: number;
}

/** Row keys of an HBase table scan (optionally only rows that hold one column). */
export class HBaseScanKeys implements KeySource {
  readonly description: string;
  readonly rejected = 0;
  rows = 0;
  readonly #o: HBaseScanOptions;

  constructor(options: HBaseScanOptions) {
    if (typeof options !== 'object' || options === null) throw invalidType('source', 'an options object', options);
    if (typeof options.table !== 'string' || options.table === '') throw invalidType('source.table', 'a table name', options.table);
    if (options.column !== undefined && !/^[^:]+:.+$/.test(options.column)) throw invalidType('source.column', "'family:qualifier'", options.column);
    this.#o = options;
    this.description = `hbase:${options.table}${options.prefix !== undefined ? `:${options.prefix}` : ''}`;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array[]> {
    const o = this.#o;
    const scan = {
      ...(o.prefix !== undefined ? { prefix: o.prefix } : {}),
      ...(o.startRow !== undefined ? { startRow: o.startRow } : {}),
      ...(o.stopRow !== undefined ? { stopRow: o.stopRow } : {}),
      ...(o.column !== undefined ? { columns: [o.column] } : {}),
      batchSize: o.batchSize ?? 1000,
    };
    let batch: Uint8Array[] = [];
    for await (const row of o.store.scanIterator(o.table, scan)) {
      if (o.column !== undefined && row.columns[o.column] === undefined) continue;
      batch.push(row.key);
      this.rows++;
      if (batch.length >= SOURCE_BATCH_KEYS) {
        yield batch;
        batch = [];
      }
    }
    if (batch.length > 0) yield batch;
  }
}
