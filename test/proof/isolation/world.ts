// The one fixture world of the isolation matrix: a target tenant holding one object of every kind the
// operations take (named `zz-target-…`, so any answer that carries one is caught by its name), and an
// attacker tenant built the same way (for the own/foreign combinations); then the five callers.
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { accessTokenFor, adminToken, login, setPassword } from '../../helpers/auth.js';
import { createUser, ok } from '../../helpers/management.js';
import { ISSUE_CSR, opensslCsr } from '../../helpers/pki.js';
import type { TestService } from '../../helpers/service.js';

/** Every object of one tenant the fixture table can name (`$key`). */
export type Side = Record<string, string>;

export interface Caller {
  name: CallerName;
  token: string | undefined;
}
export type CallerName = 'otherAdmin' | 'reader' | 'device' | 'scopedToken' | 'anonymous';

export interface World {
  target: Side;
  attacker: Side;
  /** The target's objects as ids that never existed (same format): the existence-oracle twins. */
  ghost: Side;
  /** The constants that name a target object (its alias), as ones that never existed. */
  ghostConstants: Record<string, string>;
  /** Constants the fixture names with `#key`: a CSR, the attacker's login, a seeded action id. */
  constants: Record<string, string>;
  callers: Caller[];
  /** Strings that must never reach a caller: the target's object ids and its name marker. */
  markers: string[];
  /** The target's device and its shared key (the messaging routes' publisher). */
  /** The device caller (another device of the target) and the other tenant's device, with their keys. */
  sensor: { id: string; key: string };
  attackerDevice: { id: string; key: string };
  platformAdmin: string;
}

export const MARK = 'zz-target';

const q = {
  entity: `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`,
  sharedKey: `mutation ($e: ID!) { createSharedKey(entityId: $e, input: {description: "matrix"}) { credentialId key } }`,
  resource: `mutation ($i: CreateResourceInput!) { createResource(input: $i) { id } }`,
  objectGroup: `mutation ($i: CreateGroupInput!) { createObjectGroup(input: $i) { id } }`,
  principalGroup: `mutation ($i: CreateGroupInput!) { createPrincipalGroup(input: $i) { id } }`,
  block: `mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
  role: `mutation ($i: CreateRoleInput!) { createRole(input: $i) { id } }`,
};

async function id(ts: TestService, token: string, query: string, variables: Record<string, unknown>): Promise<string> {
  const data = await ok(ts, token, query, variables);
  return (Object.values(data)[0] as { id: string }).id;
}

/** One tenant with every kind of object, made by its admin (custom endpoints by the platform admin). */
async function buildSide(ts: TestService, admin: string, owner: { id: string; token: string; password: string }, prefix: string, alias: string, dir: string): Promise<Side & { deviceKey: string }> {
  const t = owner.token;
  const s: Record<string, string> = { admin: owner.id };
  s.tenant = await id(ts, t, `mutation ($i: CreateTenantInput!) { createTenant(input: $i) { id } }`, { i: { name: `${prefix}tenant`, alias, attributes: { note: `${prefix}attr` } } });
  const ent = (kind: string, name: string) => id(ts, t, q.entity, { i: { kind, name: `${prefix}${name}`, tenantId: s.tenant, attributes: { note: `${prefix}attr` } } });
  s.device = await ent('device', 'device');
  s.service = await ent('service', 'service');
  const key = (await ok(ts, t, q.sharedKey, { e: s.device })).createSharedKey;
  s.sharedKey = key.credentialId;
  s.channel = await id(ts, t, q.resource, { i: { kind: 'channel', name: `${prefix}channel`, tenantId: s.tenant, attributes: { note: `${prefix}attr` } } });
  s.ceilingChannel = await id(ts, t, q.resource, { i: { kind: 'channel', name: `${prefix}ceiling-channel`, tenantId: s.tenant } });
  s.parentGroup = await id(ts, t, q.objectGroup, { i: { name: `${prefix}parent-group`, tenantId: s.tenant } });
  s.objectGroup = await id(ts, t, q.objectGroup, { i: { name: `${prefix}object-group`, tenantId: s.tenant } });
  await ok(ts, t, `mutation ($a: ID!, $b: ID!) { setObjectGroupParent(objectGroupId: $a, parentGroupId: $b) { id } }`, { a: s.objectGroup, b: s.parentGroup });
  s.principalGroup = await id(ts, t, q.principalGroup, { i: { name: `${prefix}principal-group`, tenantId: s.tenant } });
  await ok(ts, t, `mutation ($e: ID!, $g: ID!) { addEntityToObjectGroup(entityId: $e, objectGroupId: $g) { id } }`, { e: s.device, g: s.objectGroup });
  await ok(ts, t, `mutation ($r: ID!, $g: ID!) { addResourceToObjectGroup(resourceId: $r, objectGroupId: $g) { id } }`, { r: s.channel, g: s.objectGroup });
  await ok(ts, t, `mutation ($g: ID!, $e: ID!) { addGroupMember(groupId: $g, entityId: $e) }`, { g: s.principalGroup, e: s.service });
  await ok(ts, t, `mutation ($a: ID!, $b: ID!) { addOwnership(ownerId: $a, ownedId: $b) { ownerId } }`, { a: s.service, b: s.device });
  // The device publishes and subscribes on its channel through a role; reads it through a direct policy.
  s.block = await id(ts, t, q.block, { i: { tenantId: s.tenant, scopeMode: 'object', objectKind: 'resource', objectId: s.channel, actionIds: ['publish', 'subscribe'] } });
  s.role = await id(ts, t, q.role, { i: { name: `${prefix}role`, tenantId: s.tenant } });
  await ok(ts, t, `mutation ($r: ID!, $b: [ID!]!) { replaceRolePermissionBlocks(roleId: $r, permissionBlockIds: $b) }`, { r: s.role, b: [s.block] });
  s.assignment = await id(ts, t, `mutation ($i: CreateRoleAssignmentInput!) { createRoleAssignment(input: $i) { id } }`,
    { i: { tenantId: s.tenant, subjectKind: 'entity', subjectId: s.device, roleId: s.role } });
  s.readBlock = await id(ts, t, q.block, { i: { tenantId: s.tenant, scopeMode: 'object', objectKind: 'resource', objectId: s.channel, actionIds: ['read'] } });
  s.directPolicy = await id(ts, t, `mutation ($i: CreateDirectPolicyInput!) { createDirectPolicy(input: $i) { id } }`,
    { i: { tenantId: s.tenant, subjectKind: 'entity', subjectId: s.device, permissionBlockId: s.readBlock } });
  s.adminRole = (await ts.service.sql<{ id: string }[]>`select id from roles where tenant_id = ${s.tenant} and name = 'tenant-admin'`)[0]!.id;
  // A read-only member: a tenant-wide read role.
  const readerBlock = await id(ts, t, q.block, { i: { tenantId: s.tenant, scopeMode: 'tenant', actionIds: ['read'] } });
  s.readerRole = await id(ts, t, q.role, { i: { name: `${prefix}reader-role`, tenantId: s.tenant } });
  await ok(ts, t, `mutation ($r: ID!, $b: [ID!]!) { replaceRolePermissionBlocks(roleId: $r, permissionBlockIds: $b) }`, { r: s.readerRole, b: [readerBlock] });
  const reader = await createUser(ts, `${prefix}reader`);
  s.member = reader.id;
  s.memberToken = reader.token;
  await ok(ts, t, `mutation ($t: ID!, $e: ID!, $r: ID!) { addTenantMember(tenantId: $t, entityId: $e, roleId: $r) }`, { t: s.tenant, e: reader.id, r: s.readerRole });
  s.accessToken = (await accessTokenFor(ts, t)).credentialId;
  s.profile = await id(ts, t, `mutation ($i: CreateProfileInput!) { createProfile(input: $i) { id } }`,
    { i: { tenantId: s.tenant, objectKind: 'entity', kind: 'device', key: `${prefix}profile`, displayName: `${prefix}profile` } });
  s.profileVersion = await id(ts, t, `mutation ($p: ID!, $i: CreateProfileVersionInput!) { createProfileVersion(profileId: $p, input: $i) { id } }`,
    { p: s.profile, i: { version: 1, jsonSchema: { type: 'object' } } });
  // Certificate profiles need pki.provision, which tenant administrators do not hold.
  s.certificateProfile = await id(ts, admin, `mutation ($i: CreateCertificateProfileInput!) { createCertificateProfile(input: $i) { id } }`,
    { i: { tenantId: s.tenant, name: `${prefix}cert-profile` } });
  s.authority = (await ok(ts, t, `query ($t: ID) { pkiAuthorities(tenantId: $t) { id kind } }`, { t: s.tenant }))
    .pkiAuthorities.find((a: { kind: string }) => a.kind === 'tenant_intermediate').id;
  const csr = opensslCsr(dir, { subject: `/CN=${prefix}device` });
  const issued = (await ok(ts, t, ISSUE_CSR, { i: { entityId: s.device, csrPem: csr.csrPem, idempotencyKey: `${prefix}issue` } })).issueCertificateFromCsrV2;
  s.certificate = issued.certificate.credentialId;
  s.certificateSerial = issued.certificate.serialNumber;
  s.certificateFingerprint = issued.certificate.fingerprintSha256;
  s.certificatePem = issued.certificate.certificatePem;
  s.certificateKey = readFileSync(csr.keyPath, 'utf8');
  s.endpoint = await id(ts, admin, `mutation ($i: CreateApiEndpointInput!) { createApiEndpoint(input: $i) { id } }`, {
    i: { tenantId: s.tenant, key: `${prefix}endpoint`.replace(/-/g, '_'), name: `${prefix}endpoint`, method: 'POST', path: `/api/custom/${prefix}entities`,
      operationKind: 'query', graphql: `query ($t: ID) { entities(tenantId: $t) { total items { id name } } }`, status: 'active',
      variablesMapping: { t: '$.body.tenantId' } },
  });
  s.endpointPath = `/api/custom/${prefix}entities`;
  s.invitation = (await ok(ts, t, `mutation ($t: ID!, $i: CreateTenantInvitationInput!) { createTenantInvitation(tenantId: $t, input: $i) { id } }`,
    { t: s.tenant, i: { inviteeEmail: `${prefix}invitee@example.com`, roleId: s.readerRole } })).createTenantInvitation.id;
  s.rule = await id(ts, t, `mutation ($i: CreateActionAssignmentRuleInput!) { createActionAssignmentRule(input: $i) { id } }`,
    { i: { tenantId: s.tenant, entityKind: 'device', actionName: 'read', objectKind: 'audit_log', decision: 'deny' } });
  s.session = (await login(ts, owner.id, owner.password)).sessionId;
  return { ...s, deviceKey: key.key as string };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A value of the same format as a target object's that no object ever had: a fresh UUID, hex of the same length, a fresh name. */
function ghostOf(value: string): string {
  if (UUID.test(value)) return randomUUID();
  if (/^[0-9a-f:]+$/i.test(value)) {
    const hex = randomBytes(value.length).toString('hex');
    let at = 0;
    return value.replace(/[0-9a-f]/gi, (c) => (c === c.toUpperCase() ? hex[at++]!.toUpperCase() : hex[at++]!));
  }
  return value.replace(MARK, `never-${randomBytes(4).toString('hex')}`);
}

async function userWithPassword(ts: TestService, name: string) {
  const user = await createUser(ts, name);
  const password = `${name}-password-0123456789`;
  await setPassword(ts, user.id, password);
  return { id: user.id, password, token: (await login(ts, user.id, password)).token };
}

export async function buildWorld(ts: TestService, dir: string): Promise<World> {
  const admin = await adminToken(ts);
  const bob = await userWithPassword(ts, `${MARK}-bob`);
  const alice = await userWithPassword(ts, 'alice');
  const target = await buildSide(ts, admin, bob, `${MARK}-`, MARK, dir);
  const attacker = await buildSide(ts, admin, alice, 'acme-', 'acme', dir);
  // The device caller is another device of the target (with its own channel grant), never the object the
  // fixture aims at: a device acting on itself is self-service, not a crossing.
  const sensor = await id(ts, bob.token, q.entity, { i: { kind: 'device', name: `${MARK}-sensor`, tenantId: target.tenant } });
  const sensorKey = (await ok(ts, bob.token, q.sharedKey, { e: sensor })).createSharedKey.key as string;
  await ok(ts, bob.token, `mutation ($i: CreateRoleAssignmentInput!) { createRoleAssignment(input: $i) { id } }`,
    { i: { tenantId: target.tenant, subjectKind: 'entity', subjectId: sensor, roleId: target.role } });
  const deviceToken = (await login(ts, sensor, sensorKey, { kind: 'shared_key' })).token;
  // A scoped token of the target's own administrator whose ceiling is one other channel: every operation
  // of the matrix lies outside it.
  const scoped = await accessTokenFor(ts, bob.token, [{ actions: ['read'], scopeMode: 'object', objectKind: 'resource', objectId: target.ceilingChannel }]);
  const published = await fetch(`${ts.url('messaging')}/http/m/${target.tenant}/c/${target.channel}`, {
    method: 'POST', headers: { authorization: `Client ${target.deviceKey}`, 'content-type': 'application/senml+json' },
    body: JSON.stringify([{ bn: `${MARK}:`, n: 'temp', v: 20 }]),
  });
  if (published.status !== 202) throw new Error(`publishing the target's message: ${published.status} ${await published.text()}`);
  const readAction = (await ts.service.sql<{ id: string }[]>`select id from actions where name = 'read'`)[0]!.id;
  const csr = opensslCsr(dir, { subject: '/CN=matrix' });
  const secretKeys = new Set(['deviceKey', 'certificateKey', 'memberToken']);
  const markers = [MARK, ...Object.entries(target).filter(([k]) => !secretKeys.has(k) && k !== 'certificatePem').map(([, v]) => v), target.deviceKey, (target.certificateKey as string).split('\n')[1]!];
  return {
    target, attacker,
    ghost: Object.fromEntries(Object.entries(target).map(([k, v]) => [k, ghostOf(v)])),
    ghostConstants: { targetAlias: ghostOf(MARK), targetAliasText: ghostOf(MARK) },
    constants: {
      csr: csr.csrPem, csrBase64: csr.csrPem.replace(/-----[^-]+-----|\s/g, ''), alice: alice.id, alicePassword: alice.password, readAction, targetAlias: MARK,
      targetAliasText: MARK,
    },
    callers: [
      { name: 'otherAdmin', token: alice.token },
      { name: 'reader', token: target.memberToken },
      { name: 'device', token: deviceToken },
      { name: 'scopedToken', token: scoped.token },
      { name: 'anonymous', token: undefined },
    ],
    markers,
    sensor: { id: sensor, key: sensorKey },
    attackerDevice: { id: attacker.device as string, key: attacker.deviceKey },
    platformAdmin: admin,
  };
}
