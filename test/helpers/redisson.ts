// Builds and runs test/java/RedissonHarness.java against the real org.redisson:redisson jar (and
// its runtime dependencies) from Maven Central, so tests compare hashgate with Redisson itself.
//
//   const j = await redissonHarness();              // null when java/javac/mvn are missing
//   await j.run(['init', `127.0.0.1:${port}`, 'f', '1000', '0.01']);
//   const bits = await j.keys(['contains', addr, 'f'], ['a', '中文']);   // "10"
//
// The classpath is resolved once with `mvn dependency:build-classpath` over a two-dependency pom
// written to .services/java/redisson/, and cached there with the compiled classes.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileHarness, hasCommand, mvnDependency, runHarness } from './java.js';

export const REDISSON_VERSION = process.env.HASHGATE_REDISSON_VERSION ?? '3.52.0';
const SLF4J_NOP = '2.0.17';
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CACHE = join(ROOT, '.services/java/redisson');

export interface RedissonHarness {
  version: string;
  classpath: string;
  /** Runs the harness; resolves { code, out } (exit 3 = Redisson threw; out starts with "ERR"). */
  run(args: string[], stdin?: string): Promise<{ code: number; out: string }>;
  /** Runs a key-reading mode, rejecting on a non-zero exit; resolves trimmed stdout. */
  keys(args: string[], keys: readonly string[]): Promise<string>;
}

/** A key as the harness reads it: hex of its UTF-16 code units. */
export function utf16Hex(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) out += s.charCodeAt(i).toString(16).padStart(4, '0');
  return out;
}

function classpath(): string {
  mkdirSync(CACHE, { recursive: true });
  const cpFile = join(CACHE, `cp-${REDISSON_VERSION}.txt`);
  if (existsSync(cpFile)) {
    const cp = readFileSync(cpFile, 'utf8').trim();
    if (cp.split(delimiter).every((j) => existsSync(j))) return cp;
  }
  writeFileSync(
    join(CACHE, 'pom.xml'),
    `<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>hashgate.test</groupId><artifactId>redisson-harness</artifactId><version>1</version>
<dependencies>
<dependency><groupId>org.redisson</groupId><artifactId>redisson</artifactId><version>${REDISSON_VERSION}</version></dependency>
<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-nop</artifactId><version>${SLF4J_NOP}</version></dependency>
</dependencies></project>\n`,
  );
  mvnDependency('build-classpath', [`-Dmdep.outputFile=${cpFile}`], CACHE, cpFile, `redisson ${REDISSON_VERSION}`, 600_000);
  return readFileSync(cpFile, 'utf8').trim();
}

let harness: Promise<RedissonHarness | null> | undefined;

/** null when java, javac or mvn is missing (the caller decides whether that may skip). */
export function redissonHarness(): Promise<RedissonHarness | null> {
  harness ??= (async () => {
    if (!hasCommand('java') || !hasCommand('javac') || !hasCommand('mvn', '-v')) return null;
    const deps = classpath();
    const cp = compileHarness('RedissonHarness', deps, CACHE, deps);
    // Exit 3 is the harness reporting that Redisson threw: an answer, not a failure.
    const run = (args: string[], stdin?: string): Promise<{ code: number; out: string }> =>
      runHarness('RedissonHarness', cp, [], [0, 3], args, stdin);
    return {
      version: REDISSON_VERSION,
      classpath: cp,
      run,
      async keys(args, keys) {
        const r = await run(args, keys.map((k) => utf16Hex(k) + '\n').join(''));
        if (r.code !== 0) throw new Error(`RedissonHarness ${args[0]} failed: ${r.out.trim()}`);
        return r.out.trimEnd();
      },
    };
  })();
  return harness;
}
