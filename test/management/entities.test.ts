import t from 'tap';
import { adminToken, startAuthService, tokenFor } from '../helpers/auth.js';
import { createEntity, createTenant, createUser, fails, ok } from '../helpers/management.js';

const ENTITY = 'id kind name externalId alias tenantId status attributes objectGroupIds parentGroupId createdAt updatedAt deletedAt deletedBy';

t.test('entities: create, read, list, update, lifecycle, ownership and isolation', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const alice = await createUser(ts, 'alice');
  const bob = await createUser(ts, 'bob');
  const acme = await createTenant(ts, alice.token, 'Acme', 'acme');
  const globex = await createTenant(ts, bob.token, 'Globex', 'globex');

  await t.test('create: one entity per call; tenant admins create in their tenant only', async (t) => {
    const data = await ok(ts, alice.token, `mutation ($t: ID!) { createEntity(input: {kind: device, name: "gw-1", tenantId: $t,
      externalId: "  EXT-1  ", alias: "gw-1", attributes: {is_gateway: true, fw: "1.2"}}) { ${ENTITY} } }`, { t: acme });
    t.match(data.createEntity, {
      kind: 'device', name: 'gw-1', externalId: 'EXT-1', alias: 'gw-1', tenantId: acme, status: 'active',
      attributes: { is_gateway: true, fw: '1.2' }, objectGroupIds: [], parentGroupId: null, updatedAt: null, deletedAt: null,
    });
    t.match(await fails(ts, alice.token, `mutation ($t: ID!) { createEntity(input: {kind: device, name: "x", tenantId: $t}) { id } }`, { t: globex }),
      [{ message: 'forbidden', extensions: { code: 'FORBIDDEN' } }], 'not in another tenant');
    t.match(await fails(ts, alice.token, `mutation { createEntity(input: {kind: service, name: "global-svc"}) { id } }`),
      [{ message: 'forbidden' }], 'a tenant admin cannot create global entities');
    t.match(await fails(ts, alice.token, `mutation ($t: ID!) { createEntity(input: {kind: human, name: "h", tenantId: $t}) { id } }`, { t: acme }),
      [{ message: /humans are global entities/, extensions: { code: 'BAD_REQUEST' } }]);
    t.match(await fails(ts, undefined, `mutation ($t: ID!) { createEntity(input: {kind: device, name: "x", tenantId: $t}) { id } }`, { t: acme }),
      [{ message: 'missing authentication' }]);
    t.match(await fails(ts, alice.token, `mutation ($t: ID!) { createEntity(input: {kind: device, name: "x", tenantId: $t, attributes: [1]}) { id } }`, { t: acme }),
      [{ message: 'attributes must be a JSON object' }]);
  });

  await t.test('uniqueness: name per tenant, externalId per workspace among live entities', async (t) => {
    t.match(await fails(ts, alice.token, `mutation ($t: ID!) { createEntity(input: {kind: device, name: "gw-1", tenantId: $t}) { id } }`, { t: acme }),
      [{ message: 'an entity with this name already exists in this tenant', extensions: { code: 'CONFLICT' } }]);
    t.match(await fails(ts, alice.token, `mutation ($t: ID!) { createEntity(input: {kind: device, name: "gw-2", tenantId: $t, externalId: "EXT-1"}) { id } }`, { t: acme }),
      [{ message: 'an entity with this externalId already exists in this workspace', extensions: { code: 'CONFLICT' } }]);
    await createEntity(ts, alice.token, { kind: 'device', name: 'gw-case', tenantId: acme, externalId: 'ext-1' });
    await createEntity(ts, bob.token, { kind: 'device', name: 'gw-1', tenantId: globex, externalId: 'EXT-1' });
    t.pass('externalId is case-sensitive, and names and externalIds repeat across tenants');
  });

  const [gw] = await ts.service.sql<{ id: string }[]>`select id from entities where name = 'gw-1' and tenant_id = ${acme}`;
  const gwId = gw!.id;

  await t.test('read and cross-tenant isolation', async (t) => {
    t.equal((await ok(ts, alice.token, `query ($id: ID!) { entity(id: $id) { name } }`, { id: gwId })).entity.name, 'gw-1');
    t.match(await fails(ts, bob.token, `query ($id: ID!) { entity(id: $id) { name } }`, { id: gwId }), [{ message: 'forbidden' }]);
    t.match(await fails(ts, bob.token, `mutation ($id: ID!) { updateEntity(id: $id, input: {name: "pwned"}) { id } }`, { id: gwId }), [{ message: 'forbidden' }]);
    t.match(await fails(ts, bob.token, `mutation ($id: ID!) { deleteEntity(id: $id) }`, { id: gwId }), [{ message: 'forbidden' }]);
    const leak = await ok(ts, bob.token, `query ($t: ID!) { entities(tenantId: $t) { total items { id } } }`, { t: acme });
    t.same(leak.entities, { total: 0, items: [] }, "another tenant's totals do not leak");
    const own = await ok(ts, bob.token, `{ entities { total } }`);
    t.equal(own.entities.total, 1, 'without tenantId a tenant admin lists only tenants it may read');
    t.match(await fails(ts, alice.token, `query { entity(id: "not-a-uuid") { id } }`), [{ message: 'id must be a UUID', extensions: { code: 'BAD_REQUEST' } }]);
    // An unknown id answers a tenant administrator as another tenant's entity does (issue 35.1); only a
    // caller reading entities at platform scope reads 'entity not found'.
    t.match(await fails(ts, alice.token, `query { entity(id: "7d1f4a8e-0000-4000-8000-000000000000") { id } }`), [{ message: 'forbidden', extensions: { code: 'FORBIDDEN' } }]);
    t.match(await fails(ts, admin, `query { entity(id: "7d1f4a8e-0000-4000-8000-000000000000") { id } }`), [{ message: 'entity not found', extensions: { code: 'NOT_FOUND' } }]);
  });

  await t.test('update semantics: attributes replaced, alias/externalId omitted keeps and null clears, suspended only here', async (t) => {
    const u1 = await ok(ts, alice.token, `mutation ($id: ID!) { updateEntity(id: $id, input: {attributes: {fw: "2.0"}}) { attributes alias externalId updatedAt } }`, { id: gwId });
    t.match(u1.updateEntity, { attributes: { fw: '2.0' }, alias: 'gw-1', externalId: 'EXT-1', updatedAt: /^\d{4}-/ });
    const u2 = await ok(ts, alice.token, `mutation ($id: ID!) { updateEntity(id: $id, input: {alias: null, externalId: null}) { attributes alias externalId } }`, { id: gwId });
    t.same(u2.updateEntity, { attributes: { fw: '2.0' }, alias: null, externalId: null });
    const u3 = await ok(ts, alice.token, `mutation ($id: ID!) { updateEntity(id: $id, input: {status: suspended}) { status } }`, { id: gwId });
    t.equal(u3.updateEntity.status, 'suspended');
    t.match(await fails(ts, alice.token, `mutation ($id: ID!) { updateEntity(id: $id, input: {email: "x@y.z"}) { id } }`, { id: gwId }),
      [{ extensions: { code: 'BAD_REQUEST' } }], 'email is not an input field');
    t.equal((await ok(ts, alice.token, `mutation ($id: ID!) { enableEntity(id: $id) { status } }`, { id: gwId })).enableEntity.status, 'active');
    t.equal((await ok(ts, alice.token, `mutation ($id: ID!) { disableEntity(id: $id) { status } }`, { id: gwId })).disableEntity.status, 'inactive');
    await ok(ts, alice.token, `mutation ($id: ID!) { enableEntity(id: $id) { status } }`, { id: gwId });
  });

  await t.test('a suspended entity cannot authenticate', async (t) => {
    const svc = await createEntity(ts, alice.token, { kind: 'service', name: 'svc-1', tenantId: acme });
    const token = await tokenFor(ts, svc);
    t.ok((await ok(ts, token, `query ($id: ID!) { entity(id: $id) { id } }`, { id: svc }).catch(() => ({}))), 'token works before');
    await ok(ts, alice.token, `mutation ($id: ID!) { updateEntity(id: $id, input: {status: suspended}) { status } }`, { id: svc });
    t.match(await fails(ts, token, `query ($id: ID!) { entity(id: $id) { id } }`, { id: svc }), [{ extensions: { code: 'UNAUTHENTICATED' } }]);
  });

  await t.test('filters, ordering and paging', async (t) => {
    for (const [name, kind, attrs] of [
      ['temp-a', 'device', { room: 'lab', floor: 1 }], ['temp-b', 'device', { room: 'lab', floor: 2 }],
      ['cam-c', 'device', { room: 'hall' }], ['worker-d', 'workload', { room: 'lab' }],
    ] as const) {
      await createEntity(ts, alice.token, { kind, name, tenantId: acme, attributes: attrs, externalId: `x-${name}` });
    }
    const list = async (args: string) => (await ok(ts, alice.token, `query ($t: ID!) { entities(tenantId: $t, ${args}) { total items { name } } }`, { t: acme })).entities;
    t.same(await list('attributesContains: {room: "lab"}, order: name'), { total: 3, items: [{ name: 'temp-a' }, { name: 'temp-b' }, { name: 'worker-d' }] });
    t.same(await list('attributesContains: {room: "lab", floor: 2}'), { total: 1, items: [{ name: 'temp-b' }] });
    t.equal((await list('kind: workload')).total, 1);
    t.same(await list('q: "temp", order: name, dir: desc'), { total: 2, items: [{ name: 'temp-b' }, { name: 'temp-a' }] });
    t.same(await list('externalId: "x-cam-c"'), { total: 1, items: [{ name: 'cam-c' }] });
    t.same(await list('order: name, limit: 2, offset: 1'), { total: 7, items: [{ name: 'gw-1' }, { name: 'gw-case' }] });
    t.equal((await list('status: suspended')).total, 1);
    t.match(await fails(ts, alice.token, `{ entities(order: nonsense) { total } }`), [{ extensions: { code: 'BAD_REQUEST' } }]);
    // NUL cannot be stored or compared in PostgreSQL text: the client's mistake, not a database error.
    t.match(await fails(ts, alice.token, `{ entities(q: "a\\u0000b") { total } }`),
      [{ message: 'text must not contain NUL characters', extensions: { code: 'BAD_REQUEST' } }]);
  });

  await t.test('object-group descendants over three levels', async (t) => {
    const sql = ts.service.sql;
    const group = async (name: string, parent: string | null) => (await sql<{ id: string }[]>`
      insert into groups (name, tenant_id, group_type, parent_id) values (${name}, ${acme}, 'object', ${parent}) returning id`)[0]!.id;
    const site = await group('site', null);
    const building = await group('building', site);
    const floor = await group('floor', building);
    const ids = async (...names: string[]) => (await sql<{ id: string }[]>`select id from entities where tenant_id = ${acme} and name = any(${names})`).map((r) => r.id);
    for (const [g, names] of [[site, ['cam-c']], [building, ['temp-a']], [floor, ['temp-b', 'worker-d']]] as const) {
      for (const id of await ids(...names)) await sql`insert into object_group_entities (group_id, entity_id) values (${g}, ${id})`;
    }
    const list = async (args: string) => (await ok(ts, alice.token, `query ($t: ID!, $g: ID!) { entities(tenantId: $t, parentGroupId: $g, ${args} order: name) { total items { name objectGroupIds } } }`, { t: acme, g: site })).entities;
    t.same((await list('')).items.map((e: { name: string }) => e.name), ['cam-c']);
    t.same((await list('includeDescendants: true,')).items.map((e: { name: string }) => e.name), ['cam-c', 'temp-a', 'temp-b', 'worker-d']);
    t.same((await list('includeDescendants: true,')).items[0].objectGroupIds, [site]);
  });

  await t.test('delete → restore → purge', async (t) => {
    const doomed = await createEntity(ts, alice.token, { kind: 'device', name: 'doomed', tenantId: acme });
    t.equal((await ok(ts, alice.token, `mutation ($id: ID!) { deleteEntity(id: $id) }`, { id: doomed })).deleteEntity, true);
    t.match(await fails(ts, alice.token, `query ($id: ID!) { entity(id: $id) { id } }`, { id: doomed }), [{ message: 'entity not found', extensions: { code: 'NOT_FOUND' } }]);
    const live = await ok(ts, alice.token, `query ($t: ID!) { entities(tenantId: $t, q: "doomed") { total } }`, { t: acme });
    t.equal(live.entities.total, 0, 'gone from default listings');
    t.match(await fails(ts, alice.token, `query ($t: ID!) { entities(tenantId: $t, deleted: deleted) { total } }`, { t: acme }), [{ message: 'forbidden' }]);
    const deleted = await ok(ts, admin, `query ($t: ID!) { entities(tenantId: $t, deleted: deleted) { items { name deletedBy } } }`, { t: acme });
    t.same(deleted.entities.items, [{ name: 'doomed', deletedBy: alice.id }]);
    await createEntity(ts, alice.token, { kind: 'device', name: 'doomed', tenantId: acme });
    t.pass('the name is free again once the entity is deleted');
    t.match(await fails(ts, alice.token, `mutation ($id: ID!) { restoreEntity(id: $id) }`, { id: doomed }), [{ message: 'forbidden' }], 'restore is platform-admin only');
    t.match(await fails(ts, admin, `mutation ($id: ID!) { restoreEntity(id: $id) }`, { id: doomed }),
      [{ message: 'an entity with this name already exists in this tenant', extensions: { code: 'CONFLICT' } }]);
    const other = await createEntity(ts, alice.token, { kind: 'device', name: 'doomed-2', tenantId: acme });
    await ok(ts, alice.token, `mutation ($id: ID!) { deleteEntity(id: $id) }`, { id: other });
    t.equal((await ok(ts, admin, `mutation ($id: ID!) { restoreEntity(id: $id) }`, { id: other })).restoreEntity, true);
    t.match(await fails(ts, admin, `mutation ($id: ID!) { purgeEntity(id: $id) }`, { id: other }), [{ message: 'only a deleted entity can be purged; delete it first' }]);
    t.match(await fails(ts, alice.token, `mutation ($id: ID!) { purgeEntity(id: $id) }`, { id: doomed }), [{ message: 'forbidden' }]);
    t.equal((await ok(ts, admin, `mutation ($id: ID!) { purgeEntity(id: $id) }`, { id: doomed })).purgeEntity, true);
    t.match(await fails(ts, admin, `query ($id: ID!) { entity(id: $id) { id } }`, { id: doomed }), [{ extensions: { code: 'NOT_FOUND' } }]);
  });

  await t.test('ownership', async (t) => {
    const [owner, owned] = [await createEntity(ts, alice.token, { kind: 'service', name: 'owner', tenantId: acme }), await createEntity(ts, alice.token, { kind: 'device', name: 'owned', tenantId: acme })];
    const made = await ok(ts, alice.token, `mutation ($a: ID!, $b: ID!) { addOwnership(ownerId: $a, ownedId: $b, relation: "maintains") { ownerId ownedId relation createdAt } }`, { a: owner, b: owned });
    t.match(made.addOwnership, { ownerId: owner, ownedId: owned, relation: 'maintains', createdAt: /^\d{4}-/ });
    t.same((await ok(ts, alice.token, `query ($a: ID!) { ownedEntities(ownerId: $a) { name } }`, { a: owner })).ownedEntities, [{ name: 'owned' }]);
    t.match(await fails(ts, bob.token, `mutation ($a: ID!, $b: ID!) { removeOwnership(ownerId: $a, ownedId: $b) }`, { a: owner, b: owned }), [{ message: 'forbidden' }]);
    t.equal((await ok(ts, alice.token, `mutation ($a: ID!, $b: ID!) { removeOwnership(ownerId: $a, ownedId: $b) }`, { a: owner, b: owned })).removeOwnership, true);
    t.match(await fails(ts, alice.token, `mutation ($a: ID!) { addOwnership(ownerId: $a, ownedId: $a) { ownerId } }`, { a: owner }), [{ message: 'an entity cannot own itself' }]);
  });

  await t.test('every change is audited with its tenant', async (t) => {
    await ts.service.audit.flush();
    const rows = await ts.service.sql<{ event: string }[]>`select distinct event from audit_log where target_kind = 'entity' and tenant_id = ${acme} order by event`;
    t.match(rows.map((r) => r.event), ['entity.create', 'entity.delete', 'entity.disable', 'entity.enable', 'entity.purge', 'entity.restore', 'entity.update', 'ownership.add', 'ownership.remove']);
  });
});
