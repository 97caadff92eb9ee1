// Certificate signing requests: size bound, PEM framing, structure, proof of possession (the signature
// verified with Node's crypto), the key's algorithm, and the names its extensionRequest asks for. Only the
// key and the requested names are ever used: subject, constraints and usages come from the service.
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import * as asn1js from 'asn1js';
import { AsnConvert } from '@peculiar/asn1-schema';
import { CertificationRequest } from '@peculiar/asn1-csr';
import { ExtensionRequest, id_pkcs9_at_extensionRequest } from '@peculiar/asn1-pkcs9';
import { BasicConstraints, SubjectAlternativeName, id_ce_basicConstraints, id_ce_subjectAltName } from '@peculiar/asn1-x509';
import { AppError, invalidInput, isAppError } from '../../errors.js';
import { keyAlgorithmOf } from './certificate-info.js';
import { bytes, pemToDer, type Der } from '../x509/der.js';
import type { KeyAlgorithm } from '../keys/types.js';

/** Plain data (it crosses from the worker threads that read CSRs under load). */
export interface CsrRequest {
  spkiDer: Uint8Array;
  /** The subjectPublicKey bits (the key identifier is their SHA-1). */
  subjectPublicKey: Uint8Array;
  keyAlgorithm: KeyAlgorithm;
  dnsNames: string[];
  ipAddresses: string[];
  uris: string[];
  emails: string[];
  /** The CSR asked for a CA certificate (it gets a leaf anyway; recorded in the audit event). */
  askedCa: boolean;
}

/** Digest of each CSR signature algorithm the service verifies (null: the algorithm hashes itself). */
const CSR_SIGNATURES: Record<string, string | null> = {
  '1.2.840.10045.4.3.2': 'sha256',
  '1.2.840.10045.4.3.3': 'sha384',
  '1.2.840.10045.4.3.4': 'sha512',
  '1.2.840.113549.1.1.11': 'sha256',
  '1.2.840.113549.1.1.12': 'sha384',
  '1.2.840.113549.1.1.13': 'sha512',
  '1.3.101.112': null,
};

const bad = (why: string) => invalidInput(`csrPem is not a valid certificate signing request: ${why}`);

function child(node: asn1js.AsnType | undefined, index: number): asn1js.AsnType | undefined {
  const block = (node as asn1js.Constructed | undefined)?.valueBlock as { value?: asn1js.AsnType[] } | undefined;
  return Array.isArray(block?.value) ? block.value[index] : undefined;
}

const isSequence = (n: asn1js.AsnType | undefined): n is asn1js.Sequence => n instanceof asn1js.Sequence;

const EC_PUBLIC_KEY = '1.2.840.10045.2.1';
const JWK_CURVES: Record<string, { crv: string; size: number }> = {
  '1.2.840.10045.3.1.7': { crv: 'P-256', size: 32 },
  '1.3.132.0.34': { crv: 'P-384', size: 48 },
};

/**
 * An uncompressed P-256/P-384 key as JWK: OpenSSL 3 imports it in two thirds of the time its DER decoder
 * takes (the point is still checked to be on the curve). Anything else: null, and the DER path decides.
 */
function ecJwk(spki: asn1js.Sequence): { key: { kty: 'EC'; crv: string; x: string; y: string }; format: 'jwk' } | null {
  const algorithm = child(spki, 0);
  const oid = child(algorithm, 0);
  const curve = child(algorithm, 1);
  const bits = child(spki, 1);
  if (!(oid instanceof asn1js.ObjectIdentifier) || oid.valueBlock.toString() !== EC_PUBLIC_KEY) return null;
  if (!(curve instanceof asn1js.ObjectIdentifier) || !(bits instanceof asn1js.BitString)) return null;
  const c = JWK_CURVES[curve.valueBlock.toString()];
  const point = bits.valueBlock.valueHexView;
  if (!c || point.length !== 1 + 2 * c.size || point[0] !== 0x04) return null;
  const x = Buffer.from(point.subarray(1, 1 + c.size)).toString('base64url');
  const y = Buffer.from(point.subarray(1 + c.size)).toString('base64url');
  return { key: { kty: 'EC', crv: c.crv, x, y }, format: 'jwk' };
}

/** The checks made before any parsing: present, within SVC_PKI_ENROLLMENT_MAX_CSR_BYTES, one PEM block. */
export function csrDerOf(pem: unknown, maxBytes: number): Der {
  if (typeof pem !== 'string' || pem.trim() === '') throw invalidInput('csrPem is required');
  if (Buffer.byteLength(pem) > maxBytes) {
    throw new AppError('PAYLOAD_TOO_LARGE', `csrPem exceeds the limit of ${maxBytes} bytes (SVC_PKI_ENROLLMENT_MAX_CSR_BYTES)`);
  }
  return pemToDer(pem, ['CERTIFICATE REQUEST', 'NEW CERTIFICATE REQUEST'], 'csrPem');
}

/** Parses and verifies a PEM CSR of at most `maxBytes`; every failure is INVALID_INPUT naming the reason. */
export function readCsr(pem: unknown, maxBytes: number): CsrRequest {
  return readCsrDer(csrDerOf(pem, maxBytes));
}

/**
 * The same from DER (EST sends base64 DER). The ASN.1 decoders throw plain errors on some malformed
 * input (odd-length BMP/Universal strings, bad OIDs): anything but a deliberate refusal is a malformed CSR.
 */
export function readCsrDer(der: Der): CsrRequest {
  try {
    return readCsrUnchecked(der);
  } catch (err) {
    if (isAppError(err)) throw err;
    throw bad('malformed DER');
  }
}

/**
 * What one CSR may hold. A real one has a handful of RDNs, one or two attributes and a few extensions (at
 * most 100 names: the profiles' ceiling); a 60 KB request of 2,500 RDNs cost asn1js half a second to decode
 * (its decoder is superlinear in elements), so the decoder stops at `asn1Elements` and the counts are checked
 * before any key is read, signature verified or schema parse run.
 */
export const CSR_LIMITS = { asn1Elements: 1000, asn1Depth: 32, subjectRdns: 64, subjectAttributes: 64, attributes: 16, extensions: 32 } as const;

const tooMany = (what: string, count: number, limit: number) =>
  invalidInput(`csrPem is refused: ${count} ${what}, more than the limit of ${limit}`);

const valuesOf = (node: asn1js.AsnType | undefined): asn1js.AsnType[] => {
  const block = (node as asn1js.Constructed | undefined)?.valueBlock as { value?: asn1js.AsnType[] } | undefined;
  return Array.isArray(block?.value) ? block.value : [];
};

const EXTENSION_REQUEST = '1.2.840.113549.1.9.14';

/** RDN, subject attribute, CSR attribute and requested extension counts, within CSR_LIMITS (read off the bounded decode). */
function checkCounts(info: asn1js.Sequence): void {
  const rdns = valuesOf(child(info, 1));
  if (rdns.length > CSR_LIMITS.subjectRdns) throw tooMany('subject RDNs', rdns.length, CSR_LIMITS.subjectRdns);
  const avas = rdns.reduce((n, rdn) => n + valuesOf(rdn).length, 0);
  if (avas > CSR_LIMITS.subjectAttributes) throw tooMany('subject attributes', avas, CSR_LIMITS.subjectAttributes);
  const attributes = valuesOf(child(info, 3));
  if (attributes.length > CSR_LIMITS.attributes) throw tooMany('attributes', attributes.length, CSR_LIMITS.attributes);
  let extensions = 0;
  for (const attribute of attributes) {
    const type = child(attribute, 0);
    if (!(type instanceof asn1js.ObjectIdentifier) || type.valueBlock.toString() !== EXTENSION_REQUEST) continue;
    for (const value of valuesOf(child(attribute, 1))) extensions += valuesOf(value).length;
  }
  if (extensions > CSR_LIMITS.extensions) throw tooMany('requested extensions', extensions, CSR_LIMITS.extensions);
}

function readCsrUnchecked(der: Der): CsrRequest {
  const parsed = asn1js.fromBER(der, { maxNodes: CSR_LIMITS.asn1Elements, maxDepth: CSR_LIMITS.asn1Depth });
  if (parsed.result.error === 'Maximum ASN.1 node count exceeded') {
    throw invalidInput(`csrPem is refused: it holds more than ${CSR_LIMITS.asn1Elements} ASN.1 elements (a request may carry at most `
      + `${CSR_LIMITS.subjectRdns} subject RDNs, ${CSR_LIMITS.attributes} attributes and ${CSR_LIMITS.extensions} requested extensions)`);
  }
  if (parsed.result.error === 'Maximum ASN.1 nesting depth exceeded') throw invalidInput(`csrPem is refused: it nests deeper than ${CSR_LIMITS.asn1Depth} ASN.1 levels`);
  if (parsed.offset === -1 || parsed.offset !== der.length) throw bad('malformed DER');
  const root = parsed.result;
  const info = child(root, 0);
  if (isSequence(info)) checkCounts(info);
  const algorithm = child(child(root, 1), 0);
  const signature = child(root, 2);
  const spki = child(info, 2);
  if (!isSequence(root) || !isSequence(info) || !isSequence(spki) || !(algorithm instanceof asn1js.ObjectIdentifier)
    || !(signature instanceof asn1js.BitString) || !(child(info, 0) instanceof asn1js.Integer) || !isSequence(child(info, 1))) {
    throw bad('unexpected structure');
  }
  const oid = algorithm.valueBlock.toString();
  if (!(oid in CSR_SIGNATURES)) throw bad(`unsupported signature algorithm ${oid}`);
  const spkiDer = bytes(spki.valueBeforeDecodeView);
  let publicKey: KeyObject;
  try {
    publicKey = createPublicKey(ecJwk(spki) ?? { key: spkiDer, format: 'der', type: 'spki' });
  } catch {
    throw bad('the public key cannot be read');
  }
  const keyAlgorithm = keyAlgorithmOf(publicKey);
  if (!keyAlgorithm) {
    throw invalidInput('csrPem holds an unsupported key: use ECDSA P-256 or P-384, RSA 2048, 3072 or 4096, or Ed25519');
  }
  let verified = false;
  try {
    verified = verify(CSR_SIGNATURES[oid] ?? null, info.valueBeforeDecodeView, { key: publicKey, dsaEncoding: 'der' }, signature.valueBlock.valueHexView);
  } catch {
    verified = false;
  }
  if (!verified) throw bad('its signature does not verify with its own public key');
  const subjectPublicKey = bytes((child(spki, 1) as asn1js.BitString).valueBlock.valueHexView);
  const request: CsrRequest = {
    spkiDer, subjectPublicKey, keyAlgorithm, dnsNames: [], ipAddresses: [], uris: [], emails: [], askedCa: false,
  };
  const attributes = child(info, 3);
  if (attributes && ((attributes as asn1js.Constructed).valueBlock.value?.length ?? 0) > 0) readExtensionRequest(der, request);
  return request;
}

/** The names and constraints the extensionRequest attribute asks for (only CSRs that carry attributes pay for this). */
function readExtensionRequest(der: Der, request: CsrRequest): void {
  let csr: CertificationRequest;
  try {
    csr = AsnConvert.parse(der, CertificationRequest);
  } catch {
    throw bad('its attributes cannot be read');
  }
  for (const attribute of csr.certificationRequestInfo.attributes) {
    if (attribute.type !== id_pkcs9_at_extensionRequest) continue;
    for (const value of attribute.values) {
      let extensions: ExtensionRequest;
      try {
        extensions = AsnConvert.parse(value, ExtensionRequest);
      } catch {
        throw bad('its extensionRequest cannot be read');
      }
      for (const ext of extensions) {
        if (ext.extnID === id_ce_basicConstraints) {
          request.askedCa ||= AsnConvert.parse(ext.extnValue, BasicConstraints).cA;
        } else if (ext.extnID === id_ce_subjectAltName) {
          for (const name of AsnConvert.parse(ext.extnValue, SubjectAlternativeName)) {
            if (name.dNSName !== undefined) request.dnsNames.push(name.dNSName);
            else if (name.iPAddress !== undefined) request.ipAddresses.push(name.iPAddress);
            else if (name.uniformResourceIdentifier !== undefined) request.uris.push(name.uniformResourceIdentifier);
            else if (name.rfc822Name !== undefined) request.emails.push(name.rfc822Name);
            else throw invalidInput('csrPem asks for a subjectAltName type the service does not issue (only DNS names and IP addresses)');
          }
        }
      }
    }
  }
}
