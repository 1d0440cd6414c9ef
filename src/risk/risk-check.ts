// Point checks: risk records keyed `scene_userId_timestamp` (13-digit ms, so keys of
// one (scene, user) sort by time); families `base` (scene, userId) and `risk` (level, reason).
// The latest record of (scene, userId) is the first row of ONE reversed prefix scan with limit 1:
// no guessing a time window around "now" for a Get.
//
// Create the table with: HBaseDdl create risk_check -f base:bloom=ROW -f risk:bloom=ROW
import { HashGateError, ErrorCodes, checkInt, invalidType } from '../errors.js';
import type { HBaseStore } from '../hbase/client.js';

export const RISK_CHECK_DEFAULTS = {
  table: 'risk_check',
  batch: 500,
  /** concurrent scans in latestRiskBatch */
  concurrency: 16,
} as const;

export interface RiskRecord {
  scene: string;
  userId: string;
  /** ms since epoch */
  ts: number;
  level: string;
  reason?: string;
}

export interface RiskCheckOptions {
  store: HBaseStore;
  table?: string;
  batch?: number;
  concurrency?: number;
}

const SEP = '_';

function part(name: string, v: unknown): string {
  if (typeof v !== 'string' || v.length === 0) throw invalidType(name, 'a non-empty string', v);
  if (v.includes(SEP)) throw new HashGateError(ErrorCodes.INVALID_ARG, `${name} must not contain '${SEP}'`, { details: { name } });
  return v;
}

export function riskRowKey(scene: string, userId: string, ts: number): string {
  return `${part('scene', scene)}${SEP}${part('userId', userId)}${SEP}${String(checkInt('ts', ts, 0, 9_999_999_999_999)).padStart(13, '0')}`;
}

export class RiskCheck {
  readonly table: string;
  readonly #store: HBaseStore;
  readonly #batch: number;
  readonly #concurrency: number;

  constructor(options: RiskCheckOptions) {
    if (typeof options !== 'object' || options === null || typeof options.store?.scan !== 'function') {
      throw invalidType('options.store', 'an HBaseStore', options?.store);
    }
    this.#store = options.store;
    this.table = options.table ?? RISK_CHECK_DEFAULTS.table;
    this.#batch = checkInt('options.batch', options.batch ?? RISK_CHECK_DEFAULTS.batch, 1, 100_000);
    this.#concurrency = checkInt('options.concurrency', options.concurrency ?? RISK_CHECK_DEFAULTS.concurrency, 1, 1024);
  }

  async recordRisks(records: readonly RiskRecord[]): Promise<void> {
    if (!Array.isArray(records)) throw invalidType('records', 'an array', records);
    const rows = records.map((r, i) => {
      if (typeof r !== 'object' || r === null) throw invalidType(`records[${i}]`, 'an object', r);
      if (typeof r.level !== 'string') throw invalidType(`records[${i}].level`, 'a string', r.level);
      const values: Record<string, string> = { 'base:scene': r.scene, 'base:userId': r.userId, 'risk:level': r.level };
      if (r.reason !== undefined) values['risk:reason'] = r.reason;
      return { row: riskRowKey(r.scene, r.userId, r.ts), values, timestamp: r.ts };
    });
    for (let i = 0; i < rows.length; i += this.#batch) await this.#store.mput(this.table, rows.slice(i, i + this.#batch));
  }

  /** Latest record of (scene, userId), or null: one reversed prefix scan, limit 1. */
  async latestRisk(scene: string, userId: string): Promise<RiskRecord | null> {
    const prefix = `${part('scene', scene)}${SEP}${part('userId', userId)}${SEP}`;
    const [row] = await this.#store.scan(this.table, { prefix, reversed: true, limit: 1 });
    if (!row) return null;
    const level = row.columns['risk:level'];
    const reason = row.columns['risk:reason'];
    const rec: RiskRecord = { scene, userId, ts: Number(row.key.toString().slice(prefix.length)), level: level?.toString() ?? '' };
    if (reason !== undefined) rec.reason = reason.toString();
    return rec;
  }

  /** latestRisk for many pairs, at most `concurrency` scans in flight; results in input order. */
  async latestRiskBatch(pairs: readonly { scene: string; userId: string }[]): Promise<(RiskRecord | null)[]> {
    if (!Array.isArray(pairs)) throw invalidType('pairs', 'an array', pairs);
    const out: (RiskRecord | null)[] = new Array(pairs.length).fill(null);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < pairs.length) {
        const i = next++;
        const p = pairs[i]!;
        out[i] = await this.latestRisk(p.scene, p.userId);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, pairs.length) }, worker));
    return out;
  }
}
