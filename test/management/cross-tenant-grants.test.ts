// Issue 21 points 1 and 4: no assignment path crosses tenants. Two tenants, each with its admin; Globex
// owns a device and a service. Every path that creates an assignment (createRoleAssignment,
// addTenantMember, acceptTenantInvitation, acceptTenantInvitationToken, restoreRole) goes through the
// one check of src/roles/assign.ts: the probe's attempt (Acme's admin adds Globex's device with Acme's
// admin role, Globex's admin mints a token for it and administers Acme) is refused on each, a foreign
// entity is answered exactly like an unknown one, and a platform role needs a platform administrator.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { migrationsDir } from '../../src/paths.js';
import { AUTH_ENV, tokenFor } from '../helpers/auth.js';
import { createEntity, createTenant, createUser, fails, ok, twoTenants } from '../helpers/management.js';
import { capturingMailer, startTestService } from '../helpers/service.js';

const PLATFORM_ADMIN_ROLE = '00000000-0000-0000-0000-000000000002';
const UNKNOWN = '6f1c2a3e-0000-4000-8000-000000000999';

const MIGRATION_0070 = await readFile(path.join(migrationsDir, '0070_delete_cross_tenant_memberships.sql'), 'utf8');
const mailer = capturingMailer();
const ts = await startTestService(t, AUTH_ENV, undefined, { mailer });
const sql = ts.service.sql;
const { admin, alice, bob, dave, acme, globex } = await twoTenants(ts);
const adminRoleOf = async (tenantId: string) =>
  (await sql<[{ id: string }]>`select id from roles where tenant_id = ${tenantId} and name = 'tenant-admin'`)[0].id;
const acmeAdminRole = await adminRoleOf(acme);
const globexAdminRole = await adminRoleOf(globex);
const gDevice = await createEntity(ts, bob.token, { kind: 'device', name: 'globex-device', tenantId: globex, attributes: { secret: 'globex-only' } });
const gService = await createEntity(ts, bob.token, { kind: 'service', name: 'globex-service', tenantId: globex });
const acmeDevice = await createEntity(ts, alice.token, { kind: 'device', name: 'acme-device', tenantId: acme });

const ADD = `mutation ($t: ID!, $e: ID!, $r: ID) { addTenantMember(tenantId: $t, entityId: $e, roleId: $r) }`;
const INVITE = `mutation ($t: ID!, $i: CreateTenantInvitationInput!) { createTenantInvitation(tenantId: $t, input: $i) { id roleId roleName } }`;
const codeAndMessage = (errors: { message: string; extensions: { code: string } }[]) => errors.map((e) => ({ code: e.extensions.code, message: e.message }));

/** Every grant and membership the foreign entities hold in Acme: none, whatever was tried. */
async function foreignFootprint() {
  const ids = [gDevice, gService];
  const [row] = await sql<[{ assignments: number; memberships: number }]>`
    select (select count(*)::int from role_assignments where entity_id = any(${ids}::uuid[]) and tenant_id = ${acme}) as assignments,
           (select count(*)::int from tenant_memberships where entity_id = any(${ids}::uuid[]) and tenant_id = ${acme}) as memberships`;
  return row;
}

t.test('addTenantMember: another tenant\'s entity is answered like an unknown one, by anyone', async (t) => {
  const unknown = codeAndMessage(await fails(ts, alice.token, ADD, { t: acme, e: UNKNOWN, r: acmeAdminRole }));
  t.same(unknown, [{ code: 'NOT_FOUND', message: 'entity not found' }]);
  for (const [who, token] of [['the tenant admin', alice.token], ['a platform administrator', admin]] as const) {
    for (const [what, entity] of [['device', gDevice], ['service', gService]] as const) {
      t.same(codeAndMessage(await fails(ts, token, ADD, { t: acme, e: entity, r: acmeAdminRole })), unknown, `${who}, Globex's ${what}, with a role`);
      t.same(codeAndMessage(await fails(ts, token, ADD, { t: acme, e: entity })), unknown, `${who}, Globex's ${what}, without a role`);
    }
  }
  const members = await ok(ts, alice.token, `query ($t: ID!) { tenantMembers(tenantId: $t) { items { id attributes } } }`, { t: acme });
  t.notOk(JSON.stringify(members).includes('globex-only'), 'no foreign record is shown');
  t.same(await foreignFootprint(), { assignments: 0, memberships: 0 });

  // The probe's follow-up: Globex's admin mints a token for its device and tries Acme with it.
  const deviceToken = await tokenFor(ts, gDevice);
  t.match(await fails(ts, deviceToken, `query ($t: ID!) { tenant(id: $t) { id } }`, { t: acme }), [{ message: 'forbidden' }]);

  t.equal((await ok(ts, alice.token, ADD, { t: acme, e: acmeDevice })).addTenantMember, true, "the tenant's own device may join");
  t.equal((await ok(ts, alice.token, ADD, { t: acme, e: dave.id })).addTenantMember, true, 'a global human may join');
});

t.test('platform roles reach every tenant: only a platform administrator grants them, on every path', async (t) => {
  const errors = codeAndMessage(await fails(ts, alice.token, ADD, { t: acme, e: dave.id, r: PLATFORM_ADMIN_ROLE }));
  t.same(errors, [{ code: 'FORBIDDEN', message: 'forbidden' }], 'addTenantMember');
  t.same(codeAndMessage(await fails(ts, alice.token, INVITE, { t: acme, i: { inviteeUserId: dave.id, roleId: PLATFORM_ADMIN_ROLE } })),
    [{ code: 'FORBIDDEN', message: 'forbidden' }], 'createTenantInvitation, refused when created');
  const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from role_assignments where entity_id = ${dave.id} and role_id = ${PLATFORM_ADMIN_ROLE}`;
  t.equal(n, 0);
  const daveIsAdmin = await ok(ts, dave.token, `query ($t: ID!) { tenant(id: $t) { id } }`, { t: globex }).then(() => true, () => false);
  t.equal(daveIsAdmin, false);
});

t.test('createTenantInvitation: a role of another tenant is refused when created, like an unknown one', async (t) => {
  const errors = codeAndMessage(await fails(ts, alice.token, INVITE, { t: acme, i: { inviteeEmail: 'erin@example.com', roleId: globexAdminRole } }));
  // Issue 35.1: a role the caller may not read reads as missing in the tenant it invites to.
  t.same(errors, [{ code: 'NOT_FOUND', message: 'role not found' }]);
  t.notOk(JSON.stringify(errors).includes('tenant-admin'), "the role's name is not echoed");
  t.same(codeAndMessage(await fails(ts, alice.token, INVITE, { t: acme, i: { inviteeEmail: 'erin@example.com', roleId: UNKNOWN } })),
    errors, 'an unknown role answers the same');
  t.same(codeAndMessage(await fails(ts, admin, INVITE, { t: acme, i: { inviteeEmail: 'erin@example.com', roleId: globexAdminRole } })),
    [{ code: 'BAD_REQUEST', message: 'role assignment tenantId must match role tenantId' }], 'a platform administrator, who reads it, is told why');
  t.same(codeAndMessage(await fails(ts, alice.token, INVITE, { t: acme, i: { inviteeUserId: gDevice } })),
    [{ code: 'NOT_FOUND', message: 'entity not found' }], "another tenant's entity is not invited, and answered like an unknown one");
  const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from tenant_invitations where tenant_id = ${acme}`;
  t.equal(n, 0, 'nothing was written');
  const own = await ok(ts, alice.token, INVITE, { t: acme, i: { inviteeEmail: 'erin@example.com', roleId: acmeAdminRole } });
  t.match(own.createTenantInvitation, { roleId: acmeAdminRole, roleName: 'tenant-admin' }, "the tenant's own role is fine");
});

t.test('accepting an invitation runs the whole check, with the inviter as grantor', async (t) => {
  // Invitations written before the check existed (or by a path that skipped it): accepting must still refuse.
  const expiresAt = new Date(Date.now() + 3_600_000);
  await sql`insert into tenant_invitations (tenant_id, invitee_user_id, role_id, invited_by, expires_at)
    values (${acme}, ${gDevice}, ${acmeAdminRole}, ${alice.id}, ${expiresAt})`;
  const deviceToken = await tokenFor(ts, gDevice);
  t.match(codeAndMessage(await fails(ts, deviceToken, `mutation ($t: ID!) { acceptTenantInvitation(tenantId: $t) }`, { t: acme })),
    [{ code: 'BAD_REQUEST', message: 'the subject belongs to another tenant: cross-tenant grants are only for platform roles' }],
    "acceptTenantInvitation: Globex's device does not receive Acme's role");
  t.same(await foreignFootprint(), { assignments: 0, memberships: 0 }, 'the membership was rolled back with the grant');

  await sql`insert into tenant_invitations (tenant_id, invitee_user_id, role_id, invited_by, expires_at)
    values (${acme}, ${dave.id}, ${PLATFORM_ADMIN_ROLE}, ${alice.id}, ${expiresAt})`;
  t.same(codeAndMessage(await fails(ts, dave.token, `mutation ($t: ID!) { acceptTenantInvitation(tenantId: $t) }`, { t: acme })),
    [{ code: 'FORBIDDEN', message: 'forbidden' }], "acceptTenantInvitation: a platform role invited by a tenant admin");
  await sql`update tenant_invitations set state = 'revoked' where tenant_id = ${acme} and invitee_user_id = ${dave.id}`;

  const token = 'a-token-mailed-before-the-fix-0123456789';
  const { createHash } = await import('node:crypto');
  await sql`insert into tenant_invitations (tenant_id, invitee_email, role_id, invited_by, token_hash, expires_at)
    values (${acme}, 'dave@example.com', ${PLATFORM_ADMIN_ROLE}, ${alice.id}, ${createHash('sha256').update(token).digest('hex')}, ${expiresAt})`;
  t.same(codeAndMessage(await fails(ts, dave.token, `mutation ($k: String!) { acceptTenantInvitationToken(input: {token: $k}) }`, { k: token })),
    [{ code: 'FORBIDDEN', message: 'forbidden' }], 'acceptTenantInvitationToken: the same');
  const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from role_assignments where entity_id = ${dave.id} and role_id = ${PLATFORM_ADMIN_ROLE}`;
  t.equal(n, 0, 'dave did not become a platform administrator');

  // A platform administrator's invitation to a platform role is honoured (the inviter grants it).
  const carol = await createUser(ts, 'carol');
  await ok(ts, admin, INVITE, { t: acme, i: { inviteeUserId: carol.id, roleId: PLATFORM_ADMIN_ROLE } });
  t.equal((await ok(ts, carol.token, `mutation ($t: ID!) { acceptTenantInvitation(tenantId: $t) }`, { t: acme })).acceptTenantInvitation, true);
});

t.test('createRoleAssignment and restoreRole hold the same rule', async (t) => {
  const assign = `mutation ($i: CreateRoleAssignmentInput!) { createRoleAssignment(input: $i) { id } }`;
  t.same(codeAndMessage(await fails(ts, alice.token, assign, { i: { tenantId: acme, subjectKind: 'entity', subjectId: gDevice, roleId: acmeAdminRole } })),
    [{ code: 'NOT_FOUND', message: 'subject entity not found' }], "another tenant's subject reads as missing in the tenant (issue 35.1)");
  t.same(codeAndMessage(await fails(ts, admin, assign, { i: { tenantId: acme, subjectKind: 'entity', subjectId: gDevice, roleId: acmeAdminRole } })),
    [{ code: 'BAD_REQUEST', message: 'the subject belongs to another tenant: cross-tenant grants are only for platform roles' }], 'a platform administrator is told why');
  // A stray assignment (as the defect wrote them) on a deleted role: restoring the role must not revive it.
  const role = (await ok(ts, alice.token, `mutation ($i: CreateRoleInput!) { createRole(input: $i) { id } }`, { i: { name: 'readers', tenantId: acme } })).createRole.id as string;
  await sql`insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) values (${acme}, 'entity', ${gDevice}, ${role})`;
  t.equal((await ok(ts, alice.token, `mutation ($id: ID!) { deleteRole(id: $id) }`, { id: role })).deleteRole, true);
  t.same(codeAndMessage(await fails(ts, admin, `mutation ($id: ID!) { restoreRole(id: $id) }`, { id: role })),
    [{ code: 'BAD_REQUEST', message: 'the subject belongs to another tenant: cross-tenant grants are only for platform roles' }]);
  await sql`delete from role_assignments where role_id = ${role}`;
  t.equal((await ok(ts, admin, `mutation ($id: ID!) { restoreRole(id: $id) }`, { id: role })).restoreRole, true, 'without it, the role comes back');
});

t.test('migration 0070 removes what the defect left behind, audited', async (t) => {
  await sql`insert into tenant_memberships (tenant_id, entity_id, status) values (${acme}, ${gDevice}, 'active')`;
  await sql`insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) values (${acme}, 'entity', ${gDevice}, ${acmeAdminRole})`;
  await sql`insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) values (${acme}, 'entity', ${acmeDevice}, ${acmeAdminRole})`;
  t.same(await foreignFootprint(), { assignments: 1, memberships: 1 });
  await sql.begin((tx) => tx.unsafe(MIGRATION_0070));
  t.same(await foreignFootprint(), { assignments: 0, memberships: 0 });
  const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from role_assignments where entity_id = ${acmeDevice}`;
  t.equal(n, 1, "the tenant's own device keeps its role");
  const events = await sql<{ event: string }[]>`select event from audit_log where details->>'reason' like '%migration 0070%' order by event`;
  t.same(events.map((e) => e.event), ['role_assignment.delete', 'tenant_member.remove']);
});
