import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * True when the module at `metaUrl` is the script node was started with. npm's bin shim and
 * checkouts behind symlinks make names unreliable, so real paths are compared.
 */
export function isMainModule(metaUrl: string): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(metaUrl));
  } catch {
    return false;
  }
}
