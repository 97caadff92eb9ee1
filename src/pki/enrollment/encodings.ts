// EST wire encodings (RFC 7030 and RFC 8951): base64 bodies in and out, the certs-only CMS SignedData the
// certificates travel in (pkijs), CsrAttrs for /csrattrs (asn1js), and serverkeygen's multipart/mixed.
import { randomBytes } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { invalidInput } from '../../errors.js';
import type { KeyAlgorithm } from '../keys/types.js';

/** Base64 wrapped at 64 characters, the line length openssl's base64 decoder reads by default. */
export function base64Lines(der: Uint8Array): string {
  const b64 = Buffer.from(der).toString('base64');
  return (b64.match(/.{1,64}/g) ?? []).join('\r\n') + '\r\n';
}

/**
 * An EST request body: base64 (RFC 8951: whitespace allowed, Content-Transfer-Encoding ignored). A client
 * sending raw DER (a SEQUENCE starts with 0x30, which is not base64) is accepted too.
 */
export function decodeEstBody(body: Buffer, what: string): Buffer {
  if (body.length === 0) throw invalidInput(`${what} is required in the request body (base64 DER)`);
  if (body[0] === 0x30) return body;
  const text = body.toString('latin1').replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text) || text.length % 4 === 1) throw invalidInput(`${what} must be base64-encoded DER`);
  const der = Buffer.from(text, 'base64');
  if (der.length === 0 || der[0] !== 0x30) throw invalidInput(`${what} must be base64-encoded DER`);
  return der;
}

/** A degenerate (unsigned) CMS SignedData carrying certificates only: RFC 7030 4.1.3 and 4.2.3. */
export function certsOnly(certificatesDer: Uint8Array[]): Buffer {
  const signed = new pkijs.SignedData({
    version: 1,
    encapContentInfo: new pkijs.EncapsulatedContentInfo({ eContentType: '1.2.840.113549.1.7.1' }),
    certificates: certificatesDer.map((der) => pkijs.Certificate.fromBER(der)),
  });
  const info = new pkijs.ContentInfo({ contentType: pkijs.ContentInfo.SIGNED_DATA, content: signed.toSchema(true) });
  return Buffer.from(info.toSchema().toBER(false));
}

export const PKCS7_CERTS_ONLY = 'application/pkcs7-mime; smime-type=certs-only';

const OID = {
  ecPublicKey: '1.2.840.10045.2.1',
  secp256r1: '1.2.840.10045.3.1.7',
  secp384r1: '1.3.132.0.34',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  rsaEncryption: '1.2.840.113549.1.1.1',
  sha256WithRsa: '1.2.840.113549.1.1.11',
  ed25519: '1.3.101.112',
};

const oid = (value: string) => new asn1js.ObjectIdentifier({ value });
const attribute = (type: string, values: string[]) =>
  new asn1js.Sequence({ value: [oid(type), new asn1js.Set({ value: values.map(oid) })] });

/**
 * CsrAttrs (RFC 7030 4.5.2) describing what the profile accepts: the key types as attributes (an EC key
 * with its curve, as RFC 8295 shows) and the signature algorithms as bare OIDs.
 */
export function csrAttrs(algorithms: readonly KeyAlgorithm[]): Buffer {
  const items: asn1js.BaseBlock[] = [];
  const curves = algorithms.flatMap((a) => (a === 'ecdsa-p256' ? [OID.secp256r1] : a === 'ecdsa-p384' ? [OID.secp384r1] : []));
  if (curves.length) items.push(oid(OID.ecdsaWithSha256), attribute(OID.ecPublicKey, curves));
  if (algorithms.some((a) => a.startsWith('rsa-'))) items.push(oid(OID.sha256WithRsa), oid(OID.rsaEncryption));
  if (algorithms.includes('ed25519')) items.push(oid(OID.ed25519));
  return Buffer.from(new asn1js.Sequence({ value: items }).toBER(false));
}

/** serverkeygen's answer (RFC 7030 4.4.2): the private key as PKCS#8, then the certificate, each base64. */
export function serverKeygenMultipart(privateKeyPkcs8: Uint8Array, certificateDer: Uint8Array): { contentType: string; body: string } {
  const boundary = `est-${randomBytes(12).toString('hex')}`;
  const part = (type: string, der: Uint8Array) =>
    `--${boundary}\r\nContent-Type: ${type}\r\nContent-Transfer-Encoding: base64\r\n\r\n${base64Lines(der)}`;
  const body = part('application/pkcs8', privateKeyPkcs8) + part(PKCS7_CERTS_ONLY, certsOnly([certificateDer])) + `--${boundary}--\r\n`;
  return { contentType: `multipart/mixed; boundary=${boundary}`, body };
}
