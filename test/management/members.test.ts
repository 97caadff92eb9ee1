import t from 'tap';
import { AUTH_ENV } from '../helpers/auth.js';
import { createEntity, createTenant, createUser, fails, ok, twoTenants } from '../helpers/management.js';
import { capturingMailer, startTestService } from '../helpers/service.js';

t.test('tenant members and invitations', async (t) => {
  const mailer = capturingMailer();
  const ts = await startTestService(t, AUTH_ENV, undefined, { mailer });
  const { admin, alice, bob, dave, acme, globex } = await twoTenants(ts);
  await ts.service.sql`insert into entity_emails (entity_id, email, verified_at) values (${dave.id}, 'dave@example.com', now())`;
  const roles = await ok(ts, alice.token, `query ($t: ID!) { myTenantRoles(tenantId: $t) { roleId roleName } }`, { t: acme });
  const adminRole = roles.myTenantRoles[0].roleId as string;

  await t.test('assignable entities need a 3-character search and the tenant administration grant', async (t) => {
    t.match(await fails(ts, alice.token, `query ($t: ID!) { tenantAssignableEntities(tenantId: $t, q: "da") { total } }`, { t: acme }),
      [{ message: 'q must be at least 3 characters', extensions: { code: 'BAD_REQUEST' } }]);
    const found = await ok(ts, alice.token, `query ($t: ID!) { tenantAssignableEntities(tenantId: $t, q: "example.com") { total items { id } } }`, { t: acme });
    t.same(found.tenantAssignableEntities, { total: 1, items: [{ id: dave.id }] });
    t.match(await fails(ts, bob.token, `query ($t: ID!) { tenantAssignableEntities(tenantId: $t, q: "dave") { total } }`, { t: acme }), [{ message: 'forbidden' }]);
  });

  await t.test('adding a member with a role grants access; removing takes it away', async (t) => {
    t.match(await fails(ts, bob.token, `mutation ($t: ID!, $e: ID!) { addTenantMember(tenantId: $t, entityId: $e) }`, { t: acme, e: dave.id }), [{ message: 'forbidden' }]);
    t.match(await fails(ts, dave.token, `query ($t: ID!) { tenant(id: $t) { id } }`, { t: acme }), [{ message: 'forbidden' }]);
    t.equal((await ok(ts, alice.token, `mutation ($t: ID!, $e: ID!, $r: ID!) { addTenantMember(tenantId: $t, entityId: $e, roleId: $r) }`, { t: acme, e: dave.id, r: adminRole })).addTenantMember, true);
    t.equal((await ok(ts, dave.token, `query ($t: ID!) { tenant(id: $t) { name } }`, { t: acme })).tenant.name, 'Acme', 'the role applies at once');
    const members = await ok(ts, alice.token, `query ($t: ID!) { tenantMembers(tenantId: $t, q: "dav") { total items { id } } }`, { t: acme });
    t.same(members.tenantMembers, { total: 1, items: [{ id: dave.id }] });
    const daveRoles = await ok(ts, dave.token, `query ($t: ID!) { myTenantRoles(tenantId: $t) { roleName assignmentPaths } }`, { t: acme });
    t.same(daveRoles.myTenantRoles, [{ roleName: 'tenant-admin', assignmentPaths: ['direct'] }]);
    t.match(await fails(ts, alice.token, `mutation ($t: ID!, $e: ID!, $r: ID!) { addTenantMember(tenantId: $t, entityId: $e, roleId: $r) }`,
      { t: globex, e: dave.id, r: adminRole }), [{ message: 'forbidden' }], 'not into another tenant');
    const [globexRole] = await ts.service.sql<{ id: string }[]>`select id from roles where tenant_id = ${globex}`;
    t.match(await fails(ts, bob.token, `mutation ($t: ID!, $e: ID!, $r: ID!) { addTenantMember(tenantId: $t, entityId: $e, roleId: $r) }`,
      { t: globex, e: dave.id, r: adminRole }), [{ message: 'role not found' }], "another tenant's role cannot be assigned: it reads as missing in the tenant");
    t.ok(globexRole);
    t.equal((await ok(ts, alice.token, `mutation ($t: ID!, $e: ID!) { removeTenantMember(tenantId: $t, entityId: $e) }`, { t: acme, e: dave.id })).removeTenantMember, true);
    t.match(await fails(ts, dave.token, `query ($t: ID!) { tenant(id: $t) { id } }`, { t: acme }), [{ message: 'forbidden' }], 'access removed with the membership');
  });

  await t.test('a device cannot be added as a tenant admin: guardrails apply to member roles', async (t) => {
    const device = await createEntity(ts, admin, { kind: 'device', name: 'global-device' });
    const errors = await fails(ts, admin, `mutation ($t: ID!, $e: ID!, $r: ID!) { addTenantMember(tenantId: $t, entityId: $e, roleId: $r) }`, { t: acme, e: device, r: adminRole });
    t.match(errors, [{ extensions: { code: 'action_not_allowed_for_entity_kind' } }]);
  });

  await t.test('invitation by email: the emailed token joins the tenant with the invited role', async (t) => {
    const created = await ok(ts, alice.token, `mutation ($t: ID!, $r: ID!) { createTenantInvitation(tenantId: $t, input: {inviteeEmail: "Dave@Example.com", roleId: $r}) {
      id tenantId inviteeEmail roleId roleName state createdAt } }`, { t: acme, r: adminRole });
    t.match(created.createTenantInvitation, { tenantId: acme, inviteeEmail: 'dave@example.com', roleId: adminRole, roleName: 'tenant-admin', state: 'pending' });
    const mail = mailer.sent.at(-1)!;
    t.equal(mail.to, 'dave@example.com');
    const token = /Invitation token: (\S+)/.exec(mail.text)?.[1] as string;
    t.ok(token, 'the mail carries the token');
    t.match(await fails(ts, alice.token, `mutation ($t: ID!) { createTenantInvitation(tenantId: $t, input: {inviteeEmail: "dave@example.com"}) { id } }`, { t: acme }),
      [{ message: 'this email already has a pending invitation to this tenant', extensions: { code: 'CONFLICT' } }]);
    const pending = await ok(ts, alice.token, `query ($t: ID!) { tenantInvitations(tenantId: $t) { total items { inviteeEmail } } }`, { t: acme });
    t.same(pending.tenantInvitations, { total: 1, items: [{ inviteeEmail: 'dave@example.com' }] });
    t.match(await fails(ts, bob.token, `query ($t: ID!) { tenantInvitations(tenantId: $t) { total } }`, { t: acme }), [{ message: 'forbidden' }]);
    const mine = await ok(ts, dave.token, `{ myTenantInvitations { total items { tenantId } } }`);
    t.same(mine.myTenantInvitations, { total: 1, items: [{ tenantId: acme }] });

    t.match(await fails(ts, dave.token, `mutation { acceptTenantInvitationToken(input: {token: "wrong"}) }`), [{ extensions: { code: 'NOT_FOUND' } }]);
    t.equal((await ok(ts, dave.token, `mutation ($k: String!) { acceptTenantInvitationToken(input: {token: $k}) }`, { k: token })).acceptTenantInvitationToken, acme);
    t.equal((await ok(ts, dave.token, `query ($t: ID!) { tenant(id: $t) { name } }`, { t: acme })).tenant.name, 'Acme');
    t.match(await fails(ts, dave.token, `mutation ($k: String!) { acceptTenantInvitationToken(input: {token: $k}) }`, { k: token }), [{ extensions: { code: 'NOT_FOUND' } }], 'a token works once');
  });

  await t.test('invitation by user id: accept, reject and revoke', async (t) => {
    const erin = await createUser(ts, 'erin');
    await ok(ts, bob.token, `mutation ($t: ID!, $u: ID!) { createTenantInvitation(tenantId: $t, input: {inviteeUserId: $u}) { id } }`, { t: globex, u: erin.id });
    t.equal((await ok(ts, erin.token, `mutation ($t: ID!) { rejectTenantInvitation(tenantId: $t) }`, { t: globex })).rejectTenantInvitation, true);
    t.match(await fails(ts, erin.token, `mutation ($t: ID!) { acceptTenantInvitation(tenantId: $t) }`, { t: globex }), [{ message: 'pending invitation not found' }]);
    const again = await ok(ts, bob.token, `mutation ($t: ID!, $u: ID!) { createTenantInvitation(tenantId: $t, input: {inviteeUserId: $u}) { id } }`, { t: globex, u: erin.id });
    t.match(await fails(ts, alice.token, `mutation ($t: ID!, $i: ID!) { revokeTenantInvitation(tenantId: $t, invitationId: $i) }`, { t: globex, i: again.createTenantInvitation.id }), [{ message: 'forbidden' }]);
    t.equal((await ok(ts, bob.token, `mutation ($t: ID!, $i: ID!) { revokeTenantInvitation(tenantId: $t, invitationId: $i) }`, { t: globex, i: again.createTenantInvitation.id })).revokeTenantInvitation, true);
    const revoked = await ok(ts, bob.token, `query ($t: ID!) { tenantInvitations(tenantId: $t, state: revoked) { total } }`, { t: globex });
    t.equal(revoked.tenantInvitations.total, 1);
    await ok(ts, bob.token, `mutation ($t: ID!, $u: ID!) { createTenantInvitation(tenantId: $t, input: {inviteeUserId: $u}) { id } }`, { t: globex, u: erin.id });
    t.equal((await ok(ts, erin.token, `mutation ($t: ID!) { acceptTenantInvitation(tenantId: $t) }`, { t: globex })).acceptTenantInvitation, true);
    const members = await ok(ts, bob.token, `query ($t: ID!) { tenantMembers(tenantId: $t) { items { id } } }`, { t: globex });
    t.ok(members.tenantMembers.items.some((e: { id: string }) => e.id === erin.id), 'accepting makes a member');
    t.match(await fails(ts, erin.token, `query ($t: ID!) { tenant(id: $t) { id } }`, { t: globex }), [{ message: 'forbidden' }], 'membership without a role grants nothing');
  });

  await t.test('invitations need an invitee', async (t) => {
    t.match(await fails(ts, alice.token, `mutation ($t: ID!) { createTenantInvitation(tenantId: $t, input: {}) { id } }`, { t: acme }), [{ message: 'give inviteeUserId or inviteeEmail' }]);
    t.match(await fails(ts, alice.token, `mutation ($t: ID!) { createTenantInvitation(tenantId: $t, input: {inviteeEmail: "nope"}) { id } }`, { t: acme }), [{ message: 'inviteeEmail is not an email address' }]);
  });
});
