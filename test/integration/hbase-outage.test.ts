// HBase going away under a live client: a private second HBase (own ports and work dir, so the
// shared instance other suites use keeps running) is stopped mid-suite; every operation must then
// reject with HG_ERR_HBASE_UNAVAILABLE within its deadline instead of hanging.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCodes, HashGateError } from '../../src/errors.js';
import { HBaseStore } from '../../src/hbase/client.js';
import { hbaseConfigured, startHBaseService, stopHBaseService } from '../helpers/hbase.js';
import { freePort } from '../helpers/redis-server.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

async function code(p: Promise<unknown>): Promise<string> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(HashGateError);
  return (err as HashGateError).code;
}

describe.skipIf(!hbaseConfigured('hbase outage integration'))('HBase adapter when HBase stops', () => {
  let env: NodeJS.ProcessEnv;
  let zookeeper: string;
  let store: HBaseStore | undefined;
  let running = false;

  beforeAll(async () => {
    env = {
      HBASE_RUN: join(repo, '.services', 'hbase-outage'),
      HBASE_ZK_PORT: String(await freePort()),
      HBASE_MASTER_PORT: String(await freePort()),
      HBASE_RS_PORT: String(await freePort()),
    };
    zookeeper = await startHBaseService(env);
    running = true;
    const ddl = spawnSync(join(repo, 'services', 'hbase', 'ddl.sh'), ['create', 'outage', '-f', 'cf', '-s', 'm'],
      { env: { ...process.env, ...env }, encoding: 'utf8' });
    expect(ddl.stdout).toContain('OK create');
  });

  afterAll(async () => {
    await store?.close();
    if (running) await stopHBaseService(env);
  });

  it('works, then fails fast with typed errors once the server is gone', async () => {
    store = new HBaseStore({ zookeeper, operationTimeoutMs: 4_000, callTimeoutMs: 2_000, connectTimeoutMs: 1_000 });
    await store.mput('outage', [{ row: 'a', values: { 'cf:q': '1' } }, { row: 'z', values: { 'cf:q': '2' } }]);
    expect((await store.get('outage', 'a'))!.columns['cf:q']!.toString()).toBe('1');
    expect((await store.scan('outage')).length).toBe(2);

    await stopHBaseService(env);
    running = false;

    expect(await code(store.get('outage', 'a'))).toBe(ErrorCodes.HBASE_UNAVAILABLE);
    expect(await code(store.mget('outage', ['a', 'z']))).toBe(ErrorCodes.HBASE_UNAVAILABLE);
    expect(await code(store.put('outage', 'b', { 'cf:q': '3' }))).toBe(ErrorCodes.HBASE_UNAVAILABLE);
    expect(await code(store.mput('outage', [{ row: 'c', values: { 'cf:q': '4' } }]))).toBe(ErrorCodes.HBASE_UNAVAILABLE);
    expect(await code(store.scan('outage', { reversed: true }))).toBe(ErrorCodes.HBASE_UNAVAILABLE);
    expect(await code(store.checkAndPut('outage', 'a', { column: 'cf:q', value: '1' }, { 'cf:q': '5' })))
      .toBe(ErrorCodes.HBASE_UNAVAILABLE);
    // a fresh client (cold caches, ZooKeeper gone too) fails the same way
    const fresh = new HBaseStore({ zookeeper, operationTimeoutMs: 3_000, connectTimeoutMs: 1_000 });
    try {
      expect(await code(fresh.get('outage', 'a'))).toBe(ErrorCodes.HBASE_UNAVAILABLE);
    } finally {
      await fresh.close();
    }
  }, 60_000);
});
