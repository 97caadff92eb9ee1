// Certificate profiles over GraphQL: validation, grants (pki.provision on the tenant or platform), an
// issuer's default profile, and what a profile decides at issuance: key algorithms, TTL bounds, extended
// key usages, SAN rules and the renewal window.
import t from 'tap';
import { adminToken, startAuthService } from '../../helpers/auth.js';
import { createEntity, createTenant, createUser, fails, ok } from '../../helpers/management.js';
import { ISSUE_CSR, makeCaFiles, opensslCsr, opensslText, opensslVerify } from '../../helpers/pki.js';

const FIELDS = 'id tenantId name description keyAlgorithms minTtlSecs defaultTtlSecs maxTtlSecs extendedKeyUsages sanRules { allowDnsNames allowIpAddresses dnsSuffixes maxNames } renewalWindowSecs isSystem createdAt updatedAt';
const CREATE = `mutation ($i: CreateCertificateProfileInput!) { createCertificateProfile(input: $i) { ${FIELDS} } }`;
const UPDATE = `mutation ($id: ID!, $i: UpdateCertificateProfileInput!) { updateCertificateProfile(id: $id, input: $i) { ${FIELDS} } }`;
const DELETE = 'mutation ($id: ID!) { deleteCertificateProfile(id: $id) }';
const LIST = `query ($t: ID) { certificateProfiles(tenantId: $t) { ${FIELDS} } }`;
const SET_DEFAULT = 'mutation ($a: ID!, $p: ID!) { setAuthorityDefaultProfile(authorityId: $a, profileId: $p) { id defaultProfileId } }';

t.test('certificate profiles', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, ca.env);
  const admin = await adminToken(ts);
  const owner = await createUser(ts, 'owner');
  const tenantId = await createTenant(ts, owner.token, 'acme');
  const otherTenant = await createTenant(ts, admin, 'other');
  const device = await createEntity(ts, owner.token, { kind: 'device', name: 'd', tenantId });
  const [issuer] = await ts.service.sql<{ id: string }[]>`select id from pki_authorities where tenant_id = ${tenantId} and status = 'active'`;
  let n = 0;

  await t.test('the platform default profile and listings', async (t) => {
    const platform = (await ok(ts, owner.token, LIST, {})).certificateProfiles;
    t.match(platform, [{ name: 'default', isSystem: true, tenantId: null, keyAlgorithms: ['ecdsa_p256', 'ecdsa_p384', 'rsa_2048', 'rsa_3072', 'rsa_4096', 'ed25519'], extendedKeyUsages: ['client_auth'] }]);
    t.equal((await fails(ts, owner.token, LIST, { t: otherTenant }))[0]!.message, 'forbidden');
  });

  await t.test('creating and changing a profile needs pki.provision', async (t) => {
    t.equal((await fails(ts, owner.token, CREATE, { i: { tenantId, name: 'nope' } }))[0]!.message, 'forbidden');
    t.equal((await fails(ts, owner.token, CREATE, { i: { name: 'platform-nope' } }))[0]!.message, 'forbidden');
    const p = (await ok(ts, admin, CREATE, { i: { tenantId, name: 'x' } })).createCertificateProfile;
    t.equal((await fails(ts, owner.token, UPDATE, { id: p.id, i: { description: 'mine now' } }))[0]!.message, 'forbidden');
    t.equal((await fails(ts, owner.token, DELETE, { id: p.id }))[0]!.message, 'forbidden');
    t.equal((await fails(ts, owner.token, SET_DEFAULT, { a: issuer!.id, p: p.id }))[0]!.message, 'forbidden');
    t.ok(await ok(ts, admin, DELETE, { id: p.id }));
  });

  await t.test('validation names what is wrong', async (t) => {
    const bad = async (i: object) => (await fails(ts, admin, CREATE, { i: { tenantId, name: `v${n++}`, ...i } }))[0]!.message;
    t.match(await bad({ minTtlSecs: 600, defaultTtlSecs: 300 }), 'minTtlSecs <= defaultTtlSecs <= maxTtlSecs');
    t.match(await bad({ minTtlSecs: 30 }), 'minTtlSecs must be at least 60');
    t.match(await bad({ keyAlgorithms: [] }), 'keyAlgorithms must name at least one of');
    t.match(await bad({ sanRules: { dnsSuffixes: ['not a name'] } }), "sanRules.dnsSuffixes: 'not a name' is not a DNS name");
    t.match(await bad({ renewalWindowSecs: -1 }), 'renewalWindowSecs must be a whole number');
    t.match(await bad({ name: '  ' }), /name/);
    await ok(ts, admin, CREATE, { i: { tenantId, name: 'dup' } });
    t.equal((await fails(ts, admin, CREATE, { i: { tenantId, name: 'DUP' } }))[0]!.extensions.code, 'CONFLICT');
    t.equal((await fails(ts, admin, DELETE, { id: '00000000-0000-0000-0000-0000000000c1' }))[0]!.message, 'the platform default profile cannot be deleted');
  });

  await t.test('a profile decides key algorithms, TTL, EKUs, SANs and the renewal window', async (t) => {
    const p = (await ok(ts, admin, CREATE, { i: {
      tenantId, name: 'servers', keyAlgorithms: ['ecdsa_p384', 'ed25519'], minTtlSecs: 600, defaultTtlSecs: 3600, maxTtlSecs: 7200,
      sanRules: { allowDnsNames: true, allowIpAddresses: true, dnsSuffixes: ['example.com'], maxNames: 2 },
      renewalWindowSecs: 1800,
    } })).createCertificateProfile;
    t.same(p.extendedKeyUsages, ['client_auth'], 'client_auth is always there');
    await ok(ts, admin, SET_DEFAULT, { a: issuer!.id, p: p.id });
    const call = (csrPem: string, extra: object = {}) => ok(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem, idempotencyKey: `p${n++}`, ...extra } });
    const msg = (csrPem: string, extra: object = {}) => call(csrPem, extra).then(() => '', (e: Error) => e.message);
    t.match(await msg(opensslCsr(ca.dir).csrPem), "certificate profile 'servers' does not allow ecdsa-p256 keys (allowed: ecdsa-p384, ed25519)");
    t.match(await msg(opensslCsr(ca.dir, { key: 'ec:P-384', addext: ['subjectAltName=DNS:evil.test'] }).csrPem), 'DNS name evil.test is outside the suffixes');
    t.match(await msg(opensslCsr(ca.dir, { key: 'ec:P-384', addext: ['subjectAltName=DNS:a.example.com,DNS:b.example.com,IP:10.0.0.1'] }).csrPem), 'allows at most 2 DNS names and IP addresses');
    t.match(await msg(opensslCsr(ca.dir, { key: 'ed25519' }).csrPem, { ttlSecs: 7201 }), "ttlSecs 7201 exceeds the maximum of 7200 seconds of certificate profile 'servers'");
    const issued = (await call(opensslCsr(ca.dir, { key: 'ec:P-384', addext: ['subjectAltName=DNS:Device.Example.com,IP:192.0.2.7'] }).csrPem)).issueCertificateFromCsrV2;
    const cert = issued.certificate;
    t.match(opensslVerify(ca.root, issued.chainPem, cert.certificatePem), /OK$/);
    const text = opensslText(cert.certificatePem);
    t.match(text, /Extended Key Usage: *\n *TLS Web Client Authentication\n/);
    t.match(text, /DNS:device.example.com, IP Address:192.0.2.7/);
    t.same(cert.dnsNames, ['device.example.com']);
    t.same(cert.ipAddresses, ['192.0.2.7']);
    t.equal(cert.profileId, p.id);
    t.equal(cert.profileName, 'servers');
    t.equal(new Date(cert.expiresAt).getTime() - new Date(cert.renewalDueAt).getTime(), 1800_000, 'due for renewal 30 minutes before it expires');
    t.ok(Math.abs(new Date(cert.expiresAt).getTime() - Date.now() - 3600_000) < 60_000, 'the default TTL of the profile');
    // Changing the profile applies to the next issuance at once.
    await ok(ts, admin, UPDATE, { id: p.id, i: { keyAlgorithms: ['ecdsa_p256'] } });
    await t.resolves(call(opensslCsr(ca.dir).csrPem));
    t.equal((await fails(ts, admin, DELETE, { id: p.id }))[0]!.extensions.code, 'CONFLICT', 'a default profile cannot be deleted');
    const other = (await ok(ts, admin, CREATE, { i: { tenantId: otherTenant, name: 'theirs' } })).createCertificateProfile;
    t.match((await fails(ts, admin, SET_DEFAULT, { a: issuer!.id, p: other.id }))[0]!.message, "the profile belongs to another tenant than the authority's");
  });

  await t.test('usages beyond client_auth need SVC_PKI_PROFILE_EXTENDED_KEY_USAGES_ENABLED (off by default)', async (t) => {
    for (const eku of ['server_auth', 'code_signing']) {
      const [err] = await fails(ts, admin, CREATE, { i: { tenantId, name: `wide-${eku}`, extendedKeyUsages: ['client_auth', eku] } });
      t.match(err, { message: `extendedKeyUsages: ${eku} is not allowed: leaves are client_auth only unless the platform sets SVC_PKI_PROFILE_EXTENDED_KEY_USAGES_ENABLED=true`, extensions: { code: 'BAD_REQUEST' } });
    }
    const p = (await ok(ts, admin, CREATE, { i: { tenantId, name: 'narrow', sanRules: { allowIpAddresses: true } } })).createCertificateProfile;
    t.match((await fails(ts, admin, UPDATE, { id: p.id, i: { extendedKeyUsages: ['server_auth'] } }))[0]!.message, 'extendedKeyUsages: server_auth is not allowed');
    t.same((await ok(ts, admin, UPDATE, { id: p.id, i: { extendedKeyUsages: ['client_auth'] } })).updateCertificateProfile.extendedKeyUsages, ['client_auth']);
    // A profile stored with server_auth while the switch was on: its leaves still carry clientAuth alone.
    await ts.service.sql`update certificate_profiles set extended_key_usages = '{client_auth,server_auth}' where id = ${p.id}`;
    await ts.service.pki.authoritiesChanged({ profiles: [p.id] });
    await ok(ts, admin, SET_DEFAULT, { a: issuer!.id, p: p.id });
    const issued = (await ok(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem: opensslCsr(ca.dir, { addext: ['subjectAltName=IP:127.0.0.1'] }).csrPem, idempotencyKey: 'narrow' } })).issueCertificateFromCsrV2;
    const text = opensslText(issued.certificate.certificatePem);
    t.match(text, /Extended Key Usage: *\n *TLS Web Client Authentication\n/, 'clientAuth only');
    t.notMatch(text, /Server Authentication/);
    t.throws(() => opensslVerify(ca.root, issued.chainPem, issued.certificate.certificatePem, ['-purpose', 'sslserver']), /unsuitable certificate purpose/,
      'openssl refuses it as a TLS server certificate');
  });
});

t.test('with SVC_PKI_PROFILE_EXTENDED_KEY_USAGES_ENABLED=true a profile widens its leaves', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, { ...ca.env, SVC_PKI_PROFILE_EXTENDED_KEY_USAGES_ENABLED: 'true' });
  const admin = await adminToken(ts);
  const tenantId = await createTenant(ts, admin, 'acme');
  const device = await createEntity(ts, admin, { kind: 'device', name: 'd', tenantId });
  const [issuer] = await ts.service.sql<{ id: string }[]>`select id from pki_authorities where tenant_id = ${tenantId} and status = 'active'`;
  const p = (await ok(ts, admin, CREATE, { i: { tenantId, name: 'servers', extendedKeyUsages: ['server_auth'], sanRules: { allowIpAddresses: true } } })).createCertificateProfile;
  t.same(p.extendedKeyUsages, ['client_auth', 'server_auth'], 'client_auth is always there');
  await ok(ts, admin, SET_DEFAULT, { a: issuer!.id, p: p.id });
  const issued = (await ok(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem: opensslCsr(ca.dir, { addext: ['subjectAltName=IP:127.0.0.1'] }).csrPem, idempotencyKey: 'wide' } })).issueCertificateFromCsrV2;
  t.match(opensslText(issued.certificate.certificatePem), /TLS Web Client Authentication, TLS Web Server Authentication/);
  t.match(opensslVerify(ca.root, issued.chainPem, issued.certificate.certificatePem, ['-purpose', 'sslserver']), /OK$/);
});
