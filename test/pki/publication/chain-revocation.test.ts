// Chain revocation (issue 33.3) with real relying-party clients: tenant CA certificates carry the platform
// intermediate's CRL distribution point and AIA; the platform intermediate publishes a CRL and answers OCSP
// for the authorities it signed; `openssl verify -crl_check_all` over root (its CRL made offline by the
// operator, here with `openssl ca -gencrl`), platform intermediate and tenant CA accepts a leaf, and after
// revokeAuthority (platform administrators only, audited) reports the tenant CA revoked; the CA issues
// nothing, its leaves resolve as revoked through gRPC ResolveCertificateV2 and are refused by the
// enrollment listener, and another tenant is untouched.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { tenantsWithoutIssuer } from '../../../src/pki/authorities/authority-queries.js';
import { CHANGED_TOPIC } from '../../../src/pki/index.js';
import { adminToken, startAuthService } from '../../helpers/auth.js';
import { curlJson, enrollmentEnv } from '../../helpers/enrollment.js';
import { createEntity, createTenant, createUser, fails, ok } from '../../helpers/management.js';
import { AUTHORITY_FIELDS, ISSUE_CSR, makeCaFiles, opensslCsr } from '../../helpers/pki.js';
import { opensslOcsp, sh } from '../../helpers/publication.js';
import type { TestService } from '../../helpers/service.js';
import { waitUntil } from '../../helpers/wait.js';
import { grpcClient } from '../../grpc/helpers.js';

const REVOKE_AUTHORITY = `mutation ($id: ID!, $reason: String) { revokeAuthority(authorityId: $id, reason: $reason) { ${AUTHORITY_FIELDS} revokedAt revocationReason } }`;
const AUTHORITY = `query ($id: ID!) { pkiAuthority(id: $id) { ${AUTHORITY_FIELDS} revokedAt revocationReason } }`;

/** A role with `actions` at the scope of `tenantId`, assigned to `entityId` (as test/pki/authorities/authorities.test.ts grants). */
async function grant(ts: TestService, entityId: string, tenantId: string, actions: string[]): Promise<void> {
  const sql = ts.service.sql;
  const [role] = await sql<{ id: string }[]>`insert into roles (name, tenant_id, description) values (${`pki-${Math.random()}`}, ${tenantId}, 'test') returning id`;
  const [block] = await sql<{ id: string }[]>`insert into permission_blocks (tenant_id, scope_mode, effect) values (${tenantId}, 'tenant', 'allow') returning id`;
  await sql`insert into permission_block_actions (block_id, action_id) select ${block!.id}, id from actions where name = any(${actions})`;
  await sql`insert into role_permission_blocks (role_id, block_id) values (${role!.id}, ${block!.id})`;
  await sql`insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) values (${tenantId}, 'entity', ${entityId}, ${role!.id})`;
  await ts.service.authz.invalidate({ kind: 'subjects', entityIds: [entityId] });
}

t.test('chain revocation', async (t) => {
  const ca = makeCaFiles(t);
  const { env, serverCert } = await enrollmentEnv(ca, { SVC_GRPC_ADDR: '127.0.0.1:0', SVC_PKI_PUBLICATION_ADDR: '127.0.0.1:0' });
  const ts = await startAuthService(t, env);
  const sql = ts.service.sql;
  const admin = await adminToken(ts);
  const owner = await createUser(ts, 'owner');
  const tenantA = await createTenant(ts, owner.token, 'acme');
  const tenantB = await createTenant(ts, admin, 'globex');
  // The tenant's own administrator may provision its authorities: still not revoke them.
  await grant(ts, owner.id, tenantA, ['pki.provision', 'read', 'manage']);
  const other = await createUser(ts, 'other-admin');
  await grant(ts, other.id, tenantB, ['pki.provision', 'read', 'manage']);
  const activeCa = async (tenantId: string) => (await sql<{ id: string }[]>`select id from pki_authorities where tenant_id = ${tenantId} and status = 'active'`)[0]!.id;
  const caA = await activeCa(tenantA);
  const caB = await activeCa(tenantB);
  const [pi] = await sql<{ id: string }[]>`select id from pki_authorities where kind = 'platform_intermediate' and status = 'active'`;
  const f = (name: string, content?: string | Buffer) => {
    const file = path.join(ca.dir, name);
    if (content !== undefined) writeFileSync(file, content);
    return file;
  };
  const base = ts.url();
  const pub = ts.url('pki_publication');
  const grpcAt = grpcClient(`127.0.0.1:${ts.service.ports.grpc}`);
  t.teardown(() => grpcAt.close());
  const resolve = (certificatePem: string) => grpcAt.call('CertificateService', 'ResolveCertificateV2',
    { certificate_der: Buffer.from(certificatePem.replace(/-----[^-]+-----/g, '').replace(/\s/g, ''), 'base64') }, { token: admin });

  let n = 0;
  async function leafOf(tenantId: string) {
    const device = await createEntity(ts, admin, { kind: 'device', name: `d${n++}`, tenantId });
    const csr = opensslCsr(ca.dir);
    const issued = (await ok(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem: csr.csrPem, idempotencyKey: `c${n++}` } })).issueCertificateFromCsrV2;
    const certFile = f(`leaf-${n}.pem`, issued.certificate.certificatePem);
    return { device, ...issued.certificate, chainPem: issued.chainPem as string, certFile, keyPath: csr.keyPath };
  }
  const leafA = await leafOf(tenantA);
  const leafB = await leafOf(tenantB);
  const caAPem = (await ok(ts, admin, AUTHORITY, { id: caA })).pkiAuthority.certificatePem as string;
  const caAFile = f('tenant-ca.pem', caAPem);

  // The operator's root CRL, made offline with the root key (the service never holds it).
  f('root-ca.cnf', '[ca]\ndefault_ca = root\n[root]\ndatabase = index.txt\ncrlnumber = crlnumber\ndefault_md = sha256\ndefault_crl_days = 2\n');
  f('index.txt', '');
  f('crlnumber', '01\n');
  await sh('sh', ['-c', `cd ${ca.dir} && openssl ca -config root-ca.cnf -gencrl -keyfile ${ca.rootKey} -cert ${ca.root} -out root.crl`]);
  const crlPem = async (issuerId: string) => sh('openssl', ['crl', '-inform', 'DER'], { input: Buffer.from(await (await fetch(`${base}/certs/issuers/${issuerId}/crl`)).arrayBuffer()) });
  /** openssl verify -crl_check_all: every certificate of the chain checked against its issuer's CRL. */
  async function verifyChain(leaf: { certFile: string; chainPem: string; issuerId: string }, issuerCrl?: string) {
    const crls = f('crls.pem', `${await sh('openssl', ['crl', '-in', f('root.crl')])}${await crlPem(pi!.id)}${issuerCrl ?? await crlPem(leaf.issuerId)}`);
    return sh('openssl', ['verify', '-crl_check_all', '-CAfile', ca.root, '-untrusted', f('chain.pem', leaf.chainPem), '-CRLfile', crls, leaf.certFile], { allowFail: true });
  }

  await t.test('tenant CA certificates point at the platform intermediate\'s CRL, OCSP and certificate', async (t) => {
    const text = await sh('openssl', ['x509', '-noout', '-text', '-in', caAFile]);
    t.match(text, new RegExp(`CRL Distribution Points:[\\s\\S]*URI:\\S+/certs/issuers/${pi!.id}/crl`));
    t.match(text, new RegExp(`OCSP - URI:\\S+/certs/issuers/${pi!.id}/ocsp`));
    t.match(text, new RegExp(`CA Issuers - URI:\\S+/certs/issuers/${pi!.id}/ca.crt`));
    t.match(await verifyChain(leafA), /: OK/, 'openssl verify -crl_check_all over root, platform intermediate and tenant CA');
    const good = await opensslOcsp(pub, pi!.id, { issuer: ca.intermediate, cafile: ca.root, cert: caAFile });
    t.match(good, /tenant-ca\.pem: good/, 'the platform intermediate answers OCSP for the tenant CA');
    t.match(good, /Response verify OK/);
    t.equal((await resolve(leafA.certificatePem)).err, null, 'the leaf resolves over gRPC');
  });

  await t.test('only a platform administrator revokes an authority', async (t) => {
    t.equal((await fails(ts, owner.token, REVOKE_AUTHORITY, { id: caA }))[0]!.message, 'forbidden', 'the tenant\'s own administrator (pki.provision on it)');
    t.equal((await fails(ts, other.token, REVOKE_AUTHORITY, { id: caA }))[0]!.message, 'forbidden', 'another tenant\'s administrator');
    t.equal((await fails(ts, other.token, REVOKE_AUTHORITY, { id: caB }))[0]!.message, 'forbidden', 'even its own tenant\'s CA');
    t.equal((await fails(ts, owner.token, REVOKE_AUTHORITY, { id: '00000000-0000-0000-0000-00000000abcd' }))[0]!.message, 'forbidden', 'nothing tells whether an id exists');
    const [root] = await sql<{ id: string }[]>`select id from pki_authorities where kind = 'root'`;
    t.match((await fails(ts, admin, REVOKE_AUTHORITY, { id: root!.id }))[0]!, { message: /revoked by the operator, in the root's CRL/, extensions: { code: 'BAD_REQUEST' } });
    t.match((await fails(ts, admin, REVOKE_AUTHORITY, { id: caA, reason: 'bored' }))[0]!.extensions.code, 'BAD_REQUEST');
    t.equal((await ok(ts, admin, AUTHORITY, { id: caA })).pkiAuthority.revokedAt, null, 'nothing changed');
  });

  await t.test('revoking a tenant CA: audited, it issues nothing, its leaves are revoked everywhere, the chain check reports it', async (t) => {
    const caCrlBefore = await crlPem(caA);
    const changes: { authorities?: string[] }[] = [];
    ts.service.hub.subscribe(CHANGED_TOPIC, (p) => changes.push(p as { authorities?: string[] }));
    const revoked = (await ok(ts, admin, REVOKE_AUTHORITY, { id: caA })).revokeAuthority;
    t.match(revoked, { id: caA, status: 'retired', issuanceEnabled: false, revocationReason: 'ca_compromise' });
    t.ok(revoked.revokedAt);
    // Every instance hears it through the pki.changed NOTIFY (this one included).
    await waitUntil(() => changes.some((c) => c.authorities?.includes(caA)), 5000, 'pki.changed NOTIFY naming the authority');
    const [audit] = await sql`select actor_entity_id, tenant_id, details from audit_log where event = 'authority.revoke' and target_id = ${caA}`;
    t.match(audit, { tenant_id: tenantA, details: { reason: 'ca_compromise', leaves_revoked: 1, kind: 'tenant_intermediate', status_before: 'active' } });
    const [ledger] = await sql`select issuer_id, reason from certificate_revocations where serial_number = ${revoked.serialNumber}`;
    t.match(ledger, { issuer_id: pi!.id, reason: 'ca_compromise' }, "its certificate is in the platform intermediate's ledger");

    const [refused] = await fails(ts, admin, ISSUE_CSR, { i: { entityId: leafA.device, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'after' } });
    t.notOk((await tenantsWithoutIssuer(sql, 1000)).includes(tenantA), 'automatic provisioning (at start) leaves the revoked tenant CA unreplaced');
    t.match(refused, { message: new RegExp(`certificate authority ${caA} \\(tenant intermediate\\) was revoked \\(ca_compromise\\).*issues nothing`), extensions: { code: 'CONFLICT' } });

    const grpcAnswer = await resolve(leafA.certificatePem);
    t.equal(grpcAnswer.err?.code, grpc.status.FAILED_PRECONDITION, 'gRPC ResolveCertificateV2: revoked');
    t.same(grpcAnswer.err?.metadata.get('certificate-status'), ['revoked']);
    const reenroll = await curlJson(`https://127.0.0.1:${ts.service.ports.enrollment}/pki/reenroll`, serverCert,
      { csr_pem: opensslCsr(ca.dir).csrPem, idempotency_key: 'r' }, ['--cert', leafA.certFile, '--key', leafA.keyPath]);
    t.ok(reenroll.status === 401 || reenroll.status === 403, `the enrollment listener refuses its leaf (${reenroll.status})`);
    t.match(reenroll.json.error, /revoked/);

    // The leaf itself is in its CA's new CRL (ca_compromise); with the CA's CRL from before, the platform
    // intermediate's CRL still reports the CA; and the CA certificate alone verifies as revoked.
    t.match(await verifyChain(leafA), /error 23 at 0 depth lookup: certificate revoked/, 'openssl verify -crl_check_all: the leaf is revoked');
    t.match(await verifyChain(leafA, caCrlBefore), /error 23 at 1 depth lookup: certificate revoked/, 'the tenant CA is revoked (depth 1)');
    const caAlone = await sh('openssl', ['verify', '-crl_check_all', '-CAfile', ca.root, '-untrusted', ca.intermediate,
      '-CRLfile', f('pi-crls.pem', `${await sh('openssl', ['crl', '-in', f('root.crl')])}${await crlPem(pi!.id)}`), caAFile], { allowFail: true });
    t.match(caAlone, /error 23 at 0 depth lookup: certificate revoked/, 'the tenant CA certificate, checked alone');
    const piCrl = await sh('openssl', ['crl', '-noout', '-text', '-CAfile', ca.intermediate], { input: Buffer.from(await crlPem(pi!.id)) });
    t.match(piCrl, /verify OK/);
    t.match(piCrl, new RegExp(`Serial Number: ${revoked.serialNumber.toUpperCase()}[\\s\\S]*CA Compromise`), "the platform intermediate's CRL lists the tenant CA");
    const ocsp = await opensslOcsp(pub, pi!.id, { issuer: ca.intermediate, cafile: ca.root, cert: caAFile });
    t.match(ocsp, /tenant-ca\.pem: revoked/);
    t.match(ocsp, /Reason: cACompromise/);

    // A leaf an issuance that read the authority before the revocation committed after it (stood in for by its row).
    const [raced] = await sql<{ id: string }[]>`
      insert into credentials (entity_id, kind, identifier, issuer_id, expires_at) values (${leafA.device}, 'certificate', '7acef00d', ${caA}, now() + interval '1 day')
      returning id`;
    const again = (await ok(ts, admin, REVOKE_AUTHORITY, { id: caA, reason: 'superseded' })).revokeAuthority;
    t.match(again, { revokedAt: revoked.revokedAt, revocationReason: 'ca_compromise' }, 'a second revocation answers the first');
    const [swept] = await sql`select status, revocation_reason from credentials where id = ${raced!.id}`;
    t.match(swept, { status: 'revoked', revocation_reason: 'ca_compromise' }, 'and revokes a leaf that raced the first');
  });

  await t.test('another tenant is untouched', async (t) => {
    t.equal((await ok(ts, admin, AUTHORITY, { id: caB })).pkiAuthority.revokedAt, null);
    t.equal((await resolve(leafB.certificatePem)).err, null);
    t.match(await verifyChain(leafB), /: OK/);
    await t.resolves(leafOf(tenantB), 'tenant B still issues');
  });

  await t.test('an explicit provisioning replaces the revoked CA', async (t) => {
    const made = (await ok(ts, admin, `mutation ($t: ID!) { provisionTenantAuthorityAutomatically(tenantId: $t) { succeeded authority { id } } }`, { t: tenantA }))
      .provisionTenantAuthorityAutomatically;
    t.equal(made.succeeded, true);
    const fresh = await leafOf(tenantA);
    t.equal(fresh.issuerId, made.authority.id);
    t.match(await verifyChain(fresh), /: OK/, 'its chain checks out under the new tenant CA');
  });
});
