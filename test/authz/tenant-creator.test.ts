// An operator that creates tenants holds the tenant-admin role of each: its grants are cached in parts, one
// per tenant, and creating one more tenant reads that tenant's grants and blocks alone, however many it
// created before (issue 33/35: what grows with tenants). Revocations, denies and the other instances
// still follow at once, and nothing reaches across tenants.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { createAuthzCache } from '../../src/authz/cache.js';
import { createAuthz, createTenantAdminRole } from '../../src/authz/index.js';
import type { AuthorizeRequest, ObjectRef } from '../../src/authz/types.js';
import { createGenericPlanPool, type Sql } from '../../src/db/client.js';
import { reachOf, reachOfRemoved } from '../../src/policies/index.js';
import { testLogger } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';
import { SETTINGS, startEngine } from './helpers/engine.js';
import type { World } from './helpers/world.js';

const ADMIN = '00000000-0000-0000-0000-000000000001';

const world: World = {
  tenants: { other: {} },
  // op: a provisioning operator that may create tenants and nothing else at platform scope.
  entities: { op: { kind: 'human' }, stranger: { kind: 'human' }, admin: { kind: 'human', id: ADMIN } },
  resources: { foreign: { kind: 'channel', tenant: 'other' } },
  groups: {},
  objectMembers: [],
  principalMembers: [],
  blocks: { create: { scope: 'object_kind', tenant: null, objectKind: 'tenant', actions: ['create'] } },
  roles: {},
  assignments: [],
  policies: [{ entity: 'op', block: 'create', tenant: null }],
  credentials: {},
};

/** What the engine read from PostgreSQL: statements, grant rows (one per assignment) and block rows. */
interface Reads {
  statements: number;
  grantRows: number;
  blockRows: number;
}

/** A lookups pool that counts what the engine reads through it. */
function countingLookups(url: string): { lookups: Sql; reads: Reads; end: () => Promise<void> } {
  const pool = createGenericPlanPool(url, { name: 'svc-authz', max: 2, connectTimeoutSecs: 10 });
  const reads: Reads = { statements: 0, grantRows: 0, blockRows: 0 };
  const run = pool as unknown as (s: TemplateStringsArray, ...v: unknown[]) => Promise<unknown[]>;
  const lookups = ((strings: TemplateStringsArray, ...values: unknown[]) => {
    const query = run(strings, ...values);
    const text = strings.join('?');
    // Fragments (no select of their own) pass through untouched: they run as part of their statement.
    if (!/\bselect\b/.test(text)) return query;
    reads.statements++;
    return query.then((rows) => {
      if (text.includes('array_agg(g.block_id')) reads.grantRows += rows.length;
      if (text.includes('permission_block_actions')) reads.blockRows += rows.length;
      return rows;
    });
  }) as unknown as Sql;
  return { lookups, reads, end: () => pool.end() };
}

async function start(t: Parameters<typeof startEngine>[0]) {
  const fixture = await startEngine(t, world);
  // Instance A counts its reads; the fixture's own service is instance B (its own cache, same LISTEN hub:
  // A's invalidations reach it through PostgreSQL's NOTIFY like any other instance's).
  const counting = countingLookups(fixture.url);
  const a = createAuthz({ sql: fixture.sql, lookups: counting.lookups, hub: fixture.hub, audit: fixture.audit, log: testLogger(), config: SETTINGS });
  t.teardown(async () => {
    await a.close();
    await counting.end();
  });
  const { sql, ids } = fixture;
  /** createTenant's writes and invalidation, as tenants/service.ts makes them (through instance A). */
  const createTenant = async (creator: string) => {
    const tenantId = randomUUID();
    const role = await sql.begin(async (tx) => {
      await tx`insert into tenants (id, name) values (${tenantId}, ${`t-${tenantId}`})`;
      return createTenantAdminRole(tx, { tenantId, creatorEntityId: creator });
    });
    await a.invalidate(role.invalidation);
    return { tenantId, ...role };
  };
  const channelIn = async (tenantId: string) => {
    const [row] = await sql<{ id: string }[]>`insert into resources (kind, name, tenant_id) values ('channel', 'ch', ${tenantId}) returning id`;
    return (row as { id: string }).id;
  };
  const ask = (subjectId: string, action: string, object: ObjectRef): AuthorizeRequest => ({ subjectId, action, object });
  return { ...fixture, a, b: fixture.authz, reads: counting.reads, createTenant, channelIn, ask, op: ids.op as string };
}

t.test("the creator's decisions after each new tenant read that tenant's grants alone, at 10 tenants as at 60", async (t) => {
  const { a, reads, createTenant, ask, op } = await start(t);
  const platform: ObjectRef = { kind: 'tenant', id: null, tenantId: null };
  t.ok((await a.authorize(ask(op, 'create', platform))).allowed, 'op may create tenants');
  const after: Record<number, Reads> = {};
  let last = '';
  for (let k = 1; k <= 60; k++) {
    const { tenantId } = await createTenant(op);
    Object.assign(reads, { statements: 0, grantRows: 0, blockRows: 0 });
    // What createTenant's caller does next: may it create another, and manage the tenant it made?
    t.ok((await a.authorize(ask(op, 'create', platform))).allowed);
    t.ok((await a.authorize(ask(op, 'manage', { kind: 'tenant', id: tenantId }))).allowed);
    t.ok((await a.authorize(ask(op, 'read', { kind: 'audit_log', id: null, tenantId }))).allowed);
    if (k === 10 || k === 60) after[k] = { ...reads };
    last = tenantId;
  }
  t.same(after[60], after[10], 'the same reads after the 60th tenant as after the 10th');
  t.equal(after[10]?.grantRows, 1, "one grant row: the new tenant's assignment");
  t.equal(after[10]?.blockRows, 3, "three block rows: the new tenant-admin role's");

  // And a decision about one of its tenants consults two parts of 61: the platform one and that tenant's.
  const g = await a.engine.gather(ask(op, 'manage', { kind: 'tenant', id: last }));
  t.notOk(g.done);
  t.equal(g.grants?.parts.size, 61);
  t.equal(g.grants?.everywhere.length, 1, 'one part for every object: the platform grant');
  t.equal(g.grants?.byTenant.get(last)?.length, 1, "one for the tenant's objects");
});

t.test('parts keep every rule: grants per tenant, deny precedence, revocation, other instances, isolation', async (t) => {
  const { a, b, sql, ids, createTenant, channelIn, ask, op } = await start(t);
  const made = [];
  for (let k = 0; k < 5; k++) made.push(await createTenant(op));
  const channels = await Promise.all(made.map((m) => channelIn(m.tenantId)));
  const read = (subject: string, i: number) => ask(subject, 'read', { kind: 'resource', id: channels[i] as string });
  const allowedOn = async (authz: typeof a, r: AuthorizeRequest) => (await authz.authorize(r)).allowed;

  for (const [label, authz] of [['A', a], ['B', b]] as const) {
    for (let i = 0; i < 5; i++) t.ok(await allowedOn(authz, read(op, i)), `${label}: op reads in tenant ${i}`);
    t.notOk(await allowedOn(authz, ask(op, 'read', { kind: 'resource', id: ids.foreign as string })), `${label}: not in a tenant it did not create`);
    t.notOk(await allowedOn(authz, read(ids.stranger as string, 0)), `${label}: nor does anyone else in op's`);
    t.notOk(await allowedOn(authz, ask(op, 'manage', { kind: 'tenant', id: made[0]!.tenantId, tenantId: null })), `${label}: no platform manage on its tenants`);
  }

  // A new tenant through A: B, holding op's grants cached, follows through the NOTIFY.
  const sixth = await createTenant(op);
  const sixthChannel = await channelIn(sixth.tenantId);
  const readSixth = ask(op, 'read', { kind: 'resource', id: sixthChannel });
  t.ok(await allowedOn(a, readSixth), 'A: op reads in the tenant just created');
  await waitUntil(() => allowedOn(b, readSixth), 5000, 'B allowing op in the new tenant');

  // Revoked in tenant 1: denied there at once on A, soon on B; the other tenants are untouched.
  await sql`delete from role_assignments where id = ${made[1]!.assignmentId}`;
  await a.invalidate({ kind: 'tenantGrants', entityIds: [op], tenantIds: [made[1]!.tenantId] });
  t.notOk(await allowedOn(a, read(op, 1)), 'A: revoked at once');
  await waitUntil(async () => !(await allowedOn(b, read(op, 1))), 5000, 'B denying after the revocation');
  for (const authz of [a, b]) t.ok(await allowedOn(authz, read(op, 2)), 'tenant 2 still allowed');

  // A deny block added to tenant 3's tenant-admin role wins over its allow; the role's invalidation (not
  // a tenantGrants one) reaches the part holding it.
  const [deny] = await sql<{ id: string }[]>`
    insert into permission_blocks (tenant_id, scope_mode, effect) values (${made[3]!.tenantId}, 'tenant', 'deny') returning id`;
  await sql`insert into permission_block_actions (block_id, action_id) select ${deny!.id}, id from actions where name = 'read'`;
  await sql`insert into role_permission_blocks (role_id, block_id) values (${made[3]!.roleId}, ${deny!.id})`;
  await a.invalidate({ kind: 'roles', roleIds: [made[3]!.roleId] });
  t.match(await a.authorize(read(op, 3)), { allowed: false, blockIds: [deny!.id] }, 'A: the deny wins');
  await waitUntil(async () => !(await allowedOn(b, read(op, 3))), 5000, 'B denying through the role');
  for (const authz of [a, b]) t.ok(await allowedOn(authz, read(op, 4)), 'tenant 4 still allowed');

  // The platform administrator (every action at platform scope) creates a tenant: a deny in that tenant's
  // role still wins over the platform allow.
  const mine = await createTenant(ADMIN);
  const mineChannel = await channelIn(mine.tenantId);
  const adminRead = ask(ADMIN, 'read', { kind: 'resource', id: mineChannel });
  t.ok(await allowedOn(a, adminRead));
  const [adminDeny] = await sql<{ id: string }[]>`
    insert into permission_blocks (tenant_id, scope_mode, effect) values (${mine.tenantId}, 'tenant', 'deny') returning id`;
  await sql`insert into permission_block_actions (block_id, action_id) select ${adminDeny!.id}, id from actions where name = 'read'`;
  await sql`insert into role_permission_blocks (role_id, block_id) values (${mine.roleId}, ${adminDeny!.id})`;
  await a.invalidate({ kind: 'roles', roleIds: [mine.roleId] });
  t.match(await a.authorize(adminRead), { allowed: false, blockIds: [adminDeny!.id] }, 'a deny in its own tenant beats the platform allow');
  t.ok(await allowedOn(a, ask(ADMIN, 'read', { kind: 'resource', id: ids.foreign as string })), 'and nowhere else');
});

t.test('a part that leaves the cache for room takes the subjects holding it along', async (t) => {
  const cache = createAuthzCache({ subjects: 2, objects: 10, decisions: 10, maxBytes: 1 << 24, ttlMs: 60_000 });
  const part = (signature: string) => ({ stale: false, expiresAt: Infinity, signature, blocks: [], byAction: new Map(),
    allActionsIndex: { exact: new Map(), scan: [] }, refs: new Set<string>(), unbound: false, boundTenants: new Set(['t1']) });
  const p1 = part('sig-1');
  cache.policies.set('sig-1', p1);
  const holder = { stale: false, expiresAt: Infinity, parts: new Map([['t1', p1]]), everywhere: [], byTenant: new Map([['t1', [p1]]]),
    version: 0, reload: new Map<string, number>(),
    subject: { stale: false, expiresAt: Infinity, id: 's1', name: 's1', kind: 'human', tenantId: null, status: 'active', view: {} },
    refs: new Set(['s1', 'policy:sig-1']) };
  cache.grants.set('s1', holder);
  cache.policies.set('sig-2', part('sig-2'));
  t.notOk(holder.stale, 'still held while its part is');
  cache.policies.set('sig-3', part('sig-3'));
  t.ok(p1.stale, 'the least recently used part was evicted');
  t.ok(holder.stale, 'and its holder with it: no invalidation could reach that part any more');
  t.equal(cache.grants.size, 0);

  // A part reload marks the subject's tenants and its version: its memoised decisions are invalid.
  const again = { ...holder, stale: false, version: 0, reload: new Map<string, number>(), refs: new Set(['s1']) };
  cache.grants.set('s1', again);
  cache.reloadGrants(['s1'], ['t1', 't2']);
  t.same([...again.reload.keys()], ['t1', 't2']);
  t.equal(again.version, 1);
  t.notOk(again.stale, 'the entry itself stays: only the marked parts are read again');
});

// Role assignments and direct policies made in a tenant (roles/assignments.ts, policies/direct-policies.ts)
// invalidate through reachOf and reachOfRemoved: a grant in one tenant reloads its holders' part of that
// tenant alone, whether they hold it themselves or through a principal group.
t.test("a grant added or removed in one tenant reads that tenant's part alone, for the entity or through its group", async (t) => {
  const { a, b, sql, reads, createTenant, channelIn, ask, op, ids } = await start(t);
  const member = ids.stranger as string;
  const allowedOn = async (authz: typeof a, r: AuthorizeRequest) => (await authz.authorize(r)).allowed;
  const assign = async (tenantId: string, roleId: string, subject: { kind: 'entity' | 'group'; id: string }) => {
    const [row] = await sql<{ id: string }[]>`
      insert into role_assignments (tenant_id, subject_kind, entity_id, group_id, role_id)
      values (${tenantId}, ${subject.kind}, ${subject.kind === 'entity' ? subject.id : null}, ${subject.kind === 'group' ? subject.id : null}, ${roleId})
      returning id`;
    await a.invalidate(await reachOf(sql, subject, tenantId));
    return (row as { id: string }).id;
  };
  const made = [];
  const channels: string[] = [];
  const after: Record<number, Reads> = {};
  for (let k = 1; k <= 20; k++) {
    const tenant = await createTenant(op);
    made.push(tenant);
    channels.push(await channelIn(tenant.tenantId));
    await assign(tenant.tenantId, tenant.roleId, { kind: 'entity', id: member });
    Object.assign(reads, { statements: 0, grantRows: 0, blockRows: 0 });
    t.ok(await allowedOn(a, ask(member, 'read', { kind: 'resource', id: channels[k - 1] as string })), `reads in tenant ${k} once assigned there`);
    if (k === 2 || k === 20) after[k] = { ...reads };
  }
  t.equal(after[2]?.grantRows, 1, "one grant row after the second assignment: the new tenant's");
  t.same(after[20], after[2], 'and the same reads after the twentieth');
  const read = (i: number) => ask(member, 'read', { kind: 'resource', id: channels[i] as string });
  for (const authz of [a, b]) t.ok(await allowedOn(authz, read(7)), 'cached on both instances');

  // Removed in tenant 7: denied there at once on A, soon on B, by reading that tenant's (now empty) part.
  const [removed] = await sql<{ id: string }[]>`
    delete from role_assignments where entity_id = ${member} and tenant_id = ${made[7]!.tenantId} returning id`;
  t.ok(removed);
  Object.assign(reads, { statements: 0, grantRows: 0, blockRows: 0 });
  await a.invalidate(reachOfRemoved({ kind: 'entity', id: member }, made[7]!.tenantId));
  t.notOk(await allowedOn(a, read(7)), 'A: removed at once');
  t.equal(reads.grantRows, 0, 'no grant row read: the tenant part is empty now, the other 19 stay');
  await waitUntil(async () => !(await allowedOn(b, read(7))), 5000, 'B denying after the removal');
  for (const authz of [a, b]) t.ok(await allowedOn(authz, read(8)), 'tenant 8 still allowed');

  // Through a principal group of tenant 9: a deny role assigned to the group reaches its member's part of
  // tenant 9 alone, on both instances; removing it (a 'groups' invalidation) lifts it again.
  const tenant9 = made[9]!.tenantId;
  const [group] = await sql<{ id: string }[]>`
    insert into groups (name, tenant_id, group_type, status) values ('readers', ${tenant9}, 'principal', 'active') returning id`;
  await sql`insert into principal_group_members (group_id, entity_id) values (${group!.id}, ${member})`;
  await a.invalidate({ kind: 'subjects', entityIds: [member] });
  const [deny] = await sql<{ id: string }[]>`insert into permission_blocks (tenant_id, scope_mode, effect) values (${tenant9}, 'tenant', 'deny') returning id`;
  await sql`insert into permission_block_actions (block_id, action_id) select ${deny!.id}, id from actions where name = 'read'`;
  const [denyRole] = await sql<{ id: string }[]>`insert into roles (tenant_id, name) values (${tenant9}, 'no-reading') returning id`;
  await sql`insert into role_permission_blocks (role_id, block_id) values (${denyRole!.id}, ${deny!.id})`;
  for (const authz of [a, b]) t.ok(await allowedOn(authz, read(9)), 'allowed before the group is denied');
  Object.assign(reads, { statements: 0, grantRows: 0, blockRows: 0 });
  const groupRef = { kind: 'group' as const, id: group!.id };
  t.same(await reachOf(sql, groupRef, tenant9), { kind: 'tenantGrants', entityIds: [member], tenantIds: [tenant9] }, 'the members, in that tenant');
  await assign(tenant9, denyRole!.id, groupRef);
  t.match(await a.authorize(read(9)), { allowed: false, blockIds: [deny!.id] }, 'A: the deny through the group wins at once');
  t.equal(reads.grantRows, 2, "two grant rows: tenant 9's tenant-admin role and the group's deny");
  await waitUntil(async () => !(await allowedOn(b, read(9))), 5000, 'B denying through the group');
  for (const authz of [a, b]) t.ok(await allowedOn(authz, read(10)), 'tenant 10 untouched');
  await sql`delete from role_assignments where group_id = ${group!.id}`;
  await a.invalidate(reachOfRemoved(groupRef, tenant9));
  t.ok(await allowedOn(a, read(9)), 'A: allowed again once the group lost the role');
  await waitUntil(() => allowedOn(b, read(9)), 5000, 'B allowing again');

  // A platform grant (no tenant) is not a tenant's part: its holders' grants are dropped whole.
  t.same(await reachOf(sql, { kind: 'entity', id: member }, null), { kind: 'subjects', entityIds: [member] });
  t.same(reachOfRemoved({ kind: 'entity', id: member }, null), { kind: 'subjects', entityIds: [member] });
});
