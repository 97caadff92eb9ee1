// Publication with the issuers' keys on a SoftHSM2 token (through the test shim, which can make C_Sign
// fail on demand): openssl's OCSP client sees good, revoked with reason and unknown, with and without a
// nonce, and reads the CRL; when the PKCS#11 breaker is open fresh signatures fail fast (tryLater, the
// module not called) while cached answers keep serving until their nextUpdate, and issuance answers
// SERVICE_UNAVAILABLE at once, writing nothing.
import t from 'tap';
import { AUTH_ENV, adminToken } from '../../helpers/auth.js';
import { createEntity, createTenant, fails } from '../../helpers/management.js';
import { buildPkcs11Shim } from '../../helpers/pkcs11-shim.js';
import { ISSUE_CSR, makeCaFiles, opensslCsr } from '../../helpers/pki.js';
import { firstPem, issueLeaf, opensslOcsp, revokeLeaf, sh, tempDir } from '../../helpers/publication.js';
import { startTestService } from '../../helpers/service.js';
import { createSoftHsmToken } from '../../helpers/softhsm.js';

const shim = buildPkcs11Shim(t);
const token = createSoftHsmToken(t, { modulePath: shim.modulePath });

t.test('CRL and OCSP signed on a PKCS#11 token', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startTestService(t, {
    ...AUTH_ENV, ...ca.env, ...token.env, SVC_PKI_PUBLICATION_ADDR: '127.0.0.1:0',
    SVC_PKI_PKCS11_CIRCUIT_FAILURE_THRESHOLD: '3', SVC_PKI_PKCS11_CIRCUIT_RESET_SECS: '60', SVC_PKI_PKCS11_MAX_RETRIES: '0',
  });
  const admin = await adminToken(ts);
  const tenantId = await createTenant(ts, admin, 'hsm');
  const device = await createEntity(ts, admin, { kind: 'device', name: 'd', tenantId });
  const [row] = await ts.service.sql`select key_ref from pki_authorities where tenant_id = ${tenantId} and status = 'active'`;
  t.match(row!.key_ref, { backend: 'pkcs11' }, 'the tenant issuer key is on the token');
  const file = tempDir(t);
  const leaf = await issueLeaf(ts, admin, ca.dir, device);
  const kept = await issueLeaf(ts, admin, ca.dir, device);
  const issuer = file('issuer.pem', firstPem(leaf.chainPem));
  const leafFile = file('leaf.pem', leaf.certificatePem);
  const keptFile = file('kept.pem', kept.certificatePem);
  const pub = ts.url('pki_publication');
  const ocsp = (target: { cert?: string; serial?: string }, extra: string[] = []) => opensslOcsp(pub, leaf.issuerId, { issuer, cafile: ca.root, ...target }, extra);

  for (const extra of [[], ['-no_nonce']]) {
    const out = await ocsp({ cert: leafFile }, extra);
    t.match(out, /leaf\.pem: good/);
    t.match(out, /Response verify OK/);
    t.notMatch(out, /WARNING/);
  }
  t.match(await ocsp({ serial: '0x1234567890' }), /: unknown/);
  await revokeLeaf(ts, admin, leaf, 'key_compromise');
  for (const extra of [[], ['-no_nonce']]) {
    const out = await ocsp({ cert: leafFile }, extra);
    t.match(out, /leaf\.pem: revoked/);
    t.match(out, /Reason: keyCompromise/);
    t.match(out, /Response verify OK/);
  }
  const der = Buffer.from(await (await fetch(`${pub}/certs/issuers/${leaf.issuerId}/crl`)).arrayBuffer());
  const crl = await sh('openssl', ['crl', '-inform', 'DER', '-noout', '-text', '-CAfile', issuer], { input: der });
  t.match(crl, /verify OK/);
  t.match(crl, new RegExp(`Serial Number: ${leaf.serialNumber.toUpperCase()}`));
  t.match(crl, /Key Compromise/);

  await t.test('an open breaker: fresh signatures fail fast, cached answers keep serving', async (t) => {
    // Cached while the token is well.
    t.match(await ocsp({ cert: keptFile }, ['-no_nonce']), /kept\.pem: good/);
    shim.set('fail 48');
    for (let i = 0; i < 3; i++) t.match(await ocsp({ cert: keptFile }), /trylater/i, `nonce request ${i + 1} while the token fails`);
    t.match(ts.service.caKeys.describe(), { pkcs11: { circuit: 'open' } });
    const calls = shim.calls();
    const started = performance.now();
    t.match(await ocsp({ cert: keptFile }), /trylater/i, 'tryLater while open');
    t.ok(performance.now() - started < 2000, 'at once');
    t.equal(shim.calls(), calls, 'the module was not called');
    const cached = await ocsp({ cert: keptFile }, ['-no_nonce']);
    t.match(cached, /kept\.pem: good/, 'the cached answer is still served');
    t.match(cached, /Response verify OK/);

    const certificates = async () => Number((await ts.service.sql`
      select count(*) from credentials where entity_id = ${device} and kind = 'certificate'`)[0]!.count);
    const before = await certificates();
    const refused = await fails(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'while-open' } });
    t.equal(refused[0]!.extensions.code, 'SERVICE_UNAVAILABLE', 'issuance answers SERVICE_UNAVAILABLE while the breaker is open');
    t.match(refused[0]!.message, /circuit breaker open/);
    t.equal(shim.calls(), calls, 'the module was still not called');
    t.equal(await certificates(), before, 'nothing written');
    shim.set('pass');
  });
});
