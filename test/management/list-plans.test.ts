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
 * The application_name of the connections whose last statement read `marker`'s table during a listing:
 * only statements started after the request began count (an earlier one, e.g. createEntity's own read of
 * the table on the shared pool, may still be a connection's last).
 */
async function ranOn(token: string, query: string, variables: Record<string, unknown>, marker: RegExp): Promise<string[]> {
  const [started] = await ts.service.sql<{ since: Date }[]>`select clock_timestamp() as since`;
  const since = started!.since;
  await ok(ts, token, query, variables);
  const rows = await ts.service.sql<{ name: string; query: string }[]>`
    select application_name as name, query from pg_stat_activity
    where datname = current_database() and application_name like 'svc%' and query_start >= ${since}`;
  return rows.filter((r) => marker.test(r.query)).map((r) => r.name);
}

t.test('plain pages on svc-lists, searches on the shared pool', async (t) => {
  const page = 'query ($t: ID) { entities(tenantId: $t, limit: 50) { total items { id name } } }';
  t.same(await ranOn(admin, page, { t: acme }, /from entities e where/), ['svc-lists'], "the platform administrator's page of one tenant");
  t.same(await ranOn(alice.token, page, { t: acme }, /from entities e where/), ['svc-lists'], "the tenant administrator's page of its tenant");
  const search = 'query ($t: ID) { entities(tenantId: $t, q: "d-", limit: 50) { total items { id } } }';
  t.same(await ranOn(alice.token, search, { t: acme }, /ilike/), ['svc'], 'a free-text search keeps custom plans');
  const mine = 'query { tenants(limit: 50) { total items { id } } }';
  t.same(await ranOn(alice.token, mine, {}, /from unnest/), ['svc-lists'], "the tenant administrator's tenants: probed by key, one plan for any size");
  t.same(await ranOn(admin, mine, {}, /from tenants t where/), ['svc-lists'], "the platform administrator's tenants");
  const results = await ok(ts, alice.token, page, { t: acme });
  t.equal(results.entities.total, 1, 'the same answer');
});
