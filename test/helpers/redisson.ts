// Builds and runs test/java/RedissonHarness.java against the real org.redisson:redisson jar (and
// its runtime dependencies) from Maven Central, so tests compare hashgate with Redisson itself.
//
//   const j = await redissonHarness();              // null when java/javac/mvn are missing
//   await j.run(['init', `127.0.0.1:${port}`, 'f', '1000', '0.01']);
//   const bits = await j.keys(['contains', addr, 'f'], ['a', '中文']);   // "10"
//
// The classpath is resolved once with `mvn dependency:build-classpath` over a two-dependency pom
// written to .services/java/redisson/, and cached there with the compiled classes.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REDISSON_VERSION = process.env.HASHGATE_REDISSON_VERSION ?? '3.52.0';
const SLF4J_NOP = '2.0.17';
const DEPENDENCY_PLUGIN = '3.8.1';
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SRC = join(ROOT, 'test/java/RedissonHarness.java');
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

const has = (cmd: string, arg = '-version'): boolean => spawnSync(cmd, [arg], { stdio: 'ignore' }).status === 0;

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
  const r = spawnSync(
    'mvn',
    ['-q', '-B', `org.apache.maven.plugins:maven-dependency-plugin:${DEPENDENCY_PLUGIN}:build-classpath`, `-Dmdep.outputFile=${cpFile}`],
    { cwd: CACHE, encoding: 'utf8', timeout: 600_000 },
  );
  if (r.status !== 0 || !existsSync(cpFile)) {
    throw new Error(`mvn build-classpath for redisson ${REDISSON_VERSION} failed: ${r.stderr || r.stdout || r.error}`);
  }
  return readFileSync(cpFile, 'utf8').trim();
}

let harness: Promise<RedissonHarness | null> | undefined;

/** null when java, javac or mvn is missing (the caller decides whether that may skip). */
export function redissonHarness(): Promise<RedissonHarness | null> {
  harness ??= (async () => {
    if (!has('java') || !has('javac') || !has('mvn', '-v')) return null;
    const deps = classpath();
    const tag = createHash('sha256').update(readFileSync(SRC)).update(deps).digest('hex').slice(0, 12);
    const classes = join(CACHE, `classes-${tag}`);
    if (!existsSync(join(classes, 'RedissonHarness.class'))) {
      mkdirSync(classes, { recursive: true });
      const r = spawnSync('javac', ['-nowarn', '-cp', deps, '-d', classes, SRC], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`javac RedissonHarness failed: ${r.stderr}`);
    }
    const cp = [classes, deps].join(delimiter);
    const run = (args: string[], stdin?: string): Promise<{ code: number; out: string }> =>
      new Promise((resolveRun, reject) => {
        const child = spawn('java', ['-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-cp', cp, 'RedissonHarness', ...args], {
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        const out: Buffer[] = [];
        const err: Buffer[] = [];
        child.stdout.on('data', (d: Buffer) => out.push(d));
        child.stderr.on('data', (d: Buffer) => err.push(d));
        child.on('error', reject);
        child.on('close', (code) => {
          const text = Buffer.concat(out).toString('utf8');
          if (code === 0 || code === 3) resolveRun({ code, out: text });
          else reject(new Error(`RedissonHarness ${args.join(' ')} exited ${code}: ${Buffer.concat(err).toString('utf8')}`));
        });
        child.stdin.end(stdin ?? '');
      });
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
