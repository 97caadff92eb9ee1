// Native enrollment over the TLS listener with real clients: a device enrolls with its session token
// (replay returns the same certificate), then re-enrolls with curl --cert/--key presenting that
// certificate; revoked, expired, unknown and foreign-CA certificates are refused with their reason; bearer
// credentials never stand in for the certificate; the subject cannot be chosen; other tenants stay apart.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { adminToken, login, startAuthService, accessTokenFor } from '../../helpers/auth.js';
import { curl, curlJson, enrollmentEnv, openssl } from '../../helpers/enrollment.js';
import { createEntity, createTenant, ok } from '../../helpers/management.js';
import { REVOKE, makeCaFiles, opensslCsr, opensslVerify } from '../../helpers/pki.js';

t.test('native enrollment', async (t) => {
  const ca = makeCaFiles(t);
  const { env, serverCert } = await enrollmentEnv(ca);
  const ts = await startAuthService(t, env);
  const base = `https://127.0.0.1:${ts.service.ports.enrollment}`;
  const admin = await adminToken(ts);
  const sql = ts.service.sql;
  const tenantA = await createTenant(ts, admin, 'acme');
  const tenantB = await createTenant(ts, admin, 'globex');

  async function deviceWithSession(tenantId: string, name: string) {
    const id = await createEntity(ts, admin, { kind: 'device', name, tenantId });
    const key = (await ok(ts, admin, 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', { e: id })).createSharedKey.key as string;
    const session = await login(ts, id, key, { kind: 'shared_key' });
    return { id, key, token: session.token };
  }
  const device = await deviceWithSession(tenantA, 'sensor-a');
  const other = await deviceWithSession(tenantB, 'sensor-b');
  const bearer = (token: string) => ['-H', `authorization: Bearer ${token}`];
  let n = 0;
  /** Enrolls a device and keeps its certificate and key in files, as the device would. */
  async function enrolled(who: { token: string }) {
    const csr = opensslCsr(ca.dir);
    const r = await curlJson(`${base}/pki/enroll`, serverCert, { csr_pem: csr.csrPem, idempotency_key: `k${n++}` }, bearer(who.token));
    if (r.status !== 201) throw new Error(`enroll failed: ${r.status} ${r.body}`);
    const certPath = path.join(ca.dir, `${r.json.credential_id}.pem`);
    writeFileSync(certPath, r.json.certificate_pem);
    return { ...r.json, certPath, keyPath: csr.keyPath, tls: ['--cert', certPath, '--key', csr.keyPath] } as Record<string, any>;
  }

  await t.test('first enrollment with a session token; a replay returns the same certificate', async (t) => {
    const csr = opensslCsr(ca.dir);
    const body = { csr_pem: csr.csrPem, ttl_secs: 3600, idempotency_key: 'first' };
    const r = await curlJson(`${base}/pki/enroll`, serverCert, body, bearer(device.token));
    t.equal(r.status, 201, r.status === 201 ? 'created' : r.body);
    t.equal(r.json.entity_id, device.id);
    t.equal(r.json.tenant_id, tenantA);
    t.equal(r.json.idempotent_replay, false);
    t.ok(r.json.credential_id && r.json.issuer_id && r.json.profile_id && r.json.serial_number && r.json.renewal_due_at);
    t.match(opensslVerify(ca.root, r.json.chain_pem, r.json.certificate_pem), /OK$/);
    t.match(r.headers['x-request-id'], /.+/);
    const again = await curlJson(`${base}/pki/enroll`, serverCert, body, bearer(device.token));
    t.equal(again.status, 200);
    t.equal(again.json.idempotent_replay, true);
    t.equal(again.json.credential_id, r.json.credential_id);
    const [count] = await sql`select count(*)::int as n from credentials where entity_id = ${device.id} and kind = 'certificate'`;
    t.equal(count!.n, 1, 'one certificate, not two');
    const [outbox] = await sql`select count(*)::int as n from event_outbox where event = 'certificate.issue' and payload ->> 'credential_id' = ${r.json.credential_id}`;
    t.equal(outbox!.n, 1, 'outbox record written with the issuance');
    const reused = await curlJson(`${base}/pki/enroll`, serverCert, { ...body, ttl_secs: 7200 }, bearer(device.token));
    t.equal(reused.status, 409, 'the key used for another request conflicts');
  });

  await t.test('refusals: no credential, a scoped token, a chosen subject, bad input', async (t) => {
    const csrPem = opensslCsr(ca.dir).csrPem;
    const none = await curlJson(`${base}/pki/enroll`, serverCert, { csr_pem: csrPem, idempotency_key: 'x' });
    t.equal(none.status, 401);
    t.match(none.json.error, 'missing authentication');
    const bad = await curlJson(`${base}/pki/enroll`, serverCert, { csr_pem: csrPem, idempotency_key: 'x' }, bearer('not-a-token'));
    t.equal(bad.status, 401);
    const scoped = await accessTokenFor(ts, device.token, [{ actions: ['read'], scopeMode: 'tenant', tenantId: tenantA }]);
    const refused = await curlJson(`${base}/pki/enroll`, serverCert, { csr_pem: csrPem, idempotency_key: 'x' }, bearer(scoped.token));
    t.equal(refused.status, 403, 'a caller without the right to mint credentials is refused');
    t.match(refused.json.error, 'scoped access tokens cannot enroll');
    const chosen = await curlJson(`${base}/pki/enroll`, serverCert, { csr_pem: csrPem, idempotency_key: 'x', entity_id: other.id }, bearer(device.token));
    t.equal(chosen.status, 400);
    t.match(chosen.json.error, 'entity_id cannot be chosen');
    const tenant = await curlJson(`${base}/pki/enroll`, serverCert, { csr_pem: csrPem, idempotency_key: 'x', tenant_id: tenantB }, bearer(device.token));
    t.equal(tenant.status, 400);
    const garbage = await curlJson(`${base}/pki/enroll`, serverCert, { csr_pem: 'nope', idempotency_key: 'x' }, bearer(device.token));
    t.equal(garbage.status, 400);
    const noKey = await curlJson(`${base}/pki/enroll`, serverCert, { csr_pem: csrPem }, bearer(device.token));
    t.equal(noKey.status, 400);
    t.match(noKey.json.error, 'idempotency_key is required');
    const bigFile = path.join(ca.dir, 'big.json');
    writeFileSync(bigFile, JSON.stringify({ csr_pem: 'A'.repeat(200_000), idempotency_key: 'x' }));
    const big = await curl(`${base}/pki/enroll`, serverCert, ['-X', 'POST', '--data-binary', `@${bigFile}`, ...bearer(device.token)]);
    t.equal(big.status, 413);
    const notJson = await curl(`${base}/pki/enroll`, serverCert, ['-X', 'POST', '--data-binary', 'hello', ...bearer(device.token)]);
    t.equal(notJson.status, 400);
    const missing = await curl(`${base}/pki/nothing`, serverCert);
    t.equal(missing.status, 404);
    const method = await curl(`${base}/pki/enroll`, serverCert);
    t.equal(method.status, 405);
  });

  await t.test('re-enrollment with the certificate from the handshake (curl --cert/--key)', async (t) => {
    const held = await enrolled(device);
    const csr = opensslCsr(ca.dir);
    const r = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: csr.csrPem, idempotency_key: 'renew-1' }, held.tls);
    t.equal(r.status, 201, r.status === 201 ? 'created' : r.body);
    t.equal(r.json.entity_id, device.id);
    t.equal(r.json.profile_id, held.profile_id);
    t.not(r.json.credential_id, held.credential_id);
    t.match(opensslVerify(ca.root, r.json.chain_pem, r.json.certificate_pem), /OK$/);
    const [link] = await sql`select previous_credential_id from certificate_renewals where replacement_credential_id = ${r.json.credential_id}`;
    t.equal(link!.previous_credential_id, held.credential_id, 'the exact credential presented is the one renewed');
    const replay = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: csr.csrPem, idempotency_key: 'renew-1' }, held.tls);
    t.equal(replay.status, 200);
    t.equal(replay.json.credential_id, r.json.credential_id);
  });

  await t.test('bearer credentials never stand in for the certificate; no credential can be chosen', async (t) => {
    const held = await enrolled(device);
    const csrPem = opensslCsr(ca.dir).csrPem;
    const tokenOnly = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: csrPem, idempotency_key: 'b' }, bearer(device.token));
    t.equal(tokenOnly.status, 401);
    t.match(tokenOnly.json.error, 'client certificate is required');
    // Another tenant's device, holding its own certificate, cannot name this one.
    const foreign = await enrolled(other);
    const chosen = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: csrPem, idempotency_key: 'c', credential_id: held.credential_id }, foreign.tls);
    t.equal(chosen.status, 400);
    t.match(chosen.json.error, 'credential_id cannot be chosen');
    const own = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: csrPem, idempotency_key: 'c' }, [...foreign.tls, ...bearer(device.token)]);
    t.equal(own.status, 201);
    t.equal(own.json.entity_id, other.id, 'the certificate decides, not the bearer token');
    t.equal(own.json.tenant_id, tenantB);
  });

  await t.test('a revoked certificate is refused', async (t) => {
    const held = await enrolled(device);
    await ok(ts, admin, REVOKE, { i: { credentialId: held.credential_id, reason: 'key_compromise' } });
    const r = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: opensslCsr(ca.dir).csrPem, idempotency_key: 'r' }, held.tls);
    t.equal(r.status, 401);
    t.match(r.json.error, 'client certificate is revoked (key_compromise)');
  });

  await t.test('an expired certificate is refused: by the service record, and by the handshake', async (t) => {
    const held = await enrolled(device);
    await sql`update credentials set expires_at = now() - interval '1 second' where id = ${held.credential_id}`;
    const r = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: opensslCsr(ca.dir).csrPem, idempotency_key: 'e' }, held.tls);
    t.equal(r.status, 401);
    t.match(r.json.error, 'client certificate has expired');
    // A leaf whose notAfter has passed, signed by the platform intermediate with `openssl ca`.
    const leaf = await signWithIntermediate(ca, { start: '20200101000000Z', end: '20200201000000Z' });
    const old = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: opensslCsr(ca.dir).csrPem, idempotency_key: 'e2' }, leaf.tls);
    t.equal(old.status, 401);
    t.match(old.json.error, 'client certificate has expired');
  });

  await t.test('a certificate of this CA the service never issued is unknown', async (t) => {
    const leaf = await signWithIntermediate(ca, {});
    const r = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: opensslCsr(ca.dir).csrPem, idempotency_key: 'u' }, leaf.tls);
    t.equal(r.status, 401);
    t.match(r.json.error, 'client certificate is not known to this service');
  });

  await t.test('a certificate of a foreign CA is refused', async (t) => {
    const foreign = makeCaFiles(t, { name: 'foreign' });
    const leaf = await signWithIntermediate(foreign, {});
    const r = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: opensslCsr(ca.dir).csrPem, idempotency_key: 'f' }, leaf.tls);
    t.equal(r.status, 401);
    t.match(r.json.error, "not issued by this service's authorities");
    const self = path.join(ca.dir, 'self');
    await openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${self}.key`, '-out', `${self}.pem`, '-subj', '/CN=me', '-days', '1']);
    const selfSigned = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: opensslCsr(ca.dir).csrPem, idempotency_key: 'f' }, ['--cert', `${self}.pem`, '--key', `${self}.key`]);
    t.equal(selfSigned.status, 401);
    t.match(selfSigned.json.error, 'self-signed');
  });
});

/** A client certificate signed by a CA's platform intermediate with `openssl ca` (dates chosen), never recorded by the service. */
async function signWithIntermediate(ca: ReturnType<typeof makeCaFiles>, dates: { start?: string; end?: string }) {
  const id = Math.random().toString(36).slice(2, 10);
  const f = (name: string) => ca.file(`${id}-${name}`);
  writeFileSync(f('index.txt'), '');
  writeFileSync(f('ca.cnf'), [
    '[ca]', 'default_ca = own', '[own]', `database = ${f('index.txt')}`, `new_certs_dir = ${ca.dir}`, `serial = ${f('serial')}`,
    'default_md = sha256', 'policy = any', 'unique_subject = no', 'copy_extensions = none', 'x509_extensions = leaf', 'default_days = 30',
    '[any]', 'commonName = supplied', '[leaf]', 'basicConstraints = CA:FALSE', 'keyUsage = critical,digitalSignature', 'extendedKeyUsage = clientAuth', '',
  ].join('\n'));
  writeFileSync(f('serial'), `${Date.now().toString(16).padStart(16, '0')}\n`);
  const csr = opensslCsr(ca.dir, { subject: '/CN=not issued by the service' });
  writeFileSync(f('leaf.csr'), csr.csrPem);
  await openssl(['ca', '-batch', '-config', f('ca.cnf'), '-cert', ca.intermediate, '-keyfile', ca.intermediateKey, '-in', f('leaf.csr'), '-out', f('leaf.pem'),
    '-notext', ...(dates.start ? ['-startdate', dates.start] : []), ...(dates.end ? ['-enddate', dates.end] : [])]);
  // The chain the client sends: leaf and intermediate, so the handshake can verify it against the root.
  const chain = f('chain.pem');
  const { readFileSync } = await import('node:fs');
  writeFileSync(chain, readFileSync(f('leaf.pem'), 'utf8') + readFileSync(ca.intermediate, 'utf8'));
  return { tls: ['--cert', chain, '--key', csr.keyPath] };
}
