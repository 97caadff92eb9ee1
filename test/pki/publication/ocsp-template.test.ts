// The OCSP templates against the libraries: every response the template writes is byte for byte what
// pkijs encodes from the same fields (good, revoked with and without a reason code, unknown; with and
// without nonce; SHA-1 and SHA-256 CertIDs; one and two answers; long and short lengths), and the
// request template reads what openssl sends exactly as the asn1js reader does, declines what it does
// not know (the asn1js reader takes over), and never disagrees with it on thousands of mutated requests.
import { execFileSync, spawnSync } from 'node:child_process';
import { createPrivateKey, randomBytes, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import t from 'tap';
import { pemBlocks } from '../../../src/pki/x509/der.js';
import { parseOcspRequest, responderIdByKey, responseCertsDer, responseDataDer, singleResponseDer, subjectPublicKeyBits, successfulResponseDer, type CertStatus } from '../../../src/pki/publication/ocsp-der.js';
import { matchRequestTemplate, responseDataTemplate, responseTemplate } from '../../../src/pki/publication/ocsp-template.js';
import { makeCaFiles } from '../../helpers/pki.js';

const ssl = (args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
const fromBer = (der: Uint8Array) => asn1js.fromBER(der).result;

/** The OCSPResponse as pkijs encodes it from the same fields (the reference). */
function pkijsResponse(o: {
  keyBits: Buffer; producedAt: Date; answers: { certIdDer: Buffer; state: CertStatus }[]; thisUpdate: Date; nextUpdate: Date; nonce: Buffer | null;
  signatureAlgorithm: Buffer; signature: Buffer; certs: Buffer[];
}): { tbs: Buffer; response: Buffer } {
  const data = new pkijs.ResponseData();
  data.responderID = new asn1js.OctetString({ valueHex: createHashSha1(o.keyBits) });
  data.producedAt = o.producedAt;
  data.responses = o.answers.map((a) => new pkijs.SingleResponse({
    certID: new pkijs.CertID({ schema: fromBer(a.certIdDer) }),
    certStatus: certStatus(a.state),
    thisUpdate: o.thisUpdate,
    nextUpdate: o.nextUpdate,
  }));
  if (o.nonce) data.responseExtensions = [new pkijs.Extension({ schema: fromBer(o.nonce) })];
  const tbs = Buffer.from(data.toSchema(true).toBER());
  data.tbsView = new Uint8Array(tbs);
  const basic = new pkijs.BasicOCSPResponse({
    tbsResponseData: data,
    signatureAlgorithm: new pkijs.AlgorithmIdentifier({ schema: fromBer(o.signatureAlgorithm) }),
    signature: new asn1js.BitString({ valueHex: o.signature }),
    ...(o.certs.length ? { certs: o.certs.map((c) => new pkijs.Certificate({ schema: fromBer(c) })) } : {}),
  });
  const response = new pkijs.OCSPResponse({
    responseStatus: new asn1js.Enumerated({ value: 0 }),
    responseBytes: new pkijs.ResponseBytes({ responseType: '1.3.6.1.5.5.7.48.1.1', response: new asn1js.OctetString({ valueHex: basic.toSchema().toBER() }) }),
  });
  return { tbs, response: Buffer.from(response.toSchema().toBER()) };
}

function createHashSha1(bits: Buffer): Buffer {
  // The KeyHash of a byKey ResponderID, as responderIdByKey computes it: [2] { OCTET STRING sha1 }.
  return Buffer.from(((fromBer(responderIdByKey(bits)) as asn1js.Constructed).valueBlock.value[0] as asn1js.OctetString).valueBlock.valueHexView);
}

function certStatus(s: CertStatus): asn1js.AsnType {
  const ctx = (tagNumber: number) => ({ tagClass: 3, tagNumber });
  if (s.status === 'good') return new asn1js.Primitive({ idBlock: ctx(0), valueHex: new ArrayBuffer(0) });
  if (s.status === 'unknown') return new asn1js.Primitive({ idBlock: ctx(2), valueHex: new ArrayBuffer(0) });
  const info: asn1js.AsnType[] = [new asn1js.GeneralizedTime({ valueDate: s.revokedAt })];
  const codes = { keyCompromise: 1, superseded: 4 } as Record<string, number>;
  if (s.reason !== 'unspecified') info.push(new asn1js.Constructed({ idBlock: ctx(0), value: [new asn1js.Enumerated({ value: codes[s.reason === 'key_compromise' ? 'keyCompromise' : 'superseded'] })] }));
  return new asn1js.Constructed({ idBlock: ctx(1), value: info });
}

t.test('OCSP templates', async (t) => {
  const ca = makeCaFiles(t);
  const issuerPem = readFileSync(ca.intermediate, 'utf8');
  const issuerDer = pemBlocks(issuerPem, ['CERTIFICATE'])[0]!;
  const issuer = new pkijs.Certificate({ schema: fromBer(issuerDer) });
  const keyBits = subjectPublicKeyBits(Buffer.from(issuer.subjectPublicKeyInfo.toSchema().toBER()));
  const responderId = responderIdByKey(keyBits);
  const key = createPrivateKey(readFileSync(ca.intermediateKey));
  const signatureAlgorithm = Buffer.from('300a06082a8648ce3d040302', 'hex');
  const rootDer = pemBlocks(readFileSync(ca.root, 'utf8'), ['CERTIFICATE'])[0]!;

  // Requests as openssl makes them: SHA-1 and SHA-256 CertIDs, with and without nonce, one and two certificates.
  const request = (args: string[]) => {
    const out = ca.file('req.der');
    ssl(['ocsp', '-issuer', ca.intermediate, ...args, '-reqout', out]);
    return readFileSync(out);
  };
  const serials = ['0x4ab1c0ffee', `0x${randomBytes(16).toString('hex').replace(/^./, '5')}`, '0x00ff'];

  await t.test('responses: byte for byte what pkijs encodes', async (t) => {
    const states: CertStatus[] = [
      { status: 'good' },
      { status: 'unknown' },
      { status: 'revoked', revokedAt: new Date('2026-11-27T10:11:12Z'), reason: 'key_compromise' },
      { status: 'revoked', revokedAt: new Date('2026-01-02T03:04:05Z'), reason: 'unspecified' },
      { status: 'revoked', revokedAt: new Date('2025-12-31T23:59:59Z'), reason: 'superseded' },
    ];
    let cases = 0;
    for (const digest of ['-sha1', '-sha256']) {
      for (const nonce of [true, false]) {
        const body = request([digest, '-serial', serials[1]!, '-serial', serials[0]!, ...(nonce ? [] : ['-no_nonce'])]);
        const parsed = parseOcspRequest(body)!;
        t.equal(parsed.certs.length, 2);
        t.equal(!!parsed.nonce, nonce);
        for (const state of states) {
          for (const count of [1, 2]) {
            for (const certs of [[issuerDer, rootDer], []]) {
              const answers = parsed.certs.slice(0, count).map((c, i) => ({ certIdDer: c.certIdDer, state: i === 0 ? state : states[1]! }));
              const producedAt = new Date(Math.floor(Date.now() / 1000) * 1000 + cases * 1000);
              const thisUpdate = producedAt;
              const nextUpdate = new Date(producedAt.getTime() + 3_600_000);
              const tbs = responseDataTemplate(responderId, producedAt.getTime(), answers, thisUpdate.getTime(), nextUpdate.getTime(), parsed.nonce);
              const signature = sign('sha256', tbs, key);
              const certsDer = certs.length ? responseCertsDer(certs) : null;
              const ours = responseTemplate(tbs, signatureAlgorithm, signature, certsDer);
              const ref = pkijsResponse({ keyBits, producedAt, answers, thisUpdate, nextUpdate, nonce: parsed.nonce, signatureAlgorithm, signature, certs });
              const what = `${digest} nonce=${nonce} ${state.status}${state.status === 'revoked' ? `/${state.reason}` : ''} x${count} certs=${certs.length}`;
              t.ok(tbs.equals(ref.tbs), `ResponseData equal: ${what}`);
              t.ok(ours.equals(ref.response), `OCSPResponse equal: ${what}`);
              // And equal to the asn1js assembly it replaces on the hot path.
              const singles = answers.map((a) => singleResponseDer(a.certIdDer, a.state, thisUpdate, nextUpdate));
              t.ok(tbs.equals(responseDataDer(responderId, producedAt, singles, parsed.nonce)), `asn1js ResponseData equal: ${what}`);
              t.ok(ours.equals(successfulResponseDer(tbs, signatureAlgorithm, signature, certsDer)), `asn1js OCSPResponse equal: ${what}`);
              cases++;
            }
          }
        }
      }
    }
    t.equal(cases, 2 * 2 * states.length * 2 * 2);
  });

  await t.test('a templated answer verifies with openssl', async (t) => {
    const body = request(['-serial', serials[0]!]);
    const parsed = matchRequestTemplate(body)!;
    const now = Math.floor(Date.now() / 1000) * 1000;
    const tbs = responseDataTemplate(responderId, now, [{ certIdDer: parsed.certs[0]!.certIdDer, state: { status: 'good' } }], now, now + 3_600_000, parsed.nonce);
    const der = responseTemplate(tbs, signatureAlgorithm, sign('sha256', tbs, key), responseCertsDer([issuerDer]));
    const respFile = ca.file('resp.der');
    execFileSync('sh', ['-c', `cat > ${respFile}`], { input: der });
    const run = spawnSync('openssl', ['ocsp', '-respin', respFile, '-issuer', ca.intermediate, '-serial', serials[0]!, '-no_nonce', '-CAfile', ca.root], { encoding: 'utf8' });
    const out = run.stdout + run.stderr;
    t.match(out, /: good/);
    t.match(out, /Response verify OK/);
  });

  await t.test('requests: the template reads what openssl sends as the asn1js reader does', async (t) => {
    for (const args of [['-serial', serials[0]!], ['-serial', serials[1]!, '-no_nonce'], ['-sha256', '-serial', serials[2]!], ['-sha512', '-serial', serials[1]!],
      ['-sha384', '-no_nonce', '-serial', serials[0]!]]) {
      const body = request(args);
      const ours = matchRequestTemplate(body);
      t.ok(ours, `matched: ${args.join(' ')}`);
      t.same(ours, parseOcspRequest(body), `same reading: ${args.join(' ')}`);
    }
    // Shapes outside the template: the asn1js reader answers them.
    const two = request(['-serial', serials[0]!, '-serial', serials[1]!]);
    t.equal(matchRequestTemplate(two), null, 'two CertIDs: declined');
    t.ok(parseOcspRequest(two));
    const md5 = request(['-md5', '-serial', serials[0]!, '-no_nonce']);
    t.equal(matchRequestTemplate(md5), null, 'a digest the template does not know: declined');
    t.equal(parseOcspRequest(md5)?.certs[0]?.hash, null);
    const plain = request(['-serial', serials[0]!, '-no_nonce']);
    // The same request with a non-minimal (BER) length on the outer SEQUENCE.
    const ber = Buffer.concat([Buffer.from([0x30, 0x81, plain[1]!]), plain.subarray(2)]);
    t.equal(matchRequestTemplate(ber), null, 'a BER length: declined');
    for (const junk of [Buffer.alloc(0), Buffer.from('3000', 'hex'), Buffer.from('30023000', 'hex'), Buffer.from('ff', 'hex'), plain.subarray(0, plain.length - 1)]) {
      t.equal(matchRequestTemplate(junk), null, `declined ${junk.toString('hex').slice(0, 16)}`);
    }
  });

  await t.test('mutated requests: the template declines or agrees with the asn1js reader', async (t) => {
    const seeds = [request(['-serial', serials[0]!]), request(['-serial', serials[1]!, '-no_nonce']), request(['-sha256', '-serial', serials[2]!])];
    let matched = 0;
    let declined = 0;
    for (let i = 0; i < 3000; i++) {
      const seed = seeds[i % seeds.length]!;
      const b = Buffer.from(seed);
      const edits = 1 + (i % 3);
      for (let e = 0; e < edits; e++) {
        const at = Math.floor(Math.random() * b.length);
        b[at] = i % 2 ? Math.floor(Math.random() * 256) : (b[at]! ^ (1 << (i % 8)));
      }
      const body = i % 7 === 0 ? b.subarray(0, Math.floor(Math.random() * b.length)) : b;
      const ours = matchRequestTemplate(body);
      if (!ours) {
        declined++;
        continue;
      }
      matched++;
      const theirs = parseOcspRequest(body);
      if (!theirs || JSON.stringify(ours) !== JSON.stringify(theirs)) {
        t.fail(`disagrees on ${body.toString('hex')}`);
        return;
      }
    }
    t.ok(matched > 100 && declined > 100, `${matched} matched and agreed, ${declined} declined`);
  });
});
