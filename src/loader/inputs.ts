// Expands `hashgate load` arguments into files: plain files, directories (their regular files,
// sorted by name, so Hive's 000000_0, 000001_0, ... load in order) and globs (* ? [..] and **).
// A symbolic link to a regular file is that file, as for cat, Hive and Spark: a directory of links
// is a common way to stage a load. Links to directories are not walked (no cycles), and a link
// whose target is missing is an error naming it, never a silently smaller load.
import { lstat, readdir, realpath, stat } from 'node:fs/promises';
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

interface Entry {
  name: string;
  isDir: boolean;
  isFile: boolean;
  /** A symbolic link whose target cannot be read: the error to raise if the entry is selected. */
  broken?: HashGateError;
}

/** The entry as an input file: true for a regular file (or a link to one); throws for a broken link. */
function selectable(e: Entry): boolean {
  if (e.broken) throw e.broken;
  return e.isFile;
}

async function listDir(dir: string, input: string): Promise<Entry[]> {
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
  const out = await Promise.all(
    ents.map(async (e): Promise<Entry> => {
      if (!e.isSymbolicLink()) return { name: e.name, isDir: e.isDirectory(), isFile: e.isFile() };
      const link = join(dir, e.name);
      let target;
      try {
        target = await stat(link);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        const why = code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? 'error'})`;
        const pattern = input; // a file path or glob the operator typed, not row data
        const broken = new HashGateError(ErrorCodes.INVALID_ARG, `input ${JSON.stringify(pattern)}: ${link} is a symbolic link whose target ${why}`, {
          cause: err,
          details: { input, path: link, errno: code },
        });
        return { name: e.name, isDir: false, isFile: false, broken };
      }
      return { name: e.name, isDir: false, isFile: target.isFile() };
    }),
  );
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
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
        if (!skip(p) && selectable(e)) out.push(p);
      } else if (e.isDir) await walk(p, more);
    }
  };
  await walk(root, rest);
  return out;
}

const lstatOrUndefined = (p: string) => lstat(p).catch(() => undefined);

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
  // each file once, however many links or arguments name it
  const seen = new Set<string>();
  const out: string[] = [];
  const add = async (p: string): Promise<void> => {
    const real = await realpath(p).catch(() => p);
    if (!seen.has(real)) {
      seen.add(real);
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
      await add(p);
    } else if (st?.isDirectory()) {
      const files = (await listDir(a, a)).filter((e) => !e.name.startsWith('.') && !skip(resolve(a, e.name)) && selectable(e));
      // an empty staging directory is a mistake to report, not a load of nothing that succeeds
      if (files.length === 0) {
        throw new HashGateError(ErrorCodes.INVALID_ARG, `input ${JSON.stringify(a)}: directory ${resolve(a)} has no file to load (hidden files, subdirectories and the load's own files are skipped)`, {
          details: { input: a, dir: resolve(a) },
        });
      }
      for (const e of files) await add(resolve(a, e.name));
    } else if (GLOB_CHARS.test(a)) {
      const files = await expandGlob(a, skip);
      if (files.length === 0) throw new HashGateError(ErrorCodes.INVALID_ARG, `no file matches ${JSON.stringify(a)}`, { details: { input: a } });
      for (const f of files) await add(f);
    } else if (await lstatOrUndefined(a)) {
      throw new HashGateError(ErrorCodes.INVALID_ARG, `input ${JSON.stringify(a)} is a symbolic link whose target does not exist`, { details: { input: a } });
    } else {
      throw new HashGateError(ErrorCodes.INVALID_ARG, `input ${JSON.stringify(a)} does not exist`, { details: { input: a } });
    }
  }
  return out;
}
