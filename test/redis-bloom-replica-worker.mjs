// One process of test/redis-bloom-replica.test.ts. Role "writer": adds keys one at a time through
// RedisBloom (publishing), reporting each add's acknowledgement time. Role "replica": follows the
// filter and reports when each watched key first becomes visible locally. Times are
// performance.timeOrigin + performance.now() (one machine, so comparable across processes).
import { Redis } from 'ioredis';
import { RedisBloom, RedisBloomReplica } from 'hashgate/bloom';

const [role, url, name] = process.argv.slice(2);
const redis = new Redis(url);
const now = () => performance.timeOrigin + performance.now();

if (role === 'writer') {
  const bloom = await RedisBloom.open({ redis, name, publish: true });
  process.on('message', async (m) => {
    if (m.op === 'add') {
      const acks = [];
      for (const key of m.keys) {
        await bloom.addAll([key]);
        acks.push(now());
        await new Promise((r) => setTimeout(r, m.gapMs));
      }
      process.send({ op: 'acks', acks });
    } else if (m.op === 'exit') process.exit(0);
  });
  process.send({ op: 'ready' });
} else {
  const replica = await RedisBloomReplica.open({ redis, name, resyncIntervalMs: 0, blockMs: 500 });
  let keys = [];
  let seen = [];
  let next = 0;
  const scan = () => {
    // keys are added in order: check from the first not yet seen
    while (next < keys.length && replica.contains(keys[next])) seen[next++] = now();
    if (next === keys.length && keys.length > 0) {
      process.send({ op: 'seen', seen, stats: replica.stats() });
      keys = [];
    }
  };
  replica.on('applied', scan);
  process.on('message', (m) => {
    if (m.op === 'watch') {
      keys = m.keys;
      seen = new Array(keys.length);
      next = 0;
      // none may be visible before they are added
      process.send({ op: 'watching', visibleBefore: m.keys.filter((k) => replica.contains(k)).length });
    } else if (m.op === 'exit') process.exit(0);
  });
  process.send({ op: 'ready' });
}
