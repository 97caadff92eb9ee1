// A caller without a platform-wide grant lists the tenants it is connected to (issue 38): that set is
// cached with its grants, so it must change as fast as a grant does. Two instances on one database:
// a membership (with or without a role) added or removed through A shows in A's next answer at once,
// and in B's through the invalidation NOTIFY (B's entries would otherwise live a minute); a tenant
// deleted and restored by the platform administrator leaves and comes back the same way.
import t from 'tap';
import { AUTH_ENV, adminToken } from '../helpers/auth.js';
import { createTenant, createUser, ok } from '../helpers/management.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';

const a = await startTestService(t, AUTH_ENV);
const b = await startTestService(t, AUTH_ENV, a.db);
const admin = await adminToken(a);
const alice = await createUser(a, 'alice');
const bob = await createUser(a, 'bob');
const acme = await createTenant(a, alice.token, 'Acme', 'acme');
const globex = await createTenant(a, bob.token, 'Globex', 'globex');
const [globexAdmin] = await a.service.sql<{ id: string }[]>`select id from roles where tenant_id = ${globex}`;

async function tenantsOf(ts: TestService, token: string): Promise<string[]> {
  const data = await ok(ts, token, 'query { tenants(limit: 50) { total items { name } } }');
  t.equal(data.tenants.total, data.tenants.items.length, 'the total counts what the caller may read');
  return (data.tenants.items as { name: string }[]).map((i) => i.name);
}
const same = (want: string[]) => async () => JSON.stringify(await tenantsOf(b, alice.token)) === JSON.stringify(want);

t.test('a membership with a role: listed at once on A, through NOTIFY on B; removed the same way', async (t) => {
  t.same(await tenantsOf(a, alice.token), ['Acme']);
  t.same(await tenantsOf(b, alice.token), ['Acme'], 'B caches the set');
  await ok(a, bob.token, 'mutation ($t: ID!, $e: ID!, $r: ID!) { addTenantMember(tenantId: $t, entityId: $e, roleId: $r) }',
    { t: globex, e: alice.id, r: globexAdmin?.id });
  t.same(await tenantsOf(a, alice.token), ['Acme', 'Globex'], 'A answers with the new tenant at once');
  await waitUntil(same(['Acme', 'Globex']), 5000, 'B listing Globex');
  await ok(a, bob.token, 'mutation ($t: ID!, $e: ID!) { removeTenantMember(tenantId: $t, entityId: $e) }', { t: globex, e: alice.id });
  t.same(await tenantsOf(a, alice.token), ['Acme'], 'A drops it at once');
  await waitUntil(same(['Acme']), 5000, 'B no longer listing Globex');
});

t.test('a membership without a role connects but grants nothing: still not listed', async (t) => {
  await ok(a, bob.token, 'mutation ($t: ID!, $e: ID!) { addTenantMember(tenantId: $t, entityId: $e) }', { t: globex, e: alice.id });
  t.same(await tenantsOf(a, alice.token), ['Acme']);
  t.same(await tenantsOf(b, alice.token), ['Acme']);
  await ok(a, bob.token, 'mutation ($t: ID!, $e: ID!) { removeTenantMember(tenantId: $t, entityId: $e) }', { t: globex, e: alice.id });
});

t.test('a tenant deleted and restored leaves the cached set and comes back', async (t) => {
  t.same(await tenantsOf(b, alice.token), ['Acme'], 'cached on B');
  await ok(a, admin, 'mutation ($t: ID!) { deleteTenant(id: $t) }', { t: acme });
  t.same(await tenantsOf(a, alice.token), []);
  await waitUntil(same([]), 5000, 'B no longer listing the deleted tenant');
  await ok(a, admin, 'mutation ($t: ID!) { restoreTenant(id: $t) { id } }', { t: acme });
  t.same(await tenantsOf(a, alice.token), ['Acme'], 'back on A at once');
  await waitUntil(same(['Acme']), 5000, 'B listing the restored tenant');
});

t.test('the set is cached: a second listing asks PostgreSQL for no connected tenants', async (t) => {
  await tenantsOf(a, alice.token);
  const before = a.service.authz.stats().invalidations;
  t.ok(a.service.authz.engine, 'the engine is exposed');
  const first = await a.service.authz.engine.connectedTenants(alice.id);
  const second = await a.service.authz.engine.connectedTenants(alice.id);
  t.equal(first, second, 'the same cached array, not a new read');
  t.equal(a.service.authz.stats().invalidations, before);
});
