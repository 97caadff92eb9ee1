// Resources (channels) over GraphQL, black-box: authorization per operation, tenant isolation, uniqueness,
// frozen tenants, delete/restore/purge, paging and ordering, attribute filters, object-group containment.
import t from 'tap';
import { adminToken, startAuthService, tokenFor } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';

const ts = await startAuthService(t);
const admin = await adminToken(ts);

type Body = { data?: Record<string, any> | null; errors?: any[] };
const call = async (token: string | undefined, query: string, variables?: Record<string, unknown>): Promise<Body> =>
  (await gql(ts.url(), query, variables, token)).body;
const errorOf = (b: Body) => ({ code: b.errors?.[0]?.extensions?.code, message: b.errors?.[0]?.message });
const FORBIDDEN = { code: 'FORBIDDEN', message: 'forbidden' };

const FIELDS = 'id kind name alias tenantId ownerId attributes objectGroupIds parentGroupId createdAt updatedAt deletedAt';
const CREATE = `mutation ($input: CreateResourceInput!) { createResource(input: $input) { ${FIELDS} } }`;
const GET = `query ($id: ID!) { resource(id: $id) { ${FIELDS} } }`;
const LIST = `query ($tenantId: ID, $kind: String, $q: String, $attributesContains: JSON, $parentGroupId: ID, $includeDescendants: Boolean,
  $deleted: DeletedFilter, $order: ResourceOrder, $dir: SortDir, $limit: Int, $offset: Int) {
  resources(tenantId: $tenantId, kind: $kind, q: $q, attributesContains: $attributesContains, parentGroupId: $parentGroupId,
    includeDescendants: $includeDescendants, deleted: $deleted, order: $order, dir: $dir, limit: $limit, offset: $offset) {
    total items { id name kind } } }`;
const UPDATE = `mutation ($id: ID!, $input: UpdateResourceInput!) { updateResource(id: $id, input: $input) { ${FIELDS} } }`;
const DELETE = `mutation ($id: ID!) { deleteResource(id: $id) }`;
const RESTORE = `mutation ($id: ID!) { restoreResource(id: $id) }`;
const PURGE = `mutation ($id: ID!) { purgeResource(id: $id) }`;
const KINDS = `query ($tenantId: ID) { resourceKinds(tenantId: $tenantId) }`;
const ADD = `mutation ($r: ID!, $g: ID!) { addResourceToObjectGroup(resourceId: $r, objectGroupId: $g) { id objectGroupIds parentGroupId } }`;
const REMOVE = `mutation ($r: ID!, $g: ID!) { removeResourceFromObjectGroup(resourceId: $r, objectGroupId: $g) { id objectGroupIds } }`;
const CLEAR = `mutation ($r: ID!) { clearResourceObjectGroups(resourceId: $r) { id objectGroupIds } }`;

async function human(name: string) {
  const b = await call(admin, `mutation ($input: CreateEntityInput!) { createEntity(input: $input) { id } }`, { input: { kind: 'human', name } });
  if (!b.data?.createEntity) throw new Error(`createEntity ${name}: ${JSON.stringify(b.errors)}`);
  const id = b.data.createEntity.id as string;
  return { id, token: await tokenFor(ts, id) };
}

/** A tenant created through the API by `owner`, who becomes its tenant admin. */
async function tenantOf(owner: { token: string }, name: string): Promise<string> {
  const b = await call(owner.token, `mutation ($input: CreateTenantInput!) { createTenant(input: $input) { id } }`, { input: { name } });
  if (!b.data?.createTenant) throw new Error(`createTenant ${name}: ${JSON.stringify(b.errors)}`);
  return b.data.createTenant.id as string;
}

async function objectGroup(token: string, tenantId: string, name: string): Promise<string> {
  const b = await call(token, `mutation ($input: CreateGroupInput!) { createObjectGroup(input: $input) { id } }`, { input: { name, tenantId } });
  if (!b.data?.createObjectGroup) throw new Error(`createObjectGroup ${name}: ${JSON.stringify(b.errors)}`);
  return b.data.createObjectGroup.id as string;
}

async function resource(token: string, input: Record<string, unknown>): Promise<Record<string, any>> {
  const b = await call(token, CREATE, { input: { kind: 'channel', attributes: {}, ...input } });
  if (!b.data?.createResource) throw new Error(`createResource: ${JSON.stringify(b.errors)}`);
  return b.data.createResource;
}

const alice = await human('alice');
const bob = await human('bob');
const carol = await human('carol');
const tenantA = await tenantOf(alice, 'tenant-a');
const tenantB = await tenantOf(bob, 'tenant-b');

t.test('unauthenticated callers are refused with missing authentication', async (t) => {
  for (const [query, variables] of [[LIST, {}], [CREATE, { input: { kind: 'channel', name: 'x', tenantId: tenantA } }], [KINDS, {}]] as const) {
    const b = await call(undefined, query, variables);
    t.same(errorOf(b), { code: 'UNAUTHENTICATED', message: 'missing authentication' });
  }
});

t.test('createResource: tenant admin may, others may not; kind is validated and becomes resource:<kind>', async (t) => {
  const r = await resource(alice.token, { name: 'temperature', tenantId: tenantA, alias: 'temp', attributes: { unit: 'C' } });
  t.match(r, { kind: 'channel', name: 'temperature', alias: 'temp', tenantId: tenantA, ownerId: null, attributes: { unit: 'C' },
    objectGroupIds: [], parentGroupId: null, updatedAt: null, deletedAt: null });
  t.same(errorOf(await call(carol.token, CREATE, { input: { kind: 'channel', name: 'x', tenantId: tenantA } })), FORBIDDEN, 'no grants');
  t.same(errorOf(await call(bob.token, CREATE, { input: { kind: 'channel', name: 'x', tenantId: tenantA } })), FORBIDDEN, 'another tenant admin');
  const bad = errorOf(await call(alice.token, CREATE, { input: { kind: 'Bad Kind', name: 'x', tenantId: tenantA } }));
  t.equal(bad.code, 'BAD_REQUEST');
  t.match(bad.message, /^kind must be/);
  t.match(errorOf(await call(alice.token, CREATE, { input: { kind: 'channel', name: '  ', tenantId: tenantA } })),
    { code: 'BAD_REQUEST', message: 'name must be a non-empty string' });
  t.match(errorOf(await call(alice.token, CREATE, { input: { kind: 'channel', name: 'x', tenantId: 'nope' } })),
    { code: 'BAD_REQUEST', message: 'tenantId must be a UUID' });
  const custom = await resource(alice.token, { kind: 'rule', name: 'alarm', tenantId: tenantA, ownerId: alice.id });
  t.match(custom, { kind: 'rule', ownerId: alice.id }, 'kind is free-form; a global owner may own a tenant resource');
  const bobsDevice = await call(admin, `mutation ($input: CreateEntityInput!) { createEntity(input: $input) { id } }`,
    { input: { kind: 'device', name: 'bobs-device', tenantId: tenantB } });
  // Another tenant's entity reads as a missing one in the tenant (issue 35.1); a platform administrator is told why.
  t.same(errorOf(await call(alice.token, CREATE, { input: { kind: 'channel', name: 'x', tenantId: tenantA, ownerId: bobsDevice.data?.createEntity.id } })),
    { code: 'BAD_REQUEST', message: 'ownerId must be a live entity' });
  t.same(errorOf(await call(admin, CREATE, { input: { kind: 'channel', name: 'x', tenantId: tenantA, ownerId: bobsDevice.data?.createEntity.id } })),
    { code: 'BAD_REQUEST', message: 'ownerId belongs to another tenant' });
});

t.test('alias is unique per tenant among live resources: CONFLICT with a clear message', async (t) => {
  await resource(alice.token, { name: 'one', tenantId: tenantA, alias: 'dup' });
  const again = await call(alice.token, CREATE, { input: { kind: 'channel', name: 'two', tenantId: tenantA, alias: 'dup' } });
  t.same(errorOf(again), { code: 'CONFLICT', message: 'a resource with this alias already exists in this tenant' });
  t.ok(await resource(bob.token, { name: 'three', tenantId: tenantB, alias: 'dup' }), 'the same alias in another tenant is fine');
  t.match(errorOf(await call(alice.token, CREATE, { input: { kind: 'channel', name: 'x', tenantId: tenantA, alias: 'Not An Alias' } })),
    { code: 'BAD_REQUEST', message: /^alias must be/ });
});

t.test('resource(id) and resources: reads are confined to the caller\'s tenants; totals do not leak', async (t) => {
  const mine = await resource(alice.token, { name: 'mine', tenantId: tenantA });
  t.equal((await call(alice.token, GET, { id: mine.id })).data?.resource.name, 'mine');
  t.same(errorOf(await call(bob.token, GET, { id: mine.id })), FORBIDDEN);
  t.same(errorOf(await call(carol.token, GET, { id: mine.id })), FORBIDDEN);
  const aliceList = (await call(alice.token, LIST, { tenantId: tenantA, limit: 100 })).data?.resources;
  t.ok(aliceList.total >= 1 && aliceList.items.some((r: any) => r.id === mine.id));
  t.same((await call(bob.token, LIST, { tenantId: tenantA })).data?.resources, { total: 0, items: [] }, 'another tenant admin sees nothing');
  t.same((await call(carol.token, LIST, {})).data?.resources, { total: 0, items: [] }, 'no grants, nothing');
  const bobAll = (await call(bob.token, LIST, { limit: 100 })).data?.resources;
  t.ok(bobAll.items.length > 0 && bobAll.total === bobAll.items.length);
  const bobIds = new Set(bobAll.items.map((r: any) => r.id));
  t.notOk(bobIds.has(mine.id), 'unfiltered listing holds only the caller\'s tenants');
  const adminAll = (await call(admin, LIST, { limit: 100 })).data?.resources;
  t.equal(adminAll.total, aliceList.total + bobAll.total, 'the platform admin sees every tenant');
  t.match(errorOf(await call(alice.token, LIST, { order: 'nope' })), { code: 'BAD_REQUEST' });
});

t.test('updateResource: attributes replaced, alias kept when omitted and cleared with null; refused across tenants', async (t) => {
  const r = await resource(alice.token, { name: 'u', tenantId: tenantA, alias: 'u-alias', attributes: { a: 1, b: 2 } });
  const u = (await call(alice.token, UPDATE, { id: r.id, input: { attributes: { c: 3, status: 'inactive' } } })).data?.updateResource;
  t.same(u.attributes, { c: 3, status: 'inactive' }, 'no merge');
  t.equal(u.alias, 'u-alias');
  t.equal(u.name, 'u');
  t.ok(u.updatedAt);
  const renamed = (await call(alice.token, UPDATE, { id: r.id, input: { name: 'renamed', alias: null } })).data?.updateResource;
  t.match(renamed, { name: 'renamed', alias: null, attributes: { c: 3, status: 'inactive' } });
  t.same(errorOf(await call(bob.token, UPDATE, { id: r.id, input: { name: 'x' } })), FORBIDDEN);
  t.same(errorOf(await call(carol.token, UPDATE, { id: r.id, input: { name: 'x' } })), FORBIDDEN);
  // attributes.status is display-only: the tenant admin's read on the "inactive" channel still holds.
  const check = await call(admin, `query ($input: AuthzCheckInput!) { authzCheck(input: $input) { allowed reason } }`,
    { input: { subjectId: alice.id, action: 'read', resourceId: r.id } });
  t.same(check.data?.authzCheck, { allowed: true, reason: 'allowed' });
});

t.test('delete -> restore -> purge: soft delete hides, platform admin restores and purges', async (t) => {
  const r = await resource(alice.token, { name: 'doomed', tenantId: tenantA, alias: 'doomed' });
  t.same(errorOf(await call(bob.token, DELETE, { id: r.id })), FORBIDDEN, 'another tenant admin cannot delete');
  t.same(errorOf(await call(carol.token, DELETE, { id: r.id })), FORBIDDEN);
  t.equal((await call(alice.token, DELETE, { id: r.id })).data?.deleteResource, true);
  const live = (await call(alice.token, LIST, { tenantId: tenantA, limit: 100 })).data?.resources;
  t.notOk(live.items.some((x: any) => x.id === r.id), 'gone from the default listing');
  t.same(errorOf(await call(alice.token, LIST, { tenantId: tenantA, deleted: 'deleted' })), FORBIDDEN, 'deleted listings are for platform admins');
  const deleted = (await call(admin, LIST, { tenantId: tenantA, deleted: 'deleted' })).data?.resources;
  t.same(deleted.items.map((x: any) => x.id), [r.id]);
  const all = (await call(admin, LIST, { tenantId: tenantA, deleted: 'all', limit: 100 })).data?.resources;
  t.equal(all.total, live.total + 1);
  t.match(deleted.items, [{ id: r.id }], 'a deleted resource is listed with deleted: deleted');
  t.same(errorOf(await call(admin, GET, { id: r.id })), { code: 'NOT_FOUND', message: 'resource not found' }, 'and missing to live reads');
  t.same(errorOf(await call(alice.token, GET, { id: r.id })), { code: 'NOT_FOUND', message: 'resource not found' }, 'whoever asks');
  t.same(errorOf(await call(alice.token, UPDATE, { id: r.id, input: { name: 'x' } })), { code: 'NOT_FOUND', message: 'resource not found' });
  const decision = await call(admin, `query ($input: AuthzCheckInput!) { authzCheck(input: $input) { allowed } }`,
    { input: { subjectId: alice.id, action: 'read', resourceId: r.id } });
  t.equal(decision.data?.authzCheck.allowed, false, 'authorization no longer finds it');
  t.same(errorOf(await call(alice.token, RESTORE, { id: r.id })), FORBIDDEN, 'restore is platform-admin only');
  t.equal((await call(admin, RESTORE, { id: r.id })).data?.restoreResource, true);
  t.equal((await call(alice.token, GET, { id: r.id })).data?.resource.deletedAt, null);
  t.match(errorOf(await call(admin, PURGE, { id: r.id })), { code: 'BAD_REQUEST', message: /delete it first/ });
  t.equal((await call(alice.token, DELETE, { id: r.id })).data?.deleteResource, true);
  t.same(errorOf(await call(alice.token, PURGE, { id: r.id })), FORBIDDEN, 'purge is platform-admin only');
  t.equal((await call(admin, PURGE, { id: r.id })).data?.purgeResource, true);
  t.same(errorOf(await call(admin, GET, { id: r.id })), { code: 'NOT_FOUND', message: 'resource not found' });
  await ts.service.audit.flush();
  const events = await ts.service.sql<{ event: string }[]>`
    select event from audit_log where target_id = ${r.id} and event like 'resource.%' order by created_at, id`;
  t.same(events.map((e) => e.event), ['resource.create', 'resource.delete', 'resource.restore', 'resource.delete', 'resource.purge']);
});

t.test('frozen tenant: writes refused, reads allowed', async (t) => {
  const tenantF = await tenantOf(alice, 'tenant-frozen');
  const r = await resource(alice.token, { name: 'cold', tenantId: tenantF });
  const group = await objectGroup(alice.token, tenantF, 'cold-group');
  const frozen = await call(admin, `mutation ($id: ID!) { freezeTenant(id: $id) { status } }`, { id: tenantF });
  t.equal(frozen.data?.freezeTenant.status, 'frozen');
  const FROZEN = { code: 'FORBIDDEN', message: 'tenant is frozen' };
  t.same(errorOf(await call(alice.token, CREATE, { input: { kind: 'channel', name: 'x', tenantId: tenantF } })), FROZEN);
  t.same(errorOf(await call(alice.token, UPDATE, { id: r.id, input: { name: 'x' } })), FROZEN);
  t.same(errorOf(await call(alice.token, DELETE, { id: r.id })), FROZEN);
  t.same(errorOf(await call(alice.token, ADD, { r: r.id, g: group })), FROZEN);
  t.same(errorOf(await call(carol.token, UPDATE, { id: r.id, input: { name: 'x' } })), FORBIDDEN, 'no grants: nothing learnt about the tenant');
  t.equal((await call(alice.token, GET, { id: r.id })).data?.resource.name, 'cold');
  t.same((await call(alice.token, LIST, { tenantId: tenantF })).data?.resources.items.map((x: any) => x.id), [r.id]);
  t.same((await call(alice.token, KINDS, { tenantId: tenantF })).data?.resourceKinds, ['channel']);
});

t.test('paging and ordering: total and page from one query, every order key, both directions', async (t) => {
  const owner = await human('pager');
  const tenantP = await tenantOf(owner, 'tenant-paging');
  const specs = [['delta', 'channel'], ['alpha', 'sensor'], ['echo', 'channel'], ['charlie', 'actuator'], ['bravo', 'sensor']];
  const created: string[] = [];
  for (const [name, kind] of specs) created.push((await resource(owner.token, { name, kind, tenantId: tenantP })).id);
  const page = async (vars: Record<string, unknown>) => (await call(owner.token, LIST, { tenantId: tenantP, ...vars })).data?.resources;
  const byName = [await page({ order: 'name', limit: 2 }), await page({ order: 'name', limit: 2, offset: 2 }), await page({ order: 'name', limit: 2, offset: 4 })];
  t.same(byName.map((p) => p.total), [5, 5, 5]);
  t.same(byName.flatMap((p) => p.items.map((x: any) => x.name)), ['alpha', 'bravo', 'charlie', 'delta', 'echo']);
  t.same((await page({ order: 'name', dir: 'desc', limit: 3 })).items.map((x: any) => x.name), ['echo', 'delta', 'charlie']);
  t.same((await page({ order: 'created_at' })).items.map((x: any) => x.id), created);
  t.same((await page({ order: 'created_at', dir: 'desc' })).items.map((x: any) => x.id), [...created].reverse());
  t.same((await page({ order: 'kind' })).items.map((x: any) => x.kind), ['actuator', 'channel', 'channel', 'sensor', 'sensor']);
  t.same((await page({ offset: 10 })).items, [], 'past the end: empty page, same total');
  t.equal((await page({ limit: 100000 })).items.length, 5, 'limit is clamped, not refused');
  t.same((await page({ kind: 'sensor', order: 'name' })).items.map((x: any) => x.name), ['alpha', 'bravo']);
  t.same((await page({ q: 'ARL' })).items.map((x: any) => x.name), ['charlie'], 'q is a case-insensitive search');
  t.same((await call(owner.token, KINDS, { tenantId: tenantP })).data?.resourceKinds, ['actuator', 'channel', 'sensor']);
  t.same((await call(bob.token, KINDS, { tenantId: tenantP })).data?.resourceKinds, [], 'kinds of another tenant do not leak');
});

t.test('attributesContains is JSON containment', async (t) => {
  const owner = await human('attrs');
  const tenantX = await tenantOf(owner, 'tenant-attrs');
  const red = await resource(owner.token, { name: 'red', tenantId: tenantX, attributes: { color: 'red', tags: ['x', 'y'], geo: { floor: 2 } } });
  await resource(owner.token, { name: 'blue', tenantId: tenantX, attributes: { color: 'blue', geo: { floor: 2 } } });
  const ids = async (attributesContains: unknown) =>
    (await call(owner.token, LIST, { tenantId: tenantX, attributesContains, order: 'name' })).data?.resources.items.map((x: any) => x.name);
  t.same(await ids({ color: 'red' }), ['red']);
  t.same(await ids({ tags: ['y'] }), ['red']);
  t.same(await ids({ geo: { floor: 2 } }), ['blue', 'red']);
  t.same(await ids({ color: 'green' }), []);
  t.match(errorOf(await call(owner.token, LIST, { tenantId: tenantX, attributesContains: [1] })),
    { code: 'BAD_REQUEST', message: 'attributesContains must be a JSON object' });
  t.ok(red);
});

t.test('object groups: add twice is a no-op, remove, clear; descendants over three levels; tenants never mix', async (t) => {
  const g1 = await objectGroup(alice.token, tenantA, 'site');
  const g2 = await objectGroup(alice.token, tenantA, 'building');
  const g3 = await objectGroup(alice.token, tenantA, 'floor');
  const nest = `mutation ($c: ID!, $p: ID!) { setObjectGroupParent(objectGroupId: $c, parentGroupId: $p) { id parentId } }`;
  t.equal((await call(alice.token, nest, { c: g2, p: g1 })).data?.setObjectGroupParent.parentId, g1);
  t.equal((await call(alice.token, nest, { c: g3, p: g2 })).data?.setObjectGroupParent.parentId, g2);
  const r1 = await resource(alice.token, { name: 'at-site', tenantId: tenantA });
  const r2 = await resource(alice.token, { name: 'in-building', tenantId: tenantA });
  const r3 = await resource(alice.token, { name: 'on-floor', tenantId: tenantA });
  await resource(alice.token, { name: 'nowhere', tenantId: tenantA });

  const first = (await call(alice.token, ADD, { r: r1.id, g: g1 })).data?.addResourceToObjectGroup;
  t.same(first, { id: r1.id, objectGroupIds: [g1], parentGroupId: g1 });
  t.same((await call(alice.token, ADD, { r: r1.id, g: g1 })).data?.addResourceToObjectGroup.objectGroupIds, [g1], 'adding twice is a no-op');
  await call(alice.token, ADD, { r: r2.id, g: g2 });
  await call(alice.token, ADD, { r: r3.id, g: g3 });

  const names = async (vars: Record<string, unknown>) =>
    (await call(alice.token, LIST, { tenantId: tenantA, order: 'name', ...vars })).data?.resources.items.map((x: any) => x.name);
  t.same(await names({ parentGroupId: g1 }), ['at-site'], 'direct members only');
  t.same(await names({ parentGroupId: g1, includeDescendants: true }), ['at-site', 'in-building', 'on-floor'], 'three levels');
  t.same(await names({ parentGroupId: g2, includeDescendants: true }), ['in-building', 'on-floor']);
  t.same(await names({ parentGroupId: g3, includeDescendants: true }), ['on-floor']);

  // A grant on the site reaches the floor's channel through containment.
  const dave = await human('dave');
  const [role] = await ts.service.sql<{ id: string }[]>`insert into roles (name, tenant_id) values ('site-reader', ${tenantA}) returning id`;
  const [block] = await ts.service.sql<{ id: string }[]>`
    insert into permission_blocks (tenant_id, scope_mode, group_id, object_kind) values (${tenantA}, 'group_descendant_objects', ${g1}, 'resource') returning id`;
  await ts.service.sql`insert into permission_block_actions (block_id, action_id) select ${block!.id}, id from actions where name = 'read'`;
  await ts.service.sql`insert into role_permission_blocks (role_id, block_id) values (${role!.id}, ${block!.id})`;
  await ts.service.sql`insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) values (${tenantA}, 'entity', ${dave.id}, ${role!.id})`;
  await ts.service.authz.invalidate({ kind: 'subjects', entityIds: [dave.id] });
  t.equal((await call(dave.token, GET, { id: r3.id })).data?.resource.name, 'on-floor', 'read through the nested group');
  t.same((await call(alice.token, REMOVE, { r: r3.id, g: g3 })).data?.removeResourceFromObjectGroup.objectGroupIds, []);
  t.same(errorOf(await call(dave.token, GET, { id: r3.id })), FORBIDDEN, 'containment removed: the decision changed at once');
  t.same((await call(alice.token, REMOVE, { r: r3.id, g: g3 })).data?.removeResourceFromObjectGroup.objectGroupIds, [], 'removing twice is a no-op');

  await call(alice.token, ADD, { r: r1.id, g: g2 });
  t.same((await call(alice.token, GET, { id: r1.id })).data?.resource.objectGroupIds, [g1, g2]);
  t.same(errorOf(await call(bob.token, CLEAR, { r: r1.id })), FORBIDDEN);
  t.same((await call(alice.token, CLEAR, { r: r1.id })).data?.clearResourceObjectGroups.objectGroupIds, []);

  const foreignGroup = await objectGroup(bob.token, tenantB, 'bob-group');
  const cross = errorOf(await call(admin, ADD, { r: r1.id, g: foreignGroup }));
  t.same(cross, { code: 'BAD_REQUEST', message: 'the resource and the object group belong to different tenants' }, 'even for the platform admin');
  t.same(errorOf(await call(bob.token, ADD, { r: r1.id, g: g1 })), FORBIDDEN);
  t.same(errorOf(await call(carol.token, ADD, { r: r1.id, g: g1 })), FORBIDDEN);
  const principal = await call(alice.token, `mutation ($input: CreateGroupInput!) { createPrincipalGroup(input: $input) { id } }`,
    { input: { name: 'operators', tenantId: tenantA } });
  t.same(errorOf(await call(alice.token, ADD, { r: r1.id, g: principal.data?.createPrincipalGroup.id })),
    { code: 'BAD_REQUEST', message: 'objectGroupId must be an object group' });
  // An unknown group answers as another tenant's does (issue 35.1): NOT_FOUND only to a platform reader.
  t.same(errorOf(await call(alice.token, ADD, { r: r1.id, g: '00000000-0000-0000-0000-00000000dead' })), FORBIDDEN);
  t.same(errorOf(await call(alice.token, ADD, { r: r1.id, g: foreignGroup })), FORBIDDEN);
  t.same(errorOf(await call(admin, ADD, { r: r1.id, g: '00000000-0000-0000-0000-00000000dead' })), { code: 'NOT_FOUND', message: 'group not found' });
});
