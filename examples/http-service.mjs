// A node:http service that answers, per request, "first time this year?" (exact, Redis) and "is
// this key risky?" (blacklist Bloom filter, then a tiered lookup of the risk record).
//
//   HASHGATE_REDIS_URL=redis://127.0.0.1:6379 PORT=8080 node examples/http-service.mjs
//   curl 'http://127.0.0.1:8080/first-seen?key=张三110101199001011234'   -> {"firstSeen":true}
//   curl 'http://127.0.0.1:8080/risk?key=王五110101198001011234'          -> {"blacklisted":true,"record":{...}}
//   curl http://127.0.0.1:8080/readyz
//
// Without HASHGATE_REDIS_URL the gate uses its embedded store (one process only).
import { createServer } from 'node:http';
import { HashGate } from 'hashgate';
import { MemoryColdStore, encodeValue } from 'hashgate/cache';

const redisUrl = process.env.HASHGATE_REDIS_URL || undefined;
const journalDir = process.env.HASHGATE_JOURNAL_DIR ?? './hashgate-journal';

// Risk records would come from HBase (HBaseColdStore) in production; an in-memory cold store keeps
// this example self-contained. The Redis hot tier in front of it is shared by every instance.
const cold = new MemoryColdStore();
const BLACKLIST = { '王五110101198001011234': { level: 'high', reason: 'chargeback' } };
await cold.mput('risk', Object.entries(BLACKLIST).map(([key, v]) => ({ key, value: encodeValue(v), ts: Date.now() })));

const gate = await HashGate.open({
  threads: 0, // one small key per request: the calling thread is the fastest place to hash it
  ...(redisUrl ? { redis: redisUrl } : {}),
  dedup: { window: 'year', timeZone: 'Asia/Shanghai', onStoreError: 'fail-open', journalDir },
  bloom: { expectedItems: 1_000_000, fpp: 0.001 }, // the blacklist filter, and nothing else
  cache: { cold, ...(redisUrl ? { redis: { url: redisUrl, ttlSeconds: 3600 } } : {}) },
});
await gate.bloomAdd(Object.keys(BLACKLIST));

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

const server = createServer(async (req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const key = url.searchParams.get('key');
  try {
    if (url.pathname === '/readyz') {
      const h = await gate.health();
      return send(res, h.ready ? 200 : 503, h);
    }
    if (url.pathname === '/healthz') return send(res, 200, { status: 'ok' });
    if (!key) return send(res, 400, { error: 'missing ?key=' });
    if (url.pathname === '/first-seen') {
      // one key per call; concurrent requests are batched by the event loop, not by the caller
      const [first] = await gate.firstSeen([key]);
      return send(res, 200, { firstSeen: first === 1 });
    }
    if (url.pathname === '/risk') {
      const [maybe] = await gate.bloomCheck([key]);
      if (maybe === 0) return send(res, 200, { blacklisted: false }); // certainly not: no I/O at all
      const [record] = await gate.lookup('risk', [key]);
      return send(res, 200, record === undefined ? { blacklisted: false } : { blacklisted: true, record });
    }
    return send(res, 404, { error: 'not found' });
  } catch (err) {
    // a typed error with a stable code; never echo the key (personal data)
    return send(res, err.code === 'HG_ERR_CLOSED' ? 503 : 500, { error: err.code ?? 'internal' });
  }
});

server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});

// Graceful shutdown: stop accepting, let in-flight requests finish, then close the gate.
let stopping = false;
async function shutdown() {
  if (stopping) return;
  stopping = true;
  await new Promise((resolve) => server.close(resolve));
  await gate.close();
  console.log('stopped');
}
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
