// Expands `hashgate load` arguments into files: plain files, directories (their regular files,
// sorted by name, so Hive's 000000_0, 000001_0, ... load in order) and globs (* ? [..] and **).
import { readdir, stat } from 'node:fs/promises';
import { basename, join, resolve, sep, isAbsolute } from 'node:path';
import { ErrorCodes, HashGateError } from '../errors.js';

const GLOB_CHARS = /[*?[]/;

function segmentRegex(seg: string): RegExp {
  let re = '';
  for (let i = 0; i < seg.length; i++) {
    const c = seg[i]!;
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const j = seg.indexOf(']', i + 1);
      if (j < 0) re += '\\[';
      else {
        re += '[' + seg.slice(i + 1, j).replace(/^!/, '^').replace(/\\/g, '\\\\') + ']';
        i = j;
      }
    } else re += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

async function listDir(dir: string, input: string): Promise<{ name: string; isDir: boolean; isFile: boolean }[]> {
  let ents;
  try {
    ents = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // a glob whose directory is missing (or unreadable) names the input, not a raw scandir error
    const why = code === 'ENOENT' ? 'does not exist' : code === 'ENOTDIR' ? 'is not a directory' : code === 'EACCES' ? 'is not readable' : `cannot be listed (${code ?? 'error'})`;
    const pattern = input; // a file path or glob the operator typed, not row data
    throw new HashGateError(ErrorCodes.INVALID_ARG, `input ${JSON.stringify(pattern)}: directory ${dir} ${why}`, { cause: err, details: { input, dir, errno: code } });
  }
  return ents
    .map((e) => ({ name: e.name, isDir: e.isDirectory(), isFile: e.isFile() }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

async function expandGlob(pattern: string, skip: (p: string) => boolean): Promise<string[]> {
  const abs = isAbsolute(pattern) ? pattern : resolve(pattern);
  const parts = abs.split(sep);
  let i = 0;
  while (i < parts.length && !GLOB_CHARS.test(parts[i]!)) i++;
  const root = parts.slice(0, i).join(sep) || sep;
  const rest = parts.slice(i);
  const out: string[] = [];
  const walk = async (dir: string, segs: string[]): Promise<void> => {
    if (segs.length === 0) return;
    const [seg, ...more] = segs as [string, ...string[]];
    if (seg === '**') {
      await walk(dir, more);
      for (const e of await listDir(dir, pattern)) if (e.isDir && !e.name.startsWith('.')) await walk(join(dir, e.name), segs);
      return;
    }
    const re = segmentRegex(seg);
    for (const e of await listDir(dir, pattern)) {
      if (!re.test(e.name) || (e.name.startsWith('.') && !seg.startsWith('.'))) continue;
      const p = join(dir, e.name);
      if (more.length === 0) {
        if (e.isFile && !skip(p)) out.push(p);
      } else if (e.isDir) await walk(p, more);
    }
  };
  await walk(root, rest);
  return out;
}

/** File names the loader writes by default: never inputs when a directory or glob is expanded. */
export const OWN_FILE_NAMES: readonly string[] = [
  'hashgate-load.checkpoint.json',
  'hashgate-load.checkpoint.json.tmp',
  'hashgate-load.failed.txt',
  'hashgate-load.rejects.tsv',
];

export interface ExpandOptions {
  /** Absolute paths of the run's own output files (checkpoint, failed, rejects): skipped by
   *  directory and glob expansion, refused when named explicitly. */
  own?: readonly string[];
}

/** Absolute paths of every input file, in argument order, each once. */
export async function expandInputs(args: readonly string[], opts: ExpandOptions = {}): Promise<string[]> {
  const own = new Set<string>();
  for (const p of opts.own ?? []) {
    own.add(resolve(p));
    own.add(`${resolve(p)}.tmp`);
  }
  // the loader's own files, under the run's names or the default ones, are never data
  const skip = (p: string): boolean => own.has(p) || OWN_FILE_NAMES.includes(basename(p));
  const seen = new Set<string>();
  const out: string[] = [];
  const add = (p: string): void => {
    if (!seen.has(p)) {
      seen.add(p);
      out.push(p);
    }
  };
  for (const a of args) {
    let st;
    try {
      st = await stat(a);
    } catch {
      st = undefined;
    }
    if (st?.isFile()) {
      const p = resolve(a);
      if (own.has(p)) {
        throw new HashGateError(ErrorCodes.INVALID_ARG, `${p} is both an input and an output file of this load (checkpoint, failed or rejects); write those elsewhere`, {
          details: { path: p },
        });
      }
      add(p);
    } else if (st?.isDirectory()) {
      for (const e of await listDir(a, a)) if (e.isFile && !e.name.startsWith('.') && !skip(resolve(a, e.name))) add(resolve(a, e.name));
    } else if (GLOB_CHARS.test(a)) {
      const files = await expandGlob(a, skip);
      if (files.length === 0) throw new HashGateError(ErrorCodes.INVALID_ARG, `no file matches ${JSON.stringify(a)}`, { details: { input: a } });
      files.forEach(add);
    } else {
      throw new HashGateError(ErrorCodes.INVALID_ARG, `input ${JSON.stringify(a)} does not exist`, { details: { input: a } });
    }
  }
  return out;
}
