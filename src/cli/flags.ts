// The errors of a command's flag parsing: node:util parseArgs's errors rewritten as usage errors
// that name the flag as the user typed it and suggest the nearest known flag, instead of
// parseArgs's own wording (which quotes the argument back with an unbalanced quote).
import { ErrorCodes, HashGateTypeError } from '../errors.js';

type FlagSpec = { type: 'string' | 'boolean'; short?: string; multiple?: boolean; default?: string | boolean | string[] | boolean[] };
export type FlagSpecs = Record<string, FlagSpec>;

/** Edit distance (insertions, deletions, substitutions) between two short strings. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

/** The known flag closest to `typed` (a long name without dashes), if one is close enough to be a typo. */
export function nearestFlag(typed: string, specs: FlagSpecs): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const name of Object.keys(specs)) {
    const d = name.startsWith(typed) || typed.startsWith(name) ? Math.min(1, Math.abs(name.length - typed.length)) : distance(typed, name);
    if (d < bestD) {
      bestD = d;
      best = name;
    }
  }
  return best !== undefined && bestD <= Math.max(2, Math.floor(typed.length / 3)) ? `--${best}` : undefined;
}

const usage = (message: string, details: Record<string, unknown>): HashGateTypeError => new HashGateTypeError(ErrorCodes.INVALID_OPTION, message, details);

/** A parseArgs error as a usage error naming the flag; any other error unchanged. */
export function flagError(err: unknown, specs: FlagSpecs): unknown {
  const e = err as { code?: string; message?: string };
  const msg = e?.message ?? '';
  // parseArgs quotes the argument first: "Unknown option '--x'", "Option '--x <value>' argument missing"
  const quoted = /'([^' ]+)/.exec(msg)?.[1] ?? '';
  switch (e?.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      const flag = quoted.split('=')[0]!;
      const hint = flag.startsWith('--') ? nearestFlag(flag.slice(2), specs) : undefined;
      return usage(`unknown flag ${flag}${hint ? ` (did you mean ${hint}?)` : ''}`, { name: flag, ...(hint ? { suggestion: hint } : {}) });
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      const flag = quoted.replace(/^-\w, /, '');
      return /does not take an argument/.test(msg)
        ? usage(`${flag} takes no value`, { name: flag })
        : usage(`${flag} needs a value`, { name: flag });
    }
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return usage(`unexpected argument ${JSON.stringify(quoted)}: this command takes flags only`, { name: 'argument' });
    default:
      return err;
  }
}
