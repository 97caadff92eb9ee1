// Who may issue, renew, revoke and read certificates (SPEC.md "Authentication" 10): credential.manage on the
// entity (by its owning tenant, never membership), or rotate/revoke/read on the exact credential. A tenant
// admin never reaches another tenant's entities or global ones; callers without a grant and scoped tokens
// are refused; listings apply grants before paging.
import t from 'tap';
import { accessTokenFor, adminToken, startAuthService } from '../helpers/auth.js';
import { createEntity, createTenant, createUser, fails, ok } from '../helpers/management.js';
import { CERT_FIELDS, ISSUE_CSR, ISSUE_GENERATED, RENEW_CSR, RENEW_GENERATED, REVOKE, makeCaFiles, opensslCsr } from '../helpers/pki.js';
import type { TestService } from '../helpers/service.js';

const BULK = 'mutation ($i: BulkRevokeCertificatesInput!) { bulkRevokeCertificates(input: $i) { complete items { credentialId } } }';
const REVOKE_ENTITY = 'mutation ($e: ID!) { revokeEntityCertificates(entityId: $e) }';
const CERT = `query ($id: ID!) { certificate(credentialId: $id) { ${CERT_FIELDS} } }`;
const LIST = 'query ($e: ID, $t: ID, $i: ID, $limit: Int, $offset: Int) { certificates(entityId: $e, tenantId: $t, issuerId: $i, limit: $limit, offset: $offset) { total items { credentialId tenantId } } }';

/** One exact-object grant: `actions` on credential `credentialId`, through a role of `tenantId`. */
async function grantOnCredential(ts: TestService, entityId: string, tenantId: string, credentialId: string, actions: string[]) {
  const sql = ts.service.sql;
  const [role] = await sql<{ id: string }[]>`insert into roles (name, tenant_id) values (${`exact-${Math.random()}`}, ${tenantId}) returning id`;
  const [block] = await sql<{ id: string }[]>`
    insert into permission_blocks (tenant_id, scope_mode, object_kind, object_id, effect) values (${tenantId}, 'object', 'credential', ${credentialId}, 'allow') returning id`;
  await sql`insert into permission_block_actions (block_id, action_id) select ${block!.id}, id from actions where name = any(${actions})`;
  await sql`insert into role_permission_blocks (role_id, block_id) values (${role!.id}, ${block!.id})`;
  await sql`insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) values (${tenantId}, 'entity', ${entityId}, ${role!.id})`;
  await ts.service.authz.invalidate({ kind: 'subjects', entityIds: [entityId] });
}

t.test('certificate authorization', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, { ...ca.env, SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED: 'true' });
  const admin = await adminToken(ts);
  const alice = await createUser(ts, 'alice');
  const bob = await createUser(ts, 'bob');
  const nobody = await createUser(ts, 'nobody');
  const tenantA = await createTenant(ts, alice.token, 'tenant-a');
  const tenantB = await createTenant(ts, bob.token, 'tenant-b');
  const devA = await createEntity(ts, alice.token, { kind: 'device', name: 'dev-a', tenantId: tenantA });
  const devB = await createEntity(ts, bob.token, { kind: 'device', name: 'dev-b', tenantId: tenantB });
  const globalSvc = await createEntity(ts, admin, { kind: 'service', name: 'global-svc' });
  const scoped = (await accessTokenFor(ts, admin, [{ actions: ['read', 'manage'], scopeMode: 'platform' }])).token;
  let n = 0;
  const csr = () => opensslCsr(ca.dir).csrPem;
  const issueAs = (token: string, entityId: string) => ok(ts, token, ISSUE_CSR, { i: { entityId, csrPem: csr(), idempotencyKey: `a${n++}` } })
    .then((d) => d.issueCertificateFromCsrV2.certificate);
  const certA = await issueAs(alice.token, devA);
  const certB = await issueAs(bob.token, devB);
  const certG = await issueAs(admin, globalSvc);

  // [caller, operation, target, allowed?, why]
  type Op = (token: string, target: { entity: string; cert: any; tenant: string | null }) => Promise<unknown>;
  const ops: Record<string, Op> = {
    issueCsr: (tok, x) => ok(ts, tok, ISSUE_CSR, { i: { entityId: x.entity, csrPem: csr(), idempotencyKey: `o${n++}` } }),
    issueGenerated: (tok, x) => ok(ts, tok, ISSUE_GENERATED, { i: { entityId: x.entity } }),
    renewCsr: (tok, x) => ok(ts, tok, RENEW_CSR, { i: { credentialId: x.cert.credentialId, csrPem: csr(), idempotencyKey: `o${n++}` } }),
    renewGenerated: (tok, x) => ok(ts, tok, RENEW_GENERATED, { i: { credentialId: x.cert.credentialId, idempotencyKey: `o${n++}` } }),
    revoke: (tok, x) => ok(ts, tok, REVOKE, { i: { credentialId: x.cert.credentialId } }),
    revokeByFingerprint: (tok, x) => ok(ts, tok, REVOKE, { i: { fingerprintSha256: x.cert.fingerprintSha256 } }),
    revokeBySerial: (tok, x) => ok(ts, tok, REVOKE, { i: { issuerId: x.cert.issuerId, serialNumber: x.cert.serialNumber } }),
    revokeEntity: (tok, x) => ok(ts, tok, REVOKE_ENTITY, { e: x.entity }),
    bulk: (tok, x) => ok(ts, tok, BULK, { i: x.tenant ? { tenantId: x.tenant, limit: 1 } : { issuerId: x.cert.issuerId, limit: 1 } }),
    bulkByIssuer: (tok, x) => ok(ts, tok, BULK, { i: { issuerId: x.cert.issuerId, limit: 1 } }),
    read: (tok, x) => ok(ts, tok, CERT, { id: x.cert.credentialId }),
    listEntity: (tok, x) => ok(ts, tok, LIST, { e: x.entity }),
    listTenant: (tok, x) => ok(ts, tok, LIST, { t: x.tenant }),
  };
  type Target = { entity: string; cert: any; tenant: string | null };
  const A: Target = { entity: devA, cert: certA, tenant: tenantA };
  const B: Target = { entity: devB, cert: certB, tenant: tenantB };
  const G: Target = { entity: globalSvc, cert: certG, tenant: null };
  const refusals: [string, string, Target, string][] = [];
  for (const op of Object.keys(ops)) {
    refusals.push(['alice', op, B, "a tenant admin never reaches another tenant's entities"]);
    refusals.push(['bob', op, A, "a tenant admin never reaches another tenant's entities"]);
    refusals.push(['nobody', op, A, 'a caller without a grant']);
    refusals.push(['scoped', op, A, 'scoped tokens never manage credentials']);
    if (op !== 'listTenant') refusals.push(['alice', op, G, 'global entities are the platform\'s']);
  }
  const tokens: Record<string, string> = { alice: alice.token, bob: bob.token, nobody: nobody.token, scoped };

  await t.test('refused: wrong tenant, no grant, scoped token, global entity', async (t) => {
    for (const [who, op, target, why] of refusals) {
      const err = await (ops[op] as Op)(tokens[who] as string, target).then(() => null, (e: Error) => e.message);
      t.match(err, /"code":"FORBIDDEN"/, `${who} ${op} on ${target === A ? 'A' : target === B ? 'B' : 'global'}: ${why}`);
    }
    const states = await ts.service.sql`select count(*)::int as n from credentials where kind = 'certificate' and status = 'revoked'`;
    t.equal(states[0]!.n, 0, 'no refused call revoked anything');
  });

  await t.test('allowed: the tenant admin on its own entities, the platform admin everywhere', async (t) => {
    for (const op of ['issueCsr', 'issueGenerated', 'read', 'listEntity', 'listTenant', 'renewCsr']) {
      await t.resolves((ops[op] as Op)(alice.token, { ...A, cert: await issueAs(alice.token, devA) }), `alice ${op} on A`);
    }
    await t.resolves(ops.revoke!(alice.token, { ...A, cert: await issueAs(alice.token, devA) }), 'alice revokes on A');
    await t.resolves(ops.revokeBySerial!(alice.token, { ...A, cert: await issueAs(alice.token, devA) }));
    await t.resolves(ops.bulkByIssuer!(alice.token, A), 'alice bulk-revokes her tenant issuer');
    await t.resolves(ops.issueCsr!(admin, G), 'the platform admin issues for a global entity');
    await t.resolves(ops.read!(admin, B));
  });

  await t.test('exact-credential grants: rotate renews, revoke revokes, neither issues', async (t) => {
    const carol = await createUser(ts, 'carol');
    const target = await issueAs(alice.token, devA);
    const x = { ...A, cert: target };
    await grantOnCredential(ts, carol.id, tenantA, target.credentialId, ['rotate']);
    t.match(await ops.issueCsr!(carol.token, x).catch((e: Error) => e.message), /FORBIDDEN/, 'rotate on a credential is not issuing for the entity');
    t.match(await ops.revoke!(carol.token, x).catch((e: Error) => e.message), /FORBIDDEN/, 'rotate is not revoke');
    t.match(await ops.renewCsr!(carol.token, { ...A, cert: certA }).catch((e: Error) => e.message), /FORBIDDEN/, 'only that credential');
    await t.resolves(ops.read!(carol.token, x), 'rotate on it lets her read it');
    await t.resolves(ops.renewCsr!(carol.token, x), 'rotate renews that exact credential');
    const dave = await createUser(ts, 'dave');
    const other = await issueAs(alice.token, devA);
    await grantOnCredential(ts, dave.id, tenantA, other.credentialId, ['revoke']);
    t.match(await ops.renewCsr!(dave.token, { ...A, cert: other }).catch((e: Error) => e.message), /FORBIDDEN/);
    await t.resolves(ops.revoke!(dave.token, { ...A, cert: other }), 'revoke on it revokes that exact credential');
  });

  await t.test('listings apply grants before paging', async (t) => {
    const mine = (await ok(ts, alice.token, LIST, { limit: 1 })).certificates;
    const all = (await ok(ts, admin, LIST, { limit: 100 })).certificates;
    const aCount = all.items.filter((c: any) => c.tenantId === tenantA).length;
    t.equal(mine.total, aCount, "alice's total counts her tenant's certificates only");
    t.ok(all.total > mine.total);
    const pages = [];
    for (let offset = 0; offset < mine.total; offset++) pages.push(...(await ok(ts, alice.token, LIST, { limit: 1, offset })).certificates.items);
    t.ok(pages.every((c: any) => c.tenantId === tenantA), 'every page holds only her tenant');
    t.equal((await ok(ts, nobody.token, LIST, {})).certificates.total, 0, 'no grant, nothing listed');
    t.equal((await fails(ts, alice.token, LIST, { t: tenantB }))[0]!.message, 'forbidden');
    t.equal((await ok(ts, alice.token, LIST, { i: certB.issuerId })).certificates.total, 0, "filtering by another tenant's issuer shows nothing");
  });
});
