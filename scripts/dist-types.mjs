// After the publish build: ship types/webassembly.d.ts and reference it from the package's root
// declaration file, so consumers type-check hashgate's declarations without the DOM lib.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';

mkdirSync('dist/types', { recursive: true });
copyFileSync('types/webassembly.d.ts', 'dist/types/webassembly.d.ts');
const index = 'dist/src/index.d.ts';
const ref = '/// <reference path="../types/webassembly.d.ts" />\n';
const text = readFileSync(index, 'utf8');
if (!text.startsWith(ref)) writeFileSync(index, ref + text);
