// Revocation publication with real relying-party clients: `openssl verify` on the trust bundle, `openssl
// crl` on each issuer's DER CRL (parsed back with pkijs entry for entry), `openssl ocsp` against the
// running service (good, revoked with reason, unknown; with and without nonce), the GET form with curl,
// malformed requests, and a retired issuer that still answers.
import { readFileSync } from 'node:fs';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import t from 'tap';
import { parseOcspRequest, parseOcspRequestPkijs } from '../../../src/pki/publication/ocsp-der.js';
import { adminToken, startAuthService } from '../../helpers/auth.js';
import { createEntity, createTenant, ok } from '../../helpers/management.js';
import { makeCaFiles } from '../../helpers/pki.js';
import { firstPem, issueLeaf, opensslOcsp, revokeLeaf, sh, tempDir } from '../../helpers/publication.js';

t.test('trust bundle, CRL and OCSP', async (t) => {
  const ca = makeCaFiles(t);
  // openssl's OCSP client speaks HTTP/1.0: it goes to the publication listener; fetch and curl use both.
  const ts = await startAuthService(t, { ...ca.env, SVC_PKI_PUBLICATION_ADDR: '127.0.0.1:0' });
  const base = ts.url();
  const pub = ts.url('pki_publication');
  const admin = await adminToken(ts);
  const tenantId = await createTenant(ts, admin, 'acme');
  const device = await createEntity(ts, admin, { kind: 'device', name: 'd1', tenantId });
  const file = tempDir(t);
  const leaf = await issueLeaf(ts, admin, ca.dir, device);
  const issuerPem = firstPem(leaf.chainPem);
  const issuerFile = file('issuer.pem', issuerPem);
  const leafFile = file('leaf.pem', leaf.certificatePem);

  await t.test('trust bundle: public, PEM, the platform chain; verifies an issued leaf with the issuer it names', async (t) => {
    const res = await fetch(`${base}/certs/trust-bundle.pem`);
    t.equal(res.status, 200);
    t.match(res.headers.get('content-type'), /pem/);
    const pem = await res.text();
    t.ok(pem.startsWith('-----BEGIN CERTIFICATE-----'));
    t.equal(pem.match(/BEGIN CERTIFICATE/g)?.length, 3, 'root, platform intermediate, platform leaf issuer: no tenant CA');
    const bundle = file('bundle.pem', pem);
    // A tenant's leaf: its issuer comes with it (a TLS peer's chain, or its caIssuers URL), the anchors from the bundle.
    const out = await sh('openssl', ['verify', '-CAfile', bundle, '-untrusted', issuerFile, leafFile]);
    t.match(out, /leaf\.pem: OK/, 'openssl verify -CAfile bundle -untrusted issuer leaf');
  });

  await t.test('issuer certificate (caIssuers URL) is the DER of the issuer', async (t) => {
    const res = await fetch(`${base}/certs/issuers/${leaf.issuerId}/ca.crt`);
    t.equal(res.status, 200);
    const der = Buffer.from(await res.arrayBuffer());
    const out = await sh('openssl', ['x509', '-inform', 'DER', '-noout', '-subject'], { input: der });
    t.match(out, /subject=/);
  });

  const ocsp = (extra: string[] = [], target: { cert?: string; serial?: string } = { cert: leafFile }) =>
    opensslOcsp(pub, leaf.issuerId, { issuer: issuerFile, cafile: ca.root, ...target }, extra);

  await t.test('OCSP good, with and without a nonce', async (t) => {
    const withNonce = await ocsp();
    t.match(withNonce, /leaf\.pem: good/);
    t.match(withNonce, /Response verify OK/);
    t.notMatch(withNonce, /WARNING/, 'the nonce came back');
    const noNonce = await ocsp(['-no_nonce']);
    t.match(noNonce, /leaf\.pem: good/);
    t.match(noNonce, /Response verify OK/);
    const again = await ocsp(['-no_nonce', '-resp_text']);
    t.match(again, /Responder Id: /);
    t.match(again, /Next Update: /);
  });

  await t.test('CRL before any revocation: empty, numbered, signed', async (t) => {
    const res = await fetch(`${base}/certs/issuers/${leaf.issuerId}/crl`);
    t.equal(res.status, 200);
    t.equal(res.headers.get('content-type'), 'application/pkix-crl');
    const der = Buffer.from(await res.arrayBuffer());
    const text = await sh('openssl', ['crl', '-inform', 'DER', '-noout', '-text', '-CAfile', issuerFile], { input: der });
    t.match(text, /verify OK/);
    t.match(text, /X509v3 CRL Number:\s+1\b/);
    t.match(text, /No Revoked Certificates/);
  });

  await t.test('revocation shows in OCSP and the CRL before the revoking call returned', async (t) => {
    await revokeLeaf(ts, admin, leaf, 'key_compromise');
    for (const extra of [[], ['-no_nonce']]) {
      const out = await ocsp(extra);
      t.match(out, /leaf\.pem: revoked/, `revoked ${extra.join(' ')}`);
      t.match(out, /Reason: keyCompromise/);
      t.match(out, /Revocation Time: /);
      t.match(out, /Response verify OK/);
    }
    const der = Buffer.from(await (await fetch(`${base}/certs/issuers/${leaf.issuerId}/crl`)).arrayBuffer());
    const text = await sh('openssl', ['crl', '-inform', 'DER', '-noout', '-text', '-CAfile', issuerFile], { input: der });
    t.match(text, /verify OK/);
    t.match(text, /X509v3 CRL Number:\s+2\b/, 'the number moved on');
    t.match(text, new RegExp(`Serial Number: ${leaf.serialNumber.toUpperCase()}`));
    t.match(text, /X509v3 CRL Reason Code:\s+Key Compromise/);
    const crl = pkijs.CertificateRevocationList.fromBER(der);
    t.equal(crl.version, 1, 'v2');
    t.equal(crl.revokedCertificates?.length, 1);
    t.equal(Buffer.from(crl.revokedCertificates![0]!.userCertificate.valueBlock.valueHexView).toString('hex').replace(/^00/, ''), leaf.serialNumber);
  });

  await t.test('unknown for a serial this issuer never issued', async (t) => {
    const out = await ocsp([], { serial: '0x4ab1c0ffee' });
    t.match(out, /: unknown/);
    const plain = await ocsp(['-no_nonce'], { serial: '0x4ab1c0ffee' });
    t.match(plain, /: unknown/);
  });

  await t.test('public by design, yet one tenant\'s responder says nothing of another tenant\'s certificates', async (t) => {
    const otherTenant = await createTenant(ts, admin, 'other');
    const otherDevice = await createEntity(ts, admin, { kind: 'device', name: 'd2', tenantId: otherTenant });
    const foreign = await issueLeaf(ts, admin, ca.dir, otherDevice);
    t.not(foreign.issuerId, leaf.issuerId, 'each tenant has its own issuer');
    const foreignFile = file('foreign.pem', foreign.certificatePem);
    const foreignIssuer = file('foreign-issuer.pem', firstPem(foreign.chainPem));
    // Asked at tenant one's responder, about a certificate of tenant two (its issuer named correctly): unknown.
    t.match(await opensslOcsp(pub, leaf.issuerId, { issuer: foreignIssuer, cafile: ca.root, cert: foreignFile }), /foreign\.pem: unknown/);
    // The same serial claimed under tenant one's issuer: never issued there, unknown.
    t.match(await opensslOcsp(pub, leaf.issuerId, { issuer: issuerFile, cafile: ca.root, serial: `0x${foreign.serialNumber}` }), /: unknown/);
    // Its own responder knows it; the other tenant's CRL does not list it once revoked.
    t.match(await opensslOcsp(pub, foreign.issuerId, { issuer: foreignIssuer, cafile: ca.root, cert: foreignFile }), /foreign\.pem: good/);
    await revokeLeaf(ts, admin, foreign, 'superseded');
    const der = Buffer.from(await (await fetch(`${base}/certs/issuers/${leaf.issuerId}/crl`)).arrayBuffer());
    t.notMatch(await sh('openssl', ['crl', '-inform', 'DER', '-noout', '-text'], { input: der }), new RegExp(foreign.serialNumber.toUpperCase()));
  });

  await t.test('GET form (RFC 6960 appendix A) with curl, base64 and base64url', async (t) => {
    const other = await issueLeaf(ts, admin, ca.dir, device);
    const reqFile = file('req.der');
    await sh('openssl', ['ocsp', '-issuer', issuerFile, '-cert', file('other.pem', other.certificatePem), '-no_nonce', '-reqout', reqFile]);
    const req = await sh('base64', ['-w0', reqFile]);
    for (const encoded of [encodeURIComponent(req.trim()), Buffer.from(req.trim(), 'base64').toString('base64url')]) {
      const out = file('resp.der');
      const status = await sh('curl', ['-s', '-o', out, '-w', '%{http_code} %{content_type}', `${base}/certs/issuers/${leaf.issuerId}/ocsp/${encoded}`]);
      t.equal(status, '200 application/ocsp-response');
      const text = await sh('openssl', ['ocsp', '-respin', out, '-issuer', issuerFile, '-cert', file('other.pem'), '-CAfile', ca.root]);
      t.match(text, /other\.pem: good/);
      t.match(text, /Response verify OK/);
    }
    // While a revocation of the issuer is written but not known committed, an answer is made afresh and
    // no HTTP cache (nor the listener's thread) may keep it: it would outlive the commit.
    const coherence = ts.service.pki.publishing.coherence;
    const url = `${base}/certs/issuers/${leaf.issuerId}/ocsp/${encodeURIComponent(req.trim())}`;
    coherence.pending([leaf.issuerId]);
    t.equal((await fetch(url)).headers.get('cache-control'), 'no-store', 'pending: not to be kept');
    coherence.committed([leaf.issuerId]);
    t.match((await fetch(url)).headers.get('cache-control'), /^public, max-age=\d+/, 'committed: kept again');
  });

  await t.test('the request reader agrees with pkijs\'s OCSPRequest', async (t) => {
    const other = file('other2.pem', (await issueLeaf(ts, admin, ca.dir, device)).certificatePem);
    const variants = [['-cert', leafFile], ['-cert', leafFile, '-no_nonce'], ['-cert', leafFile, '-cert', other], ['-sha256', '-serial', '0x00ff'],
      ['-no_nonce', '-sha512', '-cert', leafFile, '-cert', other]];
    for (const args of variants) {
      const reqFile = file('variant.der');
      await sh('openssl', ['ocsp', '-issuer', issuerFile, ...args, '-reqout', reqFile]);
      const body = readFileSync(reqFile);
      const ours = parseOcspRequest(body);
      t.ok(ours, `read: ${args.join(' ')}`);
      t.same(ours, parseOcspRequestPkijs(body), `same as pkijs: ${args.join(' ')}`);
    }
    // 30021800: a GeneralizedTime that is no time, on which asn1js throws instead of flagging an error (found by the fuzz suite).
    for (const junk of [Buffer.from('3000', 'hex'), Buffer.from('30023000', 'hex'), Buffer.from('300630043002300a', 'hex'), Buffer.from('ff', 'hex'), Buffer.from('30021800', 'hex')]) {
      t.equal(parseOcspRequest(junk), null, `refused ${junk.toString('hex')}`);
      t.equal(parseOcspRequestPkijs(junk), null, `pkijs refuses ${junk.toString('hex')} too`);
    }
  });

  await t.test('nonce requests are each signed fresh, on the service thread once issuer and state are cached', async (t) => {
    const reqFile = file('nonce.der');
    await sh('openssl', ['ocsp', '-issuer', issuerFile, '-cert', leafFile, '-reqout', reqFile]);
    const body = readFileSync(reqFile);
    const signer = () => ts.service.caKeys.describe().encrypted_database as { sign_tasks: number; signatures: number; signed_in_process: number };
    const post = () => fetch(`${base}/certs/issuers/${leaf.issuerId}/ocsp`, { method: 'POST', body }).then(async (r) => Buffer.from(await r.arrayBuffer()));
    await post(); // issuer and serial state now cached
    const before = signer();
    const answers = await Promise.all(Array.from({ length: 32 }, post));
    const after = signer();
    t.equal(after.signed_in_process - before.signed_in_process, 32, 'every nonce answer signed afresh (never cached), on this thread');
    t.equal(after.sign_tasks - before.sign_tasks, 0, 'no worker task: one signature costs less than a task');
    t.ok(answers.every((a) => a.includes(body.subarray(body.length - 18))), 'each answer echoes the nonce');
  });

  await t.test('malformed requests answer malformedRequest, never 500', async (t) => {
    const bodies: Buffer[] = [Buffer.alloc(0), Buffer.from('hello'), Buffer.from([0x30, 0x82, 0xff, 0xff, 0x01]), Buffer.from([0x30, 0x03, 0x30, 0x01, 0x00]),
      Buffer.from(new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [] })] })] }).toBER()),
      Buffer.from('30021800', 'hex'), Buffer.from('1700', 'hex')];
    for (const body of bodies) {
      const res = await fetch(`${base}/certs/issuers/${leaf.issuerId}/ocsp`, { method: 'POST', headers: { 'content-type': 'application/ocsp-request' }, body });
      t.equal(res.status, 200);
      const der = Buffer.from(await res.arrayBuffer());
      t.same([...der], [0x30, 0x03, 0x0a, 0x01, 0x01], `malformedRequest for ${body.toString('hex').slice(0, 20)}`);
    }
    const get = await fetch(`${base}/certs/issuers/${leaf.issuerId}/ocsp/not*base64`);
    t.same([...Buffer.from(await get.arrayBuffer())], [0x30, 0x03, 0x0a, 0x01, 0x01], 'GET form that is not base64');
    const unknownIssuer = await ocspTo('00000000-0000-0000-0000-0000000000aa');
    t.same([...unknownIssuer], [0x30, 0x03, 0x0a, 0x01, 0x06], 'unauthorized for an issuer that is not ours');
    t.same([...await ocspTo('not-a-uuid')], [0x30, 0x03, 0x0a, 0x01, 0x06]);
    const crl = await fetch(`${base}/certs/issuers/00000000-0000-0000-0000-0000000000aa/crl`);
    t.equal(crl.status, 404);
  });

  async function ocspTo(issuerId: string): Promise<Buffer> {
    const reqFile = file('req2.der');
    await sh('openssl', ['ocsp', '-issuer', issuerFile, '-cert', leafFile, '-reqout', reqFile]);
    const res = await fetch(`${base}/certs/issuers/${issuerId}/ocsp`, { method: 'POST', body: readFileSync(reqFile) });
    return Buffer.from(await res.arrayBuffer());
  }

  await t.test('a retired issuer still answers OCSP and its CRL', async (t) => {
    const before = await issueLeaf(ts, admin, ca.dir, device);
    const rotated = await ok(ts, admin, 'mutation ($t: ID!) { provisionTenantAuthorityAutomatically(tenantId: $t) { authority { id } replacedAuthorityIds } }', { t: tenantId });
    t.ok(rotated.provisionTenantAuthorityAutomatically.replacedAuthorityIds.includes(leaf.issuerId), 'the old version was replaced');
    await ok(ts, admin, 'mutation ($id: ID!) { completeAuthorityRetirement(authorityId: $id) { status } }', { id: leaf.issuerId });
    const beforeFile = file('before.pem', before.certificatePem);
    t.match(await opensslOcsp(pub, leaf.issuerId, { issuer: issuerFile, cafile: ca.root, cert: beforeFile }), /before\.pem: good/);
    await revokeLeaf(ts, admin, before, 'superseded');
    const out = await opensslOcsp(pub, leaf.issuerId, { issuer: issuerFile, cafile: ca.root, cert: beforeFile });
    t.match(out, /before\.pem: revoked/);
    t.match(out, /Reason: superseded/);
    const der = Buffer.from(await (await fetch(`${base}/certs/issuers/${leaf.issuerId}/crl`)).arrayBuffer());
    const text = await sh('openssl', ['crl', '-inform', 'DER', '-noout', '-text', '-CAfile', issuerFile], { input: der });
    t.match(text, /verify OK/);
    t.match(text, new RegExp(`Serial Number: ${before.serialNumber.toUpperCase()}`));
  });
});
