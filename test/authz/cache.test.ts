// The decision cache: it serves repeated decisions without SQL, invalidation drops exactly what changed,
// a load that raced an invalidation is not kept, another instance follows through NOTIFY, and a lost
// LISTEN connection clears everything.
import postgres from 'postgres';
import t from 'tap';
import { createAuditWriter } from '../../src/audit/writer.js';
import { createAuthz } from '../../src/authz/index.js';
import { createAuthzCache } from '../../src/authz/cache.js';
import { createEngine } from '../../src/authz/engine.js';
import type { AuthorizeRequest } from '../../src/authz/types.js';
import { createGenericPlanPool, type Sql } from '../../src/db/client.js';
import { createNotifyHub } from '../../src/db/notify-hub.js';
import { testLogger } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';
import { SETTINGS, startEngine } from './helpers/engine.js';
import type { World } from './helpers/world.js';

const world: World = {
  tenants: { acme: {} },
  entities: { ann: { kind: 'human' }, bo: { kind: 'human' }, cy: { kind: 'human' }, dev: { kind: 'device', tenant: 'acme' } },
  resources: { ch: { kind: 'channel', tenant: 'acme' }, ch2: { kind: 'channel', tenant: 'acme' } },
  groups: { og: { type: 'object', tenant: 'acme' }, og2: { type: 'object', tenant: 'acme' } },
  objectMembers: [['og2', 'ch2']],
  principalMembers: [],
  blocks: {
    read: { scope: 'tenant', tenant: 'acme', actions: ['read'] },
    pub: { scope: 'object', tenant: 'acme', object: 'ch', actions: ['publish'] },
    ogRead: { scope: 'group_descendant_objects', tenant: 'acme', group: 'og', objectKind: 'resource', actions: ['read'] },
  },
  roles: { reader: { tenant: 'acme', blocks: ['read'] }, 'og-reader': { tenant: 'acme', blocks: ['ogRead'] } },
  assignments: [{ entity: 'ann', role: 'reader', tenant: 'acme' }, { entity: 'bo', role: 'og-reader', tenant: 'acme' }, { entity: 'cy', role: 'reader', tenant: 'acme' }],
  policies: [{ entity: 'dev', block: 'pub', tenant: 'acme' }],
  credentials: {},
};

t.test('memoised decisions, invalidation by id, races and reconnects', async (t) => {
  const { authz, ids, sql, hub, audit } = await startEngine(t, world);
  const ask = (subject: string, action: string, object: string): AuthorizeRequest => ({ subjectId: ids[subject] as string, action, object: { kind: 'resource', id: ids[object] as string } });
  const annRead = ask('ann', 'read', 'ch');

  t.ok((await authz.authorize(annRead)).allowed);
  const before = authz.stats();
  t.equal(before.decisions, 1);
  await sql`delete from role_assignments where entity_id = ${ids.ann as string}`;
  t.ok((await authz.authorize(annRead)).allowed, 'the memo answers without reading the database');
  await authz.invalidate({ kind: 'subjects', entityIds: [ids.ann as string] });
  t.match(await authz.authorize(annRead), { allowed: false, reason: 'no matching allow policy' }, 'invalidate drops it before returning');

  // Dropping one subject leaves the others cached.
  t.ok((await authz.authorize(ask('dev', 'publish', 'ch'))).allowed);
  const subjects = authz.stats().subjects;
  await authz.invalidate({ kind: 'subjects', entityIds: [ids.ann as string] });
  t.equal(authz.stats().subjects, subjects - 1);

  // Tenant state: invalidate the tenant and the frozen state shows at once.
  await sql`update tenants set status = 'frozen' where id = ${ids.acme as string}`;
  t.ok((await authz.authorize(ask('dev', 'publish', 'ch'))).allowed, 'still memoised');
  await authz.invalidate({ kind: 'tenants', tenantIds: [ids.acme as string] });
  t.match(await authz.authorize(ask('dev', 'publish', 'ch')), { allowed: false, reason: 'tenant is frozen' });
  t.match(await authz.authorize(ask('dev', 'publish', 'ch')), { allowed: false, reason: 'tenant is frozen' }, 'memoised denial');
  await audit.flush();
  const denials = await sql<{ tenant_id: string; details: Record<string, unknown> }[]>`select tenant_id, details from audit_log where event = 'authz.tenant_state_denied'`;
  t.equal(denials.length, 2, 'every tenant-state denial is audited, memoised or not');
  t.match(denials[0], { tenant_id: ids.acme, details: { tenant_status: 'frozen', action: 'publish', object_id: ids.ch } });
  await sql`update tenants set status = 'active' where id = ${ids.acme as string}`;
  await authz.invalidate({ kind: 'tenants', tenantIds: [ids.acme as string] });

  // Containment: moving og2 under og changes what bo may read; invalidating og2 reaches ch2's facts.
  t.notOk((await authz.authorize(ask('bo', 'read', 'ch2'))).allowed);
  await sql`update groups set parent_id = ${ids.og as string} where id = ${ids.og2 as string}`;
  await authz.invalidate({ kind: 'groups', groupIds: [ids.og2 as string] });
  t.ok((await authz.authorize(ask('bo', 'read', 'ch2'))).allowed, 'nested containment follows the new parent');

  // Subjects holding the same role share one compiled policy; changing the role reaches all of them.
  const shared = { subjectId: ids.cy as string, action: 'read', object: { kind: 'resource' as const, id: ids.ch as string } };
  await sql`insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) values (${ids.acme as string}, 'entity', ${ids.ann as string}, ${ids.reader as string})`;
  await authz.invalidate({ kind: 'subjects', entityIds: [ids.ann as string] });
  t.ok((await authz.authorize(annRead)).allowed);
  t.ok((await authz.authorize(shared)).allowed);
  const policies = authz.stats().policies;
  await sql`delete from role_permission_blocks where role_id = ${ids.reader as string}`;
  await authz.invalidate({ kind: 'roles', roleIds: [ids.reader as string] });
  t.equal(authz.stats().policies, policies - 1, 'the shared policy is dropped once');
  t.notOk((await authz.authorize(annRead)).allowed, 'both holders lose the grant');
  t.notOk((await authz.authorize(shared)).allowed);

  // A load that raced an invalidation is used once but never cached: replies are held back 50 ms so the
  // invalidation lands while the subject's rows are in flight.
  const cache = createAuthzCache({ subjects: 100, objects: 100, decisions: 100, maxBytes: 1 << 24, ttlMs: 60_000 });
  let delayMs = 0;
  const slowSql = ((strings: TemplateStringsArray, ...values: unknown[]) => {
    const query = (sql as unknown as (s: TemplateStringsArray, ...v: unknown[]) => Promise<unknown>)(strings, ...values);
    // A fragment (no select of its own) is written into its statement: resolving it would run it alone.
    if (!/\bselect\b/.test(strings.join(''))) return query;
    return new Promise((r) => setTimeout(r, delayMs)).then(() => query);
  }) as unknown as Sql;
  const engine = createEngine({ sql: slowSql, cache });
  t.ok((await engine.authorize(ask('ann', 'read', 'ch2'))).allowed === false, 'catalog warm');
  delayMs = 50;
  const racing = engine.authorize(ask('dev', 'publish', 'ch'));
  await new Promise((r) => setTimeout(r, 10));
  cache.dropIds([ids.dev as string]);
  t.ok((await racing).allowed, 'the raced load still answers its own request');
  t.equal(cache.grants.has(ids.dev as string), false, 'the raced load was not stored');
  t.equal(cache.decisions.size, 1, 'only the decision computed before the race is memoised');

  // A lost LISTEN connection clears everything on reconnect.
  await authz.authorize(ask('dev', 'publish', 'ch'));
  t.ok(authz.stats().subjects > 0);
  const reconnected = new Promise<void>((resolve) => hub.onReconnect(() => resolve()));
  await sql`select pg_terminate_backend(${hub.backendPid as number})`;
  await reconnected;
  t.equal(authz.stats().subjects, 0, 'cleared after reconnect');
  t.equal(authz.stats().objects, 0);
});

t.test('an entry evicted for room can no longer be invalidated, so what was built from it is not trusted', async (t) => {
  // Room for one subject and one compiled policy: asking about bo evicts ann's grants and policy, while
  // the decision memoised for ann (a larger cache) still holds them.
  const { authz, ids, sql } = await startEngine(t, world, { cacheSubjects: 1 });
  const annRead: AuthorizeRequest = { subjectId: ids.ann as string, action: 'read', object: { kind: 'resource', id: ids.ch as string } };
  t.ok((await authz.authorize(annRead)).allowed);
  await authz.authorize({ subjectId: ids.bo as string, action: 'read', object: { kind: 'resource', id: ids.ch2 as string } });
  t.equal(authz.stats().subjects, 1);

  // The block behind ann's grant loses its action; the invalidation names the block only.
  await sql`delete from permission_block_actions where block_id = ${ids.read as string}`;
  await authz.invalidate({ kind: 'blocks', blockIds: [ids.read as string] });
  t.match(await authz.authorize(annRead), { allowed: false, reason: 'no matching allow policy' });
});

t.test('invalidation finds entries by what they were built from, through replacements and evictions', async (t) => {
  const cache = createAuthzCache({ subjects: 2, objects: 10, decisions: 10, maxBytes: 1 << 24, ttlMs: 60_000 });
  const policy = (signature: string, refs: string[]) => ({ stale: false, expiresAt: Infinity, signature, blocks: [], byAction: new Map(),
    allActionsIndex: { exact: new Map(), scan: [] }, refs: new Set(refs), unbound: true, boundTenants: new Set<string>() });
  // A subject holding one platform part: its refs name the part's signature (compile.ts compileGrants).
  const grants = (subject: string, p: ReturnType<typeof policy>, refs: string[]) => ({ stale: false, expiresAt: Infinity,
    parts: new Map([['', p]]), everywhere: [p], byTenant: new Map(), version: 0, reload: new Map<string, number>(),
    subject: { stale: false, expiresAt: Infinity, id: subject, name: subject, kind: 'device', tenantId: null, status: 'active', view: {} },
    refs: new Set([subject, ...refs, `policy:${p.signature}`]) });
  const shared = policy('sig-1', ['role-1', 'block-1']);
  const first = grants('s1', shared, ['assignment-1']);
  cache.policies.set('sig-1', shared);
  cache.grants.set('s1', first);
  const replacement = grants('s1', shared, ['assignment-2']);
  cache.grants.set('s1', replacement);
  t.ok(first.stale, 'a replaced entry is stale');
  t.equal(cache.dropIds(['assignment-1']), 0, 'the replaced entry\'s ids no longer find anything');
  t.equal(cache.dropIds(['assignment-2']), 1, 'the replacement is found by its own');
  t.ok(replacement.stale);

  // A shared policy named by a block takes every subject holding it along.
  const holders = [grants('s2', shared, []), grants('s3', shared, [])];
  for (const g of holders) cache.grants.set(g.subject.id, g);
  t.equal(cache.dropIds(['block-1']), 3, 'the policy and both holders');
  t.ok(shared.stale && holders.every((g) => g.stale));

  // Evicted for room: stale at once, and gone from the index.
  const evicted = grants('s4', policy('sig-2', []), ['assignment-4']);
  cache.grants.set('s4', evicted);
  cache.grants.set('s5', grants('s5', policy('sig-2', []), []));
  cache.grants.set('s6', grants('s6', policy('sig-2', []), []));
  t.ok(evicted.stale, 'the least recently used subject was evicted and marked stale');
  t.equal(cache.dropIds(['assignment-4']), 0);
  t.equal(cache.dropIds(['s5', 's6']), 2);
  t.equal(cache.stats().subjects, 0);
});

t.test('another instance drops the same entries through NOTIFY, long before they would expire', async (t) => {
  const { authz: a, ids, sql, url } = await startEngine(t, world);
  // Instance B: its own pool, LISTEN connection, audit writer and caches on the same database.
  const log = testLogger();
  const sqlB = postgres(url, { max: 2, onnotice: () => undefined }) as unknown as Sql;
  const hubB = createNotifyHub(url, sqlB, log);
  await hubB.start();
  const auditB = createAuditWriter(sqlB, { batchSize: 100, flushIntervalMs: 20, maxQueue: 1000 }, log);
  const lookupsB = createGenericPlanPool(url, { name: 'svc-authz', max: 2, connectTimeoutSecs: 10 });
  const b = createAuthz({ sql: sqlB, lookups: lookupsB, hub: hubB, audit: auditB, log, config: SETTINGS });
  t.teardown(async () => {
    await b.close();
    await auditB.close();
    await hubB.close();
    await lookupsB.end();
    await sqlB.end();
  });
  const request: AuthorizeRequest = { subjectId: ids.ann as string, action: 'read', object: { kind: 'resource', id: ids.ch as string } };
  t.ok((await a.authorize(request)).allowed);
  t.ok((await b.authorize(request)).allowed, 'B has it cached');

  await sql`delete from role_assignments where entity_id = ${ids.ann as string}`;
  await a.invalidate({ kind: 'subjects', entityIds: [ids.ann as string] });
  // B's entries live 60 s (SETTINGS): denied within seconds means the NOTIFY dropped them. The latency
  // itself is bench/scenarios/authz-propagation.js's to measure.
  await waitUntil(async () => !(await b.authorize(request)).allowed, 5000, 'B denying');
  t.notOk((await b.authorize(request)).allowed, 'B denies');
});

t.test("subjects sharing a role share its compiled policy: only the first reads the role's blocks, and a changed block list is read afresh", async (t) => {
  const { ids, sql } = await startEngine(t, world);
  const cache = createAuthzCache({ subjects: 100, objects: 100, decisions: 100, maxBytes: 1 << 24, ttlMs: 60_000 });
  const statements: string[] = [];
  const countingSql = ((strings: TemplateStringsArray, ...values: unknown[]) => {
    statements.push(strings.join('?'));
    return (sql as unknown as (s: TemplateStringsArray, ...v: unknown[]) => Promise<unknown>)(strings, ...values);
  }) as unknown as Sql;
  const blockReads = () => statements.filter((s) => s.includes('permission_block_actions')).length;
  const engine = createEngine({ sql: countingSql, cache });
  const ask = (subject: string, action: string): AuthorizeRequest => ({ subjectId: ids[subject] as string, action, object: { kind: 'resource', id: ids.ch as string } });

  t.ok((await engine.authorize(ask('ann', 'read'))).allowed);
  t.equal(blockReads(), 1, "ann's reload compiled the reader role's policy from its blocks");
  t.ok((await engine.authorize(ask('cy', 'read'))).allowed);
  t.equal(blockReads(), 1, "cy holds the same role: its policy is found by its grants' signature, no block read");
  t.equal(cache.policies.size, 1, 'one policy for both');

  // The role gains the publish block without an invalidation reaching this engine: a subject read afresh
  // gets a new signature from its grants, so a new policy, not the cached one.
  await sql`insert into role_permission_blocks (role_id, block_id) values (${ids.reader as string}, ${ids.pub as string})`;
  cache.dropIds([ids.cy as string]);
  t.ok((await engine.authorize(ask('cy', 'publish'))).allowed, "cy's reload sees the role's new block");
  t.equal(blockReads(), 2, 'the new block list compiled afresh');
  t.notOk((await engine.authorize(ask('ann', 'publish'))).allowed, "ann's grants, still cached, wait for the role's invalidation");
});
