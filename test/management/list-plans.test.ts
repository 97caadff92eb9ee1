// Which connections a list page is read through (issue 38, db/paging.ts listingSql): a plain listing on
// the generic-plan connections (svc-lists, planned once per connection), a search on the shared pool's
// custom plans; a tenant administrator's tenants (its readable set probed by key) on svc-lists. Read from pg_stat_activity: the last
// statement of each connection of this database.
import t from 'tap';
import { AUTH_ENV, adminToken } from '../helpers/auth.js';
import { createTenant, createUser, ok } from '../helpers/management.js';
import { startTestService } from '../helpers/service.js';

const ts = await startTestService(t, { ...AUTH_ENV, SVC_LIST_DB_CONNECTIONS: '1' });
const admin = await adminToken(ts);
const alice = await createUser(ts, 'alice');
const acme = await createTenant(ts, alice.token, 'Acme', 'acme');
await ok(ts, alice.token, 'mutation ($t: ID!) { createEntity(input: {kind: device, name: "d-1", tenantId: $t}) { id } }', { t: acme });

/**
 * Whether the one svc-lists connection (SVC_LIST_DB_CONNECTIONS=1) ran a statement matching `marker` during
 * this request. Nothing but list pages uses that pool, so its last statement is the listing's when it ran
 * one; the shared pool's last statement may be anything the request did afterwards (a token's last use, an
 * audit row), so the shared pool is judged by absence from svc-lists and by the answer.
 */
async function onListConnection(token: string, query: string, variables: Record<string, unknown>, marker: RegExp): Promise<boolean> {
  const [started] = await ts.service.sql<{ since: Date }[]>`select clock_timestamp() as since`;
  await ok(ts, token, query, variables);
  const rows = await ts.service.sql<{ query: string; during: boolean }[]>`
    select query, query_start >= ${started!.since} as during from pg_stat_activity
    where datname = current_database() and application_name = 'svc-lists'`;
  return rows.some((r) => r.during && marker.test(r.query));
}

t.test('plain pages on svc-lists, searches on the shared pool', async (t) => {
  const page = 'query ($t: ID) { entities(tenantId: $t, limit: 50) { total items { id name } } }';
  t.ok(await onListConnection(admin, page, { t: acme }, /from entities e where/), "the platform administrator's page of one tenant");
  t.ok(await onListConnection(alice.token, page, { t: acme }, /from entities e where/), "the tenant administrator's page of its tenant");
  const search = 'query ($t: ID) { entities(tenantId: $t, q: "d-", limit: 50) { total items { id } } }';
  t.notOk(await onListConnection(alice.token, search, { t: acme }, /ilike/), 'a free-text search keeps custom plans (the shared pool)');
  const mine = 'query { tenants(limit: 50) { total items { id } } }';
  t.ok(await onListConnection(alice.token, mine, {}, /from unnest/), "the tenant administrator's tenants: probed by key, one plan for any size");
  t.ok(await onListConnection(admin, mine, {}, /from tenants t where/), "the platform administrator's tenants");
  const results = await ok(ts, alice.token, page, { t: acme });
  t.equal(results.entities.total, 1, 'the same answer');
  t.equal((await ok(ts, alice.token, search, { t: acme })).entities.total, 1, 'and the search finds it');
});
