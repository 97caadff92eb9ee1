// Issue 34 point 4: what the upstream admin UI showed wrong, run with the UI's own operation texts
// (fixtures/admin-ui-operations.ts) and checked for their values: the system health page, the audit
// retention banner and the dashboard's pool pressure; the entity credentials view's certificate by serial
// (tenant isolation, no oracle, ambiguity across issuers); the authorization debugger's grant_id and
// scope_ref; and the refusal of a device's "tenant itself · read" direct policy, which says what the
// tenant scope reached and which guardrail refused.
import t from 'tap';
import { SENSITIVE_KINDS } from '../../src/authz/scope.js';
import { ADMIN_ID, startAuthService } from '../helpers/auth.js';
import { createEntity, createUser, fails, ok, twoTenants } from '../helpers/management.js';
import { ISSUE_CSR, makeCaFiles, opensslCsr } from '../helpers/pki.js';
import { AUDIT_RETENTION_BANNER, AUTHZ_DEBUGGER, CERTIFICATE_BY_SERIAL, DASHBOARD_POSTURE, SYSTEM_HEALTH_PAGE } from './fixtures/admin-ui-operations.js';

const ca = makeCaFiles(t);
const ts = await startAuthService(t, ca.env);
const sql = ts.service.sql;
const { admin, alice, bob, dave, acme, globex } = await twoTenants(ts);
const FORBIDDEN = [{ message: 'forbidden', extensions: { code: 'FORBIDDEN' } }];

t.test('system health page, audit retention banner, dashboard posture: configured and live numbers', async (t) => {
  const page = (await ok(ts, admin, SYSTEM_HEALTH_PAGE.text)).systemStatus;
  t.match(page, {
    status: /^(ok|degraded)$/,
    httpReady: { status: 'ok', message: `ready; serving on 127.0.0.1:${ts.service.ports.http}` },
    grpcReady: { status: 'disabled', message: 'no gRPC listener (SVC_GRPC_ADDR is off)' },
    database: { status: 'ok', message: 'reachable' },
    migrations: { status: 'ok', message: 'all applied' },
    signingKeys: { status: 'ok', message: String },
    dbPool: { maxConnections: 10, minConnections: 0, acquireTimeoutSecs: null, connectTimeoutSecs: 10, idleTimeoutSecs: 60, maxLifetimeSecs: 1800 },
    auditRetention: { enabled: false, days: 365, cleanupIntervalSecs: 86_400, cleanupBatchSize: 5000, lastCleanup: null },
  }, 'every card has a status and a message; retention shows its configured numbers while off');
  t.ok(page.dbPool.size >= 1 && page.dbPool.size <= 10 && page.dbPool.idle >= 0 && page.dbPool.idle <= page.dbPool.size,
    `the pool's open (${page.dbPool.size}) and idle (${page.dbPool.idle}) connections, not null`);
  t.same((await ok(ts, admin, AUDIT_RETENTION_BANNER.text)).systemStatus.auditRetention,
    { enabled: false, days: 365, cleanupIntervalSecs: 86_400, cleanupBatchSize: 5000, lastCleanup: null });
  const posture = (await ok(ts, admin, DASHBOARD_POSTURE.text)).systemStatus;
  t.match(posture, { dbPool: { maxConnections: 10, size: Number, idle: Number }, auditRetention: { enabled: false, days: 365 } }, 'pool pressure can be computed');
  for (const op of [SYSTEM_HEALTH_PAGE, AUDIT_RETENTION_BANNER]) t.match(await fails(ts, alice.token, op.text), FORBIDDEN, `${op.name}: a tenant admin is refused`);
});

t.test('certificate by serial: within the caller\'s visibility, NOT_FOUND otherwise, ambiguity named', async (t) => {
  const devA = await createEntity(ts, alice.token, { kind: 'device', name: 'serial-a', tenantId: acme });
  const devB = await createEntity(ts, bob.token, { kind: 'device', name: 'serial-b', tenantId: globex });
  let n = 0;
  const issue = async (token: string, entityId: string) => (await ok(ts, token, ISSUE_CSR, {
    i: { entityId, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: `serial-${n++}` },
  })).issueCertificateFromCsrV2.certificate as { credentialId: string; serialNumber: string; issuerId: string; certificatePem: string };
  const certA = await issue(alice.token, devA);
  const certB = await issue(bob.token, devB);
  const bySerial = (token: string, serialNumber: string) => ok(ts, token, CERTIFICATE_BY_SERIAL.text, { serialNumber });
  const NOT_FOUND = [{ message: 'certificate not found', extensions: { code: 'NOT_FOUND' } }];

  t.same((await bySerial(alice.token, certA.serialNumber)).certificate, { serialNumber: certA.serialNumber, certificatePem: certA.certificatePem }, 'the UI text as written');
  const spaced = certA.serialNumber.toUpperCase().match(/../g)!.join(':');
  t.equal((await bySerial(alice.token, spaced)).certificate.serialNumber, certA.serialNumber, 'capitals and colons as openssl prints a serial');
  t.equal((await bySerial(admin, certB.serialNumber)).certificate.serialNumber, certB.serialNumber, 'the platform admin reads every tenant\'s');
  t.match(await fails(ts, alice.token, CERTIFICATE_BY_SERIAL.text, { serialNumber: certB.serialNumber }), NOT_FOUND, 'another tenant\'s certificate does not exist for her');
  t.match(await fails(ts, dave.token, CERTIFICATE_BY_SERIAL.text, { serialNumber: certA.serialNumber }), NOT_FOUND, 'nor for a human without a grant');
  t.match(await fails(ts, alice.token, CERTIFICATE_BY_SERIAL.text, { serialNumber: 'abcdef0123' }), NOT_FOUND, 'an unknown serial answers the same');
  t.match(await fails(ts, alice.token, CERTIFICATE_BY_SERIAL.text, { serialNumber: 'not-hex' }), [{ message: 'serialNumber must be a hex string', extensions: { code: 'BAD_REQUEST' } }]);

  // The same serial under a second issuer (serials are unique per issuer only): bob's next certificate
  // takes certA's serial under the root's id.
  const certB2 = await issue(bob.token, devB);
  const [root] = await sql<{ id: string }[]>`select id from pki_authorities where kind = 'root' and status = 'active'`;
  await sql`update credentials set identifier = ${certA.serialNumber}, issuer_id = ${root!.id} where id = ${certB2.credentialId}`;
  const ANY = `query ($s: String, $i: ID, $c: ID) { certificate(serialNumber: $s, issuerId: $i, credentialId: $c) { credentialId issuerId serialNumber } }`;
  const both = [certA.issuerId, root!.id].sort();
  t.match(await fails(ts, admin, ANY, { s: certA.serialNumber }), [{
    message: `serialNumber ${certA.serialNumber} names certificates of 2 issuers; give issuerId (${both.join(' or ')})`, extensions: { code: 'BAD_REQUEST' },
  }], 'ambiguous for a caller who sees both');
  t.same((await ok(ts, admin, ANY, { s: certA.serialNumber, i: root!.id })).certificate, { credentialId: certB2.credentialId, issuerId: root!.id, serialNumber: certA.serialNumber }, 'issuerId decides');
  t.same((await ok(ts, admin, ANY, { s: certA.serialNumber, i: certA.issuerId })).certificate.credentialId, certA.credentialId);
  t.equal((await bySerial(alice.token, certA.serialNumber)).certificate.serialNumber, certA.serialNumber, 'not ambiguous for alice: bob\'s twin is not hers to see');
  t.match(await fails(ts, bob.token, ANY, { s: certA.serialNumber, i: certA.issuerId }), NOT_FOUND, 'nor is alice\'s for bob, with its issuer named');

  const BAD = (message: string) => [{ message, extensions: { code: 'BAD_REQUEST' } }];
  t.match(await fails(ts, admin, ANY, { s: certA.serialNumber, c: certA.credentialId }), BAD('give credentialId or serialNumber, not both'));
  t.match(await fails(ts, admin, ANY, {}), BAD('credentialId or serialNumber is required'));
  t.match(await fails(ts, admin, ANY, { c: certA.credentialId, i: certA.issuerId }), BAD('issuerId goes with serialNumber, not credentialId'));
  t.match(await fails(ts, admin, ANY, { s: certA.serialNumber, i: 'x' }), BAD('issuerId must be a UUID'));
  t.equal((await ok(ts, alice.token, ANY, { c: certA.credentialId })).certificate.credentialId, certA.credentialId, 'by credentialId as before');
  t.match(await fails(ts, undefined, CERTIFICATE_BY_SERIAL.text, { serialNumber: certA.serialNumber }), [{ extensions: { code: 'UNAUTHENTICATED' } }]);
});

t.test('authorization debugger: grant_id is the action or role id, scope_ref the string its scope names', async (t) => {
  const device = await createEntity(ts, alice.token, { kind: 'device', name: 'debugged', tenantId: acme });
  const channel = (await ok(ts, alice.token, `mutation ($i: CreateResourceInput!) { createResource(input: $i) { id } }`,
    { i: { kind: 'channel', name: 'debug-ch', tenantId: acme } })).createResource.id as string;
  const block = async (input: Record<string, unknown>) => (await ok(ts, alice.token, `mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
    { i: { tenantId: acme, ...input } })).createPermissionBlock.id as string;
  const policy = async (blockId: string) => (await ok(ts, alice.token, `mutation ($i: CreateDirectPolicyInput!) { createDirectPolicy(input: $i) { id } }`,
    { i: { tenantId: acme, subjectKind: 'entity', subjectId: device, permissionBlockId: blockId } })).createDirectPolicy.id as string;
  const onChannel = await block({ scopeMode: 'object', objectKind: 'resource', objectId: channel, actionIds: ['publish', 'subscribe'] });
  const readResources = await block({ scopeMode: 'object_kind', objectKind: 'resource', actionIds: ['read'] });
  const channelType = await block({ scopeMode: 'object_type', objectKind: 'resource', objectType: 'resource:channel', actionIds: ['publish'] });
  const policyOnChannel = await policy(onChannel);
  const policyRead = await policy(readResources);
  const role = (await ok(ts, alice.token, `mutation ($i: CreateRoleInput!) { createRole(input: $i) { id } }`, { i: { name: 'publishers', tenantId: acme } })).createRole.id as string;
  await ok(ts, alice.token, `mutation ($r: ID!, $b: [ID!]!) { replaceRolePermissionBlocks(roleId: $r, permissionBlockIds: $b) }`, { r: role, b: [channelType] });
  const assignment = (await ok(ts, alice.token, `mutation ($i: CreateRoleAssignmentInput!) { createRoleAssignment(input: $i) { id } }`,
    { i: { tenantId: acme, subjectKind: 'entity', subjectId: device, roleId: role } })).createRoleAssignment.id as string;
  const actionIds = Object.fromEntries(((await ok(ts, admin, '{ actions(limit: 100, offset: 0) { items { id name } } }')).actions.items as { id: string; name: string }[])
    .map((a) => [a.name, a.id]));

  const explain = (input: Record<string, unknown>) => ok(ts, admin, AUTHZ_DEBUGGER.text, { input });
  const e = (await explain({ subjectId: device, action: 'publish', objectKind: 'resource', objectId: channel })).authzExplain;
  t.equal(e.allowed, true);
  const bindings = e.evaluatedBindings as Record<string, unknown>[];
  const byBlock = (id: string) => bindings.filter((b) => b.block_id === id);
  t.match(byBlock(onChannel), [{ id: `${policyOnChannel}:${onChannel}`, grant_kind: 'capability', grant_id: actionIds.publish, role_name: null,
    scope_kind: 'object', scope_ref: channel, result: 'matched', via: 'direct' }], 'a direct policy: the action it grants, the exact object');
  t.match(byBlock(readResources), [{ id: `${policyRead}:${readResources}:${actionIds.read}`, grant_kind: 'capability', grant_id: actionIds.read,
    scope_kind: 'object_kind', scope_ref: 'resource', result: 'skipped', skip_reason: "block does not grant 'publish'" }], 'a policy of another action names that action');
  t.match(byBlock(channelType), [{ id: `${assignment}:${channelType}`, grant_kind: 'role', grant_id: role, role_name: 'publishers',
    scope_kind: 'object_type', scope_ref: 'resource:channel', result: 'matched' }], 'a role assignment: the role');
  t.ok([e.matchedBinding.block_id].some((id) => id === onChannel || id === channelType), 'the matched binding is one of the allows');
  t.ok(bindings.every((b) => b.scope_ref === null || typeof b.scope_ref === 'string'), 'every scope_ref is a string (or null for platform)');
  t.ok(bindings.every((b) => b.grant_id === role || Object.values(actionIds).includes(b.grant_id as string)), 'no grant_id is a policy or assignment id');
  t.equal(new Set(bindings.map((b) => b.id)).size, bindings.length, 'binding ids are unique (the UI keys its cards by them)');

  const human = (await explain({ subjectId: alice.id, action: 'read', objectKind: 'resource', objectId: channel })).authzExplain;
  t.match(human.matchedBinding, { grant_kind: 'role', role_name: 'tenant-admin', scope_kind: 'tenant', scope_ref: acme }, 'a tenant scope names its tenant');
  const platform = (await explain({ subjectId: ADMIN_ID, action: 'read', objectKind: 'resource', objectId: channel })).authzExplain;
  t.match(platform.matchedBinding, { grant_kind: 'role', scope_kind: 'platform', scope_ref: null }, 'the platform scope has none');
  t.match(await fails(ts, alice.token, AUTHZ_DEBUGGER.text, { input: { subjectId: device, action: 'publish', resourceId: channel } }), FORBIDDEN,
    'a tenant admin does not run the debugger (policy.manage or manage at platform)');
});

t.test('a device\'s direct policy on "tenant itself · read": the refusal says what the scope reached and what refused it', async (t) => {
  const device = await createEntity(ts, alice.token, { kind: 'device', name: 'tenant-reader', tenantId: acme });
  const block = async (input: Record<string, unknown>) => (await ok(ts, alice.token, `mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
    { i: { tenantId: acme, actionIds: ['read'], ...input } })).createPermissionBlock.id as string;
  const POLICY = `mutation ($i: CreateDirectPolicyInput!) { createDirectPolicy(input: $i) { id } }`;
  const tenantRead = await block({ scopeMode: 'tenant' });
  const [error] = await fails(ts, alice.token, POLICY, { i: { tenantId: acme, subjectKind: 'entity', subjectId: device, permissionBlockId: tenantRead } });
  const reached = (await sql<{ target: string }[]>`
    select coalesce(ap.object_type, ap.object_kind) as target from action_applicability ap join actions a on a.id = ap.action_id
    where a.name = 'read' and ap.object_kind <> 'signing_key' order by 1`).map((r) => r.target)
    // A tenant scope never reaches the sensitive kinds (docs/authorization.md): they take a block of their own.
    .filter((k) => !SENSITIVE_KINDS.has(k));
  const refused = reached.filter((k) => k !== 'resource');
  t.ok(reached.length > 2 && reached.includes('resource'), `read applies to ${reached.join(', ')}`);
  const head = /^guardrail rejected device receiving read on (\S+): the block's/.exec(error!.message)?.[1] ?? '';
  t.ok(refused.includes(head), `the head names a refused kind, as before (${head})`);
  t.equal(error!.message, `guardrail rejected device receiving read on ${head}: `
    + `the block's tenant scope reaches read on ${reached.join(', ')}; refused for device on ${refused.join(', ')} (default deny: no rule allows it); `
    + 'a device may receive read on resource: narrow the block\'s scope to it', 'names every kind the scope reached, what refused them, and the way out');
  t.match(error, { extensions: { code: 'action_not_allowed_for_entity_kind' } });
  const narrowed = await block({ scopeMode: 'object_kind', objectKind: 'resource' });
  t.ok((await ok(ts, alice.token, POLICY, { i: { tenantId: acme, subjectKind: 'entity', subjectId: device, permissionBlockId: narrowed } })).createDirectPolicy.id,
    'the advice works: read on the tenant\'s resources passes');
  const bobsDevice = await createEntity(ts, bob.token, { kind: 'device', name: 'other-reader', tenantId: globex });
  t.match(await fails(ts, alice.token, POLICY, { i: { tenantId: acme, subjectKind: 'entity', subjectId: bobsDevice, permissionBlockId: narrowed } }),
    [{ extensions: { code: /BAD_REQUEST|FORBIDDEN|NOT_FOUND/ } }], 'another tenant\'s device is not hers to grant');
  const stranger = await createUser(ts, 'stranger');
  t.match(await fails(ts, stranger.token, POLICY, { i: { tenantId: acme, subjectKind: 'entity', subjectId: device, permissionBlockId: narrowed } }), FORBIDDEN,
    'a caller without policy.manage is refused');
});
