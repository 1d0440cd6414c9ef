// Deterministic stream of name+ID transactions with a known duplicate rate. Ground truth comes
// from identity indices the generator itself tracks, never from hashing, so a wrong hash or store
// shows up as a mismatch instead of agreeing with itself.

import { prng } from '../util/prng.js';

export { prng };

const SURNAMES = '王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤';
const GIVEN = '伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉萍红兰飞鹏辉波宁欣怡子涵浩宇梓轩思雨一诺晨阳佳琪雪婷建国志强秀兰';
const AREAS = ['110101', '310104', '440305', '330106', '510107', '420106', '320102', '610113'];
const WEIGHTS = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
const CHECK = '10X98765432';

/** A valid 18-digit PRC resident ID (GB 11643 checksum) that is unique per identity index. */
export function idNumber(identity: number): string {
  const area = AREAS[identity % AREAS.length]!;
  const day = 1 + (Math.floor(identity / AREAS.length) % 28);
  const month = 1 + (Math.floor(identity / (AREAS.length * 28)) % 12);
  const year = 1950 + (Math.floor(identity / (AREAS.length * 28 * 12)) % 55);
  const seq = Math.floor(identity / (AREAS.length * 28 * 12 * 55)) % 1000;
  const body = `${area}${year}${String(month).padStart(2, '0')}${String(day).padStart(2, '0')}${String(seq).padStart(3, '0')}`;
  let sum = 0;
  for (let i = 0; i < 17; i++) sum += Number(body[i]) * WEIGHTS[i]!;
  return body + CHECK[sum % 11]!;
}

export function nameOf(identity: number): string {
  const s = SURNAMES[identity % SURNAMES.length]!;
  const g1 = GIVEN[Math.floor(identity / SURNAMES.length) % GIVEN.length]!;
  const g2 = GIVEN[Math.floor(identity / (SURNAMES.length * GIVEN.length)) % GIVEN.length]!;
  return identity % 3 === 0 ? s + g1 : s + g1 + g2;
}

/** Identities are unique for indices below this bound (the ID number encodes the index). */
export const MAX_UNIQUE_IDENTITIES = AREAS.length * 28 * 12 * 55 * 1000;

export interface Transaction {
  key: string;
  identity: number;
  at: number;
}

export interface GeneratorOptions {
  items: number;
  duplicateRate: number;
  seed?: number;
  /** Transactions are spread evenly over [start, end). */
  start?: number;
  end?: number;
}

/**
 * Yields batches of transactions. A fraction `duplicateRate` of items repeats an earlier identity
 * (chosen uniformly); the rest are fresh identities.
 */
export function* transactions(opts: GeneratorOptions, batchSize = 8192): Generator<Transaction[]> {
  if (opts.items > MAX_UNIQUE_IDENTITIES) throw new RangeError(`items must be <= ${MAX_UNIQUE_IDENTITIES}`);
  const rnd = prng(opts.seed ?? 20260101);
  const start = opts.start ?? Date.UTC(2025, 11, 31, 16); // 2026-01-01 00:00 Asia/Shanghai
  const end = opts.end ?? Date.UTC(2026, 11, 31, 16);
  const step = (end - start) / Math.max(1, opts.items);
  let fresh = 0;
  let batch: Transaction[] = [];
  for (let i = 0; i < opts.items; i++) {
    const repeat = fresh > 0 && rnd() < opts.duplicateRate;
    const identity = repeat ? Math.floor(rnd() * fresh) : fresh++;
    batch.push({ key: nameOf(identity) + idNumber(identity), identity, at: start + Math.floor(i * step) });
    if (batch.length === batchSize) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}
