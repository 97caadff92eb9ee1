// The same certificate authority with SVC_PKI_CA_KEY_BACKEND=pkcs11 on a SoftHSM2 token the test initialises:
// the authorities the service makes keep their keys on the token (only a reference is stored), and
// issuance, renewal and revocation behave as with encrypted keys; openssl verifies every leaf.
import { execFileSync } from 'node:child_process';
import t from 'tap';
import { startService } from '../../../src/main.js';
import { AUTH_ENV, adminToken } from '../../helpers/auth.js';
import { createTestDatabase } from '../../helpers/database.js';
import { createEntity, createTenant, fails, ok } from '../../helpers/management.js';
import { AUTHORITIES, ISSUE_CSR, RENEW_CSR, REVOKE, makeCaFiles, opensslCsr, opensslText, opensslVerify, type CsrKey } from '../../helpers/pki.js';
import { QUIET_LISTENERS, testLogger, type TestService } from '../../helpers/service.js';
import { createSoftHsmToken } from '../../helpers/softhsm.js';

const BULK = `mutation ($i: BulkRevokeCertificatesInput!) { bulkRevokeCertificates(input: $i) { snapshotAt nextCursor complete items { credentialId outcome } } }`;

t.test('the CA on a SoftHSM2 token', async (t) => {
  const token = createSoftHsmToken(t);
  const ca = makeCaFiles(t);
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  // Two token operations at a time: bursts of issuance must queue for them, not fail.
  const env = { ...QUIET_LISTENERS, SVC_RATE_LIMIT_ENABLED: 'false', ...AUTH_ENV, ...ca.env, ...token.env, SVC_PKI_PKCS11_MAX_IN_FLIGHT: '2', DATABASE_URL: db.url };
  const service = await startService(env, { log: testLogger() });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : service.stop()));
  const ts = { service, db, url: () => `http://127.0.0.1:${service.ports.http}` } as TestService;
  const admin = await adminToken(ts);
  const sql = service.sql;
  const tenantId = await createTenant(ts, admin, 'hsm');
  const device = await createEntity(ts, admin, { kind: 'device', name: 'd', tenantId });

  await t.test('authorities made by the service keep their keys on the token', async (t) => {
    const list = (await ok(ts, admin, AUTHORITIES)).pkiAuthorities as any[];
    const byKind = (k: string) => list.find((a) => a.kind === k && a.status === 'active');
    t.equal(byKind('platform_intermediate').keyBackend, 'encrypted_database', 'the configured intermediate is imported into the database');
    t.equal(byKind('platform_leaf_issuer').keyBackend, 'pkcs11');
    t.equal(byKind('tenant_intermediate').keyBackend, 'pkcs11');
    const [row] = await sql`select key_ref from pki_authorities where tenant_id = ${tenantId} and status = 'active'`;
    t.match(row!.key_ref, { backend: 'pkcs11', tokenLabel: token.label, algorithm: 'ecdsa-p256' });
    t.notOk('encryptedKey' in row!.key_ref, 'only a token-object reference is stored');
  });

  let n = 0;
  const issue = async (csrPem = opensslCsr(ca.dir).csrPem) =>
    (await ok(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem, idempotencyKey: `h${n++}` } })).issueCertificateFromCsrV2;

  for (const key of ['ec:P-256', 'rsa:2048', 'ed25519'] as CsrKey[]) {
    await t.test(`a ${key} CSR asking CA:TRUE: a non-CA client leaf signed on the token, verified by openssl`, async (t) => {
      const issued = await issue(opensslCsr(ca.dir, { key, addext: ['basicConstraints=critical,CA:TRUE'] }).csrPem);
      t.match(opensslVerify(ca.root, issued.chainPem, issued.certificate.certificatePem), /: OK$/);
      const text = opensslText(issued.certificate.certificatePem);
      t.match(text, /CA:FALSE/);
      t.match(text, /Digital Signature\n/);
      t.match(text, /TLS Web Client Authentication/);
      t.match(text, /OCSP - URI:.*\/ocsp/);
      t.match(text, /CA Issuers - URI:.*\/ca\.crt/);
      t.match(text, /X509v3 CRL Distribution Points/);
      t.match(text, new RegExp(`URI:urn:svc:tenant:${tenantId}:entity:${device}`));
    });
  }

  await t.test('a burst of issuances waits for the token instead of failing (SVC_PKI_PKCS11_MAX_IN_FLIGHT=2)', async (t) => {
    const csrs = Array.from({ length: 40 }, () => opensslCsr(ca.dir).csrPem);
    const answers = await Promise.all(csrs.map((csrPem, k) => ok(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem, idempotencyKey: `burst-${k}` } })));
    t.equal(new Set(answers.map((a) => a.issueCertificateFromCsrV2.certificate.credentialId)).size, 40, 'forty certificates, no RATE_LIMITED');
  });

  await t.test('TTL bound, idempotent replay, renewal', async (t) => {
    const csrPem = opensslCsr(ca.dir).csrPem;
    t.match((await fails(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem, idempotencyKey: 'ttl', ttlSecs: 40_000_000 } }))[0]!.message, 'exceeds the maximum of 31536000 seconds');
    const i = { entityId: device, csrPem, idempotencyKey: 'same' };
    const first = (await ok(ts, admin, ISSUE_CSR, { i })).issueCertificateFromCsrV2;
    const again = (await ok(ts, admin, ISSUE_CSR, { i })).issueCertificateFromCsrV2;
    t.equal(again.idempotentReplay, true);
    t.equal(again.certificate.credentialId, first.certificate.credentialId);
    const renewed = (await ok(ts, admin, RENEW_CSR, { i: { credentialId: first.certificate.credentialId, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'r', revokeOld: true } })).renewCertificateFromCsrV2;
    t.match(opensslVerify(ca.root, renewed.chainPem, renewed.certificate.certificatePem), /OK$/);
    t.equal(renewed.certificate.renewedFromCredentialId, first.certificate.credentialId);
  });

  await t.test('revocation by each selector and bulk from its cursor', async (t) => {
    const [a, b, c] = [(await issue()).certificate, (await issue()).certificate, (await issue()).certificate];
    t.equal((await ok(ts, admin, REVOKE, { i: { credentialId: a.credentialId, reason: 'key_compromise' } })).revokeCertificateV2.certificate.status, 'revoked');
    t.equal((await ok(ts, admin, REVOKE, { i: { fingerprintSha256: b.fingerprintSha256 } })).revokeCertificateV2.certificate.credentialId, b.credentialId);
    t.equal((await ok(ts, admin, REVOKE, { i: { issuerId: c.issuerId, serialNumber: c.serialNumber } })).revokeCertificateV2.certificate.credentialId, c.credentialId);
    const ledger = await sql`select count(*)::int as n from certificate_revocations where credential_id = any(${[a.credentialId, b.credentialId, c.credentialId]})`;
    t.equal(ledger[0]!.n, 3);
    for (let k = 0; k < 4; k++) await issue();
    const p1 = (await ok(ts, admin, BULK, { i: { tenantId, limit: 2 } })).bulkRevokeCertificates;
    let cursor = p1.nextCursor;
    let total = p1.items.length;
    while (cursor) {
      const page = (await ok(ts, admin, BULK, { i: { tenantId, limit: 2, afterCredentialId: cursor, snapshotAt: p1.snapshotAt } })).bulkRevokeCertificates;
      total += page.items.length;
      cursor = page.nextCursor;
    }
    t.ok(total >= 4);
    const left = await sql`select count(*)::int as n from credentials c join entities e on e.id = c.entity_id where e.tenant_id = ${tenantId} and c.kind = 'certificate' and c.status = 'active'`;
    t.equal(left[0]!.n, 0, 'every certificate of the tenant revoked');
  });

  await t.test('a stored key on another token refuses the start, naming the authority', async (t) => {
    await service.stop();
    stopped = true;
    // A second token in the same token directory (SoftHSM reads its configuration once per process).
    execFileSync('softhsm2-util', ['--init-token', '--free', '--label', 'other-token', '--pin', token.pin, '--so-pin', token.soPin], { stdio: 'pipe' });
    const err = await startService({ ...env, SVC_PKI_PKCS11_TOKEN_LABEL: 'other-token' }, { log: testLogger() }).then((s) => s.stop().then(() => null), (e: Error) => e);
    t.ok(err);
    t.match(err?.message, /authority [0-9a-f-]{36} \(/);
  });
});
