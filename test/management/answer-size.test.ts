// Issue 32 point 1, the mechanism with small bounds (8 KiB documents, 64 KiB answers): a tenant admin
// stores documents near the bound; a read-only member's k-alias query is refused with one clear error
// (by its cost when it asks for too many items, by the answer cap when the items are large) while
// /health/live keeps answering; the same member's ordinary page still works, and another tenant's data
// stays out of reach. Custom endpoint answers (the operation's and a responseMapping that repeats it)
// and reader pages (cut in the database, before they are loaded) are capped the same way.
import t from 'tap';
import { AUTH_ENV, adminToken, startAuthService } from '../helpers/auth.js';
import { slowestHealthDuring } from '../helpers/health.js';
import { createTenant, createUser, fails, ok } from '../helpers/management.js';
import { callEndpoint, createEndpoint, executionsOf } from '../custom-endpoints/helpers.js';
import { publish, read, world } from '../messaging/helpers.js';

const ts = await startAuthService(t, {
  ...AUTH_ENV, SVC_JSON_DOCUMENT_MAX_BYTES: '8192', SVC_ANSWER_MAX_BYTES: '65536', SVC_MESSAGING_MAX_MESSAGE_BYTES: '16384',
});
const admin = await adminToken(ts);
const TOO_LARGE = 'answer exceeds the limit of 65536 bytes; ask for fewer items or fields';
const DOC = { pad: 'x'.repeat(8000 - 10) };

const alice = await createUser(ts, 'alice');
const bob = await createUser(ts, 'bob');
const acme = await createTenant(ts, alice.token, 'Acme');
const globex = await createTenant(ts, bob.token, 'Globex');
for (let i = 0; i < 20; i++) {
  await ok(ts, alice.token, `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`, { i: { kind: 'device', name: `d${i}`, tenantId: acme, attributes: DOC } });
}
await ok(ts, bob.token, `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`, { i: { kind: 'device', name: 'g0', tenantId: globex, attributes: DOC } });

// Mallory: a member of Acme whose only role reads.
const block = (await ok(ts, alice.token, `mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
  { i: { scopeMode: 'tenant', tenantId: acme, actionIds: ['read'] } })).createPermissionBlock.id;
const role = (await ok(ts, alice.token, `mutation ($i: CreateRoleInput!) { createRole(input: $i) { id } }`, { i: { name: 'readers', tenantId: acme } })).createRole.id;
await ok(ts, alice.token, `mutation ($r: ID!, $b: [ID!]!) { replaceRolePermissionBlocks(roleId: $r, permissionBlockIds: $b) }`, { r: role, b: [block] });
const mallory = await createUser(ts, 'mallory');
await ok(ts, alice.token, `mutation ($t: ID!, $e: ID!, $r: ID!) { addTenantMember(tenantId: $t, entityId: $e, roleId: $r) }`, { t: acme, e: mallory.id, r: role });

const aliases = (k: number, limit: number, tenant = acme) =>
  `{ ${Array.from({ length: k }, (_, i) => `e${i}: entities(tenantId: "${tenant}", limit: ${limit}) { items { attributes } }`).join(' ')} }`;

t.test('the member reads, but writes nothing and sees no other tenant', async (t) => {
  t.equal((await ok(ts, mallory.token, `query ($t: ID!) { entities(tenantId: $t, limit: 1) { total } }`, { t: acme })).entities.total, 20);
  t.match(await fails(ts, mallory.token, `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`, { i: { kind: 'device', name: 'm', tenantId: acme } }), [{ message: 'forbidden' }]);
  t.same((await ok(ts, mallory.token, aliases(1, 20, globex))).e0.items, [], "another tenant's documents are not listed");
});

t.test("the k-alias query over large documents: one error, the process keeps answering", async (t) => {
  // Compiled once first (compilation is bounded by the document limits and cached): what is measured is the answer.
  await fails(ts, mallory.token, aliases(4, 20));
  const health = await slowestHealthDuring(ts.url(), () => fails(ts, mallory.token, aliases(4, 20)), 100);
  t.same(health.result.map((e) => [e.extensions.code, e.message]), [['BAD_REQUEST', TOO_LARGE]], '4 × 20 × 8 KB: refused whole, no partial data');
  t.ok(health.ok, `/health/live within 100 ms meanwhile (${health.tried.join('; ')})`);
  const page = await ok(ts, mallory.token, aliases(1, 5));
  t.equal(page.e0.items.length, 5, 'an ordinary page of the same documents (40 KB) still answers');
  t.same(page.e0.items[0].attributes, DOC);
});

t.test('asking for more items than the cost allows is refused before anything runs', async (t) => {
  // Each alias costs 1 (entities) + 1 (items) + 20 × 10 (a JSON field costs 10): 50 of them pass 10,000.
  t.match(await fails(ts, mallory.token, aliases(50, 20)), [{ message: 'query complexity 10100 exceeds the maximum of 10000', extensions: { code: 'BAD_REQUEST' } }]);
  const FIELDS = 'id name kind status tenantId createdAt updatedAt alias externalId profileId';
  const viaVariable = `query ($n: Int) { ${Array.from({ length: 50 }, (_, i) => `e${i}: entities(tenantId: "${acme}", limit: $n) { items { ${FIELDS} } }`).join(' ')} }`;
  t.match(await fails(ts, mallory.token, viaVariable, { n: 20 }), [{ message: 'query complexity 10100 exceeds the maximum of 10000' }], 'the page size from a variable: 50 × (1 + 1 + 20 × 10)');
  t.same((await ok(ts, mallory.token, viaVariable, { n: 1 })).e49.items.length, 1, 'the same text with small pages runs');
});

t.test('custom endpoints: the operation\'s answer and a responseMapping that repeats it are capped', async (t) => {
  const big = await createEndpoint(ts, {
    graphql: 'query ($t: ID!) { entities(tenantId: $t, limit: 20) { items { attributes } } }', variablesMapping: { t: acme },
  });
  const res = await callEndpoint(ts, big.path, { token: admin });
  t.same([res.status, res.body], [400, { error: TOO_LARGE }], '160 KB of attributes');
  const small = 'query ($t: ID!) { entities(tenantId: $t, limit: 2) { items { attributes } } }';
  const repeated = await createEndpoint(ts, {
    graphql: small, variablesMapping: { t: acme },
    responseMapping: Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`copy${i}`, '$.entities'])),
  });
  const amplified = await callEndpoint(ts, repeated.path, { token: admin });
  t.same([amplified.status, amplified.body], [400, { error: TOO_LARGE }], '16 KB picked 8 times');
  const once = await createEndpoint(ts, { graphql: small, variablesMapping: { t: acme }, responseMapping: { copy: '$.entities' } });
  const fine = await callEndpoint(ts, once.path, { token: admin });
  t.equal(fine.status, 200);
  t.equal(fine.body.copy.items.length, 2);
  const [record] = await executionsOf(ts, repeated.id);
  t.match(record, { status: 'error', error: TOO_LARGE }, 'the execution record says why');
});

t.test('the reader: a page past the cap is refused, cut in the database; smaller pages answer', async (t) => {
  const w = await world(ts, 'ws-answer');
  for (let i = 0; i < 6; i++) {
    const res = await publish(ts, w.ws, w.channel, w.publisher.key, [{ n: 'blob', vs: 'v'.repeat(15_000), t: 1_700_000_000 + i }]);
    t.equal(res.status, 202);
  }
  const reader = `Bearer ${admin}`;
  const all = await read(ts, w.ws, w.channel, reader, 'limit=6');
  t.same([all.status, all.body], [400, { error: TOO_LARGE }], '6 × 15 KB');
  const some = await read(ts, w.ws, w.channel, reader, 'limit=4');
  t.equal(some.status, 200);
  t.same(some.body.messages.map((m: { time: number }) => m.time), [3, 2, 1, 0].map((i) => 1_700_000_002 + i), 'newest first, whole');
  t.equal(some.body.total, 6);
  t.equal((await read(ts, w.ws, w.channel, reader, 'limit=2&offset=4')).body.messages.length, 2);
});
