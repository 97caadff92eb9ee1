// gRPC with mutual TLS where SVC_GRPC_TLS_CLIENT_CA_PATH names the service's own root, with grpc-js clients
// presenting certificates the service issued (leaf and chain): the right certificate with its entity's
// token works and is named in the audit of what the call revokes; another entity's certificate with that
// token is refused; a revoked (key_compromise) certificate is refused on every call, also on a channel
// opened before the revocation; a certificate of this CA the service never issued is refused.
import { readFileSync, writeFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { ADMIN_ID, AUTH_ENV, adminToken, login } from '../helpers/auth.js';
import { makeCertificates } from '../helpers/certificates.js';
import { createTestDatabase } from '../helpers/database.js';
import { openssl } from '../helpers/enrollment.js';
import { createEntity, createTenant, ok } from '../helpers/management.js';
import { REVOKE, issueHeld, makeCaFiles, opensslCsr, type HeldCertificate } from '../helpers/pki.js';
import { startTestService } from '../helpers/service.js';
import { grpcClient, type TestClient } from './helpers.js';

const CHECK = { subject_id: ADMIN_ID, action: 'manage', object_kind: 'platform' };

t.test('gRPC mTLS with certificates issued by the service', async (t) => {
  const server = makeCertificates();
  const ca = makeCaFiles(t);
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  const ts = await startTestService(t, {
    ...AUTH_ENV, ...ca.env, SVC_GRPC_ADDR: '127.0.0.1:0',
    SVC_GRPC_TLS_CERT_PATH: server.cert, SVC_GRPC_TLS_KEY_PATH: server.key, SVC_GRPC_TLS_CLIENT_CA_PATH: ca.root,
  }, db);
  const admin = await adminToken(ts);
  const tenant = await createTenant(ts, admin, 'grpc-plant');
  const device = await createEntity(ts, admin, { kind: 'device', name: 'grpc-device', tenantId: tenant });
  const deviceKey = (await ok(ts, admin, 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', { e: device })).createSharedKey.key as string;
  const deviceToken = (await login(ts, device, deviceKey, { kind: 'shared_key' })).token;
  const clients: TestClient[] = [];
  t.teardown(() => clients.forEach((c) => c.close()));
  /** A channel presenting the certificate and its chain (what a TLS client sends: the root stays with the server). */
  const channel = (held: HeldCertificate) => {
    const c = grpcClient(`127.0.0.1:${ts.service.ports.grpc}`,
      grpc.credentials.createSsl(readFileSync(server.ca), Buffer.from(held.keyPem), Buffer.from(held.certificatePem + held.chainPem)),
      { 'grpc.ssl_target_name_override': 'localhost' });
    clients.push(c);
    return c;
  };
  const adminCert = await issueHeld(ts, admin, ca.dir, ADMIN_ID);
  const deviceCert = await issueHeld(ts, admin, ca.dir, device);

  await t.test('the certificate of the token\'s entity: served', async (t) => {
    const c = channel(adminCert);
    t.match(await c.call('AuthzService', 'Check', CHECK, { token: admin }), { err: null, res: { allowed: true } }, 'Check');
    const d = channel(deviceCert);
    t.match(await d.call('AuthService', 'Authenticate', { token: deviceToken }), { err: null, res: { entity_id: device } },
      'a call without a bearer (Authenticate) has nothing to bind');
  });

  await t.test('another entity\'s certificate with the token: refused', async (t) => {
    const d = channel(deviceCert);
    t.match(await d.call('AuthzService', 'Check', CHECK, { token: admin }), {
      err: { code: grpc.status.UNAUTHENTICATED, details: /belongs to another entity than the client certificate/ },
    });
    const c = channel(adminCert);
    t.match(await c.call('AuthzService', 'Check', CHECK, { token: deviceToken }), { err: { code: grpc.status.UNAUTHENTICATED } },
      'a device token on the administrator\'s certificate');
  });

  await t.test('the client certificate is named in the audit of what the call revokes', async (t) => {
    const victim = await createEntity(ts, admin, { kind: 'device', name: 'grpc-victim', tenantId: tenant });
    await issueHeld(ts, admin, ca.dir, victim);
    const c = channel(adminCert);
    t.match(await c.call('CertificateService', 'RevokeEntityCertificates', { entity_id: victim, reason: 'superseded' }, { token: admin }),
      { err: null, res: { revoked: '1' } });
    const [event] = await ts.service.sql`
      select details from audit_log where event = 'certificate.revoke' and details ->> 'entity_id' = ${victim}`;
    t.equal(event?.details.client_certificate_id, adminCert.credentialId);
    t.equal(event?.details.via, 'grpc');
  });

  await t.test('revoked (key_compromise): refused on every call, on a channel opened before too', async (t) => {
    const held = await issueHeld(ts, admin, ca.dir, ADMIN_ID);
    const c = channel(held);
    t.match(await c.call('AuthzService', 'Check', CHECK, { token: admin }), { err: null }, 'served before the revocation');
    await ok(ts, admin, REVOKE, { i: { credentialId: held.credentialId, reason: 'key_compromise' } });
    t.match(await c.call('AuthzService', 'Check', CHECK, { token: admin }), {
      err: { code: grpc.status.UNAUTHENTICATED, details: /client certificate is revoked \(key_compromise\)/ },
    }, 'the same channel');
    t.match(await channel(held).call('AuthService', 'Authenticate', { token: admin }), { err: { code: grpc.status.UNAUTHENTICATED } }, 'a new channel');
    t.match(await channel(adminCert).call('AuthzService', 'Check', CHECK, { token: admin }), { err: null }, 'another certificate still works');
  });

  await t.test('a certificate of this CA the service never issued: refused', async (t) => {
    // Signed by the platform intermediate with openssl: the chain verifies, the records do not know it.
    const csr = opensslCsr(ca.dir, { subject: '/CN=never issued' });
    const f = (n: string) => ca.file(`forged-${n}`);
    writeFileSync(f('csr.pem'), csr.csrPem);
    writeFileSync(f('ext'), 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n');
    await openssl(['x509', '-req', '-in', f('csr.pem'), '-CA', ca.intermediate, '-CAkey', ca.intermediateKey, '-CAcreateserial', '-days', '1',
      '-extfile', f('ext'), '-out', f('cert.pem')]);
    const forged = { credentialId: '', certificatePem: readFileSync(f('cert.pem'), 'utf8'), chainPem: readFileSync(ca.intermediate, 'utf8'),
      keyPem: readFileSync(csr.keyPath, 'utf8') };
    t.match(await channel(forged).call('AuthService', 'Authenticate', { token: admin }), {
      err: { code: grpc.status.UNAUTHENTICATED, details: /not known to this service/ },
    });
  });
});
