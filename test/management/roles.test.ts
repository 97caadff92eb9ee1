// Roles over GraphQL, black-box: creation (tenant and platform roles), listing with derivedKind, update,
// replacing blocks (tenant rule, guardrails for current holders, decisions follow at once), delete/restore/purge.
import t from 'tap';
import { adminToken, startAuthService, tokenFor } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';

const ts = await startAuthService(t);
const admin = await adminToken(ts);

type Body = { data?: Record<string, any> | null; errors?: any[] };
const call = async (token: string | undefined, query: string, variables?: Record<string, unknown>): Promise<Body> =>
  (await gql(ts.url(), query, variables, token)).body;
const errorOf = (b: Body) => ({ code: b.errors?.[0]?.extensions?.code, message: b.errors?.[0]?.message });
const dataOf = (b: Body) => {
  if (b.errors || !b.data) throw new Error(`GraphQL errors: ${JSON.stringify(b.errors)}`);
  return Object.values(b.data)[0] as any;
};
const FORBIDDEN = { code: 'FORBIDDEN', message: 'forbidden' };
const SVC_ADMIN_ROLE = '00000000-0000-0000-0000-000000000002';

const ROLE_FIELDS = 'id name tenantId description derivedKind isSystem deletedAt deletedBy createdAt updatedAt permissionBlocks { id scopeMode actions { name } }';
const CREATE_ROLE = `mutation ($i: CreateRoleInput!) { createRole(input: $i) { ${ROLE_FIELDS} } }`;
const GET_ROLE = `query ($id: ID!) { role(id: $id) { ${ROLE_FIELDS} } }`;
const LIST_ROLES = `query ($t: ID, $k: String, $q: String, $d: DeletedFilter, $limit: Int, $offset: Int) {
  roles(tenantId: $t, derivedKind: $k, q: $q, deleted: $d, limit: $limit, offset: $offset) { total items { id name tenantId derivedKind } } }`;
const UPDATE_ROLE = `mutation ($id: ID!, $i: UpdateRoleInput!) { updateRole(id: $id, input: $i) { ${ROLE_FIELDS} } }`;
const REPLACE = `mutation ($r: ID!, $b: [ID!]!) { replaceRolePermissionBlocks(roleId: $r, permissionBlockIds: $b) }`;
const CREATE_BLOCK = `mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id tenantId } }`;
const ASSIGN = `mutation ($i: CreateRoleAssignmentInput!) { createRoleAssignment(input: $i) { id } }`;
const op = (name: string) => `mutation ($id: ID!) { ${name}(id: $id) }`;

async function human(name: string) {
  const id = dataOf(await call(admin, `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`, { i: { kind: 'human', name } })).id as string;
  return { id, token: await tokenFor(ts, id) };
}
const tenantOf = async (token: string, name: string) =>
  dataOf(await call(token, `mutation ($i: CreateTenantInput!) { createTenant(input: $i) { id } }`, { i: { name } })).id as string;
const entityIn = async (tenantId: string, kind: string, name: string) =>
  dataOf(await call(admin, `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`, { i: { kind, name, tenantId } })).id as string;
const block = async (token: string, input: Record<string, unknown>) => dataOf(await call(token, CREATE_BLOCK, { i: input })).id as string;

async function check(subjectId: string, action: string, resourceId: string): Promise<{ allowed: boolean; reason: string }> {
  const res = await fetch(`${ts.url()}/authz/check`, {
    method: 'POST', headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ subject_id: subjectId, action, resource_id: resourceId }),
  });
  return res.json() as Promise<{ allowed: boolean; reason: string }>;
}

const alice = await human('alice');
const bob = await human('bob');
const carol = await human('carol');
const tenantA = await tenantOf(alice.token, 'roles-a');
const tenantB = await tenantOf(bob.token, 'roles-b');

t.test('unauthenticated callers are refused', async (t) => {
  t.same(errorOf(await call(undefined, LIST_ROLES, {})), { code: 'UNAUTHENTICATED', message: 'missing authentication' });
  t.same(errorOf(await call(undefined, CREATE_ROLE, { i: { name: 'x', tenantId: tenantA } })), { code: 'UNAUTHENTICATED', message: 'missing authentication' });
});

t.test('createRole: tenant admins in their tenant; platform roles for platform admins only', async (t) => {
  const role = dataOf(await call(alice.token, CREATE_ROLE, { i: { name: 'operators', tenantId: tenantA, description: 'ops' } }));
  t.match(role, { name: 'operators', tenantId: tenantA, description: 'ops', derivedKind: 'empty', isSystem: false, deletedAt: null, updatedAt: null });
  t.same(role.permissionBlocks, []);
  t.same(errorOf(await call(bob.token, CREATE_ROLE, { i: { name: 'x', tenantId: tenantA } })), FORBIDDEN, 'another tenant admin');
  t.same(errorOf(await call(carol.token, CREATE_ROLE, { i: { name: 'x', tenantId: tenantA } })), FORBIDDEN, 'no grants');
  t.same(errorOf(await call(alice.token, CREATE_ROLE, { i: { name: 'x' } })), FORBIDDEN, 'tenant-free platform role');
  t.equal(dataOf(await call(admin, CREATE_ROLE, { i: { name: 'platform-auditor' } })).tenantId, null);
  t.same(errorOf(await call(alice.token, CREATE_ROLE, { i: { name: 'operators', tenantId: tenantA } })),
    { code: 'CONFLICT', message: 'a role with this name already exists in this tenant' });
  t.ok(dataOf(await call(bob.token, CREATE_ROLE, { i: { name: 'operators', tenantId: tenantB } })), 'names are per tenant');
  t.same(errorOf(await call(alice.token, CREATE_ROLE, { i: { name: ' ', tenantId: tenantA } })), { code: 'BAD_REQUEST', message: 'name must be a non-empty string' });
  t.same(errorOf(await call(alice.token, CREATE_ROLE, { i: { name: 'x', tenantId: 'nope' } })), { code: 'BAD_REQUEST', message: 'tenantId must be a UUID' });
});

t.test('role and roles: confined to readable tenants; derivedKind and q filters; deleted needs a platform admin', async (t) => {
  const r = dataOf(await call(alice.token, CREATE_ROLE, { i: { name: 'listed-reader', tenantId: tenantA } }));
  const b1 = await block(alice.token, { scopeMode: 'tenant', tenantId: tenantA, actionIds: ['read'] });
  const b2 = await block(alice.token, { scopeMode: 'object_kind', tenantId: tenantA, objectKind: 'resource', actionIds: ['write'] });
  const simple = dataOf(await call(alice.token, CREATE_ROLE, { i: { name: 'listed-simple', tenantId: tenantA } }));
  const composite = dataOf(await call(alice.token, CREATE_ROLE, { i: { name: 'listed-composite', tenantId: tenantA } }));
  t.equal(dataOf(await call(alice.token, REPLACE, { r: simple.id, b: [b1] })), true);
  t.equal(dataOf(await call(alice.token, REPLACE, { r: composite.id, b: [b1, b2] })), true);

  t.equal(dataOf(await call(alice.token, GET_ROLE, { id: r.id })).name, 'listed-reader');
  t.same(errorOf(await call(bob.token, GET_ROLE, { id: r.id })), FORBIDDEN);
  t.same(errorOf(await call(carol.token, GET_ROLE, { id: r.id })), FORBIDDEN);
  t.same(errorOf(await call(alice.token, GET_ROLE, { id: SVC_ADMIN_ROLE })), FORBIDDEN, 'platform roles are not a tenant admin\'s');
  t.match(dataOf(await call(admin, GET_ROLE, { id: SVC_ADMIN_ROLE })), { name: 'svc-admin', tenantId: null, isSystem: true, derivedKind: 'simple' });

  const mine = dataOf(await call(alice.token, LIST_ROLES, { limit: 100 }));
  t.ok(mine.items.every((x: any) => x.tenantId === tenantA), 'only the caller\'s tenant');
  t.ok(mine.items.some((x: any) => x.name === 'tenant-admin'));
  t.same(dataOf(await call(bob.token, LIST_ROLES, { t: tenantA })), { total: 0, items: [] }, 'another tenant: nothing, not even a count');
  t.same(dataOf(await call(carol.token, LIST_ROLES, {})), { total: 0, items: [] });
  const byKind = async (k: string) => dataOf(await call(alice.token, LIST_ROLES, { t: tenantA, k, q: 'listed', limit: 100 })).items.map((x: any) => x.name);
  t.same(await byKind('empty'), ['listed-reader']);
  t.same(await byKind('simple'), ['listed-simple']);
  t.same(await byKind('composite'), ['listed-composite']);
  t.same(errorOf(await call(alice.token, LIST_ROLES, { k: 'complex' })), { code: 'BAD_REQUEST', message: 'derivedKind must be one of empty, simple, composite' });
  t.same(errorOf(await call(alice.token, LIST_ROLES, { d: 'all' })), FORBIDDEN);
  const all = dataOf(await call(admin, LIST_ROLES, { limit: 100 }));
  t.ok(all.items.some((x: any) => x.tenantId === null) && all.items.some((x: any) => x.tenantId === tenantB), 'platform admin sees every tenant and platform roles');
  const page = dataOf(await call(alice.token, LIST_ROLES, { t: tenantA, q: 'listed', limit: 2, offset: 1 }));
  t.equal(page.total, 3);
  t.equal(page.items.length, 2);
});

t.test('updateRole: role.manage on its tenant; system roles are not editable', async (t) => {
  const r = dataOf(await call(alice.token, CREATE_ROLE, { i: { name: 'rename-me', tenantId: tenantA, description: 'd' } }));
  const u = dataOf(await call(alice.token, UPDATE_ROLE, { id: r.id, i: { name: 'renamed' } }));
  t.match(u, { name: 'renamed', description: 'd', updatedAt: String });
  t.equal(dataOf(await call(alice.token, UPDATE_ROLE, { id: r.id, i: { description: null } })).description, null);
  t.same(errorOf(await call(bob.token, UPDATE_ROLE, { id: r.id, i: { name: 'x' } })), FORBIDDEN);
  t.same(errorOf(await call(admin, UPDATE_ROLE, { id: SVC_ADMIN_ROLE, i: { name: 'x' } })),
    { code: 'BAD_REQUEST', message: "system role 'svc-admin' cannot be changed" });
});

t.test('replaceRolePermissionBlocks: blocks of the role\'s tenant only; decisions follow at once', async (t) => {
  const dave = await human('dave');
  const channel = dataOf(await call(alice.token, `mutation ($i: CreateResourceInput!) { createResource(input: $i) { id } }`,
    { i: { kind: 'channel', name: 'roles-ch', tenantId: tenantA } })).id as string;
  const r = dataOf(await call(alice.token, CREATE_ROLE, { i: { name: 'channel-readers', tenantId: tenantA } }));
  dataOf(await call(alice.token, ASSIGN, { i: { tenantId: tenantA, subjectKind: 'entity', subjectId: dave.id, roleId: r.id } }));
  t.same(await check(dave.id, 'read', channel), { allowed: false, reason: 'no matching allow policy' }, 'an empty role grants nothing (and is cached)');

  const read = await block(alice.token, { scopeMode: 'object_kind', tenantId: tenantA, objectKind: 'resource', actionIds: ['read'] });
  t.equal(dataOf(await call(alice.token, REPLACE, { r: r.id, b: [read] })), true);
  t.same(await check(dave.id, 'read', channel), { allowed: true, reason: 'allowed' }, 'the holder of a formerly empty role sees the new block');
  t.match(dataOf(await call(alice.token, GET_ROLE, { id: r.id })), { derivedKind: 'simple', permissionBlocks: [{ id: read, actions: [{ name: 'read' }] }] });

  const foreign = await block(bob.token, { scopeMode: 'tenant', tenantId: tenantB, actionIds: ['read'] });
  // Another tenant's block reads as a missing one to a caller who may not read it (issue 35.1).
  t.same(errorOf(await call(alice.token, REPLACE, { r: r.id, b: [read, foreign] })),
    { code: 'BAD_REQUEST', message: `permission block ${foreign} not found` });
  t.same(errorOf(await call(admin, REPLACE, { r: r.id, b: [read, foreign] })),
    { code: 'BAD_REQUEST', message: "permission blocks must belong to the role's tenant" }, 'a platform administrator reads it, and is told why');
  t.same(errorOf(await call(bob.token, REPLACE, { r: r.id, b: [foreign] })), FORBIDDEN);
  t.same(errorOf(await call(carol.token, REPLACE, { r: r.id, b: [] })), FORBIDDEN);
  t.same(errorOf(await call(alice.token, REPLACE, { r: r.id, b: ['00000000-0000-0000-0000-00000000dead'] })),
    { code: 'BAD_REQUEST', message: 'permission block 00000000-0000-0000-0000-00000000dead not found' });

  t.equal(dataOf(await call(alice.token, REPLACE, { r: r.id, b: [] })), true);
  t.same(await check(dave.id, 'read', channel), { allowed: false, reason: 'no matching allow policy' }, 'removing the block withdrew the grant at once');
  t.equal(dataOf(await call(alice.token, GET_ROLE, { id: r.id })).derivedKind, 'empty');
});

t.test('replaceRolePermissionBlocks runs the guardrails for every current holder (directly and through groups)', async (t) => {
  const device = await entityIn(tenantA, 'device', 'roles-device');
  const r = dataOf(await call(alice.token, CREATE_ROLE, { i: { name: 'device-role', tenantId: tenantA } }));
  dataOf(await call(alice.token, ASSIGN, { i: { tenantId: tenantA, subjectKind: 'entity', subjectId: device, roleId: r.id } }));
  const publish = await block(alice.token, { scopeMode: 'object_type', tenantId: tenantA, objectKind: 'resource', objectType: 'resource:channel', actionIds: ['publish'] });
  const del = await block(alice.token, { scopeMode: 'object_type', tenantId: tenantA, objectKind: 'resource', objectType: 'resource:channel', actionIds: ['delete'] });
  t.equal(dataOf(await call(alice.token, REPLACE, { r: r.id, b: [publish] })), true, 'publish on channels is fine for a device');
  const refused = await call(alice.token, REPLACE, { r: r.id, b: [publish, del] });
  t.same(errorOf(refused), { code: 'action_not_allowed_for_entity_kind', message: 'guardrail rejected device receiving delete on resource:channel' });
  t.same(dataOf(await call(alice.token, GET_ROLE, { id: r.id })).permissionBlocks.map((b: any) => b.id), [publish], 'nothing changed');

  // The same role held by a principal group whose only device member joined after the assignment.
  const r2 = dataOf(await call(alice.token, CREATE_ROLE, { i: { name: 'group-role', tenantId: tenantA } }));
  const g = dataOf(await call(alice.token, `mutation ($i: CreateGroupInput!) { createPrincipalGroup(input: $i) { id } }`, { i: { name: 'roles-team', tenantId: tenantA } })).id;
  dataOf(await call(alice.token, ASSIGN, { i: { tenantId: tenantA, subjectKind: 'group', subjectId: g, roleId: r2.id } }));
  const member = await entityIn(tenantA, 'device', 'roles-member');
  t.equal(dataOf(await call(alice.token, `mutation ($g: ID!, $e: ID!) { addGroupMember(groupId: $g, entityId: $e) }`, { g, e: member })), true);
  t.same(errorOf(await call(alice.token, REPLACE, { r: r2.id, b: [del] })),
    { code: 'action_not_allowed_for_entity_kind', message: 'guardrail rejected device receiving delete on resource:channel' });
  await ts.service.audit.flush();
  const [rejected] = await ts.service.sql<{ n: number }[]>`
    select count(*)::int as n from audit_log where event = 'guardrail.rejected' and details->>'operation' = 'role.permission_blocks.replace'`;
  t.ok(rejected!.n >= 2, 'rejections are audited');
});

t.test('deleteRole (soft), restoreRole and purgeRole', async (t) => {
  const erin = await human('erin');
  const channel = dataOf(await call(alice.token, `mutation ($i: CreateResourceInput!) { createResource(input: $i) { id } }`,
    { i: { kind: 'channel', name: 'roles-del-ch', tenantId: tenantA } })).id as string;
  const r = dataOf(await call(alice.token, CREATE_ROLE, { i: { name: 'doomed', tenantId: tenantA } }));
  const read = await block(alice.token, { scopeMode: 'object', objectId: channel, actionIds: ['read'] });
  dataOf(await call(alice.token, REPLACE, { r: r.id, b: [read] }));
  dataOf(await call(alice.token, ASSIGN, { i: { tenantId: tenantA, subjectKind: 'entity', subjectId: erin.id, roleId: r.id } }));
  t.equal((await check(erin.id, 'read', channel)).allowed, true);

  t.same(errorOf(await call(bob.token, op('deleteRole'), { id: r.id })), FORBIDDEN);
  t.equal(dataOf(await call(alice.token, op('deleteRole'), { id: r.id })), true);
  t.equal((await check(erin.id, 'read', channel)).allowed, false, 'a deleted role grants nothing, at once');
  t.same(errorOf(await call(alice.token, GET_ROLE, { id: r.id })), FORBIDDEN, 'a deleted role is for platform admins');
  t.notOk(dataOf(await call(alice.token, LIST_ROLES, { t: tenantA, limit: 100 })).items.some((x: any) => x.id === r.id));
  t.ok(dataOf(await call(admin, LIST_ROLES, { t: tenantA, d: 'deleted' })).items.some((x: any) => x.id === r.id));
  t.match(dataOf(await call(admin, GET_ROLE, { id: r.id })), { deletedAt: String, deletedBy: alice.id });

  t.same(errorOf(await call(alice.token, op('restoreRole'), { id: r.id })), FORBIDDEN);
  t.equal(dataOf(await call(admin, op('restoreRole'), { id: r.id })), true);
  t.equal((await check(erin.id, 'read', channel)).allowed, true, 'restoring brings the grant back at once');
  t.same(errorOf(await call(admin, op('restoreRole'), { id: r.id })), { code: 'BAD_REQUEST', message: 'role is not deleted' });
  t.same(errorOf(await call(admin, op('purgeRole'), { id: r.id })), { code: 'BAD_REQUEST', message: 'only a deleted role can be purged; delete it first' });
  t.same(errorOf(await call(admin, op('deleteRole'), { id: SVC_ADMIN_ROLE })), { code: 'BAD_REQUEST', message: "system role 'svc-admin' cannot be changed" });

  dataOf(await call(alice.token, op('deleteRole'), { id: r.id }));
  t.same(errorOf(await call(alice.token, op('purgeRole'), { id: r.id })), FORBIDDEN);
  t.equal(dataOf(await call(admin, op('purgeRole'), { id: r.id })), true);
  t.same(errorOf(await call(admin, GET_ROLE, { id: r.id })), { code: 'NOT_FOUND', message: 'role not found' });
  const [left] = await ts.service.sql<{ n: number }[]>`select count(*)::int as n from role_assignments where role_id = ${r.id}`;
  t.equal(left!.n, 0, 'purging removed its assignments');
  const [blocksLeft] = await ts.service.sql<{ n: number }[]>`select count(*)::int as n from permission_blocks where id = ${read}`;
  t.equal(blocksLeft!.n, 0, 'and the block only it held');
  await ts.service.audit.flush();
  const events = await ts.service.sql<{ event: string }[]>`select event from audit_log where target_kind = 'role' and target_id = ${r.id} order by created_at`;
  t.same(events.map((e) => e.event), ['role.create', 'role.permission_blocks.replace', 'role.delete', 'role.restore', 'role.delete', 'role.purge']);
});

t.test('restoreRole judges the role\'s grants by the guardrails in force now', async (t) => {
  const sensor = await entityIn(tenantA, 'device', 'roles-restore-sensor');
  const channel = dataOf(await call(alice.token, `mutation ($i: CreateResourceInput!) { createResource(input: $i) { id } }`,
    { i: { kind: 'channel', name: 'roles-restore-ch', tenantId: tenantA } })).id as string;
  const r = dataOf(await call(alice.token, CREATE_ROLE, { i: { name: 'readers', tenantId: tenantA } }));
  const read = await block(alice.token, { scopeMode: 'object', objectId: channel, actionIds: ['read'] });
  dataOf(await call(alice.token, REPLACE, { r: r.id, b: [read] }));
  dataOf(await call(alice.token, ASSIGN, { i: { tenantId: tenantA, subjectKind: 'entity', subjectId: sensor, roleId: r.id } }));
  dataOf(await call(alice.token, op('deleteRole'), { id: r.id }));
  // While the role was deleted, the tenant forbade devices reading resources.
  dataOf(await call(alice.token, `mutation ($i: CreateActionAssignmentRuleInput!) { createActionAssignmentRule(input: $i) { id } }`,
    { i: { tenantId: tenantA, entityKind: 'device', actionName: 'read', objectKind: 'resource', decision: 'deny' } }));
  const refused = await call(admin, op('restoreRole'), { id: r.id });
  t.equal(refused.errors?.[0]?.extensions?.code, 'action_not_allowed_for_entity_kind');
  t.equal((await check(sensor, 'read', channel)).allowed, false, 'nothing was restored');
  t.ok(dataOf(await call(admin, LIST_ROLES, { t: tenantA, d: 'deleted' })).items.some((x: any) => x.id === r.id), 'the role stays deleted');
});
