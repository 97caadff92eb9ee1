// EST (RFC 7030) with curl and openssl as a device would run them: cacerts → simpleenroll (Basic with the
// entity id and shared key, and Bearer) → simplereenroll presenting the issued certificate → serverkeygen,
// each answer decoded with `openssl pkcs7` and checked with `openssl verify`; csrattrs parsed by openssl.
// Labelled routes (/.well-known/est/<tenant alias>/...) enroll only that tenant's entities; a retried
// serverkeygen gets a new key and certificate (keys are never kept); a client that goes away mid-request
// is logged at debug, without a stack.
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import t from 'tap';
import { AUTH_ENV, adminToken, login, startAuthService } from '../../helpers/auth.js';
import { curl, enrollmentEnv, estCsrFile, openssl, pkcs7Certs } from '../../helpers/enrollment.js';
import { createEntity, createTenant, ok } from '../../helpers/management.js';
import { certPublicKey, keyPublicKey, makeCaFiles, opensslVerify } from '../../helpers/pki.js';
import { capturingLogger, startTestService } from '../../helpers/service.js';
import { waitUntil } from '../../helpers/wait.js';

const PKCS10 = ['-H', 'content-type: application/pkcs10'];

t.test('EST flow', async (t) => {
  const ca = makeCaFiles(t);
  const { env, serverCert } = await enrollmentEnv(ca, { SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED: 'true' });
  const logged = capturingLogger();
  const ts = await startTestService(t, { ...AUTH_ENV, ...env }, undefined, { log: logged.log });
  const est = `https://127.0.0.1:${ts.service.ports.enrollment}/.well-known/est`;
  const admin = await adminToken(ts);
  const tenantId = await createTenant(ts, admin, 'acme', 'acme');
  const otherTenant = await createTenant(ts, admin, 'globex', 'globex');
  const device = await createEntity(ts, admin, { kind: 'device', name: 'est-device', tenantId });
  const sharedKey = (await ok(ts, admin, 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', { e: device })).createSharedKey.key as string;
  const basic = ['-u', `${device}:${sharedKey}`];
  const f = (name: string) => path.join(ca.dir, name);

  await t.test('cacerts → simpleenroll → simplereenroll → serverkeygen, verified by openssl', async (t) => {
    const cacerts = await curl(`${est}/cacerts`, serverCert);
    t.equal(cacerts.status, 200);
    t.match(cacerts.headers['content-type'], 'application/pkcs7-mime; smime-type=certs-only');
    t.equal(cacerts.headers['content-transfer-encoding'], 'base64');
    const platform = await pkcs7Certs(ca.dir, cacerts.body);
    t.equal(platform.split('BEGIN CERTIFICATE').length - 1, 3, 'unlabelled: root, platform intermediate and platform leaf issuer');
    t.match(platform, readFileSync(ca.root, 'utf8').trim().split('\n')[1]!, 'the root is among them');
    // The tenant's own chain is under its label (the alias): what its devices verify their certificates with.
    const labelled = await curl(`${est}/acme/cacerts`, serverCert);
    t.equal(labelled.status, 200);
    const anchors = await pkcs7Certs(ca.dir, labelled.body);
    writeFileSync(f('cacerts.pem'), anchors);
    t.equal(anchors.split('BEGIN CERTIFICATE').length - 1, 3, 'labelled: root, platform intermediate and the tenant CA');

    const csr = await estCsrFile(ca.dir);
    const enrolled = await curl(`${est}/simpleenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`, ...basic]);
    t.equal(enrolled.status, 200, enrolled.status === 200 ? 'issued' : enrolled.body);
    t.match(enrolled.headers['content-type'], 'application/pkcs7-mime; smime-type=certs-only');
    const leaf = await pkcs7Certs(ca.dir, enrolled.body);
    writeFileSync(f('est-leaf.pem'), leaf);
    t.match(opensslVerify(ca.root, anchors, leaf), /OK$/, 'openssl verify against the cacerts answer');
    t.equal(certPublicKey(leaf), keyPublicKey(readFileSync(csr.keyPath, 'utf8')), 'the certificate carries the CSR key');
    const fingerprint = new X509Certificate(leaf).fingerprint256.replace(/:/g, '').toLowerCase();
    const [row] = await ts.service.sql`select entity_id from credentials where kind = 'certificate' and metadata ->> 'fingerprint_sha256' = ${fingerprint}`;
    t.equal(row?.entity_id, device);

    const retried = await curl(`${est}/simpleenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`, ...basic]);
    t.equal(await pkcs7Certs(ca.dir, retried.body), leaf, 'a retried request gets the same certificate');

    const next = await estCsrFile(ca.dir, csr.keyPath);
    const renewed = await curl(`${est}/simplereenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${next.file}`,
      '--cert', f('est-leaf.pem'), '--key', csr.keyPath]);
    t.equal(renewed.status, 200, renewed.status === 200 ? 'renewed' : renewed.body);
    const renewedLeaf = await pkcs7Certs(ca.dir, renewed.body);
    t.not(renewedLeaf, leaf);
    t.match(opensslVerify(ca.root, anchors, renewedLeaf), /OK$/);

    const keygen = await curl(`${est}/serverkeygen`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${(await estCsrFile(ca.dir)).file}`, ...basic]);
    t.equal(keygen.status, 200, keygen.status === 200 ? 'generated' : keygen.body);
    const boundary = /boundary=([^;\s]+)/.exec(keygen.headers['content-type'] ?? '')?.[1];
    t.ok(boundary, 'multipart/mixed with a boundary');
    t.match(keygen.headers['content-type'], /^multipart\/mixed/);
    const parts = keygen.body.split(`--${boundary}`).slice(1, -1).map((p) => {
      const [head, body] = p.split('\r\n\r\n') as [string, string];
      return { type: /content-type: ([^\r\n]+)/i.exec(head)?.[1], body };
    });
    t.equal(parts[0]?.type, 'application/pkcs8');
    t.match(parts[1]?.type, 'application/pkcs7-mime; smime-type=certs-only');
    writeFileSync(f('keygen.key.b64'), parts[0]!.body);
    await openssl(['base64', '-d', '-in', f('keygen.key.b64'), '-out', f('keygen.key.der')]);
    const keyPem = await openssl(['pkey', '-inform', 'DER', '-in', f('keygen.key.der')]);
    t.match(keyPem, /BEGIN PRIVATE KEY/);
    const keygenLeaf = await pkcs7Certs(ca.dir, parts[1]!.body);
    t.match(opensslVerify(ca.root, anchors, keygenLeaf), /OK$/);
    t.equal(certPublicKey(keygenLeaf), keyPublicKey(keyPem), 'the key returned is the certificate key');
  });

  await t.test('csrattrs lists what the profile accepts', async (t) => {
    const r = await curl(`${est}/csrattrs`, serverCert);
    t.equal(r.status, 200);
    t.equal(r.headers['content-type'], 'application/csrattrs');
    writeFileSync(f('attrs.b64'), r.body);
    await openssl(['base64', '-d', '-in', f('attrs.b64'), '-out', f('attrs.der')]);
    const parsed = await openssl(['asn1parse', '-inform', 'DER', '-in', f('attrs.der')]);
    t.match(parsed, 'id-ecPublicKey');
    t.match(parsed, 'prime256v1');
  });

  await t.test('Bearer works for simpleenroll; refusals name what was wrong', async (t) => {
    const session = await login(ts, device, sharedKey, { kind: 'shared_key' });
    const csr = await estCsrFile(ca.dir);
    const bearer = await curl(`${est}/simpleenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`, '-H', `authorization: Bearer ${session.token}`]);
    t.equal(bearer.status, 200);
    const none = await curl(`${est}/simpleenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`]);
    t.equal(none.status, 401);
    t.equal(none.headers['www-authenticate'], 'Basic realm="est"');
    const wrong = await curl(`${est}/simpleenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`, '-u', `${device}:wrong-key`]);
    t.equal(wrong.status, 401);
    const type = await curl(`${est}/simpleenroll`, serverCert, ['-X', 'POST', '-H', 'content-type: text/plain', '--data-binary', `@${csr.file}`, ...basic]);
    t.equal(type.status, 415);
    const garbage = await curl(`${est}/simpleenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', 'not base64 !!', ...basic]);
    t.equal(garbage.status, 400);
    t.match(JSON.parse(garbage.body).error, 'base64');
    const noCert = await curl(`${est}/simplereenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`, ...basic]);
    t.equal(noCert.status, 401, 'Basic does not re-enroll: the certificate does');
    // A device of another tenant with its own key cannot enroll as this one.
    const stranger = await createEntity(ts, admin, { kind: 'device', name: 'stranger', tenantId: otherTenant });
    const strangerKey = (await ok(ts, admin, 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', { e: stranger })).createSharedKey.key as string;
    const crossed = await curl(`${est}/simpleenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`, '-u', `${device}:${strangerKey}`]);
    t.equal(crossed.status, 401, "another tenant's key does not authenticate this device");
  });
  /** The multipart answer of serverkeygen: the key (PKCS#8 PEM) and the certificate (PEM), through openssl. */
  async function keygenParts(body: string, contentType: string | undefined, name: string) {
    const boundary = /boundary=([^;\s]+)/.exec(contentType ?? '')?.[1];
    const parts = body.split(`--${boundary}`).slice(1, -1).map((p) => p.split('\r\n\r\n')[1]!);
    writeFileSync(f(`${name}.key.b64`), parts[0]!);
    await openssl(['base64', '-d', '-in', f(`${name}.key.b64`), '-out', f(`${name}.key.der`)]);
    return { keyPem: await openssl(['pkey', '-inform', 'DER', '-in', f(`${name}.key.der`)]), certPem: await pkcs7Certs(ca.dir, parts[1]!) };
  }

  await t.test('a retried serverkeygen gets a new key and certificate: the key is never kept, so nothing can be replayed', async (t) => {
    const csr = await estCsrFile(ca.dir);
    const ask = () => curl(`${est}/serverkeygen`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`, ...basic]);
    const first = await ask();
    const retried = await ask();
    t.equal(first.status, 200);
    t.equal(retried.status, 200);
    const a = await keygenParts(first.body, first.headers['content-type'], 'retry-a');
    const b = await keygenParts(retried.body, retried.headers['content-type'], 'retry-b');
    t.not(a.certPem, b.certPem, 'two certificates');
    t.not(keyPublicKey(a.keyPem), keyPublicKey(b.keyPem), 'two keys');
    t.equal(certPublicKey(b.certPem), keyPublicKey(b.keyPem), 'each answer pairs its key with its certificate');
    t.equal(certPublicKey(a.certPem), keyPublicKey(a.keyPem));
  });

  await t.test('labelled routes enroll the entities of the tenant the label names, and no other', async (t) => {
    const csr = await estCsrFile(ca.dir);
    const own = await curl(`${est}/acme/simpleenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`, ...basic]);
    t.equal(own.status, 200, 'under its tenant\'s alias');
    const leaf = await pkcs7Certs(ca.dir, own.body);
    const anchors = await pkcs7Certs(ca.dir, (await curl(`${est}/${tenantId}/cacerts`, serverCert)).body);
    t.match(opensslVerify(ca.root, anchors, leaf), /OK$/, 'verifies with the chain under the tenant id label');
    writeFileSync(f('labelled-leaf.pem'), leaf);
    const renewed = await curl(`${est}/acme/simplereenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${(await estCsrFile(ca.dir, csr.keyPath)).file}`,
      '--cert', f('labelled-leaf.pem'), '--key', csr.keyPath]);
    t.equal(renewed.status, 200, 'simplereenroll under the label');
    const other = await curl(`${est}/globex/simpleenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`, ...basic]);
    const unknown = await curl(`${est}/nowhere/simpleenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`, ...basic]);
    t.equal(other.status, 404, 'another tenant\'s label');
    t.same(other.body, unknown.body, 'answered like an unknown label');
    const anonymous = await curl(`${est}/globex/simpleenroll`, serverCert, ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`]);
    t.equal(anonymous.status, 401, 'authentication comes first: the label tells an anonymous caller nothing');
  });

  await t.test('a client that goes away mid-request is logged at debug, without a stack', async (t) => {
    const before = logged.entries.length;
    // Expect: 100-continue makes the listener say when the request reached its handler; then the client leaves.
    const socket = tlsConnect({ host: '127.0.0.1', port: ts.service.ports.enrollment!, rejectUnauthorized: false });
    await new Promise<void>((resolve, reject) => {
      socket.once('secureConnect', () => socket.write(['POST /.well-known/est/simpleenroll HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/pkcs10',
        'Content-Length: 4000', 'Expect: 100-continue', '', ''].join('\r\n')));
      socket.once('data', (chunk) => (/^HTTP\/1\.1 100/.test(chunk.toString()) ? resolve() : reject(new Error(chunk.toString()))));
      socket.once('error', reject);
    });
    socket.write('MIIB');
    socket.destroy();
    await waitUntil(() => logged.entries.slice(before).some((e) => e.msg === 'enrollment client went away before its answer'), 5000, 'the abort logged');
    const since = logged.entries.slice(before);
    const entry = since.find((e) => e.msg === 'enrollment client went away before its answer')!;
    t.equal(entry.level, 'debug');
    t.notMatch(JSON.stringify(entry), /stack|\n\s+at /, 'no stack trace');
    t.same(since.filter((e) => e.level === 'error' || e.level === 'warn'), [], 'nothing at warn or error');
  });
});

t.test('serverkeygen follows the generated-key flag', async (t) => {
  const ca = makeCaFiles(t);
  const { env, serverCert } = await enrollmentEnv(ca);
  const ts = await startAuthService(t, env);
  const admin = await adminToken(ts);
  const device = await createEntity(ts, admin, { kind: 'device', name: 'd', tenantId: await createTenant(ts, admin, 'acme') });
  const key = (await ok(ts, admin, 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', { e: device })).createSharedKey.key as string;
  const csr = await estCsrFile(ca.dir);
  const r = await curl(`https://127.0.0.1:${ts.service.ports.enrollment}/.well-known/est/serverkeygen`, serverCert,
    ['-X', 'POST', ...PKCS10, '--data-binary', `@${csr.file}`, '-u', `${device}:${key}`]);
  t.equal(r.status, 404);
  t.match(JSON.parse(r.body).error, 'SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED');
});
