import postgres from 'postgres';
import t from 'tap';
import { createNotifyHub } from '../../src/db/notify-hub.js';
import { createTestDatabase } from '../helpers/database.js';
import { testLogger } from '../helpers/service.js';

function next<T>(register: (fn: (v: T) => void) => void, ms = 5000): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out')), ms);
    register((v) => {
      clearTimeout(timer);
      resolve(v);
    });
  });
}

t.test('NOTIFY reaches subscribers; a killed LISTEN connection reconnects and says so', async (t) => {
  const db = await createTestDatabase();
  const sql = postgres(db.url, { max: 2, onnotice: () => undefined });
  const hub = createNotifyHub(db.url, sql as never, testLogger());
  await hub.start();
  t.teardown(async () => {
    await hub.close();
    await sql.end();
    await db.drop();
  });

  const first = next<unknown>((fn) => hub.subscribe('authz.invalidate', fn));
  await hub.notify('authz.invalidate', { subject: 'e1' });
  t.same(await first, { subject: 'e1' });

  const pid = hub.backendPid;
  t.type(pid, 'number');
  const reconnected = next<void>((fn) => hub.onReconnect(() => fn()));
  await sql`select pg_terminate_backend(${pid as number})`;
  await reconnected;
  t.equal(hub.reconnects, 1);
  t.not(hub.backendPid, pid, 'a new backend listens');
  t.ok(hub.connected);

  const after = next<unknown>((fn) => hub.subscribe('authz.invalidate', fn));
  await hub.notify('authz.invalidate', { subject: 'e2' });
  t.same(await after, { subject: 'e2' }, 'notifications flow again after the reconnect');

  // Sent inside a transaction, a notification arrives only once that transaction commits.
  let seen = false;
  hub.subscribe('tx', () => (seen = true));
  await sql.begin(async (tx) => {
    await hub.notify('tx', {}, tx as never);
    await new Promise((r) => setTimeout(r, 100));
    t.notOk(seen, 'not delivered before commit');
  });
  await new Promise((r) => setTimeout(r, 200));
  t.ok(seen, 'delivered after commit');
});
