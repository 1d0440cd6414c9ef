// Every error hashgate raises carries a stable `code` (the undici UND_ERR_* pattern) so callers
// can branch on it without parsing messages. Codes are part of the public API: never rename one.

export const ErrorCodes = {
  INVALID_ARG: 'HG_ERR_INVALID_ARG',
  INVALID_OPTION: 'HG_ERR_INVALID_OPTION',
  KEY_TOO_LONG: 'HG_ERR_KEY_TOO_LONG',
  EMPTY_KEY: 'HG_ERR_EMPTY_KEY',
  CANONICAL_JSON: 'HG_ERR_CANONICAL_JSON',
  WASM: 'HG_ERR_WASM',
  CAPACITY: 'HG_ERR_CAPACITY',
  SNAPSHOT_MISMATCH: 'HG_ERR_SNAPSHOT_MISMATCH',
  SNAPSHOT_CORRUPT: 'HG_ERR_SNAPSHOT_CORRUPT',
  BLOOM_SHAPE_MISMATCH: 'HG_ERR_BLOOM_SHAPE_MISMATCH',
  QUEUE_FULL: 'HG_ERR_QUEUE_FULL',
  WORKER: 'HG_ERR_WORKER',
  CLOSED: 'HG_ERR_CLOSED',
  STORE_UNAVAILABLE: 'HG_ERR_STORE_UNAVAILABLE',
  STORE: 'HG_ERR_STORE',
  JOURNAL: 'HG_ERR_JOURNAL',
  JOURNAL_CORRUPT: 'HG_ERR_JOURNAL_CORRUPT',
  LOCK_HELD: 'HG_ERR_LOCK_HELD',
  HBASE: 'HG_ERR_HBASE',
  HBASE_UNAVAILABLE: 'HG_ERR_HBASE_UNAVAILABLE',
  PARSE: 'HG_ERR_PARSE',
  TIMEOUT: 'HG_ERR_TIMEOUT',
  /** A Redis-held Bloom filter's stored size or hash count differs from the one this client uses. */
  BLOOM_CONFIG_CHANGED: 'HG_ERR_BLOOM_CONFIG_CHANGED',
  /** A Redis-held Bloom filter has no config hash (never initialised, or deleted). */
  BLOOM_NOT_INITIALIZED: 'HG_ERR_BLOOM_NOT_INITIALIZED',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

export interface HashGateErrorOptions {
  cause?: unknown;
  /** Extra machine-readable context (bad index in a batch, option name, file and line, ...). */
  details?: Record<string, unknown>;
}

/** Base class of every non-argument error hashgate raises. */
export class HashGateError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: HashGateErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'HashGateError';
    this.code = code;
    this.details = options.details;
  }
}

/** A bad argument or option type. Extends TypeError so `instanceof TypeError` keeps working. */
export class HashGateTypeError extends TypeError {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = 'HashGateTypeError';
    this.code = code;
    this.details = details;
  }
}

/** A value of the right type but outside its allowed range. */
export class HashGateRangeError extends RangeError {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = 'HashGateRangeError';
    this.code = code;
    this.details = details;
  }
}

/** `name` is the option or argument as the user wrote it, e.g. `options.bloom.fpp` or `seed`. */
export function invalidType(name: string, expected: string, got: unknown): HashGateTypeError {
  return new HashGateTypeError(
    ErrorCodes.INVALID_ARG,
    `${name} must be ${expected}, got ${describe(got)}`,
    { name },
  );
}

export function outOfRange(name: string, expected: string, got: unknown): HashGateRangeError {
  return new HashGateRangeError(
    ErrorCodes.INVALID_ARG,
    `${name} must be ${expected}, got ${describe(got)}`,
    { name },
  );
}

export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return v.length > 40 ? `string(${v.length})` : JSON.stringify(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'number' || typeof v === 'boolean' || v === undefined) return String(v);
  if (Array.isArray(v)) return `array(${v.length})`;
  if (ArrayBuffer.isView(v)) return `${v.constructor.name}(${v.byteLength})`;
  return typeof v === 'object' ? `object ${v.constructor?.name ?? 'Object'}` : typeof v;
}

/** Validation helpers shared by every options parser, so messages read the same everywhere. */
export function checkUint32(name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw invalidType(name, 'an integer', v);
  if (v < 0 || v > 0xffff_ffff) throw outOfRange(name, 'in [0, 2^32-1]', v);
  return v;
}

export function checkInt(name: string, v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw invalidType(name, 'an integer', v);
  if (v < min || v > max) throw outOfRange(name, `in [${min}, ${max}]`, v);
  return v;
}

export function checkNumber(name: string, v: unknown, min: number, max: number, exclusive = false): number {
  if (typeof v !== 'number' || Number.isNaN(v)) throw invalidType(name, 'a number', v);
  const ok = exclusive ? v > min && v < max : v >= min && v <= max;
  if (!ok) throw outOfRange(name, exclusive ? `in (${min}, ${max})` : `in [${min}, ${max}]`, v);
  return v;
}

export function checkOneOf<T extends string>(name: string, v: unknown, allowed: readonly T[]): T {
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
    throw new HashGateTypeError(
      ErrorCodes.INVALID_OPTION,
      `${name} must be one of ${allowed.map((a) => `'${a}'`).join(', ')}, got ${describe(v)}`,
      { name },
    );
  }
  return v as T;
}
