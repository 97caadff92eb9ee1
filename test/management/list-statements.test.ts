// What one list request sends to PostgreSQL (issue 38): the page and its total in ONE statement, one
// round trip, no transaction, and nothing parsed again once the connection has prepared it; the
// caller's authentication and grants come from caches. Counted on the wire by a proxy in front of the
// real server, for every list, as the platform administrator and as a tenant administrator. Background
// work of the service (heartbeats, sweepers) may add statements to any one request, so each case
// takes the least of several requests.
import t from 'tap';
import postgres from 'postgres';
import { adminToken, AUTH_ENV } from '../helpers/auth.js';
import { createTestDatabase } from '../helpers/database.js';
import { createTenant, createUser, ok } from '../helpers/management.js';
import { startTestService, gql } from '../helpers/service.js';
import { startStatementCounter, type WireTally } from '../helpers/statement-counter.js';

const db = await createTestDatabase();
const counter = await startStatementCounter(db.url);
const ts = await startTestService(t, AUTH_ENV, { ...db, url: counter.url });
t.teardown(async () => {
  await counter.close();
  await db.drop();
});

const admin = await adminToken(ts);
const alice = await createUser(ts, 'alice');
const acme = await createTenant(ts, alice.token, 'Acme', 'acme');
const bob = await createUser(ts, 'bob');
const globex = await createTenant(ts, bob.token, 'Globex', 'globex');
const site = (await ok(ts, alice.token, 'mutation ($t: ID!) { createGroup(input: {name: "site", tenantId: $t}) { id } }', { t: acme })).createGroup.id;
const device = (await ok(ts, alice.token, 'mutation ($t: ID!) { createEntity(input: {kind: device, name: "d-1", tenantId: $t}) { id } }', { t: acme })).createEntity.id;
await ok(ts, alice.token, 'mutation ($e: ID!, $g: ID!) { addEntityToObjectGroup(entityId: $e, objectGroupId: $g) { id } }', { e: device, g: site });
await ok(ts, alice.token, 'mutation ($t: ID!) { createResource(input: {kind: "channel", name: "c-1", tenantId: $t}) { id } }', { t: acme });
await ok(ts, bob.token, 'mutation ($t: ID!) { createEntity(input: {kind: device, name: "g-1", tenantId: $t}) { id } }', { t: globex });
// A certificate row as issuance writes it (the list reads the row; no authority is needed to list it).
const sql = postgres(db.url, { max: 1, onnotice: () => undefined });
await sql`insert into credentials (entity_id, kind, identifier, issuer_id, metadata, expires_at)
  values (${device}, 'certificate', 'c0ffee', gen_random_uuid(), ${sql.json({ fingerprint_sha256: 'f'.repeat(64) })}, now() + interval '1 day')`;
await sql.end();

const LISTS: Record<string, string> = {
  entities: 'query ($t: ID) { entities(tenantId: $t, limit: 50) { total items { id name kind status createdAt } } }',
  resources: 'query ($t: ID) { resources(tenantId: $t, limit: 50) { total items { id name kind createdAt } } }',
  groups: 'query ($t: ID) { groups(tenantId: $t, limit: 50) { total items { id name groupType createdAt } } }',
  tenants: 'query { tenants(limit: 50) { total items { id name status createdAt } } }',
  certificates: 'query ($t: ID) { certificates(tenantId: $t, limit: 50) { total items { credentialId serialNumber status } } }',
  auditLogs: 'query ($t: ID) { auditLogs(tenantId: $t, limit: 50) { total items { id event outcome createdAt } } }',
};

/** The least each figure reached over several requests (background work only ever adds). */
async function leastOf(token: string, query: string, variables: Record<string, unknown>) {
  const list = async () => {
    const res = await gql(ts.url(), query, variables, token);
    if (res.body.errors) throw new Error(JSON.stringify(res.body.errors));
    return Object.values(res.body.data ?? {})[0] as { total: number; items: unknown[] };
  };
  for (let i = 0; i < 3; i++) await list(); // every pool connection that answers has prepared it by now
  const seen: (WireTally & { total: number })[] = [];
  for (let i = 0; i < 6; i++) {
    counter.reset();
    const page = await list();
    seen.push({ ...counter.tally(), total: page.total });
  }
  const least = (f: (w: WireTally) => number) => Math.min(...seen.map(f));
  return {
    statements: least((w) => w.statements.length), roundTrips: least((w) => w.roundTrips), parses: least((w) => w.parses),
    transactions: least((w) => w.transactions), total: seen[0]?.total, texts: seen.map((w) => w.statements),
  };
}

// A caller without a platform-wide grant listing every tenant it may read needs the tenants it is
// connected to (roles, groups, memberships): cached with its grants (tenants-connected.test.ts), so
// one statement too.
const expected = (_name: string, _who: string) => 1;

for (const [name, query] of Object.entries(LISTS)) {
  for (const [who, token] of [['platform admin', () => admin], ['tenant admin', () => alice.token]] as const) {
    t.test(`${name} as the ${who}: ${expected(name, who)} statement(s) and round trip(s), no parse, no transaction`, async (t) => {
      const r = await leastOf(token(), query, name === 'tenants' ? {} : { t: acme });
      t.equal(r.statements, expected(name, who), 'statements per request', { sent: r.texts });
      t.equal(r.roundTrips, expected(name, who), 'round trips per request');
      t.equal(r.parses, 0, 'prepared once per connection, not parsed per request');
      t.equal(r.transactions, 0, 'a read opens no transaction');
      t.ok((r.total ?? 0) >= 1, 'the page is not empty');
    });
  }
}

t.test('the tenant admin\'s lists hold only the readable tenant', async (t) => {
  const r = await leastOf(alice.token, 'query { tenants(limit: 50) { total items { id } } }', {});
  t.equal(r.total, 1, 'alice sees Acme only');
  const other = await leastOf(alice.token, LISTS.entities as string, { t: globex });
  t.equal(other.total, 0, 'another tenant\'s entities are neither listed nor counted');
  t.equal(other.statements, 1, 'in the same one statement');
});

t.test('an empty page beyond the end still carries the total, in the same statement', async (t) => {
  const query = 'query ($t: ID) { entities(tenantId: $t, limit: 10, offset: 100) { total items { id } } }';
  const r = await leastOf(admin, query, { t: acme });
  t.equal(r.statements, 1);
  const res = await gql(ts.url(), query, { t: acme }, admin);
  t.same(res.body.data?.entities, { total: 1, items: [] });
});

t.test('object groups are read when the answer shows them, however the selection is written', async (t) => {
  const cases = {
    field: 'query ($t: ID) { entities(tenantId: $t) { items { id objectGroupIds } } }',
    alias: 'query ($t: ID) { entities(tenantId: $t) { items { id groups: objectGroupIds parentGroupId } } }',
    fragment: 'query ($t: ID) { entities(tenantId: $t) { ...L } } fragment L on EntityList { items { ...E } } fragment E on Entity { id objectGroupIds }',
    inline: 'query ($t: ID) { entities(tenantId: $t) { items { ... on Entity { id objectGroupIds } } } }',
    directive: 'query ($t: ID, $x: Boolean!) { entities(tenantId: $t) { items { id objectGroupIds @include(if: $x) } } }',
  };
  for (const [how, query] of Object.entries(cases)) {
    const res = await gql(ts.url(), query, { t: acme, x: true }, alice.token);
    const item = res.body.data?.entities.items[0];
    t.same(item.objectGroupIds ?? item.groups, [site], how);
  }
  const resources = await gql(ts.url(), 'query ($t: ID) { resources(tenantId: $t) { items { objectGroupIds parentGroupId } } }', { t: acme }, alice.token);
  t.same(resources.body.data?.resources.items, [{ objectGroupIds: [], parentGroupId: null }], 'a resource in no group');
});
