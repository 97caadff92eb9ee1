// OCSP on the hot path without an ASN.1 library call: the response (RFC 6960 4.2.1) written into one
// buffer from parts encoded once per issuer (responder id, signature algorithm, certificates) plus the
// slots of each answer (CertID and nonce as received, status, times, signature), and the request shape
// nearly every client sends (one CertID, optionally a nonce) matched against its template. asn1js costs
// ~50 µs to read a request and ~100 µs to encode a response here, several times the P-256 signature an
// answer needs. Anything that does not fit the templates goes to the asn1js reader (ocsp-der.ts); the
// tests hold both templates byte for byte to pkijs's encoding and to the asn1js reading.
import { REASON_CODES } from '../x509/der.js';
import type { CertRequest, CertStatus, ParsedRequest } from './ocsp-der.js';

/** Octets of a definite length's encoding. */
const lengthSize = (n: number) => (n < 0x80 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : 4);
/** Octets of a whole TLV with `n` content octets (one-octet tags only). */
const tlvSize = (n: number) => 1 + lengthSize(n) + n;

/** Writes tag and length at `off`; returns the offset of the content. */
function putHeader(b: Buffer, off: number, tag: number, n: number): number {
  b[off++] = tag;
  if (n < 0x80) b[off++] = n;
  else if (n < 0x100) {
    b[off++] = 0x81;
    b[off++] = n;
  } else if (n < 0x10000) {
    b[off++] = 0x82;
    b[off++] = n >> 8;
    b[off++] = n & 0xff;
  } else {
    b[off++] = 0x83;
    b[off++] = n >> 16;
    b[off++] = (n >> 8) & 0xff;
    b[off++] = n & 0xff;
  }
  return off;
}

/** GeneralizedTime TLV: 0x18 0x0f YYYYMMDDHHMMSSZ (whole seconds, as RFC 5280 4.1.2.5.2 wants). */
const TIME_TLV = 17;
// Answers made in the same second share producedAt, thisUpdate and nextUpdate: each formatted once.
const times = new Map<number, Buffer>();
function putTime(b: Buffer, off: number, ms: number): number {
  const second = Math.floor(ms / 1000);
  let t = times.get(second);
  if (!t) {
    if (times.size >= 64) times.clear();
    const iso = new Date(second * 1000).toISOString(); // 2026-11-28T05:40:12.000Z
    t = Buffer.from(`\x18\x0f${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`, 'latin1');
    times.set(second, t);
  }
  t.copy(b, off);
  return off + TIME_TLV;
}

export interface SingleAnswer {
  certIdDer: Buffer;
  state: CertStatus;
}

/** Octets of the certStatus choice. */
function statusSize(state: CertStatus): number {
  if (state.status !== 'revoked') return 2;
  return 2 + TIME_TLV + (state.reason === 'unspecified' ? 0 : 5);
}

/**
 * ResponseData (v1 left out) with one SingleResponse per answer, all with the same thisUpdate and
 * nextUpdate, and the request's nonce Extension echoed as received (RFC 8954): the to-be-signed bytes.
 */
export function responseDataTemplate(responderId: Buffer, producedAt: number, answers: SingleAnswer[], thisUpdate: number, nextUpdate: number, nonce: Buffer | null): Buffer {
  let singles = 0;
  const singleSizes = answers.map((a) => {
    const n = a.certIdDer.length + statusSize(a.state) + TIME_TLV + 2 + TIME_TLV;
    singles += tlvSize(n);
    return n;
  });
  const nonceSeq = nonce ? tlvSize(nonce.length) : 0;
  const content = responderId.length + TIME_TLV + tlvSize(singles) + (nonce ? tlvSize(nonceSeq) : 0);
  const b = Buffer.allocUnsafe(tlvSize(content));
  let off = putHeader(b, 0, 0x30, content);
  off += responderId.copy(b, off);
  off = putTime(b, off, producedAt);
  off = putHeader(b, off, 0x30, singles);
  answers.forEach((a, i) => {
    off = putHeader(b, off, 0x30, singleSizes[i] as number);
    off += a.certIdDer.copy(b, off);
    const s = a.state;
    if (s.status === 'good') off = putHeader(b, off, 0x80, 0);
    else if (s.status === 'unknown') off = putHeader(b, off, 0x82, 0);
    else {
      // RevokedInfo [1] IMPLICIT: the reason left out for 'unspecified', as in the CRL entry.
      const coded = s.reason !== 'unspecified';
      off = putHeader(b, off, 0xa1, TIME_TLV + (coded ? 5 : 0));
      off = putTime(b, off, s.revokedAt.getTime());
      if (coded) {
        b[off++] = 0xa0;
        b[off++] = 3;
        b[off++] = 0x0a;
        b[off++] = 1;
        b[off++] = REASON_CODES[s.reason];
      }
    }
    off = putTime(b, off, thisUpdate);
    off = putHeader(b, off, 0xa0, TIME_TLV);
    off = putTime(b, off, nextUpdate);
  });
  if (nonce) {
    off = putHeader(b, off, 0xa1, nonceSeq);
    off = putHeader(b, off, 0x30, nonce.length);
    off += nonce.copy(b, off);
  }
  return b;
}

// OCSPResponse { successful, [0] { id-pkix-ocsp-basic, OCTET STRING { BasicOCSPResponse } } }
const STATUS_SUCCESSFUL = Buffer.from('0a0100', 'hex');
const OID_BASIC = Buffer.from('06092b0601050507300101', 'hex');

/** The successful OCSPResponse around signed ResponseData; `certs` is the issuer's encoded [0] certs, or null. */
export function responseTemplate(tbs: Buffer, signatureAlgorithm: Buffer, signature: Buffer, certs: Buffer | null): Buffer {
  const bits = signature.length + 1;
  const basic = tbs.length + signatureAlgorithm.length + tlvSize(bits) + (certs?.length ?? 0);
  const octets = tlvSize(basic);
  const bytesSeq = OID_BASIC.length + tlvSize(octets);
  const explicit = tlvSize(bytesSeq);
  const top = STATUS_SUCCESSFUL.length + tlvSize(explicit);
  const b = Buffer.allocUnsafe(tlvSize(top));
  let off = putHeader(b, 0, 0x30, top);
  off += STATUS_SUCCESSFUL.copy(b, off);
  off = putHeader(b, off, 0xa0, explicit);
  off = putHeader(b, off, 0x30, bytesSeq);
  off += OID_BASIC.copy(b, off);
  off = putHeader(b, off, 0x04, octets);
  off = putHeader(b, off, 0x30, basic);
  off += tbs.copy(b, off);
  off += signatureAlgorithm.copy(b, off);
  off = putHeader(b, off, 0x03, bits);
  b[off++] = 0; // no unused bits
  off += signature.copy(b, off);
  if (certs) certs.copy(b, off);
  return b;
}

// ---- The request template: SEQ { SEQ { SEQ { SEQ { CertID } } [, [2] { SEQ { nonce Extension } }] } } ----

/** CertID hash algorithm OIDs (content octets) the template knows; any other goes to the asn1js reader. */
const HASH_OIDS: readonly (readonly [Buffer, string])[] = [
  [Buffer.from('2b0e03021a', 'hex'), 'sha1'],
  [Buffer.from('608648016503040201', 'hex'), 'sha256'],
  [Buffer.from('608648016503040202', 'hex'), 'sha384'],
  [Buffer.from('608648016503040203', 'hex'), 'sha512'],
];
const NONCE_OID = Buffer.from('06092b0601050507300102', 'hex');

/** Whether `b` holds exactly `expected` from `start` to `end` (a few octets: a loop, no view or native call). */
function holds(b: Buffer, start: number, end: number, expected: Buffer): boolean {
  if (end - start !== expected.length) return false;
  for (let i = 0; i < expected.length; i++) if (b[start + i] !== expected[i]) return false;
  return true;
}

function hashNamed(b: Buffer, start: number, end: number): string | undefined {
  for (const [oid, name] of HASH_OIDS) if (holds(b, start, end, oid)) return name;
  return undefined;
}

/** A TLV with tag `tag` at `off` in a DER (minimal, definite, at most two length octets) encoding that ends by `limit`. */
function tlvAt(b: Buffer, off: number, tag: number, limit: number): { start: number; end: number } | null {
  if (off + 2 > limit || b[off] !== tag) return null;
  const first = b[off + 1] as number;
  let start = off + 2;
  let n = first;
  if (first === 0x81) {
    n = b[off + 2] as number;
    if (n < 0x80) return null;
    start = off + 3;
  } else if (first === 0x82) {
    n = ((b[off + 2] as number) << 8) | (b[off + 3] as number);
    if (n < 0x100) return null;
    start = off + 4;
  } else if (first >= 0x80) return null;
  const end = start + n;
  return end <= limit ? { start, end } : null;
}

/**
 * The request when it has the template's shape (one CertID of a known digest, no version, requestor,
 * signature or per-request extensions; request extensions exactly one nonce), else null: null means
 * "ask the asn1js reader", never "malformed". Equal to parseOcspRequest's reading wherever it answers.
 */
export function matchRequestTemplate(b: Buffer): ParsedRequest | null {
  const top = tlvAt(b, 0, 0x30, b.length);
  if (!top || top.end !== b.length) return null;
  const tbs = tlvAt(b, top.start, 0x30, top.end);
  if (!tbs || tbs.end !== top.end) return null;
  const list = tlvAt(b, tbs.start, 0x30, tbs.end);
  if (!list) return null;
  const request = tlvAt(b, list.start, 0x30, list.end);
  if (!request || request.end !== list.end) return null;
  const certId = tlvAt(b, request.start, 0x30, request.end);
  if (!certId || certId.end !== request.end) return null;
  const cert = matchCertId(b, request.start, certId.end);
  if (!cert) return null;
  let nonce: Buffer | null = null;
  if (list.end !== tbs.end) {
    const exts = tlvAt(b, list.end, 0xa2, tbs.end);
    if (!exts || exts.end !== tbs.end) return null;
    const seq = tlvAt(b, exts.start, 0x30, exts.end);
    if (!seq || seq.end !== exts.end) return null;
    const ext = tlvAt(b, seq.start, 0x30, seq.end);
    if (!ext || ext.end !== seq.end || !holds(b, ext.start, Math.min(ext.start + NONCE_OID.length, ext.end), NONCE_OID)) return null;
    const value = tlvAt(b, ext.start + NONCE_OID.length, 0x04, ext.end);
    if (!value || value.end !== ext.end) return null;
    nonce = b.subarray(seq.start, seq.end);
  }
  return { certs: [cert], nonce };
}

/** CertID { AlgorithmIdentifier, OCTET STRING, OCTET STRING, INTEGER } from the TLV at `off`. */
function matchCertId(b: Buffer, off: number, end: number): CertRequest | null {
  const whole = tlvAt(b, off, 0x30, end);
  if (!whole || whole.end !== end) return null;
  const alg = tlvAt(b, whole.start, 0x30, end);
  if (!alg) return null;
  const oid = tlvAt(b, alg.start, 0x06, alg.end);
  if (!oid) return null;
  // Parameters: absent or NULL.
  if (oid.end !== alg.end && !(oid.end + 2 === alg.end && b[oid.end] === 0x05 && b[oid.end + 1] === 0)) return null;
  const hash = hashNamed(b, oid.start, oid.end);
  if (!hash) return null;
  const nameHash = tlvAt(b, alg.end, 0x04, end);
  if (!nameHash) return null;
  const keyHash = tlvAt(b, nameHash.end, 0x04, end);
  if (!keyHash) return null;
  const serialNumber = tlvAt(b, keyHash.end, 0x02, end);
  if (!serialNumber || serialNumber.end !== end || serialNumber.end === serialNumber.start) return null;
  let serial: string | null = null;
  // A negative or overlong serial was never issued here (ours are 16 positive octets). Leading zero
  // octets go, all but the last (the asn1js reader's /^(00)+(?=.)/ on the hex, without the string pass).
  if (serialNumber.end - serialNumber.start <= 33 && !((b[serialNumber.start] as number) & 0x80)) {
    let first = serialNumber.start;
    while (first < serialNumber.end - 1 && b[first] === 0) first++;
    serial = b.toString('hex', first, serialNumber.end);
  }
  return {
    certIdDer: b.subarray(off, end),
    hash,
    issuerNameHash: b.subarray(nameHash.start, nameHash.end),
    issuerKeyHash: b.subarray(keyHash.start, keyHash.end),
    serial,
  };
}
