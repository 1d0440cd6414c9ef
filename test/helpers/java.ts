// Builds and runs test/java/GuavaHarness.java against the real Guava jar, so tests can compare
// hashgate with Guava itself. Reusable by any suite that needs Guava's answers:
//
//   const java = await guavaHarness();            // null when java/javac are missing
//   const rows = await java.hash(['a', 'b'], { seed: 0 });   // murmur3_128 hex, murmur3_32, asLong
//   const out = await java.run(['check', file], keys.join('\n') + '\n');
//
// The jar comes from ~/.m2 when present, else `mvn dependency:copy` from Maven Central into
// .services/java/ (one ~3 MB download). Classes are cached there, keyed by the source's hash.
// The Maven, javac and java steps below are shared with the other JVM harnesses (redisson.ts).
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, copyFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const GUAVA_VERSION = process.env.HASHGATE_GUAVA_VERSION ?? '33.4.8-jre';

const DEPENDENCY_PLUGIN = '3.8.1';
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CACHE = join(ROOT, '.services/java');

export interface GuavaHash {
  /** murmur3_128 digest as hex (Guava HashCode.toString()). */
  hex128: string;
  /** murmur3_32_fixed asInt(), as an unsigned 32-bit number. */
  mm32: number;
  /** murmur3_128 asLong(), signed, as a bigint. */
  asLong: bigint;
}

export interface GuavaHarness {
  version: string;
  jar: string;
  /** Runs the harness with `stdin`; resolves stdout, rejects on a non-zero exit. */
  run(args: string[], stdin?: string | Uint8Array): Promise<string>;
  /** Keys must not contain '\n' unless given as Uint8Array (sent hex-encoded). */
  hash(keys: ReadonlyArray<string | Uint8Array>, opts?: { seed?: number }): Promise<GuavaHash[]>;
}

/** Whether `cmd` is installed (java/javac answer `-version`, mvn answers `-v`). */
export function hasCommand(cmd: string, arg = '-version'): boolean {
  return spawnSync(cmd, [arg], { stdio: 'ignore' }).status === 0;
}

/**
 * Runs one goal of the pinned maven-dependency-plugin in `cwd` (the default plugin version, 2.8,
 * drags in ancient Maven 2 artifacts). Throws, naming `what`, unless it exits 0 and `output` exists.
 */
export function mvnDependency(goal: string, props: string[], cwd: string, output: string, what: string, timeout: number): void {
  const r = spawnSync('mvn', ['-q', '-B', `org.apache.maven.plugins:maven-dependency-plugin:${DEPENDENCY_PLUGIN}:${goal}`, ...props], {
    cwd,
    encoding: 'utf8',
    timeout,
  });
  if (r.status !== 0 || !existsSync(output)) {
    throw new Error(`mvn dependency:${goal} for ${what} failed: ${r.stderr || r.stdout || r.error}`);
  }
}

/**
 * Compiles test/java/<main>.java against `deps` into cacheDir/classes-<tag>, where the tag hashes the
 * source and `key` (the dependency versions), so an edit or a version bump recompiles. Returns the
 * classpath to run it with.
 */
export function compileHarness(main: string, deps: string, cacheDir: string, key: string): string {
  const src = join(ROOT, 'test/java', `${main}.java`);
  const tag = createHash('sha256').update(readFileSync(src)).update(key).digest('hex').slice(0, 12);
  const classes = join(cacheDir, `classes-${tag}`);
  if (!existsSync(join(classes, `${main}.class`))) {
    mkdirSync(classes, { recursive: true });
    const r = spawnSync('javac', ['-nowarn', '-cp', deps, '-d', classes, src], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`javac ${main} failed: ${r.stderr}`);
  }
  return [classes, deps].join(delimiter);
}

/**
 * Runs `java <jvmFlags> -cp cp <main> <args>` with `stdin`; resolves { code, out } when the exit code
 * is in `okCodes`, else rejects with its stderr.
 */
export function runHarness(
  main: string,
  cp: string,
  jvmFlags: readonly string[],
  okCodes: readonly number[],
  args: string[],
  stdin?: string | Uint8Array,
): Promise<{ code: number; out: string }> {
  return new Promise((resolveRun, reject) => {
    // Serial GC and the C1-only JIT: these runs are short, so start-up dominates.
    const child = spawn('java', [...jvmFlags, '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-cp', cp, main, ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== null && okCodes.includes(code)) resolveRun({ code, out: Buffer.concat(out).toString('utf8') });
      else reject(new Error(`${main} ${args.join(' ')} exited ${code}: ${Buffer.concat(err).toString('utf8')}`));
    });
    child.stdin.end(stdin ?? '');
  });
}

function findJar(): string {
  const name = `guava-${GUAVA_VERSION}.jar`;
  const local = join(homedir(), '.m2/repository/com/google/guava/guava', GUAVA_VERSION, name);
  const cached = join(CACHE, name);
  if (existsSync(cached)) return cached;
  mkdirSync(CACHE, { recursive: true });
  if (existsSync(local) && process.env.HASHGATE_GUAVA_FROM_MVN !== '1') {
    copyFileSync(local, cached);
    return cached;
  }
  mvnDependency('copy', [`-Dartifact=com.google.guava:guava:${GUAVA_VERSION}`, `-DoutputDirectory=${CACHE}`], CACHE, cached, `guava ${GUAVA_VERSION}`, 300_000);
  return cached;
}

let harness: Promise<GuavaHarness | null> | undefined;

/** null when java/javac are not installed (callers decide whether that may skip). */
export function guavaHarness(): Promise<GuavaHarness | null> {
  harness ??= (async () => {
    if (!hasCommand('java') || !hasCommand('javac')) return null;
    const jar = findJar();
    const cp = compileHarness('GuavaHarness', jar, CACHE, GUAVA_VERSION);
    const run = async (args: string[], stdin?: string | Uint8Array): Promise<string> =>
      (await runHarness('GuavaHarness', cp, ['-Xss4m'], [0], args, stdin)).out;
    const version = (await run(['version'])).trim();
    return {
      version,
      jar,
      run,
      async hash(keys, opts = {}) {
        const hex = keys.some((k) => typeof k !== 'string');
        const lines = keys.map((k) => (hex ? Buffer.from(typeof k === 'string' ? Buffer.from(k) : k).toString('hex') : (k as string)));
        const args = ['hash', '--seed', String(opts.seed ?? 0), ...(hex ? ['--hex'] : [])];
        const text = await run(args, lines.join('\n') + (lines.length > 0 ? '\n' : ''));
        return text
          .split('\n')
          .filter((l) => l.length > 0)
          .map((l) => {
            const [h, m, a] = l.split(' ');
            return { hex128: h!, mm32: Number(m), asLong: BigInt(a!) };
          });
      },
    };
  })();
  return harness;
}
