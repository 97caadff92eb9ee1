// Issuance from CSRs made by `openssl req`: each leaf verifies with `openssl verify` against the configured
// root, carries the extensions SPEC.md requires (`openssl x509 -text`), is stored as SPEC.md "Credentials"
// says, and commits with its audit event and outbox record. Also: a CSR asking CA:TRUE, TTL bounds,
// idempotent replay, CSR limits and defects, generated keys (flag off and on), global entities. The first
// group runs twice: with the issuers' keys encrypted in the database, and on a SoftHSM2 token.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { adminToken, startAuthService } from '../../helpers/auth.js';
import { createSoftHsmToken } from '../../helpers/softhsm.js';
import { createEntity, createTenant, fails, ok } from '../../helpers/management.js';
import {
  ISSUE_CSR, ISSUE_GENERATED, certPublicKey, keyPublicKey, makeCaFiles, opensslCsr, opensslText, opensslVerify, type CsrKey,
} from '../../helpers/pki.js';

const BASE = 'https://ca.example.test';
// The JWT issuer / links origin: never in a certificate (issue 33).
const PUBLIC_BASE = 'https://iam.example.test';
// The same checks with the issuers' keys encrypted in the database and on a SoftHSM2 token.
const token = createSoftHsmToken(t);

for (const backend of ['encrypted_database', 'pkcs11'] as const) t.test(`issuance from CSR with real openssl clients (${backend} keys)`, async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, {
    ...ca.env, ...(backend === 'pkcs11' ? token.env : {}), SVC_PKI_PUBLICATION_BASE_URL: BASE, SVC_PUBLIC_BASE_URL: PUBLIC_BASE, SVC_PKI_ENROLLMENT_MAX_CSR_BYTES: '4096',
  });
  const admin = await adminToken(ts);
  const tenantId = await createTenant(ts, admin, 'acme');
  const deviceId = await createEntity(ts, admin, { kind: 'device', name: 'sensor-1', tenantId });
  const sql = ts.service.sql;
  const [issuer] = await sql<{ id: string }[]>`select id from pki_authorities where tenant_id = ${tenantId} and status = 'active'`;
  t.ok(issuer, 'creating the tenant provisioned its intermediate');
  const [ref] = await sql<{ key_ref: { backend: string } }[]>`select key_ref from pki_authorities where id = ${issuer!.id}`;
  t.equal(ref!.key_ref.backend, backend, `the issuer's key is held by ${backend}`);

  for (const key of ['ec:P-256', 'ec:P-384', 'rsa:2048', 'ed25519'] as CsrKey[]) {
    await t.test(`a ${key} CSR asking CA:TRUE yields a non-CA client leaf that chains to the root`, async (t) => {
      const { csrPem } = opensslCsr(ca.dir, { key, addext: ['basicConstraints=critical,CA:TRUE,pathlen:3', 'keyUsage=critical,keyCertSign'] });
      const data = await ok(ts, admin, ISSUE_CSR, { i: { entityId: deviceId, csrPem, idempotencyKey: `k-${key}` } });
      const issued = data.issueCertificateFromCsrV2;
      t.equal(issued.idempotentReplay, false);
      t.equal(issued.privateKeyPem, null, 'a CSR-issued certificate never exposes a private key');
      const cert = issued.certificate;
      t.match(opensslVerify(ca.root, issued.chainPem, cert.certificatePem), /: OK$/);
      const text = opensslText(cert.certificatePem);
      t.match(text, /X509v3 Basic Constraints: critical\s+CA:FALSE/);
      t.match(text, /X509v3 Key Usage: critical\s+Digital Signature\n/);
      t.notMatch(text, /Certificate Sign/);
      t.match(text, /X509v3 Extended Key Usage: \s*\n\s+TLS Web Client Authentication/);
      t.match(text, new RegExp(`URI:urn:svc:tenant:${tenantId}:entity:${deviceId}`));
      t.match(text, new RegExp(`OCSP - URI:${BASE}/certs/issuers/${issuer!.id}/ocsp`));
      t.match(text, new RegExp(`CA Issuers - URI:${BASE}/certs/issuers/${issuer!.id}/ca.crt`));
      t.match(text, new RegExp(`X509v3 CRL Distribution Points:[\\s\\S]*URI:${BASE}/certs/issuers/${issuer!.id}/crl`));
      t.notMatch(text, PUBLIC_BASE, 'SVC_PUBLIC_BASE_URL is not a certificate URL');
      t.match(text, /X509v3 Subject Key Identifier/);
      t.match(text, /X509v3 Authority Key Identifier/);
      t.match(text, new RegExp(`Subject: O = ${tenantId}, CN = ${deviceId}`), 'the subject comes from the entity, not the CSR');
      const serial = /Serial Number:\s*\n\s*([0-9a-f:]+)/.exec(text)?.[1]?.replaceAll(':', '');
      t.equal(cert.serialNumber, serial, 'serialNumber is the lowercase hex serial');
      t.equal(cert.serialNumber.length, 32, '16 random bytes');
      t.ok(parseInt(cert.serialNumber.slice(0, 2), 16) < 0x80, 'positive');
      t.equal(cert.status, 'active');
      t.equal(cert.issuerId, issuer!.id);
      t.equal(cert.tenantId, tenantId);
      const audit = await sql`select details from audit_log where event = 'certificate.issue' and target_id = ${cert.credentialId}`;
      t.equal(audit.length, 1, 'one audit event');
      t.equal(audit[0]!.details.csr_requested_ca, true, 'the audit event records that the CSR asked for CA:TRUE');
    });
  }

  await t.test('the credential record is what SPEC.md "Credentials" says', async (t) => {
    const { csrPem } = opensslCsr(ca.dir);
    const cert = (await ok(ts, admin, ISSUE_CSR, { i: { entityId: deviceId, csrPem, idempotencyKey: 'record', ttlSecs: 7200 } })).issueCertificateFromCsrV2.certificate;
    const [row] = await sql`select * from credentials where id = ${cert.credentialId}`;
    t.equal(row!.kind, 'certificate');
    t.equal(row!.identifier, cert.serialNumber);
    t.match(row!.identifier, /^[0-9a-f]+$/);
    t.equal(row!.issuer_id, issuer!.id);
    t.equal(row!.secret_hash, null);
    t.equal(row!.entity_id, deviceId);
    const notAfter = /Not After : (.+)\n/.exec(opensslText(cert.certificatePem))?.[1] as string;
    t.equal(new Date(row!.expires_at).getTime(), new Date(notAfter).getTime(), 'expires_at is the notAfter');
    t.ok(Math.abs(new Date(row!.expires_at).getTime() - Date.now() - 7200_000) < 60_000, 'ttlSecs honoured');
    const m = row!.metadata;
    t.equal(m.certificate_pem, cert.certificatePem);
    t.same(m.subject, { common_name: deviceId, organization: tenantId });
    t.match(m.fingerprint_sha256, /^[0-9a-f]{64}$/);
    t.match(m.subject_key_id, /^[0-9a-f]{40}$/);
    t.match(m.issuer_fingerprint_sha256, /^[0-9a-f]{64}$/);
    t.equal(m.identity_uri, `urn:svc:tenant:${tenantId}:entity:${deviceId}`);
    t.equal(m.profile_name, 'default');
    t.same(m.dns_names, []);
    t.same(m.ip_addresses, []);
    const outbox = await sql`select event, tenant_id, payload from event_outbox where payload ->> 'credential_id' = ${cert.credentialId}`;
    t.equal(outbox.length, 1, 'one outbox record');
    t.equal(outbox[0]!.event, 'certificate.issue');
    t.equal(outbox[0]!.tenant_id, tenantId);
    t.equal(outbox[0]!.payload.serial_number, cert.serialNumber);
    const dup = await sql`select count(*)::int as n from credentials where metadata ->> 'fingerprint_sha256' = ${m.fingerprint_sha256}`;
    t.equal(dup[0]!.n, 1);
  });

  await t.test('TTL above the profile bound or past the issuer is refused, naming the bound', async (t) => {
    const { csrPem } = opensslCsr(ca.dir);
    const [e1] = await fails(ts, admin, ISSUE_CSR, { i: { entityId: deviceId, csrPem, idempotencyKey: 'ttl-1', ttlSecs: 31_536_001 } });
    t.equal(e1!.extensions.code, 'BAD_REQUEST');
    t.match(e1!.message, "ttlSecs 31536001 exceeds the maximum of 31536000 seconds of certificate profile 'default'");
    const [e2] = await fails(ts, admin, ISSUE_CSR, { i: { entityId: deviceId, csrPem, idempotencyKey: 'ttl-2', ttlSecs: 59 } });
    t.match(e2!.message, 'below the minimum of 300 seconds');
    // The tenant intermediate lives as long as the platform intermediate (2 years): a profile allowing 10
    // years still stops at the issuer.
    const profile = await ok(ts, admin, `mutation ($i: CreateCertificateProfileInput!) { createCertificateProfile(input: $i) { id } }`,
      { i: { tenantId, name: 'long', maxTtlSecs: 315_360_000, defaultTtlSecs: 86_400 } });
    await ok(ts, admin, `mutation ($a: ID!, $p: ID!) { setAuthorityDefaultProfile(authorityId: $a, profileId: $p) { id defaultProfileId } }`,
      { a: issuer!.id, p: profile.createCertificateProfile.id });
    const [e3] = await fails(ts, admin, ISSUE_CSR, { i: { entityId: deviceId, csrPem, idempotencyKey: 'ttl-3', ttlSecs: 5 * 365 * 86_400 } });
    t.match(e3!.message, new RegExp(`ttlSecs 157680000 exceeds the issuer bound: issuer ${issuer!.id} expires at`));
    await ok(ts, admin, `mutation ($a: ID!, $p: ID!) { setAuthorityDefaultProfile(authorityId: $a, profileId: $p) { id } }`,
      { a: issuer!.id, p: '00000000-0000-0000-0000-0000000000c1' });
    const count = await sql`select count(*)::int as n from credentials where kind = 'certificate' and entity_id = ${deviceId}`;
    const audits = await sql`select count(*)::int as n from audit_log where event = 'certificate.issue' and details ->> 'entity_id' = ${deviceId}`;
    t.equal(count[0]!.n, audits[0]!.n, 'nothing half-written: every stored certificate has its audit event');
  });

  await t.test('the idempotency key returns the same certificate, never a second one', async (t) => {
    const { csrPem } = opensslCsr(ca.dir);
    const i = { entityId: deviceId, csrPem, idempotencyKey: 'replay-1' };
    const first = (await ok(ts, admin, ISSUE_CSR, { i })).issueCertificateFromCsrV2;
    const again = (await ok(ts, admin, ISSUE_CSR, { i })).issueCertificateFromCsrV2;
    t.equal(again.idempotentReplay, true);
    t.equal(again.certificate.credentialId, first.certificate.credentialId);
    t.equal(again.certificate.certificatePem, first.certificate.certificatePem);
    const [other] = await fails(ts, admin, ISSUE_CSR, { i: { ...i, csrPem: opensslCsr(ca.dir).csrPem } });
    t.equal(other!.extensions.code, 'CONFLICT');
    t.match(other!.message, 'idempotencyKey was already used for a different request');
    // The same request many times at once: one certificate, the others replay it.
    const same = { entityId: deviceId, csrPem, idempotencyKey: 'replay-burst' };
    const answers = await Promise.all(Array.from({ length: 8 }, () => ok(ts, admin, ISSUE_CSR, { i: same })));
    const ids = new Set(answers.map((a) => a.issueCertificateFromCsrV2.certificate.credentialId));
    t.equal(ids.size, 1, 'one certificate for eight concurrent identical requests');
    t.equal(answers.filter((a) => !a.issueCertificateFromCsrV2.idempotentReplay).length, 1);
    const rows = await sql`select count(*)::int as n from certificate_issuance_requests where idempotency_key = 'replay-burst'`;
    t.equal(rows[0]!.n, 1);
  });

  await t.test('CSR defects are refused with a clear message', async (t) => {
    const { csrPem } = opensslCsr(ca.dir);
    const call = async (pem: string) => (await fails(ts, admin, ISSUE_CSR, { i: { entityId: deviceId, csrPem: pem, idempotencyKey: `bad-${Math.random()}` } }))[0]!;
    const big = await call(csrPem + ' '.repeat(5000));
    t.equal(big.extensions.code, 'PAYLOAD_TOO_LARGE');
    t.match(big.message, 'csrPem exceeds the limit of 4096 bytes (SVC_PKI_ENROLLMENT_MAX_CSR_BYTES)');
    t.match((await call('not a csr')).message, "csrPem must be one PEM block labelled 'CERTIFICATE REQUEST'");
    // One bit of the signed request changed: the proof of possession fails.
    const der = Buffer.from(csrPem.replace(/-----[^-]+-----/g, '').replace(/\s/g, ''), 'base64');
    der[40] = (der[40] as number) ^ 0x01;
    const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
    const e = await call(tampered);
    t.equal(e.extensions.code, 'BAD_REQUEST');
    t.match(e.message, /csrPem is not a valid certificate signing request: (its signature does not verify|malformed|the public key)/);
    const truncated = `-----BEGIN CERTIFICATE REQUEST-----\n${der.subarray(0, 60).toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
    t.match((await call(truncated)).message, 'csrPem is not a valid certificate signing request');
    const sans = opensslCsr(ca.dir, { addext: ['subjectAltName=DNS:device.example.com'] }).csrPem;
    t.match((await call(sans)).message, "certificate profile 'default' does not allow DNS names (asked for device.example.com)");
    const uri = opensslCsr(ca.dir, { addext: ['subjectAltName=URI:urn:evil'] }).csrPem;
    t.match((await call(uri)).message, 'URI subjectAltNames are set by the service');
    t.match((await fails(ts, admin, ISSUE_CSR, { i: { entityId: deviceId, csrPem, idempotencyKey: '' } }))[0]!.message, 'idempotencyKey is required');
  });

  await t.test('generated keys are off unless SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED', async (t) => {
    const [e] = await fails(ts, admin, ISSUE_GENERATED, { i: { entityId: deviceId } });
    t.match(e!.message, 'generated-key issuance is disabled');
  });

  await t.test('an inactive entity, a frozen tenant, an unknown entity', async (t) => {
    const { csrPem } = opensslCsr(ca.dir);
    const off = await createEntity(ts, admin, { kind: 'device', name: 'off', tenantId });
    await ok(ts, admin, 'mutation ($id: ID!) { disableEntity(id: $id) { id } }', { id: off });
    t.match((await fails(ts, admin, ISSUE_CSR, { i: { entityId: off, csrPem, idempotencyKey: 'x' } }))[0]!.message, 'entity is inactive');
    t.equal((await fails(ts, admin, ISSUE_CSR, { i: { entityId: '5a0c7c55-0000-4000-8000-000000000000', csrPem, idempotencyKey: 'x' } }))[0]!.extensions.code, 'NOT_FOUND');
    const other = await createTenant(ts, admin, 'frozen-co');
    const d = await createEntity(ts, admin, { kind: 'device', name: 'cold', tenantId: other });
    await ok(ts, admin, 'mutation ($id: ID!) { freezeTenant(id: $id) { id } }', { id: other });
    // A frozen tenant locks every operation on its entities (SPEC.md), the platform administrator's too.
    t.equal((await fails(ts, admin, ISSUE_CSR, { i: { entityId: d, csrPem, idempotencyKey: 'x' } }))[0]!.extensions.code, 'FORBIDDEN');
  });
});

t.test('generated keys and global entities', async (t) => {
  const ca = makeCaFiles(t, { intermediateKeyFormat: 'sec1' });
  const ts = await startAuthService(t, { ...ca.env, SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED: 'true' });
  const admin = await adminToken(ts);
  const sql = ts.service.sql;

  await t.test('a global entity gets a leaf from the platform leaf issuer', async (t) => {
    const service = await createEntity(ts, admin, { kind: 'service', name: 'billing' });
    const { csrPem } = opensslCsr(ca.dir);
    const issued = (await ok(ts, admin, ISSUE_CSR, { i: { entityId: service, csrPem, idempotencyKey: 'g' } })).issueCertificateFromCsrV2;
    const [leafIssuer] = await sql<{ id: string }[]>`select id from pki_authorities where kind = 'platform_leaf_issuer' and status = 'active'`;
    t.equal(issued.certificate.issuerId, leafIssuer!.id);
    t.equal(issued.certificate.tenantId, null);
    t.match(opensslVerify(ca.root, issued.chainPem, issued.certificate.certificatePem), /: OK$/);
    t.match(opensslText(issued.certificate.certificatePem), new RegExp(`URI:urn:svc:platform:entity:${service}`));
  });

  await t.test('issueGeneratedCertificateV2 returns the key once; it is never stored', async (t) => {
    const tenantId = await createTenant(ts, admin, 'gen');
    const deviceId = await createEntity(ts, admin, { kind: 'device', name: 'gen-1', tenantId });
    const first = (await ok(ts, admin, ISSUE_GENERATED, { i: { entityId: deviceId, idempotencyKey: 'gen-1' } })).issueGeneratedCertificateV2;
    t.match(first.privateKeyPem, /^-----BEGIN PRIVATE KEY-----/);
    t.equal(keyPublicKey(first.privateKeyPem), certPublicKey(first.certificate.certificatePem), 'the key pairs with the certificate');
    t.match(opensslVerify(ca.root, first.chainPem, first.certificate.certificatePem), /: OK$/);
    const replay = (await ok(ts, admin, ISSUE_GENERATED, { i: { entityId: deviceId, idempotencyKey: 'gen-1' } })).issueGeneratedCertificateV2;
    t.equal(replay.idempotentReplay, true);
    t.equal(replay.privateKeyPem, null, 'a replay never returns the key again');
    const keyBody = first.privateKeyPem.replace(/-----[^-]+-----/g, '').replace(/\s/g, '').slice(20, 60);
    const leaks = await sql`
      select (select count(*) from credentials where metadata::text like ${`%${keyBody}%`})
        + (select count(*) from audit_log where details::text like ${`%${keyBody}%`})
        + (select count(*) from event_outbox where payload::text like ${`%${keyBody}%`}) as n`;
    t.equal(Number(leaks[0]!.n), 0, 'the private key is stored nowhere');
  });

  await t.test('the platform intermediate key was read as SEC1 PEM', async (t) => {
    t.match(readFileSync(ca.intermediateKey, 'utf8'), /BEGIN EC PRIVATE KEY/);
    const [row] = await sql`select key_backend, key_ref from pki_authorities where kind = 'platform_intermediate' and status = 'active'`;
    t.equal(row!.key_backend, 'encrypted_database');
    t.notOk(JSON.stringify(row!.key_ref).includes('PRIVATE KEY'));
  });
});
