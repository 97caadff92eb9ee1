// Renewal by exact credential: the replacement links back, replays return it, a second renewal of the same
// certificate conflicts, revoked certificates do not renew, revokeOld supersedes the old one atomically,
// generated-key renewal returns its key once, and renewal after an issuer rotation uses the new issuer.
import t from 'tap';
import { adminToken, startAuthService } from '../../helpers/auth.js';
import { createEntity, createTenant, fails, ok } from '../../helpers/management.js';
import { ISSUE_CSR, RENEW_CSR, RENEW_GENERATED, REVOKE, certPublicKey, keyPublicKey, makeCaFiles, opensslCsr, opensslVerify } from '../../helpers/pki.js';

t.test('renewal', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, { ...ca.env, SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED: 'true' });
  const admin = await adminToken(ts);
  const sql = ts.service.sql;
  const tenantId = await createTenant(ts, admin, 'acme');
  const device = await createEntity(ts, admin, { kind: 'device', name: 'd', tenantId });
  let n = 0;
  const issue = async () => (await ok(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: `i${n++}` } })).issueCertificateFromCsrV2.certificate;

  await t.test('from a CSR, keeping the old one; replay; a second renewal conflicts', async (t) => {
    const old = await issue();
    const csrPem = opensslCsr(ca.dir).csrPem;
    const input = { credentialId: old.credentialId, csrPem, idempotencyKey: 'r1', ttlSecs: 3600 };
    const renewed = (await ok(ts, admin, RENEW_CSR, { i: input })).renewCertificateFromCsrV2;
    t.equal(renewed.idempotentReplay, false);
    t.equal(renewed.privateKeyPem, null);
    const cert = renewed.certificate;
    t.equal(cert.renewedFromCredentialId, old.credentialId);
    t.not(cert.serialNumber, old.serialNumber);
    t.not(cert.fingerprintSha256, old.fingerprintSha256);
    t.equal(cert.entityId, device);
    t.ok(cert.renewalDueAt);
    t.match(opensslVerify(ca.root, renewed.chainPem, cert.certificatePem), /OK$/);
    const [oldRow] = await sql`select status from credentials where id = ${old.credentialId}`;
    t.equal(oldRow!.status, 'active', 'without revokeOld the old certificate stays valid (overlap)');
    const replay = (await ok(ts, admin, RENEW_CSR, { i: input })).renewCertificateFromCsrV2;
    t.equal(replay.idempotentReplay, true);
    t.equal(replay.certificate.credentialId, cert.credentialId);
    const again = await fails(ts, admin, RENEW_CSR, { i: { ...input, idempotencyKey: 'r2' } });
    t.equal(again[0]!.extensions.code, 'CONFLICT');
    t.match(again[0]!.message, `certificate already renewed (replaced by ${cert.credentialId})`);
    const [link] = await sql`select replacement_credential_id from certificate_renewals where previous_credential_id = ${old.credentialId}`;
    t.equal(link!.replacement_credential_id, cert.credentialId);
    const [audit] = await sql`select details from audit_log where event = 'certificate.renew' and target_id = ${old.credentialId}`;
    t.match(audit!.details, { old_credential_id: old.credentialId, new_credential_id: cert.credentialId, key_mode: 'csr', revoke_old: false });
    const outbox = await sql`select payload from event_outbox where event = 'certificate.renew' and payload ->> 'target_id' = ${old.credentialId}`;
    t.equal(outbox.length, 1);
    t.equal(outbox[0]!.payload.details.new_credential_id, cert.credentialId);
    await ts.service.audit.flush();
    const replays = await sql`select count(*)::int as n from audit_log where event = 'certificate.renew_replayed' and target_id = ${old.credentialId}`;
    t.equal(replays[0]!.n, 1);
  });

  await t.test('generated-key renewal with revokeOld: the old one is superseded in the same commit', async (t) => {
    const old = await issue();
    const renewed = (await ok(ts, admin, RENEW_GENERATED, { i: { credentialId: old.credentialId, idempotencyKey: 'g1', revokeOld: true } })).renewGeneratedCertificateV2;
    t.match(renewed.privateKeyPem, /BEGIN PRIVATE KEY/);
    t.equal(keyPublicKey(renewed.privateKeyPem), certPublicKey(renewed.certificate.certificatePem));
    const [oldRow] = await sql`select status, revocation_reason from credentials where id = ${old.credentialId}`;
    t.same([oldRow!.status, oldRow!.revocation_reason], ['revoked', 'superseded']);
    const [entry] = await sql`select reason from certificate_revocations where credential_id = ${old.credentialId}`;
    t.equal(entry!.reason, 'superseded');
    const replay = (await ok(ts, admin, RENEW_GENERATED, { i: { credentialId: old.credentialId, idempotencyKey: 'g1', revokeOld: true } })).renewGeneratedCertificateV2;
    t.equal(replay.idempotentReplay, true);
    t.equal(replay.privateKeyPem, null);
  });

  await t.test('a revoked certificate does not renew', async (t) => {
    const old = await issue();
    await ok(ts, admin, REVOKE, { i: { credentialId: old.credentialId } });
    const [e] = await fails(ts, admin, RENEW_CSR, { i: { credentialId: old.credentialId, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'x' } });
    t.match(e!.message, 'certificate is revoked');
  });

  await t.test('after the tenant issuer rotates, renewal comes from the new issuer', async (t) => {
    const old = await issue();
    const rotated = (await ok(ts, admin, 'mutation ($t: ID!) { provisionTenantAuthorityAutomatically(tenantId: $t) { authority { id } replacedAuthorityIds } }', { t: tenantId }))
      .provisionTenantAuthorityAutomatically;
    t.same(rotated.replacedAuthorityIds, [old.issuerId]);
    const renewed = (await ok(ts, admin, RENEW_CSR, { i: { credentialId: old.credentialId, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'rot' } })).renewCertificateFromCsrV2;
    t.equal(renewed.certificate.issuerId, rotated.authority.id);
    t.match(opensslVerify(ca.root, renewed.chainPem, renewed.certificate.certificatePem), /OK$/);
  });
});
