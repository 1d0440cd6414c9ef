// Serving the exposition text: a request handler for the user's own http server, and a tiny
// server for `hashgate metrics --port P`.

import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { invalidType } from '../errors.js';
import { redact } from '../util/redact.js';
import { isRegistry, type RegistryLike } from './registry.js';
import type { Metrics } from './types.js';

/**
 * What to serve: a gate's or a component's `metrics` (`serveMetrics(gate.metrics)`; metrics must be
 * on), what createMetrics() returned, or a prom-client Registry of your own.
 */
export type MetricsSource = Metrics | RegistryLike;

function registryOf(source: MetricsSource): RegistryLike {
  if (isRegistry(source)) return source;
  const registry = source !== null && typeof source === 'object' ? (source as { registry?: unknown }).registry : undefined;
  if (isRegistry(registry)) return registry;
  if (source !== null && typeof source === 'object' && (source as Partial<Metrics>).enabled === false) {
    throw invalidType('metrics', 'enabled metrics (open the gate with `metrics: true`)', source);
  }
  throw invalidType('metrics', 'a gate\'s metrics, createMetrics() or a prom-client Registry', source);
}

/**
 * `(req, res) => void` serving the Prometheus text format for GET/HEAD; mount it on any path of
 * your own server (`if (req.url === '/metrics') return handler(req, res)`).
 */
export function metricsHandler(source: MetricsSource): (req: IncomingMessage, res: ServerResponse) => void {
  const registry = registryOf(source);
  return (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('method not allowed\n');
      return;
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType, 'content-length': Buffer.byteLength(text) });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics collection failed: ${redact(err instanceof Error ? err.message : String(err))}\n`);
      },
    );
  };
}

export interface MetricsServer {
  server: Server;
  port: number;
  host: string;
  url: string;
  close(): Promise<void>;
}

export interface ServeOptions {
  port?: number;
  host?: string;
  /** Path that serves metrics (default /metrics); `/` answers with a pointer to it. */
  path?: string;
  /**
   * Readiness check for `/readyz`: 200 with its JSON when `ready` is true, 503 otherwise (e.g.
   * `() => gate.health()`). Without it `/readyz` answers like `/healthz`. `/healthz` (liveness)
   * answers 200 whenever the process serves HTTP at all.
   */
  readiness?: () => Promise<{ ready: boolean }> | { ready: boolean };
}

function sendJson(res: ServerResponse, status: number, body: unknown, head: boolean): void {
  const text = `${JSON.stringify(body)}\n`;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(head ? undefined : text);
}

/** Starts an http server exposing `source` at `path`. Port 0 picks a free port. */
export function serveMetrics(source: MetricsSource, options: ServeOptions = {}): Promise<MetricsServer> {
  let handler: ReturnType<typeof metricsHandler>;
  try {
    handler = metricsHandler(source);
  } catch (err) {
    return Promise.reject(err);
  }
  const path = options.path ?? '/metrics';
  const host = options.host ?? '127.0.0.1';
  const server = createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    if (url === path) return handler(req, res);
    const head = req.method === 'HEAD';
    if (url === '/healthz') return sendJson(res, 200, { status: 'ok' }, head);
    if (url === '/readyz') {
      const check = options.readiness;
      if (check === undefined) return sendJson(res, 200, { ready: true }, head);
      Promise.resolve()
        .then(check)
        .then(
          (r) => sendJson(res, r.ready ? 200 : 503, r, head),
          (err: unknown) => sendJson(res, 503, { ready: false, error: err instanceof Error ? err.message : String(err) }, head),
        );
      return;
    }
    if (url === '/' || url === '') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end(`hashgate metrics at ${path}\n`);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  return new Promise((resolvePromise, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 9464, host, () => {
      server.off('error', reject);
      const port = (server.address() as AddressInfo).port;
      resolvePromise({
        server,
        port,
        host,
        url: `http://${host.includes(':') ? `[${host}]` : host}:${port}${path}`,
        close: () => new Promise<void>((res, rej) => server.close((e) => (e ? rej(e) : res()))),
      });
    });
  });
}
