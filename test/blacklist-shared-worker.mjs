// One service instance for test/blacklist-shared.test.ts, in its own OS process: a Blacklist on
// the shared HBase table and the shared Redis-held filter. Commands arrive over IPC.
import { Redis } from 'ioredis';
import { Blacklist } from 'hashgate/hbase';
import { RedisBloom } from 'hashgate/bloom';
import { HBaseStore } from '../dist/src/hbase/client.js';

const [redisUrl, zookeeper, table, filterName] = process.argv.slice(2);
const redis = new Redis(redisUrl);
redis.on('error', () => undefined); // failures surface per call
const store = new HBaseStore({ zookeeper });
const filter = await RedisBloom.open({ redis, name: filterName, expectedItems: 100_000, fpp: 0.001 });
const bl = new Blacklist({ store, table, filter });
await bl.start();

process.on('message', async (m) => {
  try {
    if (m.op === 'import') {
      const r = await bl.importBlacklist(m.entries);
      process.send({ id: m.id, ok: true, result: r });
    } else if (m.op === 'check') {
      process.send({ id: m.id, ok: true, result: await bl.isBlacklisted(m.keys), stats: bl.stats() });
    } else if (m.op === 'exit') {
      redis.disconnect();
      await store.close();
      process.exit(0);
    }
  } catch (err) {
    process.send({ id: m.id, ok: false, error: String(err?.stack ?? err), code: err?.code });
  }
});
process.send({ ready: true, pid: process.pid });
