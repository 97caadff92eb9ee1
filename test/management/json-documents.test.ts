// Issue 32 point 1: every JSON document a caller can store is bounded in bytes (of its compact JSON text)
// and in nesting, and one past a bound is refused with BAD_REQUEST naming the field and the bound, per
// field: attributes of tenants, entities, resources and groups (create and update), profile schemas,
// custom endpoint mappings and request schemas, permission block and access token conditions, signup
// attributes (GraphQL and REST); audit details, which the service writes, are kept as a note when too
// large. Small bounds here (1 KiB, depth 4): the point is the mechanism. Every json/jsonb column of the
// schema is listed with what bounds it, so a new one fails this test until it is classified.
import t from 'tap';
import { adminToken, startAuthService } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';
import { createTenant, createUser } from '../helpers/management.js';

const ts = await startAuthService(t, { SVC_JSON_DOCUMENT_MAX_BYTES: '1024', SVC_JSON_DOCUMENT_MAX_DEPTH: '4' });
const admin = await adminToken(ts);
const sql = ts.service.sql;

const SIZE = (field: string) => `${field} is larger than 1024 bytes of JSON, the maximum for a stored JSON document`;
const DEPTH = (field: string) => `${field} nests deeper than 4 levels, the maximum for a stored JSON document`;

/** An object of exactly `bytes` bytes of compact JSON under one key (`{"<key>":"xx…"}`). */
function sized(bytes: number, key = 'description'): Record<string, string> {
  const pad = bytes - JSON.stringify({ [key]: '' }).length;
  const doc = { [key]: 'x'.repeat(pad) };
  if (Buffer.byteLength(JSON.stringify(doc)) !== bytes) throw new Error('sized() miscounted');
  return doc;
}
/** Objects nested `levels` deep: {a:{a:…{}}}. */
function nested(levels: number): Record<string, unknown> {
  let doc: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) doc = { a: doc };
  return doc;
}

type Errors = { message: string; extensions: { code: string } }[] | undefined;
async function call(query: string, variables: Record<string, unknown>, token = admin): Promise<{ data: any; errors: Errors }> {
  const res = await gql(ts.url(), query, variables, token);
  return { data: res.body.data, errors: res.body.errors as Errors };
}
const refusedWith = (errors: Errors) => errors?.map((e) => [e.extensions.code, e.message]);

const alice = await createUser(ts, 'alice');
const acme = await createTenant(ts, alice.token, 'Acme');

/** One stored JSON field: a write of the document given, answering the id (or errors). */
interface Field {
  name: string;
  /** The field as the error names it. */
  field: string;
  write: (doc: Record<string, unknown>) => Promise<{ data: any; errors: Errors }>;
  /** How a document of n bytes is built for it (the key must be one the field accepts). */
  sized?: (bytes: number) => Record<string, unknown>;
  nested?: (levels: number) => Record<string, unknown>;
}

let n = 0;
const uniq = (p: string) => `${p}_${++n}`;
const entity = (await call(`mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`, { i: { kind: 'device', name: 'd0', tenantId: acme } })).data.createEntity.id;
const resource = (await call(`mutation ($i: CreateResourceInput!) { createResource(input: $i) { id } }`, { i: { kind: 'channel', name: 'r0', tenantId: acme } })).data.createResource.id;
const group = (await call(`mutation ($i: CreateGroupInput!) { createGroup(input: $i) { id } }`, { i: { name: 'g0', tenantId: acme } })).data.createGroup.id;
const profile = (await call(`mutation ($t: ID!) { createProfile(input: {tenantId: $t, objectKind: "entity", kind: "device", key: "thermo", displayName: "T"}) { id } }`, { t: acme })).data.createProfile.id;
const endpoint = (await call(`mutation ($i: CreateApiEndpointInput!) { createApiEndpoint(input: $i) { id } }`,
  { i: { key: 'e0', name: 'E0', method: 'GET', path: '/api/custom/e0', operationKind: 'query', graphql: 'query { health }' } })).data.createApiEndpoint.id;
const token = (await call(`mutation ($i: CreateAccessTokenInput!) { createAccessToken(input: $i) { credentialId } }`,
  { i: { name: 't0', scoped: true, permissions: [{ actions: ['read'], scopeMode: 'platform' }] } })).data.createAccessToken.credentialId;
let version = 0;
const conditionsSized = (bytes: number) => sized(bytes, 'entity.attributes.site');
// {k: {in: [[…]]}}: an object, its operator object, then arrays.
const conditionsNested = (levels: number) => {
  let list: unknown = ['x'];
  for (let i = 3; i < levels; i++) list = [list];
  return { 'entity.attributes.site': { in: list } };
};
const endpointInput = (over: Record<string, unknown>) => ({ key: uniq('e'), name: uniq('E'), method: 'GET', path: `/api/custom/${uniq('p')}`, operationKind: 'query', graphql: 'query { health }', ...over });

const FIELDS: Field[] = [
  { name: 'createTenant', field: 'attributes', write: (d) => call(`mutation ($i: CreateTenantInput!) { createTenant(input: $i) { id } }`, { i: { name: uniq('t'), attributes: d } }) },
  { name: 'updateTenant', field: 'attributes', write: (d) => call(`mutation ($id: ID!, $i: UpdateTenantInput!) { updateTenant(id: $id, input: $i) { id } }`, { id: acme, i: { attributes: d } }) },
  { name: 'createEntity', field: 'attributes', write: (d) => call(`mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`, { i: { kind: 'device', name: uniq('d'), tenantId: acme, attributes: d } }) },
  { name: 'updateEntity', field: 'attributes', write: (d) => call(`mutation ($id: ID!, $i: UpdateEntityInput!) { updateEntity(id: $id, input: $i) { id } }`, { id: entity, i: { attributes: d } }) },
  { name: 'createResource', field: 'attributes', write: (d) => call(`mutation ($i: CreateResourceInput!) { createResource(input: $i) { id } }`, { i: { kind: 'channel', name: uniq('r'), tenantId: acme, attributes: d } }) },
  { name: 'updateResource', field: 'attributes', write: (d) => call(`mutation ($id: ID!, $i: UpdateResourceInput!) { updateResource(id: $id, input: $i) { id } }`, { id: resource, i: { attributes: d } }) },
  { name: 'createGroup', field: 'attributes', write: (d) => call(`mutation ($i: CreateGroupInput!) { createGroup(input: $i) { id } }`, { i: { name: uniq('g'), tenantId: acme, attributes: d } }) },
  { name: 'updateGroup', field: 'attributes', write: (d) => call(`mutation ($id: ID!, $i: UpdateGroupInput!) { updateGroup(id: $id, input: $i) { id } }`, { id: group, i: { attributes: d } }) },
  { name: 'createProfileVersion jsonSchema', field: 'jsonSchema', write: (d) => call(`mutation ($p: ID!, $i: CreateProfileVersionInput!) { createProfileVersion(profileId: $p, input: $i) { id } }`, { p: profile, i: { version: 100 + ++version, jsonSchema: d } }) },
  { name: 'createProfileVersion uiSchema', field: 'uiSchema', write: (d) => call(`mutation ($p: ID!, $i: CreateProfileVersionInput!) { createProfileVersion(profileId: $p, input: $i) { id } }`, { p: profile, i: { version: 100 + ++version, uiSchema: d } }) },
  { name: 'createApiEndpoint variablesMapping', field: 'variablesMapping', write: (d) => call(`mutation ($i: CreateApiEndpointInput!) { createApiEndpoint(input: $i) { id } }`, { i: endpointInput({ variablesMapping: d }) }) },
  { name: 'createApiEndpoint requestSchema', field: 'requestSchema', write: (d) => call(`mutation ($i: CreateApiEndpointInput!) { createApiEndpoint(input: $i) { id } }`, { i: endpointInput({ requestSchema: d }) }) },
  { name: 'createApiEndpoint responseMapping', field: 'responseMapping', write: (d) => call(`mutation ($i: CreateApiEndpointInput!) { createApiEndpoint(input: $i) { id } }`, { i: endpointInput({ responseMapping: d }) }) },
  { name: 'updateApiEndpoint responseMapping', field: 'responseMapping', write: (d) => call(`mutation ($id: ID!, $i: UpdateApiEndpointInput!) { updateApiEndpoint(id: $id, input: $i) { id } }`, { id: endpoint, i: { responseMapping: d } }) },
  {
    name: 'createPermissionBlock conditions', field: 'conditions', sized: conditionsSized, nested: conditionsNested,
    write: (d) => call(`mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`, { i: { scopeMode: 'tenant', tenantId: acme, actionIds: ['read'], conditions: d } }),
  },
  {
    name: 'createAccessToken conditions', field: 'permissions[0].conditions',
    write: (d) => call(`mutation ($i: CreateAccessTokenInput!) { createAccessToken(input: $i) { credentialId } }`,
      { i: { name: uniq('tok'), scoped: true, permissions: [{ actions: ['read'], scopeMode: 'platform', conditions: d }] } }),
  },
  {
    name: 'replaceAccessTokenPermissions conditions', field: 'permissions[0].conditions',
    write: (d) => call(`mutation ($c: ID!, $p: [AccessTokenPermissionInput!]!) { replaceAccessTokenPermissions(credentialId: $c, permissions: $p) }`,
      { c: token, p: [{ actions: ['read'], scopeMode: 'platform', conditions: d }] }),
  },
  {
    name: 'signup attributes', field: 'attributes',
    write: (d) => call(`mutation ($i: SignupInput!) { signup(input: $i) { entityId } }`, { i: { name: uniq('S'), email: `${uniq('s')}@example.com`, password: 'a-long-enough-password', attributes: d } }, ''),
  },
];

t.test('each stored JSON field: at the size bound stored; one byte over, or one level deeper, refused naming the field and the bound', async (t) => {
  for (const f of FIELDS) {
    const make = f.sized ?? ((b: number) => sized(b));
    const deep = f.nested ?? nested;
    const atBound = await f.write(make(1024));
    t.notOk(atBound.errors, `${f.name}: 1024 bytes are stored ${JSON.stringify(atBound.errors ?? '')}`);
    t.same(refusedWith((await f.write(make(1025))).errors), [['BAD_REQUEST', SIZE(f.field)]], `${f.name}: 1025 bytes`);
    const atDepth = await f.write(deep(4));
    t.notOk(atDepth.errors, `${f.name}: 4 levels are stored ${JSON.stringify(atDepth.errors ?? '')}`);
    t.same(refusedWith((await f.write(deep(5))).errors), [['BAD_REQUEST', DEPTH(f.field)]], `${f.name}: 5 levels`);
  }
  // Multi-byte text counts in UTF-8 bytes, as a client receives it: 340 three-byte characters pass 1 KiB.
  const wide = await FIELDS[2]!.write({ d: '€'.repeat(340) });
  t.same(refusedWith(wide.errors), [['BAD_REQUEST', SIZE('attributes')]], 'UTF-8 bytes, not characters');
  const [count] = await sql<{ n: number }[]>`select count(*)::int as n from entities where octet_length(attributes::text) > 1100`;
  t.equal(count!.n, 0, 'nothing over the bound was written');
});

t.test('POST /auth/signup: the same bound, 400 with the same message', async (t) => {
  const post = (attributes: unknown) => fetch(`${ts.url()}/auth/signup`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: uniq('R'), email: `${uniq('rest')}@example.com`, password: 'a-long-enough-password', attributes }),
  });
  const over = await post(sized(1025));
  t.equal(over.status, 400);
  t.same(await over.json(), { error: SIZE('attributes') });
  const deep = await post(nested(5));
  t.same([deep.status, await deep.json()], [400, { error: DEPTH('attributes') }]);
  t.equal((await post(sized(1024))).status, 202);
});

t.test('filters that take a JSON document are bounded too (attributesContains)', async (t) => {
  const res = await call(`query ($t: ID!, $c: JSON) { entities(tenantId: $t, attributesContains: $c) { total } }`, { t: acme, c: sized(1025) });
  t.same(refusedWith(res.errors), [['BAD_REQUEST', SIZE('attributesContains')]]);
});

t.test('audit details over the bounds are stored as a note of their keys', async (t) => {
  ts.service.audit.record({ event: 'test.large_details', outcome: 'allow', details: { filters: 'x'.repeat(2000), other: 1 } });
  ts.service.audit.record({ event: 'test.small_details', outcome: 'allow', details: { filters: 'x' } });
  await ts.service.audit.flush();
  const rows = await sql<{ event: string; details: Record<string, unknown> }[]>`
    select event, details from audit_log where event like 'test.%_details' order by event`;
  t.same(rows.map((r) => [r.event, r.details]), [
    ['test.large_details', { truncated: true, max_bytes: 1024, max_depth: 4, keys: ['filters', 'other'] }],
    ['test.small_details', { filters: 'x' }],
  ]);
});

// What bounds each json/jsonb column: the API's document bounds, or the service writing it itself.
const COLUMNS: Record<string, string> = {
  'tenants.attributes': 'createTenant, updateTenant',
  'entities.attributes': 'createEntity, updateEntity, signup',
  'resources.attributes': 'createResource, updateResource',
  'groups.attributes': 'createGroup, updateGroup',
  'profile_versions.json_schema': 'createProfileVersion',
  'profile_versions.ui_schema': 'createProfileVersion',
  'api_endpoints.variables_mapping': 'createApiEndpoint, updateApiEndpoint',
  'api_endpoints.request_schema': 'createApiEndpoint, updateApiEndpoint',
  'api_endpoints.response_mapping': 'createApiEndpoint, updateApiEndpoint',
  'permission_blocks.conditions': 'createPermissionBlock',
  'credential_permission_limits.conditions': 'createAccessToken, replaceAccessTokenPermissions',
  'audit_log.details': 'service-written; the audit writer keeps a note when over the bounds',
  'api_endpoint_executions.request_summary': 'service-written; cut at SVC_CUSTOM_ENDPOINT_LOG_SUMMARY_MAX_BYTES',
  'api_endpoint_executions.response_summary': 'service-written; cut at SVC_CUSTOM_ENDPOINT_LOG_SUMMARY_MAX_BYTES',
  'tenant_memberships.attributes': 'no operation writes it (default {})',
  'credentials.metadata': 'no operation writes it (default {})',
  'signing_keys.public_jwk': 'service-written: a public key',
  'pki_authorities.key_ref': 'service-written: a key reference',
  'event_outbox.payload': 'service-written: a certificate event',
};

t.test('every json/jsonb column is classified', async (t) => {
  const rows = await sql<{ c: string }[]>`
    select distinct c.table_name || '.' || c.column_name as c
    from information_schema.columns c join information_schema.tables tb using (table_schema, table_name)
    where c.table_schema = current_schema() and c.data_type in ('json', 'jsonb') and tb.table_type = 'BASE TABLE'
      and not exists (select 1 from pg_inherits i join pg_class k on k.oid = i.inhrelid where k.relname = c.table_name)
    order by 1`;
  t.same(rows.map((r) => r.c), Object.keys(COLUMNS).sort(), 'a new JSON column needs a bound (or a reason it needs none) here');
});
