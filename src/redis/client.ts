// Creating every ioredis client hashgate makes itself: the dedup store's and the cache's fail-fast clients, the bus's connections, and the CLI commands' clients.
import { Redis, Cluster, type RedisOptions } from 'ioredis';
import { ErrorCodes, HashGateError, HashGateTypeError, invalidUrl } from '../errors.js';
import { redact } from '../util/redact.js';
import type { RedisConfig } from '../dedup/options.js';
import { CACHE_DEFAULTS } from '../cache/options.js';

export type RedisClient = Redis | Cluster;

export const isCluster = (c: RedisClient): c is Cluster => (c as Cluster).isCluster === true;

/**
 * An ioredis Redis or Cluster, recognised by shape: the application's own ioredis (another major,
 * or a second install of the same one) has its own classes, so `instanceof` against hashgate's copy
 * would refuse a perfectly good client.
 */
export function isRedisClient(v: unknown): v is RedisClient {
  if (v === null || typeof v !== 'object') return false;
  const c = v as Record<string, unknown>;
  return typeof c['isCluster'] === 'boolean' && typeof c['status'] === 'string' && typeof c['sendCommand'] === 'function' &&
    typeof c['pipeline'] === 'function' && typeof c['duplicate'] === 'function';
}

/** Refuses what ioredis would misread: a URL that is not redis:// or rediss:// (never echoes it: it may hold a password). */
export function checkRedisUrl(url: string, name = 'redis'): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `${name} must be a redis:// URL (or rediss://); the value given could not be parsed`, { name });
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    throw new HashGateTypeError(ErrorCodes.INVALID_OPTION, `${name} must be a redis:// or rediss:// URL, got a ${u.protocol} URL`, { name, scheme: u.protocol });
  }
}

export function createRedisClient(config: RedisConfig, commandTimeoutMs: number): RedisClient {
  // Fail fast instead of queueing forever: fail-open needs an answer within the timeout.
  // disconnectTimeout: ioredis arms it on disconnect() even for a socket that already closed (a
  // refused connection), and nothing clears it then; short, so close() never keeps a process
  // alive for long.
  // autoResendUnfulfilledCommands off: after a reconnect ioredis would send again the commands
  // whose replies the old connection lost. A first-seen script that did run would then run twice
  // and its second reply (all 0) would reach the caller: first-seen events lost. Such a command
  // fails instead (outcome unknown) and the dedup store resends it only with its request record.
  const ours: RedisOptions = {
    maxRetriesPerRequest: 1, commandTimeout: commandTimeoutMs, enableAutoPipelining: false, disconnectTimeout: 100, autoResendUnfulfilledCommands: false,
  };
  if (typeof config === 'string') {
    checkRedisUrl(config);
    try {
      return new Redis(config, ours);
    } catch (err) {
      throw invalidUrl('redis', 'a redis:// URL', err);
    }
  }
  if (config !== null && typeof config === 'object' && 'cluster' in config && Array.isArray(config.cluster)) {
    return new Cluster(config.cluster, {
      enableAutoPipelining: false,
      ...(config.options ?? {}),
      redisOptions: { ...ours, ...((config.options?.redisOptions as RedisOptions | undefined) ?? {}) },
    });
  }
  return new Redis({ ...ours, ...(config as RedisOptions) });
}

/**
 * A client that fails commands at once while disconnected (no offline queue) so a Redis outage
 * sends lookups to the cold tier instead of stalling them, and keeps reconnecting in the background.
 */
export function createFailFastRedis(url: string, timeoutMs: number = CACHE_DEFAULTS.redis.timeoutMs, name = 'redis.url'): Redis {
  try {
    return new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 2_000,
      commandTimeout: timeoutMs,
      retryStrategy: (times) => Math.min(50 * times, 1_000),
    });
  } catch (err) {
    throw invalidUrl(name, 'a redis:// URL', err);
  }
}

/** Cluster startup nodes from "host:port,host:port" (a missing host is 127.0.0.1, a missing port 6379). */
export function parseClusterNodes(list: string): Array<{ host: string; port: number }> {
  return list.split(',').map((hp) => {
    const [host, port] = hp.trim().split(':');
    return { host: host || '127.0.0.1', port: Number(port ?? 6379) };
  });
}

export interface CliRedisOptions {
  /** Standalone Redis URL (used when `cluster` is unset). */
  url?: string;
  /** Cluster startup nodes, "host:port,host:port". */
  cluster?: string;
  /** Per-command timeout of every connection. */
  commandTimeoutMs: number;
  /** Bound on the first connection, handshake included (default CLI_CONNECT_TIMEOUT_MS). */
  connectTimeoutMs?: number;
  /** Added to a standalone client's options. */
  standalone?: RedisOptions;
}

/** Startup nodes given as "host:port,..." (`--cluster`), or as a redis:// URL of any node (`bloom --cluster --redis URL`). */
function cliClusterNodes(list: string): Array<string | { host: string; port: number }> {
  return list.split(',').map((n) => (n.includes('://') ? n.trim() : parseClusterNodes(n)[0]!));
}

/** How long a CLI command waits for its first Redis connection (`--connect-timeout-ms`). */
export const CLI_CONNECT_TIMEOUT_MS = 5_000;

/**
 * The client of a CLI command, not connected yet: one retry per command, `commandTimeoutMs` per
 * command, and no reconnect before the first connection succeeded (a dead host or a wrong
 * password ends the command with its error instead of retrying; `disconnect()` does not stop a
 * client that is already reconnecting). Once connected, a dropped connection is re-made.
 */
export function createCliRedis(o: CliRedisOptions): RedisClient {
  const connectTimeout = o.connectTimeoutMs ?? CLI_CONNECT_TIMEOUT_MS;
  let connected = false;
  const perCommand: RedisOptions = { maxRetriesPerRequest: 1, commandTimeout: o.commandTimeoutMs, connectTimeout };
  const retry = (times: number): number | null => (connected ? Math.min(times * 50, 2000) : null);
  const client: RedisClient =
    o.cluster !== undefined
      ? new Cluster(cliClusterNodes(o.cluster), { lazyConnect: true, clusterRetryStrategy: retry, redisOptions: perCommand })
      : new Redis(o.url!, { ...perCommand, lazyConnect: true, retryStrategy: retry, ...o.standalone });
  client.once('ready', () => (connected = true));
  return client;
}

/**
 * A connected CLI client (see createCliRedis): resolves once Redis answered, or rejects within
 * `connectTimeoutMs` with HG_ERR_STORE_UNAVAILABLE naming the target (credentials masked) and the
 * first error the client saw (ECONNREFUSED, WRONGPASS, ...), never the client's internals. Every
 * command that talks to Redis connects through here, so a dead Redis reads the same in all of them.
 */
export async function connectCliRedis(o: CliRedisOptions): Promise<RedisClient> {
  const ms = o.connectTimeoutMs ?? CLI_CONNECT_TIMEOUT_MS;
  const target = o.cluster !== undefined ? `Redis Cluster ${o.cluster}` : String(o.url);
  const client = createCliRedis(o);
  let first: Error | undefined;
  const onError = (e: Error): void => {
    first ??= e;
  };
  client.on('error', onError);
  let timer: NodeJS.Timeout | undefined;
  const connecting = client.connect();
  connecting.catch(() => undefined); // after a timeout it may still reject; the race below reports it
  try {
    await Promise.race([
      connecting,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms (--connect-timeout-ms)`)), ms);
      }),
    ]);
  } catch (err) {
    client.disconnect();
    // the first error says why (ECONNREFUSED, WRONGPASS); the rejection often only says "closed"
    const why = first?.message ?? (err as Error).message;
    throw new HashGateError(ErrorCodes.STORE_UNAVAILABLE, redact(`cannot connect to ${target}: ${why}`), { cause: err, details: { connectTimeoutMs: ms } });
  } finally {
    clearTimeout(timer);
    client.off('error', onError);
  }
  client.on('error', () => undefined); // later failures surface through the commands
  return client;
}

/**
 * The probe client of `hashgate metrics`: connects on the first scrape, fails a scrape at once
 * while Redis is down (no offline queue, no retry) and keeps reconnecting behind it.
 */
export function createProbeRedis(url: string, timeoutMs: number): Redis {
  return new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    retryStrategy: (times) => Math.min(times * 200, 5000),
  });
}

/** A bus connection's options; its retry delays also pace the walk over a Cluster's nodes. */
export type BusConnectionOptions = RedisOptions & { retryStrategy: (times: number) => number };

/**
 * A connection of the invalidation bus: a copy of `from` with options `o`, or a new client of the
 * URL `from`. On a Cluster it is a plain connection to one node at a time, that moves to the next
 * node the cluster knows before every reconnect attempt (paced by `o.retryStrategy`). Classic
 * PUBLISH/SUBSCRIBE carry no key, so any node serves them and a PUBLISH on one reaches the
 * subscribers of every node, even while the cluster is failed for lack of a master; one connection
 * keeps "we were disconnected, so clear" exact. Sharded pub/sub (SSUBSCRIBE) would tie the whole
 * bus to the master of one slot and stop it whenever that slot is down. A killed node is therefore
 * left for a live one within a few retry delays, where the subscriber re-subscribes and its
 * listeners resync.
 */
export function createBusConnection(from: RedisClient | string, o: BusConnectionOptions): Redis {
  if (typeof from === 'string') return new Redis(from, o);
  if (!isCluster(from)) return from.duplicate(o);
  const c = from;
  const nodes = (): Array<{ host: string; port: number }> => {
    const seen = new Map<string, { host: string; port: number }>();
    const add = (n: unknown): void => {
      const a = typeof n === 'object' && n !== null ? (n as { host?: string; port?: number }) : { port: Number(n) };
      const node = { host: a.host ?? '127.0.0.1', port: a.port ?? 6379 };
      if (Number.isInteger(node.port)) seen.set(`${node.host}:${node.port}`, node);
    };
    // startupNodes is not public in ioredis's types; the nodes the client knows now come first
    for (const n of c.nodes('all')) add(n.options);
    for (const n of (c as unknown as { startupNodes?: unknown[] }).startupNodes ?? []) add(n);
    return [...seen.values()];
  };
  const first = nodes()[0] ?? { host: '127.0.0.1', port: 6379 };
  const conn: Redis = new Redis({
    ...c.options.redisOptions,
    ...o,
    host: first.host,
    port: first.port,
    retryStrategy: (times: number) => {
      // ioredis reads host and port from these options at each connect attempt
      const list = nodes();
      const at = list.findIndex((n) => n.host === conn.options.host && n.port === conn.options.port);
      const next = list[(at + 1) % list.length];
      if (next) {
        conn.options.host = next.host;
        conn.options.port = next.port;
      }
      return o.retryStrategy(times);
    },
  });
  return conn;
}
