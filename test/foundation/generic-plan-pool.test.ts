// The connections a domain opens for its by-key lookups: generic plans forced, named in
// pg_stat_activity, statement timeout as asked; and the running service's authorization engine reads
// through such connections of its own (svc-authz), not the shared pool.
import t from 'tap';
import { createGenericPlanPool } from '../../src/db/client.js';
import { AUTH_ENV } from '../helpers/auth.js';
import { createTestDatabase } from '../helpers/database.js';
import { startTestService } from '../helpers/service.js';
import { publish, world } from '../messaging/helpers.js';

t.test('a generic-plan pool: settings of every connection', async (t) => {
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  const pool = createGenericPlanPool(db.url, { name: 'svc-test', max: 2, connectTimeoutSecs: 5, statementTimeoutMs: 1234 });
  t.teardown(() => pool.end());
  const [row] = await pool<{ mode: string; name: string; timeout: string }[]>`
    select current_setting('plan_cache_mode') as mode, current_setting('application_name') as name,
           current_setting('statement_timeout') as timeout`;
  t.same(row, { mode: 'force_generic_plan', name: 'svc-test', timeout: '1234ms' });

  const unbounded = createGenericPlanPool(db.url, { name: 'svc-test', max: 1, connectTimeoutSecs: 5, statementTimeoutMs: 0 });
  t.teardown(() => unbounded.end());
  t.equal((await unbounded<{ timeout: string }[]>`select current_setting('statement_timeout') as timeout`)[0]!.timeout, '0', '0: no bound');
});

t.test("the service's authorization engine reads through its own generic-plan connections", async (t) => {
  const ts = await startTestService(t, { ...AUTH_ENV, SVC_AUTHZ_DB_CONNECTIONS: '2' });
  const w = await world(ts, 'lookups');
  // A publish needs the device's grants and the channel's facts: loaded by the engine.
  t.equal((await publish(ts, w.ws, w.channel, w.publisher.key, [{ n: 'x', v: 1 }])).status, 202);
  const rows = await ts.service.sql<{ query: string }[]>`
    select query from pg_stat_activity where datname = current_database() and application_name = 'svc-authz'`;
  t.ok(rows.length >= 1 && rows.length <= 2, `${rows.length} svc-authz connections, at most SVC_AUTHZ_DB_CONNECTIONS`);
  t.ok(rows.some((r) => /role_assignments|permission_blocks|resources|entities/.test(r.query)), 'they ran the lookups');
});
