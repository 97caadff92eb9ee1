// The audit log over GraphQL and GET /audit/export, black-box: tenant admins read their tenant's entries
// only (never another tenant's, never platform ones), platform admins read everything; filters and paging;
// the export streams JSON lines with the same visibility.
import t from 'tap';
import { adminToken, startAuthService, tokenFor } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';

const ts = await startAuthService(t);
const admin = await adminToken(ts);
const sql = ts.service.sql;
const ADMIN_ID = '00000000-0000-0000-0000-000000000001';

type Body = { data?: Record<string, any> | null; errors?: any[] };
const call = async (token: string | undefined, query: string, variables?: Record<string, unknown>): Promise<Body> =>
  (await gql(ts.url(), query, variables, token)).body;
const errorOf = (b: Body) => ({ code: b.errors?.[0]?.extensions?.code, message: b.errors?.[0]?.message });
const dataOf = (b: Body) => {
  if (b.errors || !b.data) throw new Error(`GraphQL errors: ${JSON.stringify(b.errors)}`);
  return Object.values(b.data)[0] as any;
};
const FORBIDDEN = { code: 'FORBIDDEN', message: 'forbidden' };

const LOGS = `query ($actor: ID, $t: ID, $tk: String, $tid: ID, $e: String, $o: AuditOutcome, $from: String, $to: String, $limit: Int, $offset: Int) {
  auditLogs(actorEntityId: $actor, tenantId: $t, targetKind: $tk, targetId: $tid, event: $e, outcome: $o, from: $from, to: $to, limit: $limit, offset: $offset) {
    total items { id actorEntityId tenantId targetKind event outcome createdAt } } }`;
// A variable limit counts as the largest page in the complexity budget: the full field set goes with a literal one.
const FULL = `query ($e: String, $o: AuditOutcome, $tk: String, $tid: ID) {
  auditLogs(event: $e, outcome: $o, targetKind: $tk, targetId: $tid, limit: 50) {
    total items { id actorEntityId tenantId targetKind targetId event outcome details requestId createdAt } } }`;
const ENTITY_LOGS = `query ($id: ID!, $limit: Int) { entityAuditLogs(entityId: $id, limit: $limit) { total items { id actorEntityId tenantId targetId event } } }`;

async function human(name: string) {
  const id = dataOf(await call(admin, `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`, { i: { kind: 'human', name } })).id as string;
  return { id, token: await tokenFor(ts, id) };
}
const tenantOf = async (token: string, name: string) =>
  dataOf(await call(token, `mutation ($i: CreateTenantInput!) { createTenant(input: $i) { id } }`, { i: { name } })).id as string;
const createRole = async (token: string, tenantId: string | null, name: string) =>
  dataOf(await call(token, `mutation ($i: CreateRoleInput!) { createRole(input: $i) { id } }`, { i: { name, tenantId } })).id as string;

const alice = await human('alice');
const bob = await human('bob');
const carol = await human('carol');
const tenantA = await tenantOf(alice.token, 'audit-a');
const tenantB = await tenantOf(bob.token, 'audit-b');
const roleA = await createRole(alice.token, tenantA, 'audited-a');
await createRole(bob.token, tenantB, 'audited-b');
await createRole(admin, null, 'audited-platform');
// A guardrail rejection in tenant A (outcome deny).
const device = dataOf(await call(alice.token, `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`, { i: { kind: 'device', name: 'd', tenantId: tenantA } })).id;
const del = dataOf(await call(alice.token, `mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
  { i: { scopeMode: 'object_type', tenantId: tenantA, objectKind: 'resource', objectType: 'resource:channel', actionIds: ['delete'] } })).id;
await call(alice.token, `mutation ($i: CreateDirectPolicyInput!) { createDirectPolicy(input: $i) { id } }`,
  { i: { tenantId: tenantA, subjectKind: 'entity', subjectId: device, permissionBlockId: del } });
await ts.service.audit.flush();

t.test('auditLogs: callers without audit read are refused; another tenant is forbidden', async (t) => {
  t.same(errorOf(await call(undefined, LOGS, {})), { code: 'UNAUTHENTICATED', message: 'missing authentication' });
  t.same(errorOf(await call(carol.token, LOGS, {})), FORBIDDEN, 'no read on audit_log anywhere');
  t.same(errorOf(await call(alice.token, LOGS, { t: tenantB })), FORBIDDEN, 'another tenant');
  t.same(errorOf(await call(bob.token, LOGS, { t: tenantA })), FORBIDDEN);
  t.same(errorOf(await call(alice.token, ENTITY_LOGS, { id: alice.id })).code, undefined);
  t.same(errorOf(await call(carol.token, ENTITY_LOGS, { id: carol.id })), FORBIDDEN);
});

t.test('a tenant admin reads its tenant\'s entries only: never another tenant\'s, never platform ones', async (t) => {
  const mine = dataOf(await call(alice.token, LOGS, { limit: 100 }));
  t.ok(mine.total > 3);
  t.ok(mine.items.every((e: any) => e.tenantId === tenantA), 'only tenant A');
  t.ok(mine.items.some((e: any) => e.event === 'role.create' && e.targetKind === 'role'));
  t.ok(mine.items.some((e: any) => e.event === 'guardrail.rejected' && e.outcome === 'deny'));
  const [inA] = await sql<{ n: number }[]>`select count(*)::int as n from audit_log where tenant_id = ${tenantA}`;
  t.equal(mine.total, inA!.n, 'the total counts exactly what the caller may see');
  t.same(dataOf(await call(alice.token, LOGS, { t: tenantA, limit: 1 })).total, inA!.n);
  const bobs = dataOf(await call(bob.token, LOGS, { limit: 100 }));
  t.ok(bobs.items.every((e: any) => e.tenantId === tenantB));

  const aliceAbout = dataOf(await call(alice.token, ENTITY_LOGS, { id: alice.id, limit: 100 }));
  t.ok(aliceAbout.total > 0 && aliceAbout.items.every((e: any) => e.tenantId === tenantA), 'entity logs: the same visibility');
});

t.test('platform admins read global and cross-tenant entries', async (t) => {
  const all = dataOf(await call(admin, LOGS, { limit: 100 }));
  const [total] = await sql<{ n: number }[]>`select count(*)::int as n from audit_log`;
  t.equal(all.total, total!.n);
  t.ok(all.items.some((e: any) => e.tenantId === null), 'platform entries');
  t.ok(all.items.some((e: any) => e.tenantId === tenantA) && all.items.some((e: any) => e.tenantId === tenantB), 'both tenants');
  const onlyB = dataOf(await call(admin, LOGS, { t: tenantB, limit: 100 }));
  t.ok(onlyB.total > 0 && onlyB.items.every((e: any) => e.tenantId === tenantB));
  const platformRole = dataOf(await call(admin, LOGS, { e: 'role.create', actor: ADMIN_ID, limit: 100 }));
  t.ok(platformRole.items.some((e: any) => e.tenantId === null && e.targetKind === 'role'));
  const aboutAlice = dataOf(await call(admin, ENTITY_LOGS, { id: alice.id, limit: 100 }));
  t.ok(aboutAlice.items.some((e: any) => e.tenantId === null), 'an entity\'s platform entries (its login) for platform admins');
});

t.test('filters and paging: event (exact or prefix), outcome, actor, target, time range; newest first', async (t) => {
  const roleCreates = dataOf(await call(alice.token, LOGS, { e: 'role.create', limit: 100 }));
  t.ok(roleCreates.total >= 1 && roleCreates.items.every((e: any) => e.event === 'role.create'));
  const prefixed = dataOf(await call(alice.token, LOGS, { e: 'guardrail.*', limit: 100 }));
  t.ok(prefixed.total >= 1 && prefixed.items.every((e: any) => e.event.startsWith('guardrail.')));
  const denied = dataOf(await call(alice.token, FULL, { o: 'deny' }));
  t.ok(denied.total >= 1 && denied.items.every((e: any) => e.outcome === 'deny'));
  t.match(denied.items.find((e: any) => e.event === 'guardrail.rejected').details, { operation: 'direct_policy.create', entity_kind: 'device', action: 'delete' });
  const byTarget = dataOf(await call(alice.token, FULL, { tk: 'role', tid: roleA }));
  t.same(byTarget.items.map((e: any) => e.event), ['role.create']);
  t.ok(dataOf(await call(alice.token, LOGS, { actor: alice.id, limit: 100 })).items.every((e: any) => e.actorEntityId === alice.id));

  const all = dataOf(await call(alice.token, LOGS, { limit: 100 })).items;
  const times = all.map((e: any) => e.createdAt);
  t.same(times, [...times].sort().reverse(), 'newest first');
  const page = dataOf(await call(alice.token, LOGS, { limit: 2, offset: 1 }));
  t.same(page.items.map((e: any) => e.id), all.slice(1, 3).map((e: any) => e.id));
  const future = new Date(Date.now() + 3600_000).toISOString();
  t.same(dataOf(await call(alice.token, LOGS, { from: future })), { total: 0, items: [] });
  t.equal(dataOf(await call(alice.token, LOGS, { to: future, limit: 1 })).total, all.length);
  t.same(errorOf(await call(alice.token, LOGS, { from: 'yesterday' })), { code: 'BAD_REQUEST', message: 'from must be an ISO 8601 timestamp' });
  t.same(errorOf(await call(alice.token, LOGS, { from: future, to: '2020-01-01' })), { code: 'BAD_REQUEST', message: 'from must not be after to' });
});

t.test('GET /audit/export streams NDJSON with the same visibility rules (a few thousand rows)', async (t) => {
  // Bulk rows straight into the table, spread over the last hour.
  const seed = (tenantId: string | null, n: number, event: string) => sql`
    insert into audit_log (event, outcome, actor_entity_id, tenant_id, target_kind, target_id, details, created_at)
    select ${event}, case when i % 10 = 0 then 'deny' else 'allow' end, ${ADMIN_ID}, ${tenantId}, 'entity', i::text,
           jsonb_build_object('i', i), now() - interval '1 hour' + i * interval '1 millisecond'
    from generate_series(1, ${n}) i`;
  await seed(tenantA, 3000, 'bulk.a');
  await seed(tenantB, 1500, 'bulk.b');
  await seed(null, 500, 'bulk.platform');
  await ts.service.audit.flush();
  // The export records itself: `to` keeps that entry (and anything written meanwhile) out of the comparison.
  const to = new Date(Date.now() + 1).toISOString();
  await new Promise((r) => setTimeout(r, 5));

  const exportAs = (token: string | undefined, query: string) =>
    fetch(`${ts.url()}/audit/export?${query}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  const linesOf = async (res: Response) => (await res.text()).split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));

  const res = await exportAs(alice.token, `to=${encodeURIComponent(to)}`);
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'application/x-ndjson');
  t.equal(res.headers.get('content-length'), null, 'streamed (chunked), not buffered whole');
  const aliceLines = await linesOf(res);
  const [inA] = await sql<{ n: number }[]>`select count(*)::int as n from audit_log where tenant_id = ${tenantA} and created_at < ${to}`;
  t.equal(aliceLines.length, inA!.n, 'every tenant A entry');
  t.ok(aliceLines.length > 3000);
  t.ok(aliceLines.every((l) => l.tenantId === tenantA), 'and nothing else');
  t.match(aliceLines.find((l) => l.event === 'bulk.a'), { id: String, actorEntityId: ADMIN_ID, targetKind: 'entity', outcome: String, details: { i: Number }, createdAt: String });
  const times = aliceLines.map((l) => l.createdAt);
  t.same(times, [...times].sort(), 'oldest first');

  const all = await linesOf(await exportAs(admin, `to=${encodeURIComponent(to)}`));
  const [total] = await sql<{ n: number }[]>`select count(*)::int as n from audit_log where created_at < ${to}`;
  t.equal(all.length, total!.n, 'a platform admin exports everything');
  t.ok(all.some((l) => l.tenantId === null) && all.some((l) => l.tenantId === tenantB));

  const filtered = await linesOf(await exportAs(admin, `tenantId=${tenantB}&event=bulk.b&outcome=deny`));
  t.equal(filtered.length, 150);
  t.ok(filtered.every((l) => l.tenantId === tenantB && l.outcome === 'deny'));
  const ranged = await linesOf(await exportAs(bob.token, `from=${encodeURIComponent(new Date(Date.now() - 7200_000).toISOString())}&event=bulk.*`));
  t.equal(ranged.length, 1500, 'bob: his tenant\'s bulk rows only');

  const forbidden = await exportAs(alice.token, `tenantId=${tenantB}`);
  t.equal(forbidden.status, 403);
  t.same(await forbidden.json(), { error: 'forbidden' });
  t.equal((await exportAs(carol.token, '')).status, 403);
  const anonymous = await exportAs(undefined, '');
  t.equal(anonymous.status, 401);
  t.same(await anonymous.json(), { error: 'missing Authorization header' });
  const badFrom = await exportAs(admin, 'from=soon');
  t.equal(badFrom.status, 400);
  t.same(await badFrom.json(), { error: 'from must be an ISO 8601 timestamp' });

  await ts.service.audit.flush();
  const [exports] = await sql<{ n: number }[]>`select count(*)::int as n from audit_log where event = 'audit_log.export' and actor_entity_id = ${alice.id}`;
  t.equal(exports!.n, 1, 'exports are audited');
});
