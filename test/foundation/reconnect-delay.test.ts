// After a burst of failed connections (a restart, a storm of terminated backends) a query handed to a pool
// connection that is reconnecting waits out that connection's backoff. postgres.js's default delay grows to
// 20 s with a failure count shared by the whole pool, so a request waited 10-20 s while other connections
// sat idle (an EST request in test/proof/faults/est-connection-loss.test.ts). Every connection the service
// opens takes reconnectDelaySecs (src/db/client.ts), capped at 1 s.
import postgres from 'postgres';
import t from 'tap';
import { createGenericPlanPool, createPool, reconnectDelaySecs, type Sql } from '../../src/db/client.js';
import { createTestDatabase } from '../helpers/database.js';
import { testLogger } from '../helpers/service.js';

const DB = { poolMax: 1, connectTimeoutSecs: 5, idleTimeoutSecs: 0, maxLifetimeSecs: 0, embedded: { dataDir: '', port: 0 }, url: undefined };

t.test('the delay before a reconnect is at most 1 s however many attempts failed', async (t) => {
  const delays = Array.from({ length: 40 }, (_, failures) => reconnectDelaySecs(failures));
  t.ok(delays.every((d) => d >= 0 && d <= 1), `at most 1 s (longest ${Math.max(...delays).toFixed(3)} s)`);
  t.ok(reconnectDelaySecs(0) < 0.02, 'and the first retry is at once');
});

t.test('a query on a connection that reconnects after many failures waits at most about a second', async (t) => {
  const db = await createTestDatabase({ empty: true });
  t.teardown(() => db.drop());
  const killer = postgres(db.url, { max: 1, onnotice: () => undefined });
  t.teardown(() => killer.end({ timeout: 1 }));
  const pools: [string, Sql][] = [
    ['the shared pool', createPool(db.url, DB, testLogger())],
    ['a generic-plan pool', createGenericPlanPool(db.url, { name: 'svc-test', max: 1, connectTimeoutSecs: 5 })],
  ];
  for (const [name, sql] of pools) {
    t.teardown(() => sql.end({ timeout: 1 }));
    const [{ pid }] = await sql<[{ pid: number }]>`select pg_backend_pid() as pid`;
    // Eight failed attempts since the last success (postgres.js's own count): its default would wait
    // 10-20 s before this connection's next attempt.
    (sql as unknown as { options: { shared: { retries: number } } }).options.shared.retries = 8;
    await killer`select pg_terminate_backend(${pid})`;
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = Date.now();
    const [{ x }] = await sql<[{ x: number }]>`select 1 as x`;
    const waited = Date.now() - started;
    t.equal(x, 1, `${name}: the query answers`);
    t.ok(waited < 2000, `${name}: after ${waited} ms`);
  }
});
