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

const send = (p, chunk) => {
  const d = delayMs[p.dir];
  if (d <= 0 && p.last <= Date.now()) {
    if (!p.to.destroyed) p.to.write(chunk);
    return;
  }
  const at = Math.max(Date.now() + d, p.last);
  p.last = at;
  const t = setTimeout(() => {
    p.timers.delete(t);
    if (!p.to.destroyed) p.to.write(chunk);
  }, at - Date.now());
  p.timers.add(t);
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
  const up = { dir: 'up', to: upstream, held: [], last: 0, timers: new Set() };
  const down = { dir: 'down', to: client, held: [], last: 0, timers: new Set() };
  pipes.add(up);
  pipes.add(down);
  client.on('data', (c) => push(up, c));
  upstream.on('data', (c) => push(down, c));
  const end = () => {
    for (const p of [up, down]) {
      for (const t of p.timers) clearTimeout(t);
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
