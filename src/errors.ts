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
  MISSING_DEPENDENCY: 'HG_ERR_MISSING_DEPENDENCY',
  /** A Redis-held Bloom filter's stored size or hash count differs from the one this client uses. */
  BLOOM_CONFIG_CHANGED: 'HG_ERR_BLOOM_CONFIG_CHANGED',
  /** A Redis-held Bloom filter has no config hash (never initialised, or deleted). */
  BLOOM_NOT_INITIALIZED: 'HG_ERR_BLOOM_NOT_INITIALIZED',
  /**
   * A lookup could not check some keys: a cache tier that could hold them failed or was skipped
   * (details: tier, tiers, indexes of the unchecked keys, the tier errors).
   */
  TIER_UNAVAILABLE: 'HG_ERR_TIER_UNAVAILABLE',
  /**
   * A store command was sent but its reply never came (timeout, connection lost): it may or may not
   * have been applied. Retry with the same requestId to get the original answers.
   */
  STORE_OUTCOME_UNKNOWN: 'HG_ERR_STORE_OUTCOME_UNKNOWN',
  /** The call was refused before anything was sent: the local queue in front of the store is full. */
  OVERLOADED: 'HG_ERR_OVERLOADED',
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

/**
 * Arguments that hold user data (keys, row keys, documents): an error names them and says what
 * type they were, never what they contained (personal data): `keys`, `keys[3]`, `entries[2].row`, ...
 */
const DATA_ARG = /^(keys?|input|rows?|members?|entries|records?|docs?|ids?|userId)(\[\d+\])?(\.(row|key|userId))?$/;

/**
 * Option errors (names rooted at `options`, e.g. `options.dedup.window`) carry HG_ERR_INVALID_OPTION;
 * errors about a method's arguments (`keys[3]`, `seed`) carry HG_ERR_INVALID_ARG. One rule, so a
 * caller can tell "my configuration is wrong" from "this call is wrong" by the code alone.
 */
export function codeFor(name: string): ErrorCode {
  return name === 'options' || name.startsWith('options.') || name.startsWith('options[') ? ErrorCodes.INVALID_OPTION : ErrorCodes.INVALID_ARG;
}

/** `name` is the option or argument as the user wrote it, e.g. `options.bloom.fpp` or `seed`. */
export function invalidType(name: string, expected: string, got: unknown): HashGateTypeError {
  return new HashGateTypeError(codeFor(name), `${name} must be ${expected}, got ${describe(got, DATA_ARG.test(name))}`, { name });
}

export function outOfRange(name: string, expected: string, got: unknown): HashGateRangeError {
  return new HashGateRangeError(codeFor(name), `${name} must be ${expected}, got ${describe(got, DATA_ARG.test(name))}`, { name });
}

/**
 * Refuses keys an options object does not know, by their full path, so a misspelt option
 * (`bloom: { expected: 10 }`) is reported as itself instead of as a missing required one.
 */
export function checkKnownKeys(name: string, value: unknown, known: readonly string[]): void {
  if (value === null || typeof value !== 'object') return;
  for (const k of Object.keys(value)) {
    if (known.includes(k)) continue;
    const lower = k.toLowerCase();
    const near = known.find((c) => c.toLowerCase().startsWith(lower) || lower.startsWith(c.toLowerCase()));
    throw new HashGateTypeError(
      ErrorCodes.INVALID_OPTION,
      `${name}.${k} is not a known option${near === undefined ? '' : ` (did you mean ${near}?)`}; known: ${known.join(', ')}`,
      { name: `${name}.${k}` },
    );
  }
}

/**
 * Re-roots an option error raised by a component (which names its own options `options.x` or just
 * `x`) under the path the user wrote, e.g. `options.cache.local.maxEntries`; the code becomes
 * HG_ERR_INVALID_OPTION. Any other error passes through unchanged.
 */
export function underOption(prefix: string, err: unknown): unknown {
  if (!(err instanceof HashGateTypeError || err instanceof HashGateRangeError)) return err;
  const name = err.details?.['name'];
  if (typeof name !== 'string' || name.startsWith(prefix)) return err;
  const last = prefix.slice(prefix.lastIndexOf('.') + 1);
  const full =
    name === 'options' || name.startsWith('options.') ? prefix + name.slice('options'.length)
      : name === last || name.startsWith(`${last}.`) ? prefix.slice(0, prefix.length - last.length) + name
        : `${prefix}.${name}`;
  const message = err.message.startsWith(name) ? full + err.message.slice(name.length) : `${prefix}: ${err.message}`;
  const Ctor = err instanceof HashGateRangeError ? HashGateRangeError : HashGateTypeError;
  const out = new Ctor(ErrorCodes.INVALID_OPTION, message, { ...err.details, name: full });
  return out;
}

/** Runs a component's constructor, re-rooting its option errors under `prefix`. */
export function withOptionPath<T>(prefix: string, build: () => T): T {
  try {
    return build();
  } catch (err) {
    throw underOption(prefix, err);
  }
}

/**
 * What a bad value was, for a message. A string's contents are never shown: it may be a key, a
 * secret or a URL with credentials. With `data` (a key or row argument) numbers are not shown either.
 */
export function describe(v: unknown, data = false): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return `a string of ${v.length} chars`;
  if (data && (typeof v === 'number' || typeof v === 'bigint')) return `a ${typeof v}`;
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
      codeFor(name),
      `${name} must be one of ${allowed.map((a) => `'${a}'`).join(', ')}, got ${describe(v)}`,
      { name },
    );
  }
  return v as T;
}

/**
 * A connection URL the client library could not parse (e.g. Node's ERR_INVALID_URL). The URL is
 * not echoed: it may carry a password.
 */
export function invalidUrl(name: string, expected: string, cause: unknown): HashGateTypeError {
  const reason = typeof (cause as { code?: unknown })?.code === 'string' ? ` (${(cause as { code: string }).code})` : '';
  return new HashGateTypeError(ErrorCodes.INVALID_OPTION, `${name} must be ${expected}; the value given could not be parsed${reason}`, {
    name,
  });
}
