// The time limit (SPEC.md Limits: 5 s): an operation still running when it passes is answered 400 'custom
// endpoint execution timed out' at the limit, and its work is abandoned, not left to run: the statement
// it has running is cancelled (its transaction rolls back) and nothing after it starts.
// Slow for real: the test holds a lock the operation's first write waits on.
import postgres from 'postgres';
import t, { type Test } from 'tap';
import { adminToken, startAuthService } from '../helpers/auth.js';
import { waitUntil } from '../helpers/wait.js';
import { parseExposition } from '../metrics/exposition.js';
import { callEndpoint, createEndpoint, executionsOf } from './helpers.js';

/** Holds an exclusive lock on a table from a connection of the test's until release() is called. */
async function holdLock(t: Test, url: string, table: string): Promise<{ release: () => void; transaction: Promise<unknown> }> {
  const locker = postgres(url, { max: 1, onnotice: () => undefined });
  let release!: () => void;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const transaction = locker.begin(async (tx) => {
    await tx.unsafe(`lock table ${table} in exclusive mode`);
    locked();
    await held;
  });
  // A failed assertion must not leave the lock held while the service shuts down.
  t.teardown(async () => {
    release();
    await transaction.catch(() => undefined);
    await locker.end();
  });
  await lockTaken;
  return { release, transaction };
}

/** Statements of the service still running that write into the table. */
async function insertsRunning(ts: Awaited<ReturnType<typeof startAuthService>>, table: string): Promise<number> {
  const [row] = await ts.service.sql<{ n: number }[]>`
    select count(*)::int as n from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid() and state = 'active' and query ilike ${`%insert into ${table}%`}`;
  return row!.n;
}

t.test('a slow operation is cut at 5 s and its remaining work abandoned', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  t.equal(ts.service.config.customEndpoints.timeoutMs, 5000, 'the default limit');
  // Two tenants created one after the other: mutations run their fields in order.
  const e = await createEndpoint(ts, {
    method: 'POST', path: '/api/custom/two-tenants', operationKind: 'mutation',
    graphql: 'mutation ($a: CreateTenantInput!, $b: CreateTenantInput!) { a: createTenant(input: $a) { id } b: createTenant(input: $b) { id } }',
    variablesMapping: { 'a.name': '$body.first', 'b.name': '$body.second' },
  });

  const { release, transaction } = await holdLock(t, ts.db.url, 'tenants');

  const started = Date.now();
  const res = await callEndpoint(ts, '/api/custom/two-tenants', { token: admin, method: 'POST', body: { first: 'slow-first', second: 'slow-second' } });
  const elapsed = Date.now() - started;
  t.same(res, { status: 400, body: { error: 'custom endpoint execution timed out' } });
  t.ok(elapsed >= 4900 && elapsed < 10_000, `answered at the limit (${elapsed} ms)`);
  t.equal(ts.service.customEndpoints.stats.timeouts, 1);

  // While the lock is still held, the first field's insert is no longer waiting on it: it was cancelled.
  await waitUntil(async () => ts.service.customEndpoints.stats.abandonedEnded === 1, 10_000, 'the abandoned work ended');
  t.equal(await insertsRunning(ts, 'tenants'), 0, 'no insert of the call still waits on the lock');
  t.ok(ts.service.customEndpoints.stats.statementsStopped >= 1, 'the running statement was stopped');
  release();
  await transaction;
  const names = (await ts.service.sql<{ name: string }[]>`select name from tenants where name like 'slow-%'`).map((r) => r.name);
  t.same(names, [], 'neither field left a tenant: the first was rolled back, the second never ran');

  const [record] = await executionsOf(ts, e.id);
  t.match(record, { status: 'error', error: 'custom endpoint execution timed out', requestSummary: { variables: { a: { name: 'slow-first' }, b: { name: 'slow-second' } } } });
  const quick = await callEndpoint(ts, '/api/custom/two-tenants', { token: admin, method: 'POST', body: { first: 'quick-1', second: 'quick-2' } });
  const ids = await ts.service.sql<{ id: string; name: string }[]>`select id, name from tenants where name like 'quick-%' order by name`;
  t.same(quick, { status: 200, body: { a: { id: ids[0]?.id }, b: { id: ids[1]?.id } } }, 'without the lock the same call is served');
});

// Services beyond the management domains that a call may run: the certificate authority's profiles and
// credential management. Each write waits on a lock past a 1 s limit, is cancelled, and leaves nothing.
const writes = [
  {
    what: 'a certificate profile', table: 'certificate_profiles', path: '/api/custom/profile',
    graphql: 'mutation ($i: CreateCertificateProfileInput!) { createCertificateProfile(input: $i) { id } }',
    variablesMapping: { 'i.name': '$body.name' },
    stored: (ts: Awaited<ReturnType<typeof startAuthService>>, name: string) => ts.service.sql`select id from certificate_profiles where name = ${name}`,
  },
  {
    what: 'an access token', table: 'credentials', path: '/api/custom/token',
    graphql: 'mutation ($i: CreateAccessTokenInput!) { createAccessToken(input: $i) { credentialId } }',
    variablesMapping: { 'i.name': '$body.name', 'i.scoped': false, 'i.permissions': [] },
    stored: (ts: Awaited<ReturnType<typeof startAuthService>>, name: string) => ts.service.sql`select id from credentials where name = ${name}`,
  },
];

for (const w of writes) {
  t.test(`${w.what} written by a call cut at the limit is rolled back`, async (t) => {
    const ts = await startAuthService(t, { SVC_CUSTOM_ENDPOINT_TIMEOUT_MS: '1000' });
    const admin = await adminToken(ts);
    await createEndpoint(ts, { method: 'POST', path: w.path, operationKind: 'mutation', graphql: w.graphql, variablesMapping: w.variablesMapping });
    const { release, transaction } = await holdLock(t, ts.db.url, w.table);
    const res = await callEndpoint(ts, w.path, { token: admin, method: 'POST', body: { name: 'slow-write' } });
    t.same(res, { status: 400, body: { error: 'custom endpoint execution timed out' } });
    await waitUntil(() => ts.service.customEndpoints.stats.abandonedEnded === 1, 10_000, 'the abandoned work ended');
    t.equal(await insertsRunning(ts, w.table), 0, 'the insert no longer waits on the lock');
    await ts.service.customEndpoints.executions.flush();
    const m = parseExposition(await (await fetch(`${ts.url()}/metrics`)).text());
    t.equal(m.value('svc_custom_endpoint_timeouts_total'), 1, 'the timeout is counted');
    t.ok((m.value('svc_custom_endpoint_statements_stopped_total') ?? 0) >= 1, 'and the statement it stopped');
    t.ok((m.value('svc_custom_endpoint_execution_records_total', { outcome: 'written' }) ?? 0) >= 1, 'its execution record written');
    release();
    await transaction;
    t.same([...(await w.stored(ts, 'slow-write'))], [], 'nothing written');
    const quick = await callEndpoint(ts, w.path, { token: admin, method: 'POST', body: { name: 'quick-write' } });
    t.equal(quick.status, 200, 'without the lock the same call is served');
    t.equal((await w.stored(ts, 'quick-write')).length, 1);
  });
}
