// The RespPipes of one ioredis client: one for a standalone Redis, one per master of a Cluster (found through the client's slot map), each behind its own in-flight limit.
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { isCluster, type RedisClient } from './client.js';
import { InFlightLimit } from './inflight.js';
import { RespPipe, type PipeEndpoint } from './pipe.js';

/** Where an ioredis client is connected and how it authenticates, for a pipe of ours to the same server. */
export function endpointOf(client: Redis, connectTimeoutMs: number): PipeEndpoint {
  const o = client.options as RedisOptions & { path?: string };
  const e: PipeEndpoint = { connectTimeoutMs, name: 'hashgate' };
  // Sentinel: the options name the sentinels; the live stream is connected to the master
  const st = (client as unknown as { stream?: { remoteAddress?: string; remotePort?: number } }).stream;
  if (o.path) e.path = o.path;
  else if (o.sentinels && st?.remoteAddress && st.remotePort) {
    e.host = st.remoteAddress;
    e.port = st.remotePort;
  } else {
    e.host = o.host ?? '127.0.0.1';
    e.port = o.port ?? 6379;
  }
  if (o.family) e.family = o.family;
  if (o.tls) e.tls = o.tls === (true as unknown) ? {} : o.tls;
  if (o.username) e.username = o.username;
  if (o.password) e.password = o.password;
  if (o.db) e.db = o.db;
  return e;
}

/** A Cluster node as the client's slot map names it. */
const nodeKeyOf = (node: Redis): string => `${node.options.host}:${node.options.port}`;

/** Commands in flight on the control route: each is small (a read, an INCRBY, a DUMP, a split). */
const CONTROL_IN_FLIGHT = 64;

export interface PipeRoute {
  pipe: RespPipe;
  lane: InFlightLimit;
}

export interface PipeRouterOptions {
  connectTimeoutMs: number;
  /** In-flight limit of each pipe: sends at most, and the stall timeout of the oldest. */
  maxInFlight: number;
  /**
   * Keys of a full send: smaller sends that say their key count take a share of a send's room,
   * so the keys in flight stay at maxInFlight full sends' worth. Default 1 (every send is full).
   */
  keysPerSend?: number;
  commandTimeoutMs: number;
}

export class PipeRouter {
  readonly cluster: boolean;
  private readonly routes = new Map<string, PipeRoute>();
  private closed = false;

  constructor(
    readonly client: RedisClient,
    private readonly opts: PipeRouterOptions,
  ) {
    this.cluster = isCluster(client);
  }

  private make(key: string, endpoint: () => PipeEndpoint, maxInFlight = this.opts.maxInFlight, unit = this.opts.keysPerSend ?? 1): PipeRoute {
    let r = this.routes.get(key);
    if (r === undefined) {
      const pipe = new RespPipe(endpoint());
      // a stalled pipe is cut: what it still owes is lost anyway, and the next send reconnects
      const lane = new InFlightLimit(maxInFlight, this.opts.commandTimeoutMs, () => pipe.destroy(`no reply within ${this.opts.commandTimeoutMs} ms`), unit);
      r = { pipe, lane };
      if (this.closed) pipe.close();
      this.routes.set(key, r);
    }
    return r;
  }

  /** The route of a standalone client. */
  main(): PipeRoute {
    return this.make('main', () => endpointOf(this.client as Redis, this.opts.connectTimeoutMs));
  }

  /**
   * A second route of a standalone client, for the small commands that keep the compact tables
   * growing (state reads, count reports, DUMP and the split script). On the main pipe they waited
   * behind the writes of big batches (each send thousands of SADDs), so splits fell behind the
   * window count and a later batch had to split hundreds of tables before it could go. Redis
   * serves its connections in turn, so these get through between two sends.
   */
  control(): PipeRoute {
    return this.make('control', () => endpointOf(this.client as Redis, this.opts.connectTimeoutMs), CONTROL_IN_FLIGHT, 1);
  }

  /** Cluster: the route of the master that serves `slot` by the client's slot map; undefined when the map does not know it. */
  forSlot(slot: number): PipeRoute | undefined {
    if (!this.cluster) return this.main();
    const nodeKey = (this.client as Cluster).slots[slot]?.[0];
    if (nodeKey === undefined) return undefined;
    const known = this.routes.get(nodeKey);
    if (known !== undefined) return known;
    const node = (this.client as Cluster).nodes('master').find((n) => nodeKeyOf(n) === nodeKey);
    if (node === undefined) return undefined;
    return this.nodeRoute(node);
  }

  /** The route of a Cluster node, under the key the client's slot map names it by. */
  private nodeRoute(node: Redis): PipeRoute {
    return this.make(nodeKeyOf(node), () => endpointOf(node, this.opts.connectTimeoutMs));
  }

  /** The route of `key` (by its Cluster slot; the one pipe of a standalone client). */
  forKey(key: string): PipeRoute | undefined {
    return this.cluster ? this.forSlot(calculateSlot(key)) : this.main();
  }

  /**
   * Connects every route the store writes over (a standalone client's main and control pipes; a
   * Cluster's one pipe per master), so the first call does not wait for connections and their
   * handshakes. Rejects with the first failure; a pipe that could not connect tries again on its
   * first send.
   */
  async connectAll(): Promise<void> {
    const routes = this.cluster ? (this.client as Cluster).nodes('master').map((n) => this.nodeRoute(n)) : [this.main(), this.control()];
    await Promise.all(routes.map((r) => r.pipe.connect()));
  }

  /** Cuts every connection (sends owed replies fail) and fails what waits; later sends reconnect. */
  reset(why: string): void {
    for (const r of this.routes.values()) {
      r.lane.rejectWaiting(why);
      r.pipe.destroy(why);
    }
  }

  /** Routes whose pipe has replies owed or sends waiting. */
  busy(): number {
    let n = 0;
    for (const r of this.routes.values()) if (r.lane.inFlight > 0 || r.lane.queued > 0) n++;
    return n;
  }

  close(why = 'the store is closing'): void {
    this.closed = true;
    for (const r of this.routes.values()) {
      r.lane.rejectWaiting(why);
      r.pipe.close();
    }
  }
}
