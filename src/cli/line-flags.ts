// Parsing of the flags that say how export lines split into fields (--delimiter, --fields, and
// integer flags), shared by every command that reads export files as 'hashgate load' does.
import { ErrorCodes, HashGateRangeError, HashGateTypeError } from '../errors.js';

export const usage = (msg: string): HashGateTypeError => new HashGateTypeError(ErrorCodes.INVALID_OPTION, msg);

/** An integer flag's value (undefined when absent); a typed error names the flag otherwise. */
export function intFlag(flag: string, v: string | undefined, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^-?\d+$/.test(v.trim()) || !Number.isSafeInteger(n)) throw usage(`${flag} must be an integer, got ${JSON.stringify(v)}`);
  if (n < min || n > max) throw new HashGateRangeError(ErrorCodes.INVALID_OPTION, `${flag} must be in [${min}, ${max}], got ${n}`, { name: flag });
  return n;
}

/** --delimiter: one byte other than CR/LF, or 'tab'. */
export function delimiterByte(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const s = v === 'tab' || v === '\\t' ? '\t' : v;
  const b = Buffer.from(s);
  if (b.length !== 1 || b[0] === 10 || b[0] === 13) throw usage(`--delimiter must be one byte other than CR/LF (or 'tab'), got ${JSON.stringify(v)}`);
  return b[0];
}

/** --fields 0,2: the field indexes forming the key, in order; null (absent or 'all') = every field. */
export function fieldList(v: string | undefined): number[] | null {
  if (v === undefined || v === 'all') return null;
  const parts = v.split(',');
  const out = parts.map((p) => intFlag('--fields', p.trim(), 0, 255)!);
  if (out.length === 0) throw usage('--fields must list at least one field index');
  return out;
}
