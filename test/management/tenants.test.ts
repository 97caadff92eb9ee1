import t from 'tap';
import { adminToken, login, setPassword, startAuthService } from '../helpers/auth.js';
import { createEntity, createTenant, createUser, fails, ok } from '../helpers/management.js';
import { gql } from '../helpers/service.js';

const TENANT = 'id name alias status tags attributes createdAt updatedAt deletedAt deletedBy';

t.test('tenants: creation, reads, listing, lifecycle and isolation', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const alice = await createUser(ts, 'alice');
  const bob = await createUser(ts, 'bob');

  await t.test('a human creates a tenant and becomes its tenant admin with exactly the spec grants', async (t) => {
    const data = await ok(ts, alice.token, `mutation { createTenant(input: {name: "Acme", alias: "acme", tags: ["iot"], attributes: {tier: "gold"}}) { ${TENANT} } }`);
    const acme = data.createTenant;
    t.match(acme, { name: 'Acme', alias: 'acme', status: 'active', tags: ['iot'], attributes: { tier: 'gold' }, updatedAt: null, deletedAt: null });
    const roles = await ok(ts, alice.token, `query ($id: ID!) { myTenantRoles(tenantId: $id) { roleName actions assignmentPaths } }`, { id: acme.id });
    t.same(roles.myTenantRoles, [{ roleName: 'tenant-admin', actions: ['manage', 'policy.manage', 'read', 'role.manage'], assignmentPaths: ['direct'] }]);
    const blocks = await ts.service.sql<{ scope_mode: string; object_kind: string | null; actions: string[] }[]>`
      select b.scope_mode, b.object_kind, array_agg(a.name order by a.name) as actions
      from roles r join role_permission_blocks rpb on rpb.role_id = r.id join permission_blocks b on b.id = rpb.block_id
      join permission_block_actions pba on pba.block_id = b.id join actions a on a.id = pba.action_id
      where r.tenant_id = ${acme.id} and r.name = 'tenant-admin' group by b.id, b.scope_mode, b.object_kind order by b.scope_mode, b.object_kind`;
    t.same(blocks.map((b) => [b.scope_mode, b.object_kind, b.actions]), [
      ['object_kind', 'audit_log', ['read']],
      ['object_kind', 'credential', ['manage']],
      ['tenant', null, ['manage', 'policy.manage', 'read', 'role.manage']],
    ], 'tenant-scoped manage/read/policy.manage/role.manage, read on audit_log, manage on credential; no platform manage');
    const members = await ok(ts, alice.token, `query ($id: ID!) { tenantMembers(tenantId: $id) { total items { id } } }`, { id: acme.id });
    t.same(members.tenantMembers.items.map((e: { id: string }) => e.id), [alice.id], 'the human creator is a member');
    await ts.service.audit.flush();
    const [audit] = await ts.service.sql`select actor_entity_id, tenant_id from audit_log where event = 'tenant.create'`;
    t.same(audit, { actor_entity_id: alice.id, tenant_id: acme.id });
  });

  const [acmeRow] = await ts.service.sql<{ id: string }[]>`select id from tenants where alias = 'acme'`;
  const acme = acmeRow!.id;
  const globex = await createTenant(ts, bob.token, 'Globex', 'globex');

  await t.test('refused callers', async (t) => {
    const device = await createEntity(ts, admin, { kind: 'device', name: 'lonely-device', tenantId: acme });
    const { tokenFor } = await import('../helpers/auth.js');
    const deviceToken = await tokenFor(ts, device);
    t.match(await fails(ts, deviceToken, `mutation { createTenant(input: {name: "X"}) { id } }`), [{ message: 'forbidden', extensions: { code: 'FORBIDDEN' } }]);
    t.match(await fails(ts, undefined, `mutation { createTenant(input: {name: "X"}) { id } }`), [{ message: 'missing authentication', extensions: { code: 'UNAUTHENTICATED' } }]);
    t.match(await fails(ts, bob.token, `query ($id: ID!) { tenant(id: $id) { id } }`, { id: acme }), [{ message: 'forbidden' }]);
  });

  await t.test('uniqueness and validation', async (t) => {
    t.match(await fails(ts, alice.token, `mutation { createTenant(input: {name: "Other", alias: "acme"}) { id } }`),
      [{ message: 'a tenant with this alias already exists', extensions: { code: 'CONFLICT' } }]);
    t.match(await fails(ts, alice.token, `mutation { createTenant(input: {name: "Acme"}) { id } }`),
      [{ message: 'a tenant with this name already exists', extensions: { code: 'CONFLICT' } }]);
    t.match(await fails(ts, alice.token, `mutation { createTenant(input: {name: "Y", alias: "Not An Alias"}) { id } }`),
      [{ message: 'alias must be 1-63 lowercase letters, digits or inner hyphens', extensions: { code: 'BAD_REQUEST' } }]);
    t.match(await fails(ts, alice.token, `mutation { createTenant(input: {name: "  "}) { id } }`), [{ extensions: { code: 'BAD_REQUEST' } }]);
  });

  await t.test('listing: the platform admin sees all, others only their workspaces; totals never leak', async (t) => {
    const all = await ok(ts, admin, `{ tenants { total items { name } } }`);
    t.equal(all.tenants.total, 2);
    const mine = await ok(ts, alice.token, `{ tenants { total items { name } } }`);
    t.same(mine.tenants, { total: 1, items: [{ name: 'Acme' }] });
    const bobs = await ok(ts, bob.token, `{ tenants(q: "acm") { total items { name } } }`);
    t.same(bobs.tenants, { total: 0, items: [] });
    t.match(await fails(ts, alice.token, `{ tenants(deleted: all) { total } }`), [{ message: 'forbidden' }]);
  });

  await t.test('renaming, freezing and deleting need platform manage, not the tenant admin role', async (t) => {
    t.match(await fails(ts, alice.token, `mutation ($id: ID!) { updateTenant(id: $id, input: {name: "Acme 2"}) { id } }`, { id: acme }), [{ message: 'forbidden' }]);
    t.match(await fails(ts, alice.token, `mutation ($id: ID!) { freezeTenant(id: $id) { id } }`, { id: acme }), [{ message: 'forbidden' }]);
    t.match(await fails(ts, alice.token, `mutation ($id: ID!) { deleteTenant(id: $id) }`, { id: acme }), [{ message: 'forbidden' }]);
    const updated = await ok(ts, admin, `mutation ($id: ID!) { updateTenant(id: $id, input: {name: "Acme Corp", alias: null, attributes: {tier: "silver"}}) { name alias tags attributes updatedAt } }`, { id: acme });
    t.match(updated.updateTenant, { name: 'Acme Corp', alias: null, tags: ['iot'], attributes: { tier: 'silver' }, updatedAt: /^\d{4}-/ });
  });

  await t.test('a frozen tenant refuses writes and keeps its data readable', async (t) => {
    const device = await createEntity(ts, alice.token, { kind: 'device', name: 'sensor-1', tenantId: acme });
    t.equal((await ok(ts, admin, `mutation ($id: ID!) { freezeTenant(id: $id) { status } }`, { id: acme })).freezeTenant.status, 'frozen');
    t.match(await fails(ts, alice.token, `mutation ($id: ID!) { createEntity(input: {kind: device, name: "sensor-2", tenantId: $id}) { id } }`, { id: acme }), [{ extensions: { code: 'FORBIDDEN' } }]);
    t.match(await fails(ts, alice.token, `mutation ($id: ID!) { updateEntity(id: $id, input: {name: "renamed"}) { id } }`, { id: device }), [{ extensions: { code: 'FORBIDDEN' } }]);
    const read = await ok(ts, alice.token, `query ($t: ID!, $e: ID!) { tenant(id: $t) { status } entity(id: $e) { name } entities(tenantId: $t) { total } }`, { t: acme, e: device });
    t.same(read, { tenant: { status: 'frozen' }, entity: { name: 'sensor-1' }, entities: { total: 2 } });
    t.equal((await ok(ts, admin, `mutation ($id: ID!) { enableTenant(id: $id) { status } }`, { id: acme })).enableTenant.status, 'active');
    await ok(ts, alice.token, `mutation ($id: ID!) { updateEntity(id: $id, input: {name: "renamed"}) { id } }`, { id: device });
  });

  await t.test('a disabled tenant denies its own admin', async (t) => {
    await ok(ts, admin, `mutation ($id: ID!) { disableTenant(id: $id) { status } }`, { id: globex });
    t.match(await fails(ts, bob.token, `query ($id: ID!) { tenant(id: $id) { id } }`, { id: globex }), [{ message: 'forbidden' }]);
    await ok(ts, admin, `mutation ($id: ID!) { enableTenant(id: $id) { status } }`, { id: globex });
    t.equal((await ok(ts, bob.token, `query ($id: ID!) { tenant(id: $id) { status } }`, { id: globex })).tenant.status, 'active');
  });

  await t.test('delete → restore → purge; sessions of the tenant stay revoked', async (t) => {
    const carol = await createUser(ts, 'carol');
    await ok(ts, admin, `mutation ($t: ID!, $e: ID!) { addTenantMember(tenantId: $t, entityId: $e) }`, { t: globex, e: carol.id });
    await setPassword(ts, carol.id, 'carol-password-1234');
    const session = await login(ts, carol.id, 'carol-password-1234', { tenantId: globex });
    t.equal((await gql(ts.url(), '{ myTenantInvitations { total } }', {}, session.token)).body.data?.myTenantInvitations.total, 0, 'session works');

    t.equal((await ok(ts, admin, `mutation ($id: ID!) { deleteTenant(id: $id) }`, { id: globex })).deleteTenant, true);
    t.match(await fails(ts, session.token, '{ myTenantInvitations { total } }'), [{ extensions: { code: 'UNAUTHENTICATED' } }], 'a session in the deleted tenant is revoked');
    // Hidden: to anyone but a platform administrator it answers as an unknown id does (issue 35.1).
    t.match(await fails(ts, bob.token, `query ($id: ID!) { tenant(id: $id) { id } }`, { id: globex }), [{ message: 'forbidden', extensions: { code: 'FORBIDDEN' } }]);
    t.match(await fails(ts, bob.token, `query ($id: ID!) { tenant(id: $id) { id } }`, { id: '7d1f4a8e-0000-4000-8000-000000000000' }), [{ message: 'forbidden', extensions: { code: 'FORBIDDEN' } }]);
    t.equal((await ok(ts, admin, `{ tenants { total } }`)).tenants.total, 1, 'gone from default listings');
    const deleted = await ok(ts, admin, `{ tenants(deleted: deleted) { items { id status deletedAt deletedBy } } }`);
    t.match(deleted.tenants.items, [{ id: globex, status: 'deleted', deletedAt: /^\d{4}-/, deletedBy: '00000000-0000-0000-0000-000000000001' }]);
    t.match(await fails(ts, bob.token, `mutation ($id: ID!) { restoreTenant(id: $id) { id } }`, { id: globex }), [{ message: 'forbidden' }]);

    const restored = await ok(ts, admin, `mutation ($id: ID!) { restoreTenant(id: $id) { status deletedAt } }`, { id: globex });
    t.same(restored.restoreTenant, { status: 'active', deletedAt: null });
    t.match(await fails(ts, session.token, '{ myTenantInvitations { total } }'), [{ extensions: { code: 'UNAUTHENTICATED' } }], 'revoked sessions are not reinstated');

    t.match(await fails(ts, admin, `mutation ($id: ID!) { purgeTenant(id: $id) }`, { id: globex }), [{ message: 'only a deleted tenant can be purged; delete it first' }]);
    await ok(ts, admin, `mutation ($id: ID!) { deleteTenant(id: $id) }`, { id: globex });
    t.equal((await ok(ts, admin, `mutation ($id: ID!) { purgeTenant(id: $id) }`, { id: globex })).purgeTenant, true);
    t.match(await fails(ts, admin, `query ($id: ID!) { tenant(id: $id) { id } }`, { id: globex }), [{ extensions: { code: 'NOT_FOUND' } }]);
    const [{ count }] = await ts.service.sql<[{ count: number }]>`select count(*)::int as count from roles where tenant_id = ${globex}`;
    t.equal(count, 0, 'purge removed what the tenant owned');
  });

  await t.test('paging and ordering', async (t) => {
    for (const n of ['t-c', 't-a', 't-e', 't-b', 't-d']) await createTenant(ts, admin, n);
    const page = await ok(ts, admin, `{ tenants(q: "t-", order: name, dir: desc, limit: 2, offset: 1) { total items { name } } }`);
    t.same(page.tenants, { total: 5, items: [{ name: 't-d' }, { name: 't-c' }] });
    const clamped = await ok(ts, admin, `{ tenants(limit: 0) { items { id } } }`);
    t.equal(clamped.tenants.items.length, 1, 'limit is clamped to at least 1');
  });
});
