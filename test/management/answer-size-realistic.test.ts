// Issue 32 point 1, the probe's case at the default bounds (16 KiB documents, cost 10,000 with a JSON field
// costing 10, 16 MiB answers): the probe's 880 KB attributes are refused; a tenant admin stores 60 devices
// with documents just under the bound; a read-only member's k-alias query for all of them is refused by
// its cost before anything runs (the probe's k = 24, and k = 10), while the most the cost admits (k = 9,
// 8.6 MB) answers; /health/live keeps answering within 100 ms throughout.
import t from 'tap';
import { startAuthService } from '../helpers/auth.js';
import { slowestHealthDuring } from '../helpers/health.js';
import { createTenant, createUser, fails, ok } from '../helpers/management.js';

const ts = await startAuthService(t);
const alice = await createUser(ts, 'alice');
const acme = await createTenant(ts, alice.token, 'Acme');
const CREATE = `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`;
const NEAR_BOUND = { pad: 'x'.repeat(16_000 - 10) };

t.test("the probe's 880 KB document is refused, naming the bound", async (t) => {
  t.match(await fails(ts, alice.token, CREATE, { i: { kind: 'device', name: 'huge', tenantId: acme, attributes: { pad: 'x'.repeat(880_000) } } }),
    [{ message: 'attributes is larger than 16384 bytes of JSON, the maximum for a stored JSON document', extensions: { code: 'BAD_REQUEST' } }]);
});

t.test('a member cannot make the service build a huge answer, and the process keeps answering', async (t) => {
  for (let i = 0; i < 60; i++) await ok(ts, alice.token, CREATE, { i: { kind: 'device', name: `d${i}`, tenantId: acme, attributes: NEAR_BOUND } });
  const block = (await ok(ts, alice.token, `mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
    { i: { scopeMode: 'tenant', tenantId: acme, actionIds: ['read'] } })).createPermissionBlock.id;
  const role = (await ok(ts, alice.token, `mutation ($i: CreateRoleInput!) { createRole(input: $i) { id } }`, { i: { name: 'readers', tenantId: acme } })).createRole.id;
  await ok(ts, alice.token, `mutation ($r: ID!, $b: [ID!]!) { replaceRolePermissionBlocks(roleId: $r, permissionBlockIds: $b) }`, { r: role, b: [block] });
  const mallory = await createUser(ts, 'mallory');
  await ok(ts, alice.token, `mutation ($t: ID!, $e: ID!, $r: ID!) { addTenantMember(tenantId: $t, entityId: $e, roleId: $r) }`, { t: acme, e: mallory.id, r: role });
  const aliases = (k: number) => `{ ${Array.from({ length: k }, (_, i) => `e${i}: entities(tenantId: "${acme}", limit: 100) { items { attributes } }`).join(' ')} }`;

  // Each alias costs 1 + 1 + 100 × 10 = 1,002.
  const probe = await slowestHealthDuring(ts.url(), () => fails(ts, mallory.token, aliases(24)), 100);
  t.match(probe.result, [{ message: 'query complexity 24048 exceeds the maximum of 10000', extensions: { code: 'BAD_REQUEST' } }], "the probe's 24 aliases");
  t.ok(probe.ok, `/health/live within 100 ms meanwhile (${probe.tried.join('; ')})`);
  t.match(await fails(ts, mallory.token, aliases(10)), [{ message: 'query complexity 10020 exceeds the maximum of 10000' }]);

  // The most the cost admits: 9 × 60 documents, 8.6 MB, under the 16 MiB cap. Taken as bytes: the test
  // client runs in the service's process, and parsing the answer is its work, not the service's.
  const raw = async () => {
    const res = await fetch(`${ts.url()}/graphql`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${mallory.token}` }, body: JSON.stringify({ query: aliases(9) }),
    });
    return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
  };
  const most = await slowestHealthDuring(ts.url(), raw, 100);
  t.equal(most.result.status, 200);
  t.ok(most.result.body.length > 8_000_000, `${most.result.body.length} bytes`);
  t.equal(JSON.parse(most.result.body.toString()).data.e8.items.length, 60);
  t.ok(most.ok, `/health/live within 100 ms while 8.6 MB are read and answered (${most.tried.join('; ')})`);
});
