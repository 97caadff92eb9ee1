// Permission blocks naming a policy object (issue 22 point 6, INTERFACES.md section 6): deleting the direct
// policy or role assignment a block names deletes the block, whatever path deletes it (a mutation, a role
// purge's cascade), so no grant on a vanished object survives, in the database or in a cached decision.
import t from 'tap';
import { adminToken, startAuthService } from '../helpers/auth.js';
import { createTenant, createUser, ok } from '../helpers/management.js';
import { gql } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';

const ts = await startAuthService(t);
const admin = await adminToken(ts);
const sql = ts.service.sql;

t.test('blocks naming a deleted direct policy or role assignment are deleted with it', async (t) => {
  const alice = await createUser(ts, 'alice');
  const acme = await createTenant(ts, alice.token, 'acme');
  const run = (query: string, variables: Record<string, unknown>) => ok(ts, alice.token, query, variables);
  const entity = async (kind: string, name: string) => (await run(`mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`,
    { i: { kind, name, tenantId: acme } })).createEntity.id as string;
  const block = async (input: Record<string, unknown>) => (await run(`mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
    { i: { tenantId: acme, ...input } })).createPermissionBlock.id as string;
  const directPolicy = async (subjectId: string, permissionBlockId: string) => (await run(`mutation ($i: CreateDirectPolicyInput!) { createDirectPolicy(input: $i) { id } }`,
    { i: { tenantId: acme, subjectKind: 'entity', subjectId, permissionBlockId } })).createDirectPolicy.id as string;
  const role = async (name: string, blocks: string[]) => {
    const id = (await run(`mutation ($i: CreateRoleInput!) { createRole(input: $i) { id } }`, { i: { name, tenantId: acme } })).createRole.id as string;
    await run(`mutation ($r: ID!, $b: [ID!]!) { replaceRolePermissionBlocks(roleId: $r, permissionBlockIds: $b) }`, { r: id, b: blocks });
    return id;
  };
  const assign = async (subjectId: string, roleId: string) => (await run(`mutation ($i: CreateRoleAssignmentInput!) { createRoleAssignment(input: $i) { id } }`,
    { i: { tenantId: acme, subjectKind: 'entity', subjectId, roleId } })).createRoleAssignment.id as string;
  const check = async (subjectId: string, objectId: string) => (await ok(ts, admin, `query ($i: AuthzCheckInput!) { authzCheck(input: $i) { allowed reason } }`,
    { i: { subjectId, action: 'policy.manage', objectKind: 'policy', objectId } })).authzCheck as { allowed: boolean; reason: string };
  const naming = async (id: string) => (await sql<{ n: number }[]>`select count(*)::int as n from permission_blocks where object_id = ${id}`)[0]!.n;
  const BLOCK = `query ($id: ID!) { permissionBlock(id: $id) { id } }`;

  const device = await entity('device', 'd1');
  const channel = (await run(`mutation ($i: CreateResourceInput!) { createResource(input: $i) { id } }`, { i: { kind: 'channel', name: 'c1', tenantId: acme } })).createResource.id;
  const publish = await block({ scopeMode: 'object', objectKind: 'resource', objectId: channel, actionIds: ['publish'] });

  // A direct policy P, and a block naming it held by u through a direct policy of its own.
  const p = await directPolicy(device, publish);
  const u = await entity('service', 'u');
  const onP = await block({ scopeMode: 'object', objectKind: 'policy', objectId: p, actionIds: ['policy.manage'] });
  const uPolicy = await directPolicy(u, onP);
  t.same(await check(u, p), { allowed: true, reason: 'allowed' }, 'service u may manage P (and the decision is now cached)');
  t.equal((await run(`mutation ($id: ID!) { deleteDirectPolicy(id: $id) }`, { id: p })).deleteDirectPolicy, true);
  t.equal(await naming(p), 0, 'the block naming P is gone');
  // Gone: an unknown id, FORBIDDEN to the tenant admin (issue 35.1), NOT_FOUND to a platform administrator.
  t.match((await gql(ts.url(), BLOCK, { id: onP }, alice.token)).body.errors?.[0], { extensions: { code: 'FORBIDDEN' } });
  t.match((await gql(ts.url(), BLOCK, { id: onP }, admin)).body.errors?.[0], { extensions: { code: 'NOT_FOUND' } });
  t.equal((await sql`select 1 from direct_policies where id = ${uPolicy}`).length, 0, "and u's direct policy holding it");
  t.equal((await check(u, p)).allowed, false, 'no cached grant survives');

  // A role assignment A, and a block naming it held by w through a role.
  const v = await entity('device', 'v');
  const a = await assign(v, await role('publishers', [publish]));
  const w = await entity('service', 'w');
  const onA = await block({ scopeMode: 'object', objectKind: 'policy', objectId: a, actionIds: ['policy.manage'] });
  await assign(w, await role('assignment-keepers', [onA]));
  t.same(await check(w, a), { allowed: true, reason: 'allowed' });
  t.equal((await run(`mutation ($id: ID!) { deleteRoleAssignment(id: $id) }`, { id: a })).deleteRoleAssignment, true);
  t.equal(await naming(a), 0, 'the block naming A is gone');
  t.equal((await sql`select 1 from role_permission_blocks where block_id = ${onA}`).length, 0, 'and unlinked from its role');
  t.equal((await check(w, a)).allowed, false);

  // A cascade: purging a role deletes its assignments, and the blocks naming them go too. The purge
  // drops the role's own subjects' grants; x's cached grant is dropped by the notification the trigger sends.
  const y = await entity('device', 'y');
  const doomedRole = await role('doomed', [publish]);
  const a3 = await assign(y, doomedRole);
  const x = await entity('service', 'x');
  const onA3 = await block({ scopeMode: 'object', objectKind: 'policy', objectId: a3, actionIds: ['policy.manage'] });
  await directPolicy(x, onA3);
  t.same(await check(x, a3), { allowed: true, reason: 'allowed' });
  t.equal((await run(`mutation ($id: ID!) { deleteRole(id: $id) }`, { id: doomedRole })).deleteRole, true);
  t.equal((await ok(ts, admin, `mutation ($id: ID!) { purgeRole(id: $id) }`, { id: doomedRole })).purgeRole, true);
  t.equal(await naming(a3), 0, 'the purge cascade deleted the block naming A3');
  await waitUntil(async () => !(await check(x, a3)).allowed, 10_000, 'the cached grant on A3 is dropped');
  t.pass('no cached grant on A3 survives');

  await ts.service.audit.flush();
  const [audited] = await sql<{ details: { deleted_targeting_block_ids?: string[] } }[]>`
    select details from audit_log where event = 'direct_policy.delete' and target_id = ${p}`;
  t.same(audited?.details.deleted_targeting_block_ids, [onP], 'the deletion records the blocks it took along');
});
