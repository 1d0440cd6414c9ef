// A node:http service that answers, per request, "first time this year?" (exact, Redis) and "is
// this key risky?" (blacklist Bloom filter, then a tiered lookup of the risk record).
//
//   HASHGATE_REDIS_URL=redis://127.0.0.1:6379 PORT=8080 node examples/http-service.mjs
//   curl 'http://127.0.0.1:8080/first-seen?key=张三110101199001011234'   -> {"firstSeen":true}
//   curl 'http://127.0.0.1:8080/risk?key=王五110101198001011234'          -> {"blacklisted":true,"record":{...}}
//   curl -X POST -d '{"level":"low"}' 'http://127.0.0.1:8080/blacklist?key=赵六110101197001011234'
//   curl http://127.0.0.1:8080/readyz
//
// While Redis is down a risk check that cannot be decided answers 503 {"blacklisted":"unknown"},
// never "not blacklisted". The service starts without Redis (lazyConnect) and answers what it can.
// Without HASHGATE_REDIS_URL the gate uses its embedded store (one process only).
import { createServer } from 'node:http';
import { HashGate } from 'hashgate';
import { HotColdStore, MemoryColdStore, encodeValue } from 'hashgate/cache';

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
  // lazyConnect: a pod restarted during a Redis outage starts at once instead of failing open()
  // (and crash-looping); the connection is made in the background
  dedup: { window: 'year', timeZone: 'Asia/Shanghai', onStoreError: 'fail-open', journalDir, lazyConnect: true },
  bloom: { expectedItems: 1_000_000, fpp: 0.001 }, // the blacklist filter, and nothing else
  cache: { cold, ...(redisUrl ? { redis: { url: redisUrl, ttlSeconds: 3600 } } : {}) },
});
await gate.bloomAdd(Object.keys(BLACKLIST));
// New blacklist entries land in the Redis hot tier (migrateCold() archives them to the cold store
// later); the write drops this instance's local copies.
const hot = redisUrl ? new HotColdStore({ redis: gate.cache.redis, cold, cache: gate.cache }) : undefined;

/** Errors that mean "cannot decide now, retry later": 503, never a made-up answer. */
const UNAVAILABLE = new Set(['HG_ERR_TIER_UNAVAILABLE', 'HG_ERR_STORE_UNAVAILABLE', 'HG_ERR_STORE', 'HG_ERR_TIMEOUT', 'HG_ERR_CLOSED']);

async function readJson(req) {
  let text = '';
  for await (const chunk of req) {
    text += chunk;
    if (text.length > 64 * 1024) throw Object.assign(new Error('body too large'), { status: 413 });
  }
  try {
    return JSON.parse(text || '{}');
  } catch {
    throw Object.assign(new Error('body is not JSON'), { status: 400 });
  }
}

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
      try {
        // undefined only when every tier that could hold the record answered "absent"
        const [record] = await gate.lookup('risk', [key]);
        return send(res, 200, record === undefined ? { blacklisted: false } : { blacklisted: true, record });
      } catch (err) {
        // a tier could not be asked: unknown, which a risk check must never turn into "not listed"
        if (err.code === 'HG_ERR_TIER_UNAVAILABLE') return send(res, 503, { blacklisted: 'unknown', error: err.code });
        throw err;
      }
    }
    if (url.pathname === '/blacklist' && req.method === 'POST') {
      const record = await readJson(req);
      await gate.bloomAdd([key]); // first: a filter that says "maybe" too early costs one lookup
      if (hot) await hot.write('risk', [{ key, value: record }]);
      else {
        await cold.mput('risk', [{ key, value: encodeValue(record), ts: Date.now() }]);
        gate.cache.invalidate('risk', [key]);
      }
      return send(res, 200, { blacklisted: true });
    }
    return send(res, 404, { error: 'not found' });
  } catch (err) {
    if (err.status) return send(res, err.status, { error: err.message });
    // a typed error with a stable code; never echo the key (personal data)
    return send(res, UNAVAILABLE.has(err.code) ? 503 : 500, { error: err.code ?? 'internal' });
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
