// DER plumbing of the CA: PEM framing, digests, serials, and the assembly of to-be-signed certificates,
// certificates and CRL entries from parts. Structures are encoded by @peculiar/asn1-x509 once (per
// issuer, per profile) and joined per certificate with asn1js, which costs a tenth of encoding the whole
// TBSCertificate through the schema classes on every issuance.
import { createHash, randomBytes } from 'node:crypto';
import * as asn1js from 'asn1js';
import { AsnConvert } from '@peculiar/asn1-schema';
import { AlgorithmIdentifier, CRLReason, Extension, RevokedCertificate, Time, id_ce_cRLReasons } from '@peculiar/asn1-x509';
import { OctetString } from '@peculiar/asn1-schema';
import { invalidInput } from '../../errors.js';
import type { KeyAlgorithm } from '../keys/types.js';

export type Der = Buffer;

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n([A-Za-z0-9+/=\r\n\t ]*?)-----END \1-----/g;

/** Every PEM block of `pem` whose label is in `labels`, as DER; other blocks are ignored. */
export function pemBlocks(pem: string, labels: readonly string[]): Der[] {
  const out: Der[] = [];
  for (const m of pem.matchAll(PEM_BLOCK)) {
    if (labels.includes(m[1] as string)) out.push(Buffer.from((m[2] as string).replace(/\s+/g, ''), 'base64'));
  }
  return out;
}

/** The single PEM block of one of `labels`; `what` names it in the error. */
export function pemToDer(pem: string, labels: readonly string[], what: string): Der {
  const blocks = pemBlocks(pem, labels);
  if (blocks.length !== 1 || (blocks[0] as Der).length === 0) {
    throw invalidInput(`${what} must be one PEM block labelled ${labels.map((l) => `'${l}'`).join(' or ')}`);
  }
  return blocks[0] as Der;
}

export function derToPem(der: Uint8Array, label: string): string {
  const b64 = Buffer.from(der.buffer, der.byteOffset, der.byteLength).toString('base64');
  let body = '';
  for (let i = 0; i < b64.length; i += 64) body += `${b64.slice(i, i + 64)}\n`;
  return `-----BEGIN ${label}-----\n${body}-----END ${label}-----\n`;
}

export const sha256Hex = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');
export const sha1 = (data: Uint8Array) => createHash('sha1').update(data).digest();

/** A byte view of an ArrayBuffer-backed value without copying. */
export function bytes(view: ArrayBuffer | ArrayBufferView): Buffer {
  return view instanceof ArrayBuffer ? Buffer.from(view) : Buffer.from(view.buffer, view.byteOffset, view.byteLength);
}

/**
 * 16 random bytes read as a positive INTEGER of exactly 16 octets: the top bit is cleared (positive) and
 * the next one set (no leading zero octet, so the DER content is the 16 bytes as they are): 126 bits of
 * randomness, well above the 64 that CA/Browser Forum rules ask for.
 */
export function randomSerial(): Buffer {
  const serial = randomBytes(16);
  serial[0] = ((serial[0] as number) & 0x7f) | 0x40;
  return serial;
}

/** Signature AlgorithmIdentifier and Node's digest name for keys of each algorithm (RFC 5758, 4055, 8410). */
const SIGNATURE_ALGORITHMS: Record<KeyAlgorithm, { oid: string; nullParams: boolean }> = {
  'ecdsa-p256': { oid: '1.2.840.10045.4.3.2', nullParams: false },
  'ecdsa-p384': { oid: '1.2.840.10045.4.3.3', nullParams: false },
  'rsa-2048': { oid: '1.2.840.113549.1.1.11', nullParams: true },
  'rsa-3072': { oid: '1.2.840.113549.1.1.11', nullParams: true },
  'rsa-4096': { oid: '1.2.840.113549.1.1.11', nullParams: true },
  ed25519: { oid: '1.3.101.112', nullParams: false },
};

const NULL_DER = new Uint8Array([0x05, 0x00]).buffer;

/** DER AlgorithmIdentifier of the signatures a key of `alg` makes (the CaKeys.sign contract). */
export function signatureAlgorithmDer(alg: KeyAlgorithm): Der {
  const a = SIGNATURE_ALGORITHMS[alg];
  return bytes(AsnConvert.serialize(new AlgorithmIdentifier({ algorithm: a.oid, ...(a.nullParams ? { parameters: NULL_DER } : {}) })));
}

/** One Extension (extnID, critical, extnValue) around an already encoded value. */
export function extensionDer(oid: string, critical: boolean, value: ArrayBuffer | Uint8Array): Der {
  return bytes(AsnConvert.serialize(new Extension({ extnID: oid, critical, extnValue: new OctetString(value) })));
}

/** The same, built with asn1js: per-certificate extensions (SAN, SKI) are wrapped on the hot path. */
export function extensionDerFast(oid: string, critical: boolean, value: Uint8Array): Der {
  const items: asn1js.AsnType[] = [new asn1js.ObjectIdentifier({ value: oid })];
  if (critical) items.push(new asn1js.Boolean({ value: true }));
  items.push(new asn1js.OctetString({ valueHex: value }));
  return Buffer.from(new asn1js.Sequence({ value: items }).toBER());
}

/**
 * Pre-encoded DER placed as it is inside an asn1js constructed value. asn1js's own RawData is only written
 * at the top level (inside a SEQUENCE its toBER ignores the writer and the bytes vanish), so this is the
 * one piece asn1js's constructed encoder calls: toBER(sizeOnly, writer) appending the bytes.
 */
class Verbatim {
  constructor(private readonly der: Uint8Array) {}
  toBER(_sizeOnly?: boolean, writer?: { write(buf: ArrayBuffer | Uint8Array): void }): ArrayBuffer {
    if (writer) {
      writer.write(this.der);
      return new ArrayBuffer(0);
    }
    return this.der.buffer.slice(this.der.byteOffset, this.der.byteOffset + this.der.byteLength) as ArrayBuffer;
  }
}
export const raw = (data: Uint8Array) => new Verbatim(data) as unknown as asn1js.AsnType;
const VERSION_3 = Buffer.from(new asn1js.Constructed({ idBlock: { tagClass: 3, tagNumber: 0 }, value: [new asn1js.Integer({ value: 2 })] }).toBER());

/** RFC 5280 4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050; whole seconds. */
export function timeOf(at: Date): asn1js.AsnType {
  const d = new Date(Math.floor(at.getTime() / 1000) * 1000);
  return d.getUTCFullYear() >= 2050 ? new asn1js.GeneralizedTime({ valueDate: d }) : new asn1js.UTCTime({ valueDate: d });
}

export interface TbsParts {
  serial: Uint8Array;
  /** signatureAlgorithmDer() of the issuer's key. */
  signatureAlgorithm: Uint8Array;
  /** The issuer certificate's subject Name, exactly as encoded there. */
  issuerName: Uint8Array;
  notBefore: Date;
  notAfter: Date;
  subjectName: Uint8Array;
  subjectPublicKeyInfo: Uint8Array;
  extensions: Uint8Array[];
}

/** DER TBSCertificate (v3) from encoded parts. */
export function tbsCertificateDer(p: TbsParts): Der {
  const serial = new asn1js.Integer({ valueHex: p.serial });
  const validity = new asn1js.Sequence({ value: [timeOf(p.notBefore), timeOf(p.notAfter)] });
  const extensions = new asn1js.Constructed({
    idBlock: { tagClass: 3, tagNumber: 3 },
    value: [new asn1js.Sequence({ value: p.extensions.map(raw) })],
  });
  return Buffer.from(new asn1js.Sequence({
    value: [raw(VERSION_3), serial, raw(p.signatureAlgorithm), raw(p.issuerName), validity, raw(p.subjectName), raw(p.subjectPublicKeyInfo), extensions],
  }).toBER());
}

/** DER Certificate: the signed TBS, the algorithm and the signature (as CaKeys.sign returns it). */
export function certificateDer(tbs: Uint8Array, signatureAlgorithm: Uint8Array, signature: Uint8Array): Der {
  return Buffer.from(new asn1js.Sequence({
    value: [raw(tbs), raw(signatureAlgorithm), new asn1js.BitString({ valueHex: signature })],
  }).toBER());
}

export const REVOCATION_REASONS = [
  'unspecified', 'key_compromise', 'ca_compromise', 'affiliation_changed', 'superseded', 'cessation_of_operation', 'privilege_withdrawn',
] as const;
export type RevocationReason = (typeof REVOCATION_REASONS)[number];

/** RFC 5280 5.3.1 CRLReason codes of the reasons the API accepts (certificateHold and removeFromCRL are not offered). */
export const REASON_CODES: Record<RevocationReason, number> = {
  unspecified: 0, key_compromise: 1, ca_compromise: 2, affiliation_changed: 3, superseded: 4, cessation_of_operation: 5, privilege_withdrawn: 9,
};

export function revocationReason(value: unknown): RevocationReason {
  if (value === undefined || value === null) return 'unspecified';
  if (typeof value !== 'string' || !(REVOCATION_REASONS as readonly string[]).includes(value)) {
    throw invalidInput(`reason must be one of ${REVOCATION_REASONS.join(', ')}`);
  }
  return value as RevocationReason;
}

/**
 * The DER of one revokedCertificates element of a CRL: serial, revocation date and, except for
 * 'unspecified' (RFC 5280 5.3.1: SHOULD be absent), the reasonCode entry extension.
 */
export function crlEntryDer(serialHex: string, revokedAt: Date, reason: RevocationReason): Der {
  const hex = serialHex.length % 2 ? `0${serialHex}` : serialHex;
  // A content octet with the top bit set would read as negative: INTEGER content gets a leading zero then.
  const serial = Buffer.from(/^[89a-f]/.test(hex) ? `00${hex}` : hex, 'hex');
  const entry = new RevokedCertificate({
    userCertificate: serial.buffer.slice(serial.byteOffset, serial.byteOffset + serial.length),
    revocationDate: new Time(revokedAt),
  });
  if (reason !== 'unspecified') {
    entry.crlEntryExtensions = [new Extension({
      extnID: id_ce_cRLReasons, critical: false, extnValue: new OctetString(AsnConvert.serialize(new CRLReason(REASON_CODES[reason]))),
    })];
  }
  return bytes(AsnConvert.serialize(entry));
}
