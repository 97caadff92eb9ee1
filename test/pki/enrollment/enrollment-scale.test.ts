// The enrollment listener with more tenant CAs than one TLS CertificateRequest can name (its CA list is
// capped at 65,535 bytes, about 936 tenant-CA subjects; beyond that every handshake used to fail with alert
// 80): the handshake names only the root (asserted from `openssl s_client`), a device of the 1,000th tenant
// enrolls and re-enrolls with curl presenting its certificate, and what anonymous callers get stays O(1) in
// tenants: the unlabelled EST cacerts and the trust bundle hold the platform chain, a labelled cacerts that
// tenant's chain only, and an unknown label answers exactly like a tenant without a CA. Once its tenant CA
// stops vouching (as a revoked CA will), the device's certificate is refused.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { AUTH_ENV, adminToken, login } from '../../helpers/auth.js';
import { createTestDatabase } from '../../helpers/database.js';
import { curl, curlJson, enrollmentEnv, openssl, pkcs7Certs } from '../../helpers/enrollment.js';
import { createEntity, createTenant, ok } from '../../helpers/management.js';
import { makeCaFiles, opensslCsr, opensslVerify } from '../../helpers/pki.js';
import { startTestService } from '../../helpers/service.js';
import { bulkTenantAuthorities } from '../../helpers/tenant-cas.js';

const TENANT_CAS = 1_100;
const count = (pem: string) => (pem.match(/BEGIN CERTIFICATE/g) ?? []).length;

/** The "Acceptable client certificate CA names" of a handshake, as `openssl s_client` prints them. */
async function acceptableCaNames(port: number): Promise<string[]> {
  const out = await openssl(['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'localhost'], '');
  const block = /Acceptable client certificate CA names\n([\s\S]*?)\n(?:Requested Signature|Client Certificate Types|Shared Requested)/.exec(out);
  if (!block) throw new Error(`no acceptable CA names in the handshake:\n${out.slice(0, 2000)}`);
  return block[1]!.split('\n').filter((l) => l.trim() !== '');
}

t.test(`enrollment with ${TENANT_CAS} tenant CAs`, async (t) => {
  const ca = makeCaFiles(t);
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  // One instance provisions (the fixture), a second one serves enrollment from its start with every CA there.
  const first = await startTestService(t, { ...AUTH_ENV, ...ca.env }, db);
  const admin = await adminToken(first);
  await createTenant(first, admin, 'template', 'template');
  const [template] = await first.service.sql`select * from pki_authorities where kind = 'tenant_intermediate'`;
  const started = Date.now();
  const { tenantIds: tenants, subjectBytes } = await bulkTenantAuthorities(first.service.sql, ca, template as never, TENANT_CAS);
  t.comment(`${TENANT_CAS} tenant CAs made and stored in ${Date.now() - started} ms`);
  t.ok(subjectBytes > 65_535, `their subjects would take ${subjectBytes} bytes of a CertificateRequest (limit 65,535)`);

  const { env, serverCert } = await enrollmentEnv(ca);
  const ts = await startTestService(t, { ...AUTH_ENV, ...env }, db);
  const base = `https://127.0.0.1:${ts.service.ports.enrollment}`;
  const last = tenants[tenants.length - 1]!;
  let held: { certPath: string; keyPath: string } | undefined;

  await t.test('the handshake names the root alone', async (t) => {
    const names = await acceptableCaNames(ts.service.ports.enrollment!);
    t.same(names, ['O = svc tests, CN = test root CA'], 'one acceptable CA: the root');
  });

  await t.test(`a device of the ${TENANT_CAS}th tenant enrolls, then re-enrolls with its certificate (curl)`, async (t) => {
    const device = await createEntity(ts, admin, { kind: 'device', name: 'far-device', tenantId: last });
    const key = (await ok(ts, admin, 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', { e: device })).createSharedKey.key as string;
    const session = await login(ts, device, key, { kind: 'shared_key' });
    const csr = opensslCsr(ca.dir);
    const enrolled = await curlJson(`${base}/pki/enroll`, serverCert, { csr_pem: csr.csrPem, idempotency_key: 'scale-1' }, ['-H', `authorization: Bearer ${session.token}`]);
    t.equal(enrolled.status, 201, enrolled.body);
    t.equal(enrolled.json.tenant_id, last);
    const certPath = path.join(ca.dir, 'far-device.pem');
    writeFileSync(certPath, enrolled.json.certificate_pem);
    const renewed = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: opensslCsr(ca.dir).csrPem, idempotency_key: 'scale-2' },
      ['--cert', certPath, '--key', csr.keyPath]);
    t.equal(renewed.status, 201, renewed.body);
    t.equal(renewed.json.entity_id, device, 'the certificate presented named the credential renewed');
    t.match(opensslVerify(ca.root, renewed.json.chain_pem, renewed.json.certificate_pem), /OK$/);
    held = { certPath, keyPath: csr.keyPath };
  });

  await t.test('cacerts, the trust bundle and labels stay O(1) in tenants', async (t) => {
    const platform = await pkcs7Certs(ca.dir, (await curl(`${base}/.well-known/est/cacerts`, serverCert)).body);
    t.equal(count(platform), 3, 'unlabelled cacerts: root, platform intermediate, platform leaf issuer');
    const bundle = await (await fetch(`${ts.url()}/certs/trust-bundle.pem`)).text();
    t.equal(count(bundle), 3, 'the trust bundle: the same platform chain');
    t.notMatch(bundle + platform, /tenant-/, 'no tenant CA in either');
    for (const label of [`bulk-${TENANT_CAS}`, last]) {
      const r = await curl(`${base}/.well-known/est/${label}/cacerts`, serverCert);
      t.equal(r.status, 200, `cacerts under label ${label === last ? 'the tenant id' : 'the alias'}`);
      const chain = await pkcs7Certs(ca.dir, r.body);
      t.equal(count(chain), 3, 'root, platform intermediate, the tenant CA');
      // `openssl pkcs7 -print_certs` heads each certificate with its subject.
      const subjects = chain.match(/^subject=.*$/gm) ?? [];
      t.same(subjects.filter((s) => s.includes('tenant-')), [`subject=CN = tenant-${last} CA ${subjects.find((s) => s.includes('tenant-'))?.slice(-8)}`], 'that tenant\'s CA alone');
      t.match(subjects.join('\n'), /root CA[\s\S]*platform intermediate/, 'under the root and the platform intermediate');
    }
    const csrattrs = await curl(`${base}/.well-known/est/bulk-${TENANT_CAS}/csrattrs`, serverCert);
    t.equal(csrattrs.status, 200, 'labelled csrattrs');
    // A tenant without a CA (made after the start, so not provisioned), an unknown alias and a malformed label: one answer.
    await ts.service.sql`insert into tenants (name, alias) values ('bare', 'bare')`;
    const answers = await Promise.all(['bare', 'no-such-tenant', '00000000-0000-4000-8000-000000000000', 'bad%20label']
      .map((label) => curl(`${base}/.well-known/est/${label}/cacerts`, serverCert)));
    for (const a of answers) t.same({ status: a.status, body: a.body }, { status: answers[0]!.status, body: answers[0]!.body });
    t.equal(answers[0]!.status, 404);
  });

  await t.test('a certificate under an authority that no longer vouches for it is refused', async (t) => {
    // The tenant CA taken out of service (failed; a revoked CA is refused the same way), as every instance hears it.
    const [authority] = await ts.service.sql`
      update pki_authorities set status = 'failed', issuance_enabled = false where tenant_id = ${last} returning id`;
    await ts.service.pki.authoritiesChanged({ authorities: [authority!.id], tenants: [last] });
    const r = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: opensslCsr(ca.dir).csrPem, idempotency_key: 'scale-3' },
      ['--cert', held!.certPath, '--key', held!.keyPath]);
    t.equal(r.status, 401);
    t.match(r.json.error, `client certificate is no longer trusted: its issuing authority ${authority!.id} (tenant intermediate) is failed`);
  });
});
