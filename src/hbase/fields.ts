// Protobuf request fields built from caller arguments (rows, columns, puts, deletes) and results
// parsed back into HBaseRow, with the argument checks that name the offending parameter.
import { HashGateError, ErrorCodes, invalidType, outOfRange } from '../errors.js';
import { toBuf } from './wire.js';
import type { RegionLocation } from './regions.js';
import type { Bytes, HBaseCell, HBaseRow, ReadOptions } from './client.js';

/** The server-side exception class an HBase error carries ('' for other errors). */
export function remoteClass(err: unknown): string {
  return err instanceof HashGateError ? String(err.details?.['exceptionClassName'] ?? '') : '';
}

export function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) throw outOfRange(name, 'a positive integer', value);
  return value;
}

export function bytes(name: string, v: Bytes): Buffer {
  if (Buffer.isBuffer(v)) return v;
  if (typeof v === 'string') return Buffer.from(v);
  throw invalidType(name, 'a Buffer or string', v);
}

export function rowKey(name: string, v: Bytes): Buffer {
  const b = bytes(name, v);
  if (b.length === 0) throw new HashGateError(ErrorCodes.EMPTY_KEY, `${name} must not be empty`, { details: { name } });
  return b;
}

export function splitColumn(name: string, column: string): [Buffer, Buffer] {
  if (typeof column !== 'string') throw invalidType(name, "a 'family:qualifier' string", column);
  const i = column.indexOf(':');
  if (i <= 0) {
    throw new HashGateError(ErrorCodes.INVALID_ARG, `${name} must be 'family:qualifier', got '${column}'`, { details: { name } });
  }
  return [Buffer.from(column.slice(0, i)), Buffer.from(column.slice(i + 1))];
}

export function columnSpecs(columns: string[] | undefined): { family: Buffer; qualifier: Buffer[] }[] {
  if (columns === undefined) return [];
  if (!Array.isArray(columns)) throw invalidType('options.columns', 'an array of strings', columns);
  const byFamily = new Map<string, Buffer[]>();
  for (const [n, c] of columns.entries()) {
    if (typeof c !== 'string' || c.length === 0) throw invalidType(`options.columns[${n}]`, "'family' or 'family:qualifier'", c);
    const i = c.indexOf(':');
    const fam = i < 0 ? c : c.slice(0, i);
    const list = byFamily.get(fam) ?? [];
    if (i >= 0) list.push(Buffer.from(c.slice(i + 1)));
    byFamily.set(fam, list);
  }
  return [...byFamily].map(([family, qualifier]) => ({ family: Buffer.from(family), qualifier }));
}

export function getFields(row: Buffer, options: ReadOptions): Record<string, unknown> {
  const maxVersions = options.maxVersions ?? 1;
  if (!Number.isInteger(maxVersions) || maxVersions < 1) throw outOfRange('options.maxVersions', 'an integer >= 1', maxVersions);
  return { row, column: columnSpecs(options.columns), maxVersions };
}

export function putFields(row: Buffer, values: Record<string, Bytes>, timestamp: number | undefined, name: string): Record<string, unknown> {
  if (typeof values !== 'object' || values === null) throw invalidType(name, "an object of 'family:qualifier' -> value", values);
  if (timestamp !== undefined && (!Number.isSafeInteger(timestamp) || timestamp < 0)) throw outOfRange('timestamp', 'an integer >= 0 (ms)', timestamp);
  const byFamily = new Map<string, { qualifier: Buffer; value: Buffer; timestamp?: number }[]>();
  for (const [column, value] of Object.entries(values)) {
    const [family, qualifier] = splitColumn(`${name} key`, column);
    const list = byFamily.get(family.toString()) ?? [];
    const cell: { qualifier: Buffer; value: Buffer; timestamp?: number } = { qualifier, value: bytes(`${name}['${column}']`, value) };
    if (timestamp !== undefined) cell.timestamp = timestamp;
    list.push(cell);
    byFamily.set(family.toString(), list);
  }
  if (byFamily.size === 0) throw new HashGateError(ErrorCodes.INVALID_ARG, `${name} must have at least one column`, { details: { name } });
  return {
    row,
    mutateType: 'PUT',
    columnValue: [...byFamily].map(([family, qualifierValue]) => ({ family: Buffer.from(family), qualifierValue })),
  };
}

export function deleteFields(row: Buffer, columns?: string[], timestamp?: number): Record<string, unknown> {
  const columnValue: Record<string, unknown>[] = [];
  if (columns !== undefined) {
    if (!Array.isArray(columns)) throw invalidType('options.columns', 'an array of strings', columns);
    for (const spec of columnSpecs(columns)) {
      const base = timestamp === undefined ? {} : { timestamp };
      columnValue.push({
        family: spec.family,
        qualifierValue: spec.qualifier.length === 0
          ? [{ ...base, deleteType: 'DELETE_FAMILY' }]
          : spec.qualifier.map((q) => ({ ...base, qualifier: q, deleteType: 'DELETE_MULTIPLE_VERSIONS' })),
      });
    }
  }
  const out: Record<string, unknown> = { row, mutateType: 'DELETE', columnValue };
  if (timestamp !== undefined && columns === undefined) out['timestamp'] = timestamp;
  return out;
}

export function regionSpec(region: RegionLocation): Record<string, unknown> {
  return { type: 'REGION_NAME', value: region.name };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function parseResult(result: any): HBaseRow | null {
  const cells = result?.cell;
  if (!cells || cells.length === 0) return null;
  const out: HBaseRow = { key: toBuf(cells[0].row), columns: {}, cells: [] };
  for (const c of cells) {
    const family = toBuf(c.family).toString();
    const qualifier = toBuf(c.qualifier).toString();
    const value = toBuf(c.value);
    const cell: HBaseCell = { family, qualifier, value, timestamp: Number(c.timestamp?.toString() ?? 0) };
    out.cells.push(cell);
    const col = `${family}:${qualifier}`;
    // cells of one column come newest first
    if (!(col in out.columns)) out.columns[col] = value;
  }
  return out;
}
