// Dedup windows. The window id is part of every Redis key, so years (months, days) never mix and
// an old window is dropped by deleting its keys (the yearly cleanup: one UNLINK pass, no per-key TTL bookkeeping) instead of TTLs.
// Boundaries are local midnights in an IANA time zone (default Asia/Shanghai), computed with
// Intl.DateTimeFormat; formatters are cached per zone because constructing one costs ~50 µs.
import { HashGateTypeError, ErrorCodes, invalidType } from '../errors.js';

export type WindowKind = 'year' | 'month' | 'day';
/** Custom window: returns a short id without ':' '{' '}' '*' '?' '[' ']' or whitespace. */
export type WindowFn = (at: Date, timeZone: string) => string;
export type WindowSpec = WindowKind | WindowFn;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string, name = 'dedup.timeZone'): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (f === undefined) {
    try {
      f = new Intl.DateTimeFormat('en-US', {
        timeZone,
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hourCycle: 'h23',
      });
    } catch (cause) {
      throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `${name} must be an IANA time zone, got ${JSON.stringify(timeZone)}`, {
        name,
        cause,
      });
    }
    formatters.set(timeZone, f);
  }
  return f;
}

/** Throws if `timeZone` is not a zone this runtime knows. */
export function checkTimeZone(timeZone: unknown, name = 'dedup.timeZone'): string {
  if (typeof timeZone !== 'string' || timeZone === '') throw invalidType(name, 'an IANA time zone name', timeZone);
  formatterFor(timeZone, name);
  return timeZone;
}

/** Local calendar date of `at` in `timeZone`. */
export function localDate(at: Date | number, timeZone: string): { year: number; month: number; day: number } {
  const parts = formatterFor(timeZone).formatToParts(typeof at === 'number' ? at : at.getTime());
  let year = 0;
  let month = 0;
  let day = 0;
  for (const p of parts) {
    if (p.type === 'year') year = Number(p.value);
    else if (p.type === 'month') month = Number(p.value);
    else if (p.type === 'day') day = Number(p.value);
  }
  return { year, month, day };
}

const BAD_ID = /[\s:{}*?[\]\\]/;

/** '2026', '2026-03' or '2026-03-07' (local calendar in `timeZone`), or what `window` returns. */
export function windowId(at: Date | number, window: WindowSpec = 'year', timeZone = 'Asia/Shanghai'): string {
  const ms = typeof at === 'number' ? at : at.getTime();
  if (!Number.isFinite(ms)) throw invalidType('at', 'a valid Date or epoch milliseconds', at);
  if (typeof window === 'function') {
    const id = window(new Date(ms), timeZone);
    if (typeof id !== 'string' || id === '' || id.length > 64 || BAD_ID.test(id)) {
      throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `dedup.window function must return a non-empty id of at most 64 characters without ':', braces, glob characters or spaces, got ${JSON.stringify(id)}`, { name: 'dedup.window' });
    }
    return id;
  }
  // Every UTC offset in the time zone database is a whole number of seconds, so the local date
  // cannot change inside one UTC second: a service asking for the window of "now" on every call
  // formats the date (a few µs of Intl) once a second.
  const sec = Math.floor(ms / 1000);
  const c = lastId;
  if (c.sec === sec && c.kind === window && c.timeZone === timeZone) return c.id;
  const { year, month, day } = localDate(ms, timeZone);
  const id = formatWindowId(year, month, day, window);
  lastId = { sec, kind: window, timeZone, id };
  return id;
}

let lastId: { sec: number; kind: WindowKind | undefined; timeZone: string; id: string } = { sec: Number.NaN, kind: undefined, timeZone: '', id: '' };

/** The id of the `kind` window holding a local calendar date: '2026', '2026-03' or '2026-03-07'. */
export function formatWindowId(year: number, month: number, day: number, kind: WindowKind): string {
  const y = String(year).padStart(4, '0');
  if (kind === 'year') return y;
  const m = month < 10 ? `0${month}` : String(month);
  if (kind === 'month') return `${y}-${m}`;
  return `${y}-${m}-${day < 10 ? `0${day}` : String(day)}`;
}

/**
 * Memoises windowId for a clock that mostly moves forward: ids are recomputed only when `at`
 * leaves the last local-day span we saw, so the hot path costs two comparisons.
 */
export class WindowClock {
  private lo = 1;
  private hi = 0;
  private id = '';
  constructor(
    private readonly window: WindowSpec,
    private readonly timeZone: string,
  ) {
    formatterFor(timeZone);
  }

  idAt(ms: number): string {
    if (typeof this.window === 'function') return windowId(ms, this.window, this.timeZone);
    if (ms >= this.lo && ms < this.hi) return this.id;
    const id = windowId(ms, this.window, this.timeZone);
    // Cache only within the same local day: zone offsets change at most a few hours a day, so
    // checking the ids one hour either side keeps the span safely inside the window.
    const hour = 3_600_000;
    const start = Math.floor(ms / hour) * hour;
    if (windowId(start - hour, this.window, this.timeZone) === id && windowId(start + 2 * hour, this.window, this.timeZone) === id) {
      this.lo = start - hour;
      this.hi = start + 2 * hour;
    } else {
      this.lo = 1;
      this.hi = 0;
    }
    this.id = id;
    return id;
  }
}
