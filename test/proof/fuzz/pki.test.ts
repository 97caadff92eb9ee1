// Generated hostile input (fast-check, FUZZ_SEED replays) for the certificate authority's parsers. CSRs are
// built and SIGNED here, so they get past proof of possession to the parts a byte-flip fuzzer never reaches
// (test/pki/issuance/csr-fuzz.test.ts mutates whole requests): subjects of random RDNs (multi-valued, every string
// tag, odd-length BMP and Universal strings, bad OIDs, values that are no string) and extensionRequests
// asking for every GeneralName type with random contents. OCSP requests: openssl's mutated, read by ours
// and by pkijs (ours may never accept what pkijs refuses, nor read it differently). Then a smaller number
// of each through the running service: GraphQL issuance (never INTERNAL, a certificate stored exactly for
// each success, the subject always the service's own) and the OCSP responder (always an OCSPResponse).
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as asn1js from 'asn1js';
import fc from 'fast-check';
import * as pkijs from 'pkijs';
import t from 'tap';
import { readCsrDer, type CsrRequest } from '../../../src/pki/issuance/csr.js';
import { parseOcspRequest, parseOcspRequestPkijs } from '../../../src/pki/publication/ocsp-der.js';
import { AUTH_ENV, adminToken } from '../../helpers/auth.js';
import { createEntity, createTenant } from '../../helpers/management.js';
import { ISSUE_CSR, makeCaFiles } from '../../helpers/pki.js';
import { firstPem, issueLeaf, sh, tempDir } from '../../helpers/publication.js';
import { gql, startTestService } from '../../helpers/service.js';
import { FUZZ_SEED, mutated, outcome, params } from './fuzz.js';

// A DER encoder for building test inputs (never for reading them): tag, definite length, contents.
function tlv(tag: number, ...contents: Uint8Array[]): Buffer {
  const body = Buffer.concat(contents);
  const n = body.length;
  const len = n < 0x80 ? [n] : n < 0x100 ? [0x81, n] : [0x82, n >> 8, n & 0xff];
  return Buffer.concat([Buffer.from([tag, ...len]), body]);
}
const oid = (hex: string) => tlv(0x06, Buffer.from(hex, 'hex'));
const OIDS = {
  cn: '550403', o: '55040a', ou: '55040b', c: '550406', serial: '550405', email: '2a864886f70d010901', dc: '0992268993f22c640119',
  extensionRequest: '2a864886f70d01090e', san: '551d11', basicConstraints: '551d13', keyUsage: '551d0f', ecdsaSha256: '2a8648ce3d040302',
};
const MARKER = 'rdn-marker-7f3a';

const stringTag = fc.constantFrom(0x0c, 0x13, 0x14, 0x16, 0x1c, 0x1e, 0x1a, 0x12, 0x04, 0x02, 0x05, 0x30, 0x31, 0xa0, 0x1f);
const text = fc.oneof(fc.constantFrom(MARKER, '', 'a\u0000b', 'é', 'x'.repeat(300), '+,;=\\"<>#', '\ud800'), fc.string({ maxLength: 12 }));
const attributeValue = fc.oneof(
  fc.tuple(stringTag, text).map(([tag, s]) => tlv(tag, Buffer.from(s))),
  fc.tuple(stringTag, fc.uint8Array({ maxLength: 9 })).map(([tag, b]) => tlv(tag, b)),
);
const attributeType = fc.oneof(fc.constantFrom(...Object.values(OIDS)).map(oid), fc.uint8Array({ minLength: 0, maxLength: 6 }).map((b) => tlv(0x06, b)));
const rdn = fc.array(fc.tuple(attributeType, attributeValue).map(([type, value]) => tlv(0x30, type, value)), { minLength: 0, maxLength: 3 })
  .map((atvs) => tlv(0x31, ...atvs));
const subject = fc.array(rdn, { maxLength: 5 }).map((rdns) => tlv(0x30, ...rdns));

// GeneralNames: [1] rfc822, [2] dNSName, [6] URI, [7] iPAddress (any length), [0] otherName, [4] directoryName, [8] registeredID.
const generalName = fc.oneof(
  fc.tuple(fc.constantFrom(0x81, 0x82, 0x86), text.filter((s) => !s.includes(MARKER))).map(([tag, s]) => ({ tag, der: tlv(tag, Buffer.from(s)), dns: tag === 0x82 ? s : null })),
  fc.constantFrom('device.example.com', '*.example.com', 'a..b', 'localhost', '-x-', 'ex ample').map((s) => ({ tag: 0x82, der: tlv(0x82, Buffer.from(s)), dns: s })),
  fc.uint8Array({ maxLength: 20 }).map((b) => ({ tag: 0x87, der: tlv(0x87, b), dns: null })),
  fc.tuple(fc.constantFrom(0xa0, 0xa4, 0x88, 0xa3, 0xa5), fc.uint8Array({ maxLength: 10 })).map(([tag, b]) => ({ tag, der: tlv(tag, b), dns: null })),
);
const extension = fc.oneof(
  fc.array(generalName, { maxLength: 4 }).map((names) => ({ der: tlv(0x30, oid(OIDS.san), tlv(0x04, tlv(0x30, ...names.map((n) => n.der)))), names })),
  fc.tuple(fc.boolean(), fc.nat(3)).map(([ca, path]) => ({ der: tlv(0x30, oid(OIDS.basicConstraints), tlv(0x04, tlv(0x30, ...(ca ? [tlv(0x01, Buffer.from([0xff])), tlv(0x02, Buffer.from([path]))] : [])))), names: [] })),
  fc.tuple(attributeType, fc.uint8Array({ maxLength: 12 })).map(([type, b]) => ({ der: tlv(0x30, type, tlv(0x04, b)), names: [] })),
);
const attributes = fc.oneof(
  fc.constant({ der: Buffer.alloc(0), names: [] as { tag: number; dns: string | null }[] }),
  fc.array(extension, { minLength: 1, maxLength: 3 }).map((exts) => ({
    der: tlv(0xa0, tlv(0x30, oid(OIDS.extensionRequest), tlv(0x31, tlv(0x30, ...exts.map((e) => e.der))))),
    names: exts.flatMap((e) => e.names),
  })),
  fc.uint8Array({ maxLength: 16 }).map((b) => ({ der: tlv(0xa0, tlv(0x30, oid(OIDS.extensionRequest), tlv(0x31, b))), names: [] })),
);

const keys = [generateKeyPairSync('ec', { namedCurve: 'P-256' }), generateKeyPairSync('ec', { namedCurve: 'P-256' })];
const spkiOf = (k: KeyObject) => k.export({ type: 'spki', format: 'der' });

/** A signed CSR (ecdsa-with-SHA256) with the given subject and attributes. */
function signedCsr(subjectDer: Buffer, attributesDer: Buffer, keyIndex = 0): Buffer {
  const key = keys[keyIndex]!;
  const info = tlv(0x30, tlv(0x02, Buffer.from([0])), subjectDer, spkiOf(key.publicKey), attributesDer.length ? attributesDer : tlv(0xa0));
  const signature = sign('sha256', info, { key: key.privateKey, dsaEncoding: 'der' });
  return tlv(0x30, info, tlv(0x30, oid(OIDS.ecdsaSha256)), tlv(0x03, Buffer.from([0]), signature));
}
const csrCase = fc.tuple(subject, attributes).map(([s, a]) => ({ der: signedCsr(s, a.der), names: a.names }));

t.test(`signed CSRs with random RDNs and extensionRequests: read or refused cleanly (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  let read = 0;
  let withNames = 0;
  fc.assert(fc.property(csrCase, ({ der, names }) => {
    const r = outcome<CsrRequest>(() => readCsrDer(der));
    if (!r.ok) return true;
    read++;
    const got = r.value;
    if (got.dnsNames.length + got.ipAddresses.length + got.uris.length + got.emails.length > 0) withNames++;
    // Only names the request really asked for, as asked (the subject is never read).
    const asked = new Set(names.filter((n) => n.dns !== null).map((n) => n.dns));
    return got.dnsNames.every((d) => asked.has(d)) && !JSON.stringify(got).includes(MARKER);
  }), params(2000));
  t.ok(read > 350 && withNames > 30, `requests got through to their names: ${read} read, ${withNames} with names`);
});

t.test(`OCSP requests, mutated: ours reads nothing pkijs refuses, and reads it the same (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  const file = tempDir(t, 'ocsp-fuzz-');
  const ca = makeCaFiles(t);
  const bases: Buffer[] = [];
  for (const args of [['-serial', '0x01'], ['-serial', '0x4ab1c0ffee', '-no_nonce'], ['-sha256', '-serial', '0x00ff', '-serial', '0x02'], ['-sha512', '-serial', '0x7f', '-no_nonce']]) {
    const out = file(`req-${bases.length}.der`);
    await sh('openssl', ['ocsp', '-issuer', ca.root, ...args, '-reqout', out]);
    bases.push(readFileSync(out));
  }
  for (const b of bases) t.ok(parseOcspRequest(b), 'openssl requests are read');
  // Found by this property in one CI run: the hash algorithm's OID (9 octets) overruns its SEQUENCE (9);
  // asn1js reads it without an error and pkijs re-encodes it, so the echoed CertID would not be the asked one.
  const overrun = Buffer.from('304630443042304030' + '3e3009060900052b0e03021a05000414' + '8635ac75a1a9b3129cddfebaf4b47fb398bb200a'
    + '041418e91d8a2f2476e398545e0e21967dc98c247e0702054ab1c0ffee', 'hex');
  t.equal(parseOcspRequest(overrun), null, 'an element overrunning its SEQUENCE is refused');
  let readCount = 0;
  fc.assert(fc.property(fc.oneof(mutated(fc.constantFrom(...bases)), fc.uint8Array({ maxLength: 80 })), (body) => {
    const ours = parseOcspRequest(body);
    if (!ours) return true;
    readCount++;
    const theirs = parseOcspRequestPkijs(body);
    return theirs !== null && JSON.stringify(theirs) === JSON.stringify(ours);
  }), params(3000));
  t.ok(readCount > 50, `mutations that still read: ${readCount}`);
});

t.test(`through the service: generated CSRs to GraphQL issuance, mutated requests to the OCSP responder (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startTestService(t, { ...AUTH_ENV, ...ca.env, SVC_PKI_PUBLICATION_ADDR: '127.0.0.1:0' });
  const admin = await adminToken(ts);
  const tenantId = await createTenant(ts, admin, 'fuzz-pki', 'fuzz-pki');
  const device = await createEntity(ts, admin, { kind: 'device', name: 'fuzz-device', tenantId });
  const count = async () => (await ts.service.sql<{ n: number }[]>`select count(*)::int as n from credentials where kind = 'certificate'`)[0]!.n;
  const before = await count();
  let issued = 0;
  let refused = 0;
  let i = 0;
  await fc.assert(fc.asyncProperty(csrCase, async ({ der }) => {
    const csrPem = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE REQUEST-----\n`;
    const res = await gql(ts.url(), ISSUE_CSR, { i: { entityId: device, csrPem, idempotencyKey: `fuzz-${i++}` } }, admin);
    const codes = (res.body.errors ?? []).map((e) => e.extensions?.code);
    const cert = res.body.data?.issueCertificateFromCsrV2?.certificate;
    if (cert) issued++;
    else refused++;
    // Refused with a client error, or issued with the service's subject (tenant and entity), never the request's.
    const fine = res.status < 500 && !codes.includes('INTERNAL')
      && (cert ? !JSON.stringify(cert.subject).includes(MARKER) && JSON.stringify(cert.subject).includes(device) : codes.length > 0);
    if (!fine) t.comment(`${res.status} ${JSON.stringify(res.body).slice(0, 400)}`);
    return fine;
  }), params(100));
  t.equal(await count(), before + issued, `a certificate stored for each of the ${issued} issued, none for the ${refused} refused`);
  t.ok(issued > 10 && refused > 10, 'both outcomes reached');

  const leaf = await issueLeaf(ts, admin, ca.dir, device);
  const file = tempDir(t, 'ocsp-svc-');
  const issuerFile = file('issuer.pem', firstPem(leaf.chainPem));
  const leafFile = file('leaf.pem', leaf.certificatePem);
  const bases: Buffer[] = [];
  for (const extra of [[], ['-no_nonce']]) {
    const out = file(`svc-req-${bases.length}.der`);
    await sh('openssl', ['ocsp', '-issuer', issuerFile, '-cert', leafFile, ...extra, '-reqout', out]);
    bases.push(readFileSync(out));
  }
  const statuses: Record<number, number> = {};
  // Both listeners that carry the responder: the management API (uWS) and the publication listener (node:http).
  await fc.assert(fc.asyncProperty(fc.oneof(mutated(fc.constantFrom(...bases)), fc.constantFrom(...bases)), fc.constantFrom('http', 'pki_publication' as const), async (body, listener) => {
    const res = await fetch(`${ts.url(listener)}/certs/issuers/${leaf.issuerId}/ocsp`, { method: 'POST', headers: { 'content-type': 'application/ocsp-request' }, body });
    const der = Buffer.from(await res.arrayBuffer());
    if (res.status !== 200) return false;
    const asn = asn1js.fromBER(der);
    if (asn.offset === -1) return false;
    const response = new pkijs.OCSPResponse({ schema: asn.result });
    const status = response.responseStatus.valueBlock.valueDec;
    statuses[status] = (statuses[status] ?? 0) + 1;
    // successful, malformedRequest or unauthorized; never internalError.
    return [0, 1, 6].includes(status);
  }), params(300));
  t.ok((statuses[0] ?? 0) > 20 && (statuses[1] ?? 0) > 20, `answers by OCSP status: ${JSON.stringify(statuses)}`);
  t.equal(await count(), before + issued + 1, 'OCSP stored nothing');
});
