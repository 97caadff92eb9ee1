// DER of OCSP (RFC 6960 4.2): reading a request (asn1js, held to pkijs's reading in tests), and the response built from parts encoded
// once per issuer (responder id, certificates) with the request's CertID and nonce echoed as received.
import { createHash } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { REASON_CODES, raw, type Der, type RevocationReason } from '../x509/der.js';

export const OCSP_STATUS = { successful: 0, malformedRequest: 1, internalError: 2, tryLater: 3, unauthorized: 6 } as const;
export type OcspStatus = keyof typeof OCSP_STATUS;

const ID_PKIX_OCSP_BASIC = '1.3.6.1.5.5.7.48.1.1';
const ID_PKIX_OCSP_NONCE = '1.3.6.1.5.5.7.48.1.2';

/** Digests a CertID may name (RFC 6960 4.1.1; SHA-1 is what most clients, openssl included, send). */
const CERT_ID_HASHES: Record<string, string> = {
  '1.3.14.3.2.26': 'sha1',
  '2.16.840.1.101.3.4.2.1': 'sha256',
  '2.16.840.1.101.3.4.2.2': 'sha384',
  '2.16.840.1.101.3.4.2.3': 'sha512',
};

export interface CertRequest {
  /** The CertID exactly as the client encoded it: the response names the certificate the same way. */
  certIdDer: Buffer;
  /** Node's digest name, or null when the client used one we do not know. */
  hash: string | null;
  issuerNameHash: Buffer;
  issuerKeyHash: Buffer;
  /** Lowercase hex as the credentials store it; null when the serial cannot be one of ours (negative, too long). */
  serial: string | null;
}

export interface ParsedRequest {
  certs: CertRequest[];
  /** The whole nonce Extension as received, echoed in the response. */
  nonce: Buffer | null;
}

const bufferOf = (view: Uint8Array) => Buffer.from(view.buffer, view.byteOffset, view.byteLength);

const UNIVERSAL = 0;
const CONTEXT = 3;
const is = (node: asn1js.AsnType | undefined, tagClass: number, tagNumber: number): node is asn1js.AsnType =>
  !!node && node.idBlock.tagClass === (tagClass === UNIVERSAL ? 1 : tagClass) && node.idBlock.tagNumber === tagNumber;
const children = (node: asn1js.AsnType): asn1js.AsnType[] => {
  const v = (node as asn1js.Constructed).valueBlock?.value;
  return Array.isArray(v) ? v : [];
};
const SEQUENCE = 16;
/**
 * Whether a constructed element's declared length is exactly its children's encodings. asn1js reads an
 * element that overruns its parent (an OID of 9 octets in a SEQUENCE of 9) without an error, and pkijs then
 * re-encodes what it read, so the CertID echoed in the answer would differ from the one asked about.
 */
const filled = (node: asn1js.AsnType): boolean =>
  node.lenBlock.length === children(node).reduce((n, child) => n + child.valueBeforeDecodeView.byteLength, 0);

/** One CertID (RFC 6960 4.1.1), or null when it is not one. */
function readCertId(node: asn1js.AsnType | undefined): CertRequest | null {
  if (!is(node, UNIVERSAL, SEQUENCE)) return null;
  const [alg, nameHash, keyHash, serialNumber, extra] = children(node);
  if (extra || !is(alg, UNIVERSAL, SEQUENCE) || !(nameHash instanceof asn1js.OctetString) || !(keyHash instanceof asn1js.OctetString)
    || !(serialNumber instanceof asn1js.Integer)) return null;
  const oid = children(alg)[0];
  if (!(oid instanceof asn1js.ObjectIdentifier) || !filled(alg) || !filled(node)) return null;
  const serialBytes = bufferOf(serialNumber.valueBlock.valueHexView);
  let serial: string | null = null;
  // A negative or overlong serial was never issued here (ours are 16 positive octets).
  if (serialBytes.length > 0 && serialBytes.length <= 33 && !((serialBytes[0] as number) & 0x80)) {
    serial = serialBytes.toString('hex').replace(/^(00)+(?=.)/, '');
  }
  return {
    certIdDer: bufferOf(node.valueBeforeDecodeView),
    hash: CERT_ID_HASHES[oid.valueBlock.toString()] ?? null,
    issuerNameHash: bufferOf(nameHash.valueBlock.valueHexView),
    issuerKeyHash: bufferOf(keyHash.valueBlock.valueHexView),
    serial,
  };
}

/**
 * The request, or null when it is not a well-formed OCSPRequest (the caller answers malformedRequest).
 * Read from the asn1js tree along RFC 6960 4.1.1, every element's tag checked: the schema comparison of
 * pkijs's OCSPRequest costs ~0.9 ms a request here, 30x the rest of a signed answer. The tests hold this
 * reader to pkijs's reading of the same requests (parseOcspRequestPkijs).
 */
export function parseOcspRequest(body: Uint8Array): ParsedRequest | null {
  if (body.length === 0) return null;
  let asn: ReturnType<typeof asn1js.fromBER>;
  try {
    asn = asn1js.fromBER(body);
  } catch {
    // asn1js throws (rather than flagging an error) on some contents, e.g. a GeneralizedTime that is no time.
    return null;
  }
  if (asn.offset === -1 || asn.offset !== body.length || asn.result.error) return null;
  const top = asn.result;
  if (!is(top, UNIVERSAL, SEQUENCE)) return null;
  const [tbs, signature, extra] = children(top);
  if (extra || !is(tbs, UNIVERSAL, SEQUENCE) || (signature && !is(signature, CONTEXT, 0))) return null;
  const fields = children(tbs);
  let i = 0;
  if (is(fields[i], CONTEXT, 0)) i++; // version
  if (is(fields[i], CONTEXT, 1)) i++; // requestorName
  const list = fields[i++];
  if (!is(list, UNIVERSAL, SEQUENCE)) return null;
  let nonce: Buffer | null = null;
  const exts = fields[i];
  if (exts) {
    if (!is(exts, CONTEXT, 2) || fields[i + 1]) return null;
    const seq = children(exts)[0];
    if (!is(seq, UNIVERSAL, SEQUENCE)) return null;
    for (const ext of children(seq)) {
      // Extension ::= SEQUENCE { extnID OID, critical BOOLEAN DEFAULT FALSE, extnValue OCTET STRING }: nothing else.
      const [id, second, third, more] = children(ext);
      const flagged = second instanceof asn1js.Boolean;
      const value = flagged ? third : second;
      if (!is(ext, UNIVERSAL, SEQUENCE) || !(id instanceof asn1js.ObjectIdentifier) || !(value instanceof asn1js.OctetString) || (flagged ? more : third)) return null;
      if (id.valueBlock.toString() === ID_PKIX_OCSP_NONCE) nonce = bufferOf(ext.valueBeforeDecodeView);
    }
  }
  const certs: CertRequest[] = [];
  for (const request of children(list)) {
    if (!is(request, UNIVERSAL, SEQUENCE)) return null;
    const [certId, singleExts, more] = children(request);
    if (more || (singleExts && !is(singleExts, CONTEXT, 0))) return null;
    const cert = readCertId(certId);
    if (!cert) return null;
    certs.push(cert);
  }
  return certs.length ? { certs, nonce } : null;
}

/** The same reading through pkijs's OCSPRequest schema: the reference the tests compare with. */
export function parseOcspRequestPkijs(body: Uint8Array): ParsedRequest | null {
  if (body.length === 0) return null;
  let request: pkijs.OCSPRequest;
  try {
    const asn = asn1js.fromBER(body);
    if (asn.offset === -1 || asn.offset !== body.length) return null;
    request = new pkijs.OCSPRequest({ schema: asn.result });
  } catch {
    return null;
  }
  const list = request.tbsRequest.requestList;
  if (!Array.isArray(list) || list.length === 0) return null;
  const certs = list.map((item) => readCertId(asn1js.fromBER(item.reqCert.toSchema().toBER()).result));
  if (certs.some((c) => c === null)) return null;
  const nonceExt = request.tbsRequest.requestExtensions?.find((e) => e.extnID === ID_PKIX_OCSP_NONCE);
  return { certs: certs as CertRequest[], nonce: nonceExt ? Buffer.from(nonceExt.toSchema().toBER()) : null };
}

/** The issuer's name and key hashes in one digest, for matching CertIDs (RFC 6960 4.1.1). */
export function issuerHashes(hash: string, subjectNameDer: Uint8Array, subjectPublicKey: Uint8Array): { name: Buffer; key: Buffer } {
  return { name: createHash(hash).update(subjectNameDer).digest(), key: createHash(hash).update(subjectPublicKey).digest() };
}

/** The public key bits of a SubjectPublicKeyInfo (what KeyHash and issuerKeyHash digest). */
export function subjectPublicKeyBits(spkiDer: Uint8Array): Buffer {
  const spki = asn1js.fromBER(spkiDer).result as asn1js.Sequence;
  return bufferOf((spki.valueBlock.value[1] as asn1js.BitString).valueBlock.valueHexView);
}

/** ResponderID byKey ([2] EXPLICIT KeyHash): the SHA-1 of the responder's public key bits. */
export function responderIdByKey(subjectPublicKey: Uint8Array): Der {
  const keyHash = createHash('sha1').update(subjectPublicKey).digest();
  return Buffer.from(new asn1js.Constructed({ idBlock: { tagClass: 3, tagNumber: 2 }, value: [new asn1js.OctetString({ valueHex: keyHash })] }).toBER());
}

/** OCSP times are GeneralizedTime in whole seconds. */
function generalizedTime(at: Date): asn1js.GeneralizedTime {
  return new asn1js.GeneralizedTime({ valueDate: new Date(Math.floor(at.getTime() / 1000) * 1000) });
}

const explicit = (tagNumber: number, inner: asn1js.AsnType) => new asn1js.Constructed({ idBlock: { tagClass: 3, tagNumber }, value: [inner] });
const implicitNull = (tagNumber: number) => new asn1js.Primitive({ idBlock: { tagClass: 3, tagNumber }, valueHex: new ArrayBuffer(0) });

export type CertStatus =
  | { status: 'good' }
  | { status: 'revoked'; revokedAt: Date; reason: RevocationReason }
  | { status: 'unknown' };

/** One SingleResponse. */
export function singleResponseDer(certIdDer: Uint8Array, state: CertStatus, thisUpdate: Date, nextUpdate: Date | null): Der {
  let certStatus: asn1js.AsnType;
  if (state.status === 'good') certStatus = implicitNull(0);
  else if (state.status === 'unknown') certStatus = implicitNull(2);
  else {
    // RevokedInfo, [1] IMPLICIT: the reason is left out for 'unspecified', as in the CRL entry (RFC 5280 5.3.1).
    const info: asn1js.AsnType[] = [generalizedTime(state.revokedAt)];
    if (state.reason !== 'unspecified') info.push(explicit(0, new asn1js.Enumerated({ value: REASON_CODES[state.reason] })));
    certStatus = new asn1js.Constructed({ idBlock: { tagClass: 3, tagNumber: 1 }, value: info });
  }
  const items: asn1js.AsnType[] = [raw(certIdDer), certStatus, generalizedTime(thisUpdate)];
  if (nextUpdate) items.push(explicit(0, generalizedTime(nextUpdate)));
  return Buffer.from(new asn1js.Sequence({ value: items }).toBER());
}

/** ResponseData (v1, the default, is left out). */
export function responseDataDer(responderId: Uint8Array, producedAt: Date, singles: Uint8Array[], nonce: Uint8Array | null): Der {
  const items: asn1js.AsnType[] = [raw(responderId), generalizedTime(producedAt), new asn1js.Sequence({ value: singles.map(raw) })];
  if (nonce) items.push(explicit(1, new asn1js.Sequence({ value: [raw(nonce)] })));
  return Buffer.from(new asn1js.Sequence({ value: items }).toBER());
}

/**
 * A successful OCSPResponse around the signed ResponseData. `certs` ([0] of BasicOCSPResponse) carries the
 * issuer's certificate and its parents, so a client finds the signer (the issuer itself) and its path.
 */
export function successfulResponseDer(tbs: Uint8Array, signatureAlgorithm: Uint8Array, signature: Uint8Array, certs: Uint8Array | null): Der {
  const basic: asn1js.AsnType[] = [raw(tbs), raw(signatureAlgorithm), new asn1js.BitString({ valueHex: signature })];
  if (certs) basic.push(raw(certs));
  const basicDer = new asn1js.Sequence({ value: basic }).toBER();
  return Buffer.from(new asn1js.Sequence({
    value: [
      new asn1js.Enumerated({ value: OCSP_STATUS.successful }),
      explicit(0, new asn1js.Sequence({ value: [new asn1js.ObjectIdentifier({ value: ID_PKIX_OCSP_BASIC }), new asn1js.OctetString({ valueHex: basicDer })] })),
    ],
  }).toBER());
}

/** `[0] EXPLICIT SEQUENCE OF Certificate`, encoded once per issuer. */
export function responseCertsDer(certificates: Uint8Array[]): Der {
  return Buffer.from(explicit(0, new asn1js.Sequence({ value: certificates.map(raw) })).toBER());
}

const unsuccessful = new Map<OcspStatus, Der>();
/** An OCSPResponse without responseBytes: malformedRequest, internalError, tryLater, unauthorized. */
export function unsuccessfulResponseDer(status: Exclude<OcspStatus, 'successful'>): Der {
  let der = unsuccessful.get(status);
  if (!der) {
    der = Buffer.from(new asn1js.Sequence({ value: [new asn1js.Enumerated({ value: OCSP_STATUS[status] })] }).toBER());
    unsuccessful.set(status, der);
  }
  return der;
}
