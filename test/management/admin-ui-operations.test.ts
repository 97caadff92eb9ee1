// The admin UI's operations against the live schema (issue 22 point 4): every operation text of
// fixtures/admin-ui-operations.ts (INTERFACES.md sections 1 and 7) passes the validation the GraphQL
// endpoint runs (the specified rules plus its document bounds: fragments, aliases, depth, complexity); then the operations this
// issue adds are run: orphanPolicies, expiringCredentials, explain, profiles(status: "active") and
// auditLogs(targetId: $id) with an ID variable, each refused to a caller without the grant.
import { parse, specifiedRules, validate } from 'graphql';
import t from 'tap';
import { checkDocument } from '../../src/graphql/limits.js';
import { adminToken, startAuthService } from '../helpers/auth.js';
import { createTenant, createUser, fails, ok } from '../helpers/management.js';
import { explainTemplate, mutations, queries } from './fixtures/admin-ui-operations.js';

const ts = await startAuthService(t);
const admin = await adminToken(ts);
const sql = ts.service.sql;

t.test('every admin UI operation validates against the live schema', async (t) => {
  const { schema } = ts.service.graphql;
  const { graphql: limits, lists } = ts.service.config;
  // Measured as the endpoint measures them, each page at its largest (variables unknown), against half the
  // complexity budget: the UI stays well under it whatever page size it asks for.
  const typing = { schema, maxPageSize: lists.maxLimit, jsonFieldCost: limits.jsonFieldCost };
  const half = { ...limits, maxComplexity: limits.maxComplexity / 2 };
  for (const op of [...queries, ...mutations, explainTemplate]) {
    if (op.skip) {
      t.comment(`skipped ${op.name}: ${op.skip}`);
      continue;
    }
    const document = parse(op.text);
    const bounds = checkDocument(document, half, typing);
    const errors = [...bounds.errors, ...validate(schema, document, specifiedRules)];
    t.same(errors.map((e) => e.message), [], op.name);
    t.notOk(bounds.costDependsOnVariables, `${op.name}: within half the budget at the largest pages`);
  }
});

t.test('orphanPolicies: platform manage; direct policies and assignments whose subject, role or block target is gone', async (t) => {
  const alice = await createUser(ts, 'alice');
  const acme = await createTenant(ts, alice.token, 'acme');
  const run = (query: string, variables: Record<string, unknown>) => ok(ts, alice.token, query, variables);
  const entity = async (name: string) => (await run(`mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`,
    { i: { kind: 'device', name, tenantId: acme } })).createEntity.id as string;
  const channel = async (name: string) => (await run(`mutation ($i: CreateResourceInput!) { createResource(input: $i) { id } }`,
    { i: { kind: 'channel', name, tenantId: acme } })).createResource.id as string;
  const block = async (objectId: string) => (await run(`mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
    { i: { tenantId: acme, scopeMode: 'object', objectKind: 'resource', objectId, actionIds: ['publish'] } })).createPermissionBlock.id as string;
  const policy = async (subjectId: string, permissionBlockId: string) => (await run(`mutation ($i: CreateDirectPolicyInput!) { createDirectPolicy(input: $i) { id } }`,
    { i: { tenantId: acme, subjectKind: 'entity', subjectId, permissionBlockId } })).createDirectPolicy.id as string;
  const ORPHANS = `query ($limit: Int, $offset: Int) { orphanPolicies(limit: $limit, offset: $offset) {
    id tenantId sourceKind subjectKind subjectId roleId permissionBlockId orphanReason createdAt } }`;

  const ch1 = await channel('c1');
  const ch2 = await channel('c2');
  const b1 = await block(ch1);
  const b2 = await block(ch2);
  const [live, gone, targetGone] = [await entity('live'), await entity('gone'), await entity('target-gone')];
  const livePolicy = await policy(live, b1);
  const gonePolicy = await policy(gone, b1);
  const targetPolicy = await policy(targetGone, b2);
  const role = (await run(`mutation ($i: CreateRoleInput!) { createRole(input: $i) { id } }`, { i: { name: 'publishers', tenantId: acme } })).createRole.id as string;
  await run(`mutation ($r: ID!, $b: [ID!]!) { replaceRolePermissionBlocks(roleId: $r, permissionBlockIds: $b) }`, { r: role, b: [b1] });
  const assignment = (await run(`mutation ($i: CreateRoleAssignmentInput!) { createRoleAssignment(input: $i) { id } }`,
    { i: { tenantId: acme, subjectKind: 'entity', subjectId: live, roleId: role } })).createRoleAssignment.id as string;
  t.same((await ok(ts, admin, ORPHANS, {})).orphanPolicies, [], 'nothing is orphaned yet');

  await run(`mutation ($id: ID!) { deleteEntity(id: $id) }`, { id: gone });
  await run(`mutation ($id: ID!) { deleteResource(id: $id) }`, { id: ch2 });
  await run(`mutation ($id: ID!) { deleteRole(id: $id) }`, { id: role });
  const orphans = (await ok(ts, admin, ORPHANS, {})).orphanPolicies as Record<string, unknown>[];
  const byId = Object.fromEntries(orphans.map((o) => [o.id, o]));
  t.same(Object.keys(byId).sort(), [gonePolicy, targetPolicy, assignment].sort(), 'the live policy is not listed');
  t.match(byId[gonePolicy], { tenantId: acme, sourceKind: 'direct_policy', subjectKind: 'entity', subjectId: gone, roleId: null, permissionBlockId: b1, orphanReason: 'subject_deleted' });
  t.match(byId[targetPolicy], { sourceKind: 'direct_policy', subjectId: targetGone, permissionBlockId: b2, orphanReason: 'block_target_deleted' });
  t.match(byId[assignment], { sourceKind: 'role_assignment', subjectId: live, roleId: role, permissionBlockId: null, orphanReason: 'role_deleted', createdAt: String });
  t.notOk(byId[livePolicy]);
  t.equal((await ok(ts, admin, ORPHANS, { limit: 1 })).orphanPolicies.length, 1, 'paged');
  t.equal((await ok(ts, admin, ORPHANS, { limit: 2, offset: 2 })).orphanPolicies.length, 1);

  // An exact-object block whose object id names nothing (object_id has no foreign key).
  const [ghostBlock] = await sql<{ id: string }[]>`
    insert into permission_blocks (tenant_id, scope_mode, object_kind, object_id) values (${acme}, 'object', 'resource', gen_random_uuid()) returning id`;
  await sql`insert into permission_block_actions (block_id, action_id) select ${ghostBlock!.id}, id from actions where name = 'publish'`;
  const ghostPolicy = await policy(live, ghostBlock!.id).catch(async () => {
    const [row] = await sql<{ id: string }[]>`insert into direct_policies (tenant_id, subject_kind, entity_id, block_id) values (${acme}, 'entity', ${live}, ${ghostBlock!.id}) returning id`;
    return row!.id;
  });
  t.match((await ok(ts, admin, ORPHANS, {})).orphanPolicies.find((o: { id: string }) => o.id === ghostPolicy), { orphanReason: 'block_target_not_found' });

  t.match(await fails(ts, alice.token, ORPHANS, {}), [{ message: 'forbidden', extensions: { code: 'FORBIDDEN' } }], 'a tenant admin is refused');
  t.match(await fails(ts, undefined, ORPHANS, {}), [{ extensions: { code: 'UNAUTHENTICATED' } }]);
});

t.test('expiringCredentials: platform manage; active credentials of live entities expiring within the window', async (t) => {
  const bob = await createUser(ts, 'bob');
  const globex = await createTenant(ts, bob.token, 'globex');
  const device = (await ok(ts, bob.token, `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`, { i: { kind: 'device', name: 'gd', tenantId: globex } })).createEntity.id;
  const inDays = (d: number) => new Date(Date.now() + d * 86_400_000).toISOString();
  const key = async (expiresAt: string | null) => (await ok(ts, bob.token, `mutation ($e: ID!, $i: CreateSharedKeyInput) { createSharedKey(entityId: $e, input: $i) { credentialId } }`,
    { e: device, i: { expiresAt } })).createSharedKey.credentialId as string;
  const soon = await key(inDays(3));
  const later = await key(inDays(20));
  const far = await key(inDays(90));
  const never = await key(null);
  const revoked = await key(inDays(5));
  await ok(ts, bob.token, `mutation ($c: ID!) { revokeCredential(credentialId: $c) }`, { c: revoked });
  const token = (await ok(ts, bob.token, `mutation ($i: CreateAccessTokenInput!) { createAccessToken(input: $i) { credentialId } }`,
    { i: { name: 'soon', scoped: false, permissions: [], expiresAt: inDays(1) } })).createAccessToken.credentialId as string;
  // An already-expired credential is not "expiring" (its window has passed).
  await sql`update credentials set expires_at = now() - interval '1 day' where id = ${far}`;
  const EXPIRING = `query ($days: Int, $entityId: ID, $kind: CredentialKind, $limit: Int, $offset: Int) {
    expiringCredentials(days: $days, entityId: $entityId, kind: $kind, limit: $limit, offset: $offset) { id entityId kind identifier status expiresAt createdAt } }`;
  const ids = async (variables: Record<string, unknown>) => ((await ok(ts, admin, EXPIRING, variables)).expiringCredentials as { id: string }[]).map((c) => c.id);

  t.same(await ids({}), [token, soon, later], 'default 30 days, soonest first; revoked, never-expiring and expired left out');
  t.same(await ids({ days: 7 }), [token, soon]);
  t.same(await ids({ days: 7, kind: 'shared_key' }), [soon]);
  t.same(await ids({ entityId: device }), [soon, later]);
  t.same(await ids({ limit: 1, offset: 1 }), [soon]);
  t.notOk((await ids({ days: 365 })).includes(never));
  t.match((await ok(ts, admin, EXPIRING, { days: 7, kind: 'shared_key' })).expiringCredentials[0], { id: soon, entityId: device, kind: 'shared_key', status: 'active', expiresAt: String });
  t.match(await fails(ts, admin, EXPIRING, { days: -1 }), [{ message: 'days must be an integer from 0 to 36500', extensions: { code: 'BAD_REQUEST' } }]);
  await ok(ts, bob.token, `mutation ($id: ID!) { deleteEntity(id: $id) }`, { id: device });
  t.same(await ids({}), [token], "a deleted entity's credentials are not listed");
  t.match(await fails(ts, bob.token, EXPIRING, {}), [{ message: 'forbidden', extensions: { code: 'FORBIDDEN' } }], 'a tenant admin is refused');
});

t.test('explain as a query: decision, reason and trace; gated like authzExplain', async (t) => {
  const carol = await createUser(ts, 'carol');
  const initech = await createTenant(ts, carol.token, 'initech');
  const device = (await ok(ts, carol.token, `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`, { i: { kind: 'device', name: 'id1', tenantId: initech } })).createEntity.id;
  const channel = (await ok(ts, carol.token, `mutation ($i: CreateResourceInput!) { createResource(input: $i) { id } }`, { i: { kind: 'channel', name: 'ic', tenantId: initech } })).createResource.id;
  const block = (await ok(ts, carol.token, `mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
    { i: { tenantId: initech, scopeMode: 'object', objectKind: 'resource', objectId: channel, actionIds: ['publish'] } })).createPermissionBlock.id;
  await ok(ts, carol.token, `mutation ($i: CreateDirectPolicyInput!) { createDirectPolicy(input: $i) { id } }`,
    { i: { tenantId: initech, subjectKind: 'entity', subjectId: device, permissionBlockId: block } });

  const template = await ok(ts, admin, explainTemplate.text, { entityId: device, action: 'publish', resourceId: channel });
  t.same(template.explain, { decision: 'allow', reason: 'allowed' }, 'the UI template as written');
  const FULL = `query ($e: ID!, $a: String!, $r: ID, $k: String, $o: ID, $c: JSON) {
    explain(entityId: $e, action: $a, resourceId: $r, objectKind: $k, objectId: $o, context: $c) {
      decision allowed reason details subject resource capability matchedBinding evaluatedBindings } }`;
  const full = (await ok(ts, admin, FULL, { e: device, a: 'publish', k: 'resource', o: channel, c: { ip: '10.0.0.1' } })).explain;
  t.match(full, { decision: 'allow', allowed: true, reason: 'allowed', subject: { id: device, kind: 'device' }, resource: { id: channel, type: 'resource:channel' },
    capability: { name: 'publish' }, matchedBinding: { block_id: block, effect: 'allow', grant_kind: 'capability' } });
  t.ok(full.evaluatedBindings.length >= 1, 'the trace');
  t.match((await ok(ts, admin, FULL, { e: device, a: 'subscribe', r: channel })).explain, { decision: 'deny', reason: 'no matching allow policy', matchedBinding: null });
  t.match((await ok(ts, admin, FULL, { e: device, a: 'execute', r: channel })).explain,
    { decision: 'deny', reason: "action 'execute' is not valid for resource:channel", details: { action: 'execute' } });
  t.match(await fails(ts, admin, FULL, { e: device, a: 'publish' }), [{ message: 'resourceId or objectKind is required', extensions: { code: 'BAD_REQUEST' } }]);
  t.match(await fails(ts, carol.token, FULL, { e: device, a: 'publish', r: channel }), [{ message: 'forbidden' }], 'a tenant admin is refused, as for authzExplain');
});

t.test('profiles take status as the string the UI sends; auditLogs take an ID variable for targetId', async (t) => {
  const dave = await createUser(ts, 'dave');
  const umbrella = await createTenant(ts, dave.token, 'umbrella');
  const counters = await ok(ts, dave.token, `query ($t: ID!) {
    active: profiles(tenantId: $t, status: "active") { total } disabled: profiles(tenantId: $t, status: "disabled") { total } }`, { t: umbrella });
  t.ok(counters.active.total > 0, 'seeded device types are active');
  t.equal(counters.disabled.total, 0);
  const viaVariable = await ok(ts, dave.token, `query ($t: ID!, $s: String) { profiles(tenantId: $t, status: $s) { total } }`, { t: umbrella, s: 'active' });
  t.equal(viaVariable.profiles.total, counters.active.total);
  t.match(await fails(ts, dave.token, `query ($t: ID!) { profiles(tenantId: $t, status: "gone") { total } }`, { t: umbrella }),
    [{ message: 'status must be one of active, deprecated, disabled', extensions: { code: 'BAD_REQUEST' } }]);

  await ts.service.audit.flush();
  const logs = await ok(ts, admin, `query ($id: ID) { auditLogs(targetId: $id) { total items { targetId event } } }`, { id: umbrella });
  t.ok(logs.auditLogs.total > 0 && logs.auditLogs.items.every((i: { targetId: string }) => i.targetId === umbrella), 'an ID-typed variable filters by target');
  const other = await createUser(ts, 'erin');
  t.match(await fails(ts, other.token, `query ($id: ID, $t: ID) { auditLogs(targetId: $id, tenantId: $t) { total } }`, { id: umbrella, t: umbrella }),
    [{ message: 'forbidden' }], 'another tenant cannot read it');
});
