// Issue 35 point 6: a broad tenant-scope grant does not reach the sensitive kinds audit_log and credential.
// A read-only member (tenant · read) reads the tenant's entities but neither its audit log nor anyone's
// credentials; reading them takes a block naming the kind (as SPEC.md's tenant-admin role carries them),
// the exact object, or platform scope. Same rule on every surface: GraphQL, GET /audit/export, runtime
// checks and the guardrails' expansion of a tenant scope.
import t from 'tap';
import { AUTH_ENV } from '../helpers/auth.js';
import { createEntity, createUser, fails, ok, twoTenants } from '../helpers/management.js';
import { gql, startTestService } from '../helpers/service.js';

const ts = await startTestService(t, { ...AUTH_ENV, SVC_KEY_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64') });
const { admin, alice, acme } = await twoTenants(ts);
const device = await createEntity(ts, alice.token, { kind: 'device', name: 'meter-1', tenantId: acme });
await ok(ts, alice.token, `mutation ($e: ID!) { createSharedKey(entityId: $e, input: {description: "k"}) { credentialId } }`, { e: device });

/** A role in Acme made of the given blocks, held by a fresh member. */
async function memberWith(name: string, blocks: Record<string, unknown>[]) {
  const ids: string[] = [];
  for (const b of blocks) {
    ids.push((await ok(ts, alice.token, `mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
      { i: { tenantId: acme, ...b } })).createPermissionBlock.id);
  }
  const role = (await ok(ts, alice.token, `mutation ($i: CreateRoleInput!) { createRole(input: $i) { id } }`, { i: { name, tenantId: acme } })).createRole.id;
  await ok(ts, alice.token, `mutation ($r: ID!, $b: [ID!]!) { replaceRolePermissionBlocks(roleId: $r, permissionBlockIds: $b) }`, { r: role, b: ids });
  const user = await createUser(ts, name);
  await ok(ts, alice.token, `mutation ($t: ID!, $e: ID!, $r: ID!) { addTenantMember(tenantId: $t, entityId: $e, roleId: $r) }`, { t: acme, e: user.id, r: role });
  return user;
}

const reader = await memberWith('reader', [{ scopeMode: 'tenant', actionIds: ['read'] }]);
const auditor = await memberWith('auditor', [{ scopeMode: 'tenant', actionIds: ['read'] }, { scopeMode: 'object_kind', objectKind: 'audit_log', actionIds: ['read'] }]);
const custodian = await memberWith('custodian', [{ scopeMode: 'tenant', actionIds: ['read'] }, { scopeMode: 'object_kind', objectKind: 'credential', actionIds: ['read'] }]);

const AUDIT = `query ($t: ID!) { auditLogs(tenantId: $t) { total items { event } } }`;
const ENTITY_AUDIT = `query ($e: ID!) { entityAuditLogs(entityId: $e) { total } }`;
const CREDENTIALS = `query ($e: ID!) { credentials(entityId: $e) { total items { kind } } }`;
const CERTIFICATES = `query ($t: ID!) { certificates(tenantId: $t) { total } }`;
const ENTITIES = `query ($t: ID!) { entities(tenantId: $t) { total } }`;

async function outcome(token: string, query: string, variables: Record<string, unknown>) {
  const res = await gql(ts.url(), query, variables, token);
  if (res.body.errors) return res.body.errors.map((e) => e.extensions?.code).join(',');
  const value = Object.values(res.body.data ?? {})[0] as { total: number };
  return value.total > 0 ? 'reads' : 'empty';
}

// who, what, expected, why
const cases: [string, string, string, Record<string, unknown>, string, string][] = [
  ['reader', 'entities', ENTITIES, { t: acme }, 'reads', 'tenant · read still reads the ordinary kinds'],
  ['reader', 'auditLogs', AUDIT, { t: acme }, 'FORBIDDEN', 'tenant · read does not reach audit_log'],
  ['reader', 'entityAuditLogs', ENTITY_AUDIT, { e: device }, 'FORBIDDEN', 'nor through one entity'],
  ['reader', 'credentials', CREDENTIALS, { e: device }, 'FORBIDDEN', 'tenant · read does not reach credential'],
  ['reader', 'certificates', CERTIFICATES, { t: acme }, 'FORBIDDEN', 'nor through certificate listings'],
  ['auditor', 'auditLogs', AUDIT, { t: acme }, 'reads', 'object_kind audit_log · read'],
  ['auditor', 'credentials', CREDENTIALS, { e: device }, 'FORBIDDEN', 'the audit block gives no credentials'],
  ['custodian', 'credentials', CREDENTIALS, { e: device }, 'reads', 'object_kind credential · read'],
  ['custodian', 'auditLogs', AUDIT, { t: acme }, 'FORBIDDEN', 'the credential block gives no audit log'],
  ['alice', 'auditLogs', AUDIT, { t: acme }, 'reads', "the tenant-admin role's explicit audit_log block"],
  ['alice', 'credentials', CREDENTIALS, { e: device }, 'reads', "the tenant-admin role's explicit credential block"],
  ['admin', 'auditLogs', AUDIT, { t: acme }, 'reads', 'platform scope reaches everything'],
  ['admin', 'credentials', CREDENTIALS, { e: device }, 'reads', 'platform scope reaches everything'],
];

t.test('GraphQL reads of the sensitive kinds, as data', async (t) => {
  const tokens: Record<string, string> = { reader: reader.token, auditor: auditor.token, custodian: custodian.token, alice: alice.token, admin };
  for (const [who, what, query, variables, expected, why] of cases) {
    t.equal(await outcome(tokens[who] as string, query, variables), expected, `${who} ${what}: ${why}`);
  }
});

t.test('GET /audit/export: the same rule', async (t) => {
  const exportAs = (token: string) => fetch(`${ts.url()}/audit/export?tenantId=${acme}`, { headers: { authorization: `Bearer ${token}` } });
  t.equal((await exportAs(reader.token)).status, 403, 'the read-only member');
  const res = await exportAs(auditor.token);
  t.equal(res.status, 200, 'the auditor');
  t.ok((await res.text()).length > 0);
});

t.test('runtime decisions: the same containment', async (t) => {
  const authorize = (subjectId: string, kind: 'audit_log' | 'credential') =>
    ts.service.authz.authorize({ subjectId, action: 'read', object: { kind, id: null, tenantId: acme } });
  t.match(await authorize(reader.id, 'audit_log'), { allowed: false, reason: 'no matching allow policy' });
  t.match(await authorize(reader.id, 'credential'), { allowed: false, reason: 'no matching allow policy' });
  t.match(await authorize(auditor.id, 'audit_log'), { allowed: true });
  t.match(await authorize(custodian.id, 'credential'), { allowed: true });
  // The ordinary kinds are untouched: the tenant block still contains the tenant's entities.
  t.match(await ts.service.authz.authorize({ subjectId: reader.id, action: 'read', object: { kind: 'entity', id: device } }), { allowed: true });
});

t.test("the guardrails' expansion of a tenant scope leaves the sensitive kinds out", async (t) => {
  // A device given tenant · read: refused (a device reads resources only); the message lists what the
  // scope reaches, and that no longer includes the audit log or credentials.
  const block = (await ok(ts, alice.token, `mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
    { i: { tenantId: acme, scopeMode: 'tenant', actionIds: ['read'] } })).createPermissionBlock.id;
  const errors = await fails(ts, alice.token, `mutation ($i: CreateDirectPolicyInput!) { createDirectPolicy(input: $i) { id } }`,
    { i: { tenantId: acme, subjectKind: 'entity', subjectId: device, permissionBlockId: block } });
  const message = errors[0]?.message ?? '';
  t.match(message, /tenant scope reaches read on /);
  t.notMatch(message, /audit_log|credential/, message);
});
