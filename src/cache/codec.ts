// Hot-tier envelope: [version u8][flags u8][ts f64 BE][msgpack payload]. The write timestamp rides
// with the value so migration can hand HBase the original time (the cold family's TTL counts from
// the cell timestamp), and the archived flag lives inside the value so it expires with the key
// instead of growing a side index.
import { Packr } from 'msgpackr';
import { HashGateError, ErrorCodes } from '../errors.js';
import type { CacheValue } from './types.js';

export const ENVELOPE_VERSION = 1;
export const ENVELOPE_HEADER_BYTES = 10;
export const FLAG_ARCHIVED = 0x01;
/** Offset of the flags byte; migration flips FLAG_ARCHIVED in place with SETRANGE (keeps the TTL). */
export const FLAGS_OFFSET = 1;

// copyBuffers: a binary value (or field) is decoded into memory of its own, never a view of the
// buffer it was read from: that may be a whole socket read, which a cached value would keep alive.
const packr = new Packr({ useRecords: false, moreTypes: false, mapsAsObjects: true, copyBuffers: true });

export function encodeValue(value: CacheValue): Buffer {
  if (value === undefined || value === null || typeof value !== 'object') {
    throw new HashGateError(ErrorCodes.INVALID_ARG, 'cache values must be a Uint8Array or a plain object');
  }
  return packr.pack(value);
}

export function decodeValue(payload: Uint8Array): CacheValue {
  try {
    return packr.unpack(payload) as CacheValue;
  } catch (cause) {
    throw new HashGateError(ErrorCodes.PARSE, 'cannot decode cached value (msgpack)', { cause });
  }
}

const range = { start: ENVELOPE_HEADER_BYTES, end: 0 };

/** Decodes the payload of an envelope in place (no header object, no subarray); undefined if not ours. */
export function decodeEnvelopeValue(buf: Buffer): CacheValue | undefined {
  if (buf.length < ENVELOPE_HEADER_BYTES || buf[0] !== ENVELOPE_VERSION) return undefined;
  range.end = buf.length;
  try {
    return packr.unpack(buf, range) as CacheValue;
  } catch (cause) {
    throw new HashGateError(ErrorCodes.PARSE, 'cannot decode cached value (msgpack)', { cause });
  }
}

export function wrapEnvelope(payload: Uint8Array, ts: number, flags = 0): Buffer {
  const out = Buffer.allocUnsafe(ENVELOPE_HEADER_BYTES + payload.byteLength);
  out[0] = ENVELOPE_VERSION;
  out[1] = flags;
  out.writeDoubleBE(ts, 2);
  out.set(payload, ENVELOPE_HEADER_BYTES);
  return out;
}

export interface Envelope {
  flags: number;
  ts: number;
  payload: Buffer;
}

/** Undefined for bytes that are not ours (foreign keys under the prefix are skipped, not fatal). */
export function readEnvelope(buf: Buffer): Envelope | undefined {
  if (buf.length < ENVELOPE_HEADER_BYTES || buf[0] !== ENVELOPE_VERSION) return undefined;
  return { flags: buf[1]!, ts: buf.readDoubleBE(2), payload: buf.subarray(ENVELOPE_HEADER_BYTES) };
}
