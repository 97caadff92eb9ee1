// What src/pki/index.ts offers the next entry points: issuance and renewal for an authenticated subject
// (native enroll, EST, re-enroll with the presented certificate), lookups by issuer and serial, by
// fingerprint and by leaf DER, the trust bundle, and the ledger pages CRLs are built from.
import t from 'tap';
import { AsnConvert } from '@peculiar/asn1-schema';
import { RevokedCertificate } from '@peculiar/asn1-x509';
import { adminToken, startAuthService } from '../helpers/auth.js';
import { createEntity, createTenant, ok } from '../helpers/management.js';
import { REVOKE, makeCaFiles, opensslCsr, opensslVerify } from '../helpers/pki.js';

t.test('the service API of the certificate authority', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, ca.env);
  const pki = ts.service.pki;
  const admin = await adminToken(ts);
  const tenantId = await createTenant(ts, admin, 'acme');
  const device = await createEntity(ts, admin, { kind: 'device', name: 'd', tenantId });
  const other = await createEntity(ts, admin, { kind: 'device', name: 'other', tenantId });
  const subject = { kind: 'subject' as const, entityId: device, via: 'enroll', requestId: 'req-1' };

  const issued = await pki.issuance.issueFromCsr(subject, { csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'enroll-1' });
  const cert = issued.certificate;

  await t.test('a subject issues for itself only, with the same rules and records', async (t) => {
    t.match(opensslVerify(ca.root, issued.chainPem, cert.metadata.certificate_pem), /OK$/);
    t.equal(cert.entity_id, device);
    const [audit] = await ts.service.sql`select actor_entity_id, details from audit_log where event = 'certificate.issue' and target_id = ${cert.id}`;
    t.equal(audit!.actor_entity_id, device);
    t.equal(audit!.details.via, 'enroll');
    const replay = await pki.issuance.issueFromCsr(subject, { csrPem: 'different', idempotencyKey: 'enroll-1' }).catch((e: Error) => e);
    t.match((replay as Error).message, 'idempotencyKey was already used for a different request');
    const forOther = await pki.issuance.issueFromCsr(subject, { entityId: other, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'x' }).catch((e: Error) => e);
    t.match((forOther as Error).message, 'forbidden');
  });

  await t.test('re-enrollment renews only the exact certificate presented', async (t) => {
    const wrong = await pki.issuance.renewFromCsr({ ...subject, via: 'reenroll', presentedCredentialId: null }, { credentialId: cert.id, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'r' })
      .catch((e: Error) => e);
    t.match((wrong as Error).message, 'forbidden');
    const renewed = await pki.issuance.renewFromCsr({ ...subject, via: 'reenroll', presentedCredentialId: cert.id }, { credentialId: cert.id, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'r' });
    t.equal(renewed.certificate.metadata.renewed_from_credential_id, cert.id);
    const expired = await pki.issuance.issueFromCsr(subject, { csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'soon-expired' });
    await ts.service.sql`update credentials set expires_at = now() - interval '1 minute' where id = ${expired.certificate.id}`;
    const late = await pki.issuance.renewFromCsr({ ...subject, via: 'reenroll', presentedCredentialId: expired.certificate.id }, { credentialId: expired.certificate.id, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'late' })
      .catch((e: Error) => e);
    t.match((late as Error).message, 'certificate has expired: enroll again');
  });

  await t.test('lookups by issuer and serial, fingerprint, leaf DER, issuer fingerprint and serial', async (t) => {
    const der = Buffer.from(cert.metadata.certificate_pem.replace(/-----[^-]+-----/g, '').replace(/\s/g, ''), 'base64');
    const byDer = await pki.certificates.byDer(der);
    t.match(byDer, { credentialId: cert.id, entityId: device, tenantId, issuerId: cert.issuer_id, serialNumber: cert.identifier, status: 'active' });
    t.equal(byDer?.identityUri, `urn:svc:tenant:${tenantId}:entity:${device}`);
    t.equal((await pki.certificates.byFingerprint(cert.metadata.fingerprint_sha256))?.credentialId, cert.id);
    t.equal((await pki.certificates.byIssuerSerial(cert.issuer_id, cert.identifier))?.credentialId, cert.id);
    t.equal((await pki.certificates.byIssuerFingerprintSerial(cert.metadata.issuer_fingerprint_sha256, cert.identifier))?.credentialId, cert.id);
    t.equal(await pki.certificates.byIssuerSerial(cert.issuer_id, 'abcdef'), null);
    t.equal(await pki.certificates.byDer(Buffer.from('not a certificate')), null);
    await ok(ts, admin, REVOKE, { i: { credentialId: cert.id, reason: 'superseded' } });
    t.match(await pki.certificates.byDer(der), { status: 'revoked', revocationReason: 'superseded' });
  });

  await t.test('the trust bundle and the issuer\'s ledger for CRLs', async (t) => {
    const bundle = await pki.certificates.trustBundle();
    t.equal((bundle.roots.match(/BEGIN CERTIFICATE/g) ?? []).length, 1, 'one trust anchor');
    t.equal((bundle.intermediates.match(/BEGIN CERTIFICATE/g) ?? []).length, 2, 'platform intermediate and platform leaf issuer: no tenant CA (O(1) in tenants)');
    const fresh = await pki.issuance.issueFromCsr(subject, { csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'bundle' });
    const { writeFileSync, mkdtempSync } = await import('node:fs');
    const dir = mkdtempSync('/tmp/bundle-');
    writeFileSync(`${dir}/roots.pem`, bundle.roots);
    t.match(opensslVerify(`${dir}/roots.pem`, bundle.intermediates + fresh.chainPem, fresh.certificate.metadata.certificate_pem), /OK$/,
      'a tenant leaf verifies with the bundle and the chain issuance returned');
    const issuer = await pki.publication.issuer(cert.issuer_id);
    t.ok(issuer?.authority.key_ref, 'the issuer context carries its key reference for CaKeys.sign');
    t.ok(issuer?.info.subjectNameDer.length, 'and its name as encoded, the issuer of its CRL');
    const ledger = await pki.publication.ledger(cert.issuer_id);
    t.equal(ledger.length, 1);
    t.equal(Buffer.from(AsnConvert.parse(ledger[0]!.crl_entry, RevokedCertificate).userCertificate).toString('hex'), cert.identifier);
  });
});
