// Authorities: root and platform intermediate from configuration (idempotent by fingerprint, a changed
// intermediate retires the previous one, stored keys of an unknown key id refuse the start), the platform
// leaf issuer, tenant intermediates provisioned automatically (tenants that existed before and tenants
// created later), and the GraphQL lifecycle with its grants.
import t from 'tap';
import { startService } from '../../../src/main.js';
import { AUTH_ENV, adminToken, startAuthService } from '../../helpers/auth.js';
import { createTestDatabase } from '../../helpers/database.js';
import { createEntity, createTenant, createUser, fails, ok } from '../../helpers/management.js';
import { AUTHORITIES, AUTHORITY_FIELDS, ISSUE_CSR, addIntermediate, makeCaFiles, opensslCsr, opensslVerify } from '../../helpers/pki.js';
import { QUIET_LISTENERS, testLogger, type TestService } from '../../helpers/service.js';
import { waitUntil } from '../../helpers/wait.js';

const AUTHORITY = `query ($id: ID!) { pkiAuthority(id: $id) { ${AUTHORITY_FIELDS} } }`;
const BEGIN = `mutation ($t: ID!) { beginTenantAuthorityProvisioning(tenantId: $t) { ${AUTHORITY_FIELDS} } }`;
const AUTO = `mutation ($t: ID!) { provisionTenantAuthorityAutomatically(tenantId: $t) { succeeded validationError replacedAuthorityIds authority { ${AUTHORITY_FIELDS} } } }`;
const TRANSITION = `mutation ($id: ID!) { transitionRetirement(authorityId: $id) { ${AUTHORITY_FIELDS} } }`;
const RETIRE_BEGIN = `mutation ($id: ID!) { beginAuthorityRetirement(authorityId: $id) { ${AUTHORITY_FIELDS} } }`;
const RETIRE_COMPLETE = `mutation ($id: ID!) { completeAuthorityRetirement(authorityId: $id) { ${AUTHORITY_FIELDS} } }`;

/** A role with `actions` at the scope of `tenantId` (platform when null), assigned to `entityId`. */
async function grant(ts: TestService, entityId: string, tenantId: string | null, actions: string[]): Promise<void> {
  const sql = ts.service.sql;
  const [role] = await sql<{ id: string }[]>`insert into roles (name, tenant_id, description) values (${`pki-${Math.random()}`}, ${tenantId}, 'test') returning id`;
  const [block] = await sql<{ id: string }[]>`
    insert into permission_blocks (tenant_id, scope_mode, effect) values (${tenantId}, ${tenantId ? 'tenant' : 'platform'}, 'allow') returning id`;
  await sql`insert into permission_block_actions (block_id, action_id) select ${block!.id}, id from actions where name = any(${actions})`;
  await sql`insert into role_permission_blocks (role_id, block_id) values (${role!.id}, ${block!.id})`;
  await sql`insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) values (${tenantId}, 'entity', ${entityId}, ${role!.id})`;
  await ts.service.authz.invalidate({ kind: 'subjects', entityIds: [entityId] });
}

const activeOf = (ts: TestService, tenantId: string) =>
  ts.service.sql<{ id: string }[]>`select id from pki_authorities where tenant_id = ${tenantId} and status = 'active'`.then((r) => r[0]?.id);

t.test('configuration bootstrap across restarts', async (t) => {
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  const ca = makeCaFiles(t);
  const start = (env: Record<string, string>) => startService({ ...QUIET_LISTENERS, SVC_RATE_LIMIT_ENABLED: 'false', ...AUTH_ENV, ...env, DATABASE_URL: db.url }, { log: testLogger() });

  // Before the CA is configured: a tenant exists, and automatic provisioning says why it cannot happen.
  const bare = await start({});
  const ts0 = { service: bare, db, url: () => `http://127.0.0.1:${bare.ports.http}` } as TestService;
  const admin0 = await adminToken(ts0);
  const early = await createTenant(ts0, admin0, 'early');
  const refused = (await ok(ts0, admin0, AUTO, { t: early })).provisionTenantAuthorityAutomatically;
  t.equal(refused.succeeded, false);
  t.equal(refused.authority, null);
  t.match(refused.validationError, 'no active platform intermediate');
  await bare.stop();

  const first = await start(ca.env);
  const ts1 = { service: first, db, url: () => `http://127.0.0.1:${first.ports.http}` } as TestService;
  const admin1 = await adminToken(ts1);
  const list1 = (await ok(ts1, admin1, AUTHORITIES)).pkiAuthorities as any[];
  const root = list1.find((a) => a.kind === 'root');
  const intermediate = list1.find((a) => a.kind === 'platform_intermediate');
  const leafIssuer = list1.find((a) => a.kind === 'platform_leaf_issuer');
  t.match(root, { status: 'active', managedBy: 'config', provisioningMode: 'config', keyBackend: null, issuanceEnabled: false, ocspUrl: null });
  t.match(intermediate, { status: 'active', managedBy: 'config', keyBackend: 'encrypted_database', parentId: root.id, version: 1 });
  t.match(leafIssuer, { status: 'active', issuanceEnabled: true, provisioningMode: 'automatic', parentId: intermediate.id, keyBackend: 'encrypted_database' });
  t.match(leafIssuer.ocspUrl, `/certs/issuers/${leafIssuer.id}/ocsp`);
  t.match(opensslVerify(ca.root, intermediate.certificatePem, leafIssuer.certificatePem, ['-purpose', 'any']), /OK$/, 'the leaf issuer chains to the root');
  t.match(leafIssuer.csrPem, /BEGIN CERTIFICATE REQUEST/);
  await waitUntil(async () => (await activeOf(ts1, early)) !== undefined, 20_000, 'the tenant created before configuration gets its intermediate');
  const later = await createTenant(ts1, admin1, 'later');
  t.ok(await activeOf(ts1, later), 'a tenant created now gets its intermediate at once');
  const count1 = (await first.sql`select count(*)::int as n from pki_authorities`)[0]!.n;
  await first.stop();

  // Same configuration: nothing new (idempotent by fingerprint; the key file is not read again).
  const second = await start(ca.env);
  t.equal((await second.sql`select count(*)::int as n from pki_authorities`)[0]!.n, count1, 'a restart adds no authority');
  await second.stop();

  // A changed intermediate retires the previous one; the platform leaf issuer moves under the new one.
  const next = addIntermediate(ca.dir, 'intermediate-2', '/O=svc tests/CN=test platform intermediate 2', 365, 'sec1');
  const nextEnv = { ...ca.env, SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH: next.cert, SVC_PKI_PLATFORM_INTERMEDIATE_KEY_PATH: next.key };
  const third = await start(nextEnv);
  const ts3 = { service: third, db, url: () => `http://127.0.0.1:${third.ports.http}` } as TestService;
  const list3 = (await ok(ts3, await adminToken(ts3), AUTHORITIES)).pkiAuthorities as any[];
  const intermediates = list3.filter((a) => a.kind === 'platform_intermediate');
  t.same(intermediates.map((a) => [a.version, a.status]).sort(), [[1, 'retired'], [2, 'active']]);
  const leafIssuers = list3.filter((a) => a.kind === 'platform_leaf_issuer');
  t.same(leafIssuers.map((a) => [a.version, a.status]).sort(), [[1, 'retiring'], [2, 'active']]);
  t.equal(leafIssuers.find((a) => a.status === 'active').parentId, intermediates.find((a) => a.status === 'active').id);
  await third.stop();

  // Going back to the retired intermediate is refused, naming it.
  const back = await start(ca.env).then(() => null, (e: Error) => e);
  t.match(back?.message, `this certificate was the platform_intermediate ${intermediate.id}, now retired; configure a new one instead`);

  // Keys wrapped under a key-encryption key id this configuration does not have: the start is refused.
  const err = await start({ ...nextEnv, SVC_PKI_CA_KEY_ENCRYPTION_KEY_ID: 'local-ca:v2' }).then(() => null, (e: Error) => e);
  t.ok(err, 'the start is refused');
  t.match(err?.message, /authority [0-9a-f-]{36} \(.+\): its key is wrapped by key-encryption key 'local-ca:v1'/);

  // The backend of an authority is never changed.
  const check = await start(nextEnv);
  const e = await check.sql`update pki_authorities set key_backend = 'pkcs11' where kind = 'platform_leaf_issuer'`.catch((x: Error) => x);
  t.match(String(e), 'the key of an authority cannot be changed');
  await check.stop();
});

t.test('the authority lifecycle over GraphQL, with its grants', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, ca.env);
  const admin = await adminToken(ts);
  const owner = await createUser(ts, 'owner');
  const tenantId = await createTenant(ts, owner.token, 'acme');
  const otherTenant = await createTenant(ts, admin, 'other');
  const v1 = await activeOf(ts, tenantId);
  const device = await createEntity(ts, admin, { kind: 'device', name: 'd', tenantId });
  const { csrPem } = opensslCsr(ca.dir);
  const oldLeaf = (await ok(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem, idempotencyKey: 'old' } })).issueCertificateFromCsrV2;

  await t.test('reading: a tenant\'s authorities need read on it, the platform\'s platform read', async (t) => {
    const mine = (await ok(ts, owner.token, AUTHORITIES, { t: tenantId })).pkiAuthorities as any[];
    t.same(mine.map((a) => a.id), [v1]);
    t.equal((await fails(ts, owner.token, AUTHORITIES, { t: otherTenant }))[0]!.message, 'forbidden');
    const visible = (await ok(ts, owner.token, AUTHORITIES)).pkiAuthorities as any[];
    t.same(visible.map((a) => a.id), [v1], "only the tenant's own: neither the platform's nor another tenant's");
    const [root] = await ts.service.sql<{ id: string }[]>`select id from pki_authorities where kind = 'root'`;
    t.equal((await fails(ts, owner.token, AUTHORITY, { id: root!.id }))[0]!.message, 'forbidden', 'the root record needs platform read');
    const all = (await ok(ts, admin, AUTHORITIES)).pkiAuthorities as any[];
    t.ok(all.some((a) => a.kind === 'root') && all.some((a) => a.id === v1) && all.some((a) => a.tenantId === otherTenant), 'a platform reader lists every one');
    const [otherCa] = await ts.service.sql<{ id: string }[]>`select id from pki_authorities where tenant_id = ${otherTenant}`;
    t.equal((await fails(ts, owner.token, AUTHORITY, { id: otherCa!.id }))[0]!.message, 'forbidden');
    const one = (await ok(ts, owner.token, AUTHORITY, { id: v1 })).pkiAuthority;
    t.match(one, { kind: 'tenant_intermediate', status: 'active', tenantId, keyBackend: 'encrypted_database', keyAlgorithm: 'ecdsa-p256' });
    t.match(opensslVerify(ca.root, one.chainPem, one.certificatePem, ['-purpose', 'any']), /OK$/);
  });

  await t.test('provisioning needs pki.provision on the tenant; the automatic flow also pki.provision_automated', async (t) => {
    t.equal((await fails(ts, owner.token, BEGIN, { t: tenantId }))[0]!.message, 'forbidden', 'a tenant admin does not hold pki.provision');
    t.equal((await fails(ts, owner.token, AUTO, { t: tenantId }))[0]!.message, 'forbidden');
    t.equal((await fails(ts, owner.token, RETIRE_BEGIN, { id: v1 }))[0]!.message, 'forbidden');
    await grant(ts, owner.id, tenantId, ['pki.provision']);
    t.equal((await fails(ts, owner.token, AUTO, { t: tenantId }))[0]!.message, 'forbidden', 'pki.provision_automated on the platform is missing');
    t.equal((await fails(ts, owner.token, BEGIN, { t: otherTenant }))[0]!.message, 'forbidden', 'not on another tenant');
    const [root] = await ts.service.sql<{ id: string }[]>`select id from pki_authorities where kind = 'root'`;
    t.equal((await fails(ts, owner.token, RETIRE_BEGIN, { id: root!.id }))[0]!.message, 'forbidden', 'platform authorities need platform scope');
  });

  let v2: any;
  await t.test('begin provisioning leaves a pending version; transitionRetirement hands over to it', async (t) => {
    v2 = (await ok(ts, owner.token, BEGIN, { t: tenantId })).beginTenantAuthorityProvisioning;
    t.match(v2, { status: 'pending', issuanceEnabled: false, version: 2, provisioningMode: 'manual', tenantId });
    t.match(v2.csrPem, /BEGIN CERTIFICATE REQUEST/);
    const again = await fails(ts, owner.token, BEGIN, { t: tenantId });
    t.equal(again[0]!.extensions.code, 'CONFLICT');
    t.match(again[0]!.message, `a pending authority (${v2.id}) is waiting already`);
    t.equal(await activeOf(ts, tenantId), v1, 'the active version issues until the hand-over');
    // Without pki.provision on the tenant (a plain user; the other tenant's admin) nothing moves.
    const stranger = await createUser(ts, 'stranger');
    for (const op of [TRANSITION, RETIRE_COMPLETE, RETIRE_BEGIN]) {
      t.equal((await fails(ts, stranger.token, op, { id: v2.id }))[0]!.message, 'forbidden');
    }
    const [otherCa] = await ts.service.sql<{ id: string }[]>`select id from pki_authorities where tenant_id = ${otherTenant} and status = 'active'`;
    for (const op of [TRANSITION, RETIRE_COMPLETE, RETIRE_BEGIN]) {
      t.equal((await fails(ts, owner.token, op, { id: otherCa!.id }))[0]!.message, 'forbidden', "pki.provision on one tenant is not on another's");
    }
    const active = (await ok(ts, owner.token, TRANSITION, { id: v2.id })).transitionRetirement;
    t.match(active, { id: v2.id, status: 'active', issuanceEnabled: true });
    t.ok(active.activatedAt);
    const old = (await ok(ts, owner.token, AUTHORITY, { id: v1 })).pkiAuthority;
    t.match(old, { status: 'retiring', issuanceEnabled: false });
    t.ok(old.retiringAt);
    const fresh = (await ok(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem, idempotencyKey: 'after-handover' } })).issueCertificateFromCsrV2;
    t.equal(fresh.certificate.issuerId, v2.id, 'new leaves come from the new version');
    t.match(opensslVerify(ca.root, fresh.chainPem, fresh.certificate.certificatePem), /OK$/);
    t.match(opensslVerify(ca.root, oldLeaf.chainPem, oldLeaf.certificate.certificatePem), /OK$/, 'leaves of the retiring version still verify');
    t.match((await fails(ts, owner.token, TRANSITION, { id: v2.id }))[0]!.message, 'only a pending authority can take over');
  });

  await t.test('retirement: active → retiring → retired; configuration-managed ones refuse', async (t) => {
    t.match((await fails(ts, owner.token, RETIRE_COMPLETE, { id: v2.id }))[0]!.message, 'call beginAuthorityRetirement first');
    const done = (await ok(ts, owner.token, RETIRE_COMPLETE, { id: v1 })).completeAuthorityRetirement;
    t.match(done, { status: 'retired', issuanceEnabled: false });
    t.ok(done.retiredAt);
    t.match((await fails(ts, owner.token, RETIRE_BEGIN, { id: v1 }))[0]!.message, 'only an active authority can begin retirement');
    const [intermediate] = await ts.service.sql<{ id: string }[]>`select id from pki_authorities where kind = 'platform_intermediate'`;
    t.match((await fails(ts, admin, RETIRE_BEGIN, { id: intermediate!.id }))[0]!.message, 'come from configuration');
    const retiring = (await ok(ts, owner.token, RETIRE_BEGIN, { id: v2.id })).beginAuthorityRetirement;
    t.match(retiring, { status: 'retiring' });
    // The tenant must keep one active issuer: the next issuance provisions one automatically.
    const next = (await ok(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem, idempotencyKey: 'after-retire' } })).issueCertificateFromCsrV2;
    const v3 = await activeOf(ts, tenantId);
    t.equal(next.certificate.issuerId, v3);
    t.not(v3, v2.id);
  });

  await t.test('provisionTenantAuthorityAutomatically replaces the active version', async (t) => {
    await grant(ts, owner.id, null, ['pki.provision_automated']);
    const before = await activeOf(ts, tenantId);
    const r = (await ok(ts, owner.token, AUTO, { t: tenantId })).provisionTenantAuthorityAutomatically;
    t.equal(r.succeeded, true);
    t.equal(r.validationError, null);
    t.same(r.replacedAuthorityIds, [before]);
    t.match(r.authority, { status: 'active', provisioningMode: 'automatic', tenantId });
    t.equal(await activeOf(ts, tenantId), r.authority.id);
    const audit = await ts.service.sql`select count(*)::int as n from audit_log where event = 'authority.provision' and target_id = ${r.authority.id}`;
    t.equal(audit[0]!.n, 1);
  });
});
