// Window ids for rows whose window comes from a date field. Parses digits straight from bytes
// (no string per row) using the positions of yyyy/MM/dd in the format, or epoch seconds/millis
// converted in the configured IANA time zone.
import { HashGateTypeError, ErrorCodes } from '../errors.js';
import { formatWindowId, localDate, type WindowKind } from '../dedup/window.js';

export interface WindowFieldSpec {
  format: string;
  unit: WindowKind;
  timeZone: string;
}

/** Returns a numeric window code for a date field, or -1 when the field is not a valid date. */
export type WindowCoder = (buf: Uint8Array, start: number, end: number) => number;

const digitsAt = (buf: Uint8Array, p: number, n: number): number => {
  let v = 0;
  for (let i = 0; i < n; i++) {
    const d = buf[p + i]! - 48;
    if (d < 0 || d > 9) return -1;
    v = v * 10 + d;
  }
  return v;
};

export function makeWindowCoder(spec: WindowFieldSpec): WindowCoder {
  const unit = spec.unit;
  const code = (y: number, m: number, d: number): number =>
    unit === 'year' ? y * 10000 : unit === 'month' ? y * 10000 + m * 100 : y * 10000 + m * 100 + d;
  if (spec.format === 'epoch-s' || spec.format === 'epoch-ms') {
    const scale = spec.format === 'epoch-s' ? 1000 : 1;
    // Rows cluster in time and every zone offset is a multiple of 15 minutes, so the local date is
    // constant inside a 15-minute UTC quarter: Intl runs about once per quarter seen.
    const QUARTER_MS = 900_000;
    let quarter = -1;
    let last = -1;
    return (buf, start, end) => {
      if (end - start < 1 || end - start > 16) return -1;
      const v = digitsAt(buf, start, end - start);
      if (v < 0) return -1;
      const ms = v * scale;
      const s = Math.floor(ms / QUARTER_MS);
      if (s === quarter) return last;
      const { year: y, month: m, day: d } = localDate(ms, spec.timeZone);
      quarter = s;
      last = code(y, m, d);
      return last;
    };
  }
  const f = spec.format;
  const py = f.indexOf('yyyy');
  const pm = f.indexOf('MM');
  const pd = f.indexOf('dd');
  if (py < 0 || (unit !== 'year' && pm < 0) || (unit === 'day' && pd < 0)) {
    throw new HashGateTypeError(
      ErrorCodes.INVALID_OPTION,
      `--date-format must contain yyyy (and MM for month, dd for day windows) or be epoch-s/epoch-ms, got ${JSON.stringify(f)}`,
      { name: '--date-format' },
    );
  }
  const minLen = Math.max(py + 4, pm >= 0 ? pm + 2 : 0, pd >= 0 ? pd + 2 : 0);
  return (buf, start, end) => {
    if (end - start < minLen) return -1;
    const y = digitsAt(buf, start + py, 4);
    const m = pm >= 0 ? digitsAt(buf, start + pm, 2) : 1;
    const d = pd >= 0 ? digitsAt(buf, start + pd, 2) : 1;
    if (y < 0 || m < 1 || m > 12 || d < 1 || d > 31) return -1;
    return code(y, m, d);
  };
}

/** The window id of a code from a WindowCoder: the dedup store's id of that date's window. */
export function windowIdFromCode(code: number, unit: WindowKind): string {
  return formatWindowId(Math.floor(code / 10000), Math.floor(code / 100) % 100, code % 100, unit);
}

/** Window index of a row: the table of windows a load has met, in the order it met them. */
export class WindowTable {
  /** Window ids by index: the fixed window, or the ones found in the rows. */
  readonly ids: string[];
  private readonly byCode = new Map<number, number>();

  constructor(
    /** Reads a row's date field; undefined: every row is in the fixed window 0. */
    readonly coder: WindowCoder | undefined,
    fixed: string | undefined,
    private readonly unit: WindowKind,
    private readonly max: number,
    /** Told the new window count, so per-window buffers can grow. */
    private readonly onNew: (windows: number) => void,
  ) {
    this.ids = fixed !== undefined ? [fixed] : [];
  }

  /** Window index of the date in buf[start, end): -1 when it is not a date, -2 when it would be
   *  a window past the cap. */
  indexOf(buf: Uint8Array, start: number, end: number): number {
    if (!this.coder) return 0;
    const code = this.coder(buf, start, end);
    if (code < 0) return -1;
    let w = this.byCode.get(code);
    if (w === undefined) {
      if (this.ids.length >= this.max) return -2;
      w = this.ids.length;
      this.ids.push(windowIdFromCode(code, this.unit));
      this.byCode.set(code, w);
      this.onNew(this.ids.length);
    }
    return w;
  }
}
