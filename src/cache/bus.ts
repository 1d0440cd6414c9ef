// Cross-process L1 invalidation over Redis pub/sub: every instance publishes the (table, keys) it
// wrote or invalidated, every other instance drops its local positive and negative entries for
// them. Pub/sub is fire-and-forget, so a subscriber that lost its connection may have missed
// messages: when it is subscribed again it tells its listeners to clear everything local (the
// "clear on reconnect" strategy of near caches such as Redisson's local cached map).
//
// Message payload: the raw keys, not digests. The local tier is keyed by the raw key, so a peer
// needs the key itself to delete it (digests would cost a digest->key map per cached entry). The
// same keys already sit in Redis as part of the value key names, so the payload exposes nothing new
// to whoever can read Redis; they are never logged, and errors/metrics only carry counts.
// Wire format: JSON [1, origin, sentAtMs, table, keys]; sentAtMs (epoch ms, sub-ms precision)
// gives the delivery-lag histogram (meaningful across hosts only with synchronised clocks).
//
// Optional replay log (`replay`, standalone Redis): every publish is also appended to a capped
// stream by the same script that publishes it, as [2, streamId, logEpoch, origin, sentAtMs, table,
// keys]. A subscriber remembers the last stream id it saw; after a reconnect it replays what it
// missed instead of clearing, unless the log cannot prove it covers the gap (entries trimmed past
// that id, the log recreated under a new epoch after a Redis restart, or more than maxEntries
// missed): then it clears as without a log.
import { randomBytes } from 'node:crypto';
import { createHistogram, performance, type RecordableHistogram } from 'node:perf_hooks';
import type { Cluster, Redis } from 'ioredis';
import { createBusConnection, type BusConnectionOptions } from '../redis/client.js';
import { LuaScript, runScript } from '../redis/scripts.js';
import { ErrorCodes, HashGateError, checkInt, checkOneOf, invalidType } from '../errors.js';

export const BUS_DEFAULTS = {
  channel: 'hg:bus:inv',
  /** A bigger invalidation is split into several messages (bounded payload per PUBLISH). */
  maxKeysPerMessage: 1_000,
  /** Messages kept while the publishing connection is down; beyond that they are dropped and counted. */
  maxPendingMessages: 1_000,
  /** 'clear': drop every local entry after a re-subscription. 'none': keep them (stale until TTL). */
  onReconnect: 'clear',
  /** PING on the subscriber connection; no answer within the interval forces a reconnect (and a clear). */
  heartbeatMs: 2_000,
} as const;

const WIRE_VERSION = 1;
const WIRE_LOGGED = 2;

// KEYS: log, epoch. ARGV: body ("[origin,sentAt,table,keys]"), channel, maxEntries, fresh epoch.
const LOG_PUBLISH = new LuaScript(`redis.call('SET', KEYS[2], ARGV[4], 'NX')
local ep = redis.call('GET', KEYS[2])
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'm', ARGV[1])
redis.call('PUBLISH', ARGV[2], '[2,"' .. id .. '","' .. ep .. '",' .. string.sub(ARGV[1], 2))
return id`);

// KEYS: log, epoch. ARGV: last id seen, max entries, fresh epoch. -> {epoch, maxDeletedId,
// lastGeneratedId, entries}. Readers create the epoch too, so a log lost with a Redis restart
// always comes back under another epoch, even if it did not exist when we last read it.
const LOG_READ = new LuaScript(`redis.call('SET', KEYS[2], ARGV[3], 'NX')
local ep = redis.call('GET', KEYS[2])
if redis.call('EXISTS', KEYS[1]) == 0 then return {ep, '0-0', '0-0', {}} end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local del, last = '0-0', '0-0'
for i = 1, #info, 2 do
  if info[i] == 'max-deleted-entry-id' then del = info[i + 1] end
  if info[i] == 'last-generated-id' then last = info[i + 1] end
end
return {ep, del, last, redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', tonumber(ARGV[2]) + 1)}`);

/** Stream ids "ms-seq" compared numerically. */
function cmpId(a: string, b: string): number {
  const [am = '0', as = '0'] = a.split('-');
  const [bm = '0', bs = '0'] = b.split('-');
  const d = Number(am) - Number(bm);
  return d !== 0 ? Math.sign(d) : Math.sign(Number(as) - Number(bs));
}

export interface InvalidationBusOptions {
  /** Connection to copy (duplicate()): the bus opens its own publisher and subscriber connections. */
  redis?: Redis | Cluster;
  /** Or a redis:// URL for the bus's own connections. */
  url?: string;
  /** Pub/sub channel; instances that must invalidate each other use the same one. */
  channel?: string;
  maxKeysPerMessage?: number;
  maxPendingMessages?: number;
  onReconnect?: 'clear' | 'none';
  /** 0 disables the heartbeat (a silently dead link is then only noticed by TCP). */
  heartbeatMs?: number;
  /**
   * Log publishes in a capped Redis stream (`${channel}:log`, about maxEntries long) and replay
   * missed messages after a reconnect instead of clearing. Standalone Redis only (the script
   * publishes and appends together; on a Cluster the bus moves between nodes, so a gap always
   * clears). Every bus of the fleet should log, or gaps force clears.
   */
  replay?: false | { maxEntries?: number };
}

/** Receives invalidations from other processes (and from other publishers in this process). */
export interface BusListener {
  /** Drop local entries of `keys` in `table`. */
  keys(table: string, keys: readonly string[]): void;
  /**
   * The bus may have missed messages: drop every local entry. Called on every successful
   * subscription (the first one too, for listeners registered before it).
   */
  resync(): void;
}

export interface BusStats {
  /** Subscribed and the publisher connected: messages flow both ways. */
  connected: boolean;
  /** The publisher connection alone is up (publishes go out now instead of queueing). */
  publisherConnected: boolean;
  /** PUBLISH commands acknowledged by Redis and keys they carried. */
  sent: number;
  sentKeys: number;
  /** Messages from other instances applied to local listeners, and their keys. */
  received: number;
  receivedKeys: number;
  /** Our own messages echoed back by Redis (ignored). */
  ownEchoes: number;
  /** Messages that never reached Redis (publish failed or the pending queue was full). */
  droppedSend: number;
  /** Received messages that were not ours to read (wrong version or shape). */
  droppedMalformed: number;
  /** Messages waiting for the publisher connection. */
  pending: number;
  /** Re-subscriptions after a lost connection (the first subscription is not counted). */
  resyncs: number;
  /** Re-subscriptions answered by replaying the log instead of clearing, and messages replayed. */
  replays: number;
  replayedMessages: number;
  /** Re-subscriptions after which listeners were told to drop everything (no log, or a gap). */
  localClears: number;
  /** Publisher-to-subscriber delay of received messages, ms (sender's clock to ours). */
  lagMs: { count: number; p50: number; p99: number; max: number };
}

const noop = (): void => undefined;
const nowMs = (): number => performance.timeOrigin + performance.now();

type Client = Redis | Cluster;

export class InvalidationBus {
  /** Random per instance: our own messages come back from Redis and are skipped by it. */
  readonly origin: string = randomBytes(8).toString('base64url');
  readonly channel: string;
  readonly #pub: Redis;
  readonly #sub: Redis;
  readonly #maxKeys: number;
  readonly #maxPending: number;
  readonly #clearOnReconnect: boolean;
  readonly #listeners = new Set<BusListener>();
  readonly #pending: Array<{ p: string; n: number }> = [];
  readonly #lag: RecordableHistogram = createHistogram({ lowest: 1, highest: 3_600_000_000, figures: 3 });
  #subscribedOnce = false;
  #subscribed = false;
  #ready: Promise<void>;
  #heartbeat: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #s = { sent: 0, sentKeys: 0, received: 0, receivedKeys: 0, ownEchoes: 0, droppedSend: 0, droppedMalformed: 0, resyncs: 0, replays: 0, replayedMessages: 0, localClears: 0 };
  /** Replay log: its key, epoch key, size; the last stream id and epoch this bus has seen. */
  readonly #log: { key: string; epochKey: string; max: number } | undefined;
  #lastId: string | undefined;
  #epoch = '';
  /** Position in the log when the subscriber connection was lost: the gap starts there. */
  #gapFrom: { id: string; epoch: string } | undefined;

  constructor(opts: InvalidationBusOptions) {
    if (opts === null || typeof opts !== 'object') throw invalidType('bus', 'an object', opts);
    this.channel = opts.channel ?? BUS_DEFAULTS.channel;
    if (typeof this.channel !== 'string' || this.channel.length === 0) throw invalidType('bus.channel', 'a non-empty string', opts.channel);
    this.#maxKeys = checkInt('bus.maxKeysPerMessage', opts.maxKeysPerMessage ?? BUS_DEFAULTS.maxKeysPerMessage, 1, 1_000_000);
    this.#maxPending = checkInt('bus.maxPendingMessages', opts.maxPendingMessages ?? BUS_DEFAULTS.maxPendingMessages, 0, 10_000_000);
    this.#clearOnReconnect = checkOneOf('bus.onReconnect', opts.onReconnect ?? BUS_DEFAULTS.onReconnect, ['clear', 'none'] as const) === 'clear';
    const heartbeatMs = checkInt('bus.heartbeatMs', opts.heartbeatMs ?? BUS_DEFAULTS.heartbeatMs, 0, 3_600_000);
    const rp = opts.replay ?? false;
    if (rp !== false) {
      if (rp === null || typeof rp !== 'object') throw invalidType('bus.replay', 'false or { maxEntries }', rp);
      if ((opts.redis as Cluster | undefined)?.isCluster === true) throw invalidType('bus.replay', 'false on a Redis Cluster (the log script needs one node)', rp);
      const max = checkInt('bus.replay.maxEntries', rp.maxEntries ?? 10_000, 1, 10_000_000);
      this.#log = { key: `${this.channel}:log`, epochKey: `${this.channel}:log:epoch`, max };
    }

    // Publisher: no offline queue (we keep our own bounded one); auto-pipelining batches the
    // PUBLISHes of one tick into one write. Subscriber: we resubscribe ourselves so we know when
    // the subscription is live again and can clear after it, never before.
    const pubOpts: BusConnectionOptions = { lazyConnect: false, enableOfflineQueue: false, enableAutoPipelining: true, maxRetriesPerRequest: 0, retryStrategy: retry };
    // no per-command timeout on the subscriber (a copied fail-fast client may carry one): a slow
    // PING on a loaded box must not look like a dead link; the heartbeat judges liveness itself
    const subOpts: BusConnectionOptions = { lazyConnect: false, enableOfflineQueue: true, autoResubscribe: false, maxRetriesPerRequest: null, retryStrategy: retry, commandTimeout: undefined };
    if (opts.redis !== undefined) {
      const r = opts.redis;
      if (r === null || typeof r !== 'object' || typeof (r as Redis).duplicate !== 'function') {
        throw invalidType('bus.redis', 'an ioredis Redis or Cluster', r);
      }
      this.#pub = createBusConnection(r, pubOpts);
      this.#sub = createBusConnection(r, subOpts);
    } else if (typeof opts.url === 'string') {
      this.#pub = createBusConnection(opts.url, pubOpts);
      this.#sub = createBusConnection(opts.url, subOpts);
    } else {
      throw invalidType('bus.redis', 'an ioredis client (or bus.url a string)', opts.redis);
    }
    // connection errors are reported through stats (connected, resyncs, droppedSend)
    this.#pub.on('error', noop);
    this.#sub.on('error', noop);
    this.#pub.on('ready', () => this.#flush());
    this.#sub.on('messageBuffer', (ch: Buffer, msg: Buffer) => this.#onMessage(ch, msg));
    this.#sub.on('close', () => {
      // snapshot before any message of the next connection can move the position
      if (this.#subscribed && this.#lastId !== undefined) this.#gapFrom = { id: this.#lastId, epoch: this.#epoch };
      this.#subscribed = false;
    });
    let resolveReady: () => void = noop;
    this.#ready = new Promise<void>((r) => (resolveReady = r));
    this.#sub.on('ready', () => {
      this.#sub.subscribe(this.channel).then(
        async () => {
          if (this.#closed) return;
          this.#subscribed = true;
          const first = !this.#subscribedOnce;
          this.#subscribedOnce = true;
          if (!first) this.#s.resyncs++;
          // replay only what the log proves complete; otherwise clear. Also after the first
          // subscription: whatever listeners cached before it was live may already be stale
          // (await ready() before serving and this clears nothing).
          const replayed = this.#log !== undefined && (await this.#catchUp(first));
          if (!replayed && this.#clearOnReconnect) {
            if (!first) this.#s.localClears++;
            for (const l of [...this.#listeners]) safe(() => l.resync());
          }
          resolveReady();
        },
        noop, // the connection dropped again: the next 'ready' retries
      );
    });
    if (heartbeatMs > 0) {
      this.#heartbeat = setInterval(() => this.#beat(heartbeatMs), heartbeatMs);
      this.#heartbeat.unref();
    }
  }

  /** Resolves once subscribed (and the publisher is connected); rejects after timeoutMs. */
  async ready(timeoutMs = 5_000): Promise<void> {
    let t: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      t = setTimeout(() => reject(new HashGateError(ErrorCodes.TIMEOUT, `invalidation bus not subscribed within ${timeoutMs} ms`)), timeoutMs);
    });
    const pubReady = this.#pub.status === 'ready' ? Promise.resolve() : new Promise<void>((r) => this.#pub.once('ready', () => r()));
    try {
      await Promise.race([Promise.all([this.#ready, pubReady]), timeout]);
    } finally {
      clearTimeout(t);
    }
  }

  /** Registers a listener; returns the function that removes it. */
  subscribe(listener: BusListener): () => void {
    if (listener === null || typeof listener !== 'object' || typeof listener.keys !== 'function' || typeof listener.resync !== 'function') {
      throw invalidType('listener', 'an object with keys() and resync()', listener);
    }
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /**
   * Tells every other instance (and the other listeners of this bus in this process, except
   * `source`) to drop `keys` of `table`. Never throws and never waits for Redis: a message that
   * cannot be sent is queued (bounded) until the publisher reconnects, or counted as dropped.
   */
  publish(table: string, keys: readonly string[], source?: BusListener): void {
    if (this.#closed || keys.length === 0) return;
    for (const l of this.#listeners) if (l !== source) safe(() => l.keys(table, keys));
    for (let off = 0; off < keys.length; off += this.#maxKeys) {
      const part = off === 0 && keys.length <= this.#maxKeys ? keys : keys.slice(off, off + this.#maxKeys);
      this.#send(JSON.stringify([WIRE_VERSION, this.origin, nowMs(), table, part]), part.length);
    }
  }

  stats(): BusStats {
    const h = this.#lag;
    const has = h.count > 0;
    return {
      ...this.#s,
      connected: this.#subscribed && this.#pub.status === 'ready',
      publisherConnected: this.#pub.status === 'ready',
      pending: this.#pending.length,
      lagMs: {
        count: h.count,
        p50: has ? h.percentile(50) / 1000 : 0,
        p99: has ? h.percentile(99) / 1000 : 0,
        max: has ? h.max / 1000 : 0,
      },
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    this.#listeners.clear();
    // QUIT on a connection that is down would wait in the offline queue for a reconnect
    await Promise.all(
      [this.#pub, this.#sub].map((c) => (c.status === 'ready' ? c.quit().then(noop, () => c.disconnect()) : c.disconnect())),
    );
  }

  /**
   * After a subscription: with a log, read it from the last id seen. Returns true when every
   * missed message was replayed (no clear needed). Always re-baselines on the log's tail.
   */
  async #catchUp(first: boolean): Promise<boolean> {
    const log = this.#log!;
    const gap = first ? undefined : this.#gapFrom;
    this.#gapFrom = undefined;
    const since = gap?.id;
    let res: [string, string, string, Array<[string, string[]]>];
    try {
      if (this.#pub.status !== 'ready') await new Promise<void>((r, j) => {
        const t = setTimeout(() => j(new Error('publisher not ready')), 2_000);
        this.#pub.once('ready', () => (clearTimeout(t), r()));
      });
      // without a gap to fill this only reads the tail position (count 0: at most one entry)
      res = (await runScript(this.#pub, LOG_READ, 2, [log.key, log.epochKey, since ?? '0-0', since === undefined ? 0 : log.max, this.origin + nowMs().toString(36)])) as typeof res;
    } catch {
      return false; // cannot read the log: clear (and the next reconnect re-baselines)
    }
    const [epoch, maxDeleted, lastGenerated, entries] = res;
    const covered = gap !== undefined && since !== undefined && epoch === gap.epoch && cmpId(maxDeleted, since) <= 0 && entries.length <= log.max;
    if (covered) {
      for (const [, fields] of entries) {
        const i = fields.indexOf('m');
        const body = i >= 0 ? fields[i + 1] : undefined;
        if (body !== undefined) this.#onMessage(Buffer.from(this.channel), Buffer.from(`[${WIRE_VERSION},` + body.slice(1)), true);
      }
      this.#s.replays++;
    }
    this.#epoch = epoch;
    if (this.#lastId === undefined || cmpId(lastGenerated, this.#lastId) > 0) this.#lastId = lastGenerated;
    return covered;
  }

  // Invalidations are idempotent deletes, so queued messages may overtake each other.
  #send(p: string, n: number): void {
    if (this.#pub.status !== 'ready') {
      this.#enqueue(p, n);
      return;
    }
    const log = this.#log;
    const sent = log
      ? runScript(this.#pub, LOG_PUBLISH, 2, [log.key, log.epochKey, '[' + p.slice(p.indexOf(',') + 1), this.channel, log.max, this.origin + nowMs().toString(36)])
      : this.#pub.publish(this.channel, p);
    sent.then(
      () => {
        this.#s.sent++;
        this.#s.sentKeys += n;
      },
      () => this.#enqueue(p, n),
    );
  }

  #enqueue(p: string, n: number): void {
    if (this.#closed) return;
    if (this.#pending.length >= this.#maxPending) {
      this.#s.droppedSend++;
      return;
    }
    this.#pending.push({ p, n });
  }

  #flush(): void {
    for (const m of this.#pending.splice(0, this.#pending.length)) this.#send(m.p, m.n);
  }

  #beat(timeoutMs: number): void {
    const sub = this.#sub;
    if (this.#closed || sub.status !== 'ready' || !this.#subscribed) return;
    let answered = false;
    sub.ping().then(() => (answered = true), noop);
    setTimeout(() => {
      // a link that stopped answering may have lost messages: reconnect, resubscribe, clear
      if (!answered && !this.#closed && sub.status === 'ready') sub.disconnect(true);
    }, timeoutMs).unref();
  }

  #onMessage(ch: Buffer, msg: Buffer, replayed = false): void {
    if (this.#closed || ch.toString() !== this.channel) return;
    let m: unknown;
    try {
      m = JSON.parse(msg.toString('utf8'));
    } catch {
      this.#s.droppedMalformed++;
      return;
    }
    if (Array.isArray(m) && m[0] === WIRE_LOGGED && typeof m[1] === 'string' && typeof m[2] === 'string') {
      // a logged message: remember how far we have read the log, then treat it as a plain one
      if (this.#lastId === undefined || cmpId(m[1], this.#lastId) > 0) this.#lastId = m[1];
      if (this.#epoch !== m[2]) this.#epoch = m[2];
      m = [WIRE_VERSION, ...m.slice(3)];
    }
    if (!Array.isArray(m) || m[0] !== WIRE_VERSION || typeof m[1] !== 'string' || typeof m[2] !== 'number' || typeof m[3] !== 'string' || !Array.isArray(m[4])) {
      this.#s.droppedMalformed++;
      return;
    }
    if (m[1] === this.origin) {
      this.#s.ownEchoes++;
      return;
    }
    const keys = m[4] as unknown[];
    for (const k of keys) {
      if (typeof k !== 'string') {
        this.#s.droppedMalformed++;
        return;
      }
    }
    if (replayed) this.#s.replayedMessages++;
    else {
      const lagUs = Math.round((nowMs() - m[2]) * 1000);
      this.#lag.record(Math.max(1, Math.min(lagUs, 3_600_000_000)));
    }
    this.#s.received++;
    this.#s.receivedKeys += keys.length;
    const table = m[3];
    for (const l of this.#listeners) safe(() => l.keys(table, keys as string[]));
  }
}

function retry(times: number): number {
  return Math.min(25 * times, 1_000);
}

/** A throwing listener must not stop the others (nor the bus). */
function safe(f: () => void): void {
  try {
    f();
  } catch {
    // listeners are ours (cache, blacklist) or the user's: their failure is theirs to report
  }
}

/** What a component's `bus` option may be: a shared bus, or options for one it creates and owns. */
export type BusOption = InvalidationBus | InvalidationBusOptions | true;

/** Resolves a `bus` option; `fallback` is the component's own Redis connection to copy. */
export function resolveBus(option: BusOption, fallback: Client | undefined, name = 'bus'): { bus: InvalidationBus; owned: boolean } {
  if (option instanceof InvalidationBus) return { bus: option, owned: false };
  const o: InvalidationBusOptions = option === true ? {} : option;
  if (o === null || typeof o !== 'object') throw invalidType(name, 'an InvalidationBus, options or true', option);
  if (o.redis === undefined && o.url === undefined) {
    if (fallback === undefined) throw invalidType(`${name}.redis`, 'an ioredis client (the component has no Redis to copy)', o.redis);
    return { bus: new InvalidationBus({ ...o, redis: fallback }), owned: true };
  }
  return { bus: new InvalidationBus(o), owned: true };
}
