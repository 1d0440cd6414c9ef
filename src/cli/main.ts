#!/usr/bin/env node
// `hashgate <command> [flags]`. Each command lives in ./commands/<name>.js and exports
// run(argv) -> exit code, so commands load lazily and a slow import never taxes the others.
import { ErrorCodes, HashGateTypeError } from '../errors.js';
import { isMainModule } from '../util/main-module.js';
import { redact } from '../util/redact.js';
import { flagError } from './flags.js';
import { fail, failureCode, failureMessage, wantsJson } from './output.js';

const COMMANDS: Record<string, string> = {
  demo: 'generate name+ID transactions and run first-seen-this-year dedup (embedded, no servers)',
  hash: 'print MurmurHash3 / xxHash digests of keys (args or stdin lines)',
  load: 'bulk-load pipe-delimited export files into the dedup store',
  buckets: 'analyse bucket balance: murmur mod N vs jump hash vs a hash ring',
  'gen-export': 'write a synthetic pipe-delimited export (for load tests)',
  stats: 'exact and approximate member counts of a dedup window',
  export: 'move the durable embedded store (--store) to Redis, or its raw keys to a file',
  recover: 'replay the fail-open journal into Redis',
  migrate: 'move near-expiry hot keys from Redis to HBase',
  metrics: 'serve Prometheus metrics over HTTP',
  bloom: 'rebuild a shared Redis-held Bloom filter (Redisson layout) and swap it in atomically; show its last rebuild',
};

function usage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  return [
    'usage: hashgate <command> [flags]   (hashgate help <command> or hashgate <command> --help for flags)',
    '',
    ...Object.entries(COMMANDS).map(([c, d]) => `  ${c.padEnd(width)}  ${d}`),
  ].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  // `hashgate help load` is `hashgate load --help`; `hashgate help bloom rebuild` is `hashgate bloom rebuild --help`
  if (cmd === 'help' && rest[0] !== undefined) return main([...rest, '--help']);
  if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    console.log(usage());
    return cmd === undefined ? 2 : 0;
  }
  if (cmd === '--version' || cmd === '-v') {
    const { createRequire } = await import('node:module');
    console.log((createRequire(import.meta.url)('../../../package.json') as { version: string }).version);
    return 0;
  }
  if (!Object.hasOwn(COMMANDS, cmd)) {
    return fail('', new HashGateTypeError(ErrorCodes.INVALID_ARG, `unknown command '${cmd}'`, { name: 'command' }), 2, { json: wantsJson(rest), help: usage() });
  }
  let mod: { run(argv: string[]): Promise<number> };
  try {
    mod = (await import(`./commands/${cmd}.js`)) as typeof mod;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') {
      return fail('', new HashGateTypeError(ErrorCodes.INVALID_ARG, `command '${cmd}' is not available in this build`, { name: 'command' }), 2, { json: wantsJson(rest) });
    }
    throw err;
  }
  return mod.run(rest);
}


if (isMainModule(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      // a command that threw instead of returning its exit code: a coded error (a bad flag or
      // value) is a usage error; anything else is a bug, reported with its stack
      const [cmd, ...rest] = process.argv.slice(2);
      const json = wantsJson(rest);
      if (err instanceof Error && typeof (err as { code?: unknown }).code === 'string') {
        process.exitCode = fail(cmd ?? '', flagError(err, {}), 2, { json });
      } else {
        console.error(redact(err instanceof Error ? (err.stack ?? err.message) : String(err)));
        if (json) console.log(JSON.stringify({ ok: false, code: failureCode(err, 1), message: failureMessage(err), exitCode: 1 }));
        process.exitCode = 1;
      }
    },
  );
}
