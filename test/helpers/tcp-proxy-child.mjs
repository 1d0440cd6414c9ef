// The TCP proxy of tcp-proxy.ts, run in its own process so a busy test process never delays its forwarding.
import { createServer, connect } from 'node:net';

const targetPort = Number(process.argv[2]);
const targetHost = process.argv[3] ?? '127.0.0.1';
const delayMs = { up: 0, down: 0 };
const stalled = { up: false, down: false };
const pipes = new Set();
const sockets = new Set();
let accepted = 0;
let refusing = false;

// Delayed chunks wait in one FIFO per direction and one timer writes whatever is due, in order.
// Why not a timer per chunk: timeouts are whole milliseconds taken from the clock, so two chunks
// read within one millisecond can get timers that fire in the other order, and a reordered stream
// hands the client replies that belong to other commands (a TCP connection never does that).
const drain = (p) => {
  p.timer = undefined;
  const now = Date.now();
  while (p.head < p.queue.length && p.queue[p.head].at <= now) {
    const c = p.queue[p.head].chunk;
    p.queue[p.head++] = undefined;
    if (!p.to.destroyed) p.to.write(c);
  }
  if (p.head === p.queue.length) {
    p.queue = [];
    p.head = 0;
  } else arm(p);
};
const arm = (p) => {
  if (p.timer !== undefined) return;
  p.timer = setTimeout(drain, Math.max(1, p.queue[p.head].at - Date.now()), p);
};
const send = (p, chunk) => {
  const d = delayMs[p.dir];
  if (p.head === p.queue.length && d <= 0) {
    if (!p.to.destroyed) p.to.write(chunk);
    return;
  }
  p.queue.push({ at: Date.now() + Math.max(0, d), chunk });
  arm(p);
};
const push = (p, chunk) => {
  if (stalled[p.dir]) p.held.push(chunk);
  else send(p, chunk);
};

const server = createServer((client) => {
  if (refusing) {
    client.resetAndDestroy();
    return;
  }
  accepted++;
  const upstream = connect(targetPort, targetHost);
  sockets.add(client);
  sockets.add(upstream);
  const up = { dir: 'up', to: upstream, held: [], queue: [], head: 0, timer: undefined };
  const down = { dir: 'down', to: client, held: [], queue: [], head: 0, timer: undefined };
  pipes.add(up);
  pipes.add(down);
  client.on('data', (c) => push(up, c));
  upstream.on('data', (c) => push(down, c));
  const end = () => {
    for (const p of [up, down]) {
      if (p.timer !== undefined) clearTimeout(p.timer);
      pipes.delete(p);
    }
    client.destroy();
    upstream.destroy();
    sockets.delete(client);
    sockets.delete(upstream);
  };
  for (const s of [client, upstream]) {
    s.on('close', end);
    s.on('error', end);
  }
});
const dirs = (dir) => (dir === 'both' ? ['up', 'down'] : [dir]);

process.on('message', (m) => {
  if (m.op === 'delay') for (const d of dirs(m.dir)) delayMs[d] = m.ms;
  else if (m.op === 'stall') for (const d of dirs(m.dir)) stalled[d] = true;
  else if (m.op === 'resume') {
    stalled.up = stalled.down = false;
    for (const p of pipes) {
      const held = p.held;
      p.held = [];
      for (const c of held) send(p, c);
    }
  } else if (m.op === 'cut') for (const s of sockets) s.destroy();
  else if (m.op === 'refuse') {
    refusing = true;
    for (const s of sockets) (s.resetAndDestroy ?? s.destroy).call(s);
  } else if (m.op === 'restore') refusing = false;
  process.send({ id: m.id, accepted });
});
process.on('disconnect', () => process.exit(0));
server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
