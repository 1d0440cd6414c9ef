// After the publish build: ship types/webassembly.d.ts and reference it from every entry point's
// declaration file (the root and the subpath exports), so consumers type-check hashgate's
// declarations without the DOM lib.
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';

mkdirSync('dist/types', { recursive: true });
copyFileSync('types/webassembly.d.ts', 'dist/types/webassembly.d.ts');
const entries = [
  ['dist/src/index.d.ts', '../types/webassembly.d.ts'],
  ...readdirSync('dist/src/entries').filter((f) => f.endsWith('.d.ts')).map((f) => [`dist/src/entries/${f}`, '../../types/webassembly.d.ts']),
];
for (const [file, path] of entries) {
  const ref = `/// <reference path="${path}" />\n`;
  const text = readFileSync(file, 'utf8');
  if (!text.startsWith(ref)) writeFileSync(file, ref + text);
}
