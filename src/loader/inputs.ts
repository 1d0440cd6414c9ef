// Expands `hashgate load` arguments into files: plain files, directories (their regular files,
// sorted by name, so Hive's 000000_0, 000001_0, ... load in order) and globs (* ? [..] and **).
import { readdir, stat } from 'node:fs/promises';
import { join, resolve, sep, isAbsolute } from 'node:path';
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

async function listDir(dir: string): Promise<{ name: string; isDir: boolean; isFile: boolean }[]> {
  const ents = await readdir(dir, { withFileTypes: true });
  return ents
    .map((e) => ({ name: e.name, isDir: e.isDirectory(), isFile: e.isFile() }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

async function expandGlob(pattern: string): Promise<string[]> {
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
      for (const e of await listDir(dir)) if (e.isDir && !e.name.startsWith('.')) await walk(join(dir, e.name), segs);
      return;
    }
    const re = segmentRegex(seg);
    for (const e of await listDir(dir)) {
      if (!re.test(e.name) || (e.name.startsWith('.') && !seg.startsWith('.'))) continue;
      const p = join(dir, e.name);
      if (more.length === 0) {
        if (e.isFile) out.push(p);
      } else if (e.isDir) await walk(p, more);
    }
  };
  await walk(root, rest);
  return out;
}

/** Absolute paths of every input file, in argument order, each once. */
export async function expandInputs(args: readonly string[]): Promise<string[]> {
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
    if (st?.isFile()) add(resolve(a));
    else if (st?.isDirectory()) {
      for (const e of await listDir(a)) if (e.isFile && !e.name.startsWith('.')) add(resolve(a, e.name));
    } else if (GLOB_CHARS.test(a)) {
      const files = await expandGlob(a);
      if (files.length === 0) throw new HashGateError(ErrorCodes.INVALID_ARG, `no file matches ${JSON.stringify(a)}`, { details: { input: a } });
      files.forEach(add);
    } else {
      throw new HashGateError(ErrorCodes.INVALID_ARG, `input ${JSON.stringify(a)} does not exist`, { details: { input: a } });
    }
  }
  return out;
}
