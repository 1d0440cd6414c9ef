// `hashgate hash`: digests of keys given as arguments or as stdin lines, for spot checks against
// the Java services (same bytes as Guava's murmur3_128(seed).hashString(key, UTF_8).toString()).
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { checkInt, checkOneOf, checkUint32 } from '../../errors.js';
import { flagError } from '../flags.js';
import { bucketOf, jumpBucket, murmur3_128Hex, murmur3_32, murmur3_x86_128, xxh64 } from '../../hash/index.js';

const ALGORITHMS = ['murmur3_128', 'murmur3_32', 'murmur3_x86_128', 'xxh64'] as const;

const FLAGS = {
  algorithm: { type: 'string', short: 'a', default: 'murmur3_128' },
  seed: { type: 'string', default: '0' },
  buckets: { type: 'string' },
  jump: { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

export async function run(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, strict: true, options: FLAGS });
  } catch (err) {
    throw flagError(err, FLAGS); // reported by main as a usage error
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(`usage: hashgate hash [--algorithm ${ALGORITHMS.join('|')}] [--seed N] [--buckets N [--jump]] [--json] [key ...]

Prints "<digest>\\t<key>" per key (keys from the arguments, else one per stdin line). murmur3_128
hex equals Guava's HashCode.toString(); murmur3_32 is unsigned decimal; xxh64 is 16 hex digits.
--buckets N adds the Java-compatible bucket (asLong() mod N) or, with --jump, the jump-hash bucket.
--json prints one JSON object per key instead (NDJSON: {"key","digest","bucket"?}).`);
    return 0;
  }
  const algorithm = checkOneOf('--algorithm', values.algorithm, ALGORITHMS);
  const seed = checkUint32('--seed', Number(values.seed));
  const buckets = values.buckets === undefined ? undefined : checkInt('--buckets', Number(values.buckets), 1, 0x7fff_ffff);
  const digest = (k: string): string => {
    switch (algorithm) {
      case 'murmur3_128':
        return murmur3_128Hex(k, seed);
      case 'murmur3_32':
        return String(murmur3_32(k, seed));
      case 'murmur3_x86_128':
        return Buffer.from(murmur3_x86_128(k, seed)).toString('hex');
      case 'xxh64':
        return xxh64(k, seed).toString(16).padStart(16, '0');
    }
  };
  const line = (k: string): string => {
    if (values.json) {
      const bucket = buckets === undefined ? undefined : values.jump ? jumpBucket(k, buckets) : bucketOf(k, buckets);
      return JSON.stringify(bucket === undefined ? { key: k, digest: digest(k) } : { key: k, digest: digest(k), bucket });
    }
    const b = buckets === undefined ? '' : `\t${values.jump ? jumpBucket(k, buckets) : bucketOf(k, buckets)}`;
    return `${digest(k)}${b}\t${k}`;
  };
  if (positionals.length > 0) {
    for (const k of positionals) console.log(line(k));
    return 0;
  }
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const k of rl) process.stdout.write(`${line(k)}\n`);
  return 0;
}
