// Reading certificates the CA is given or has made: the exact encodings it reuses (subject name, public
// key), identifiers (serial, fingerprint, key identifiers), validity and CA constraints.
import { X509Certificate, createPublicKey, type KeyObject } from 'node:crypto';
import * as asn1js from 'asn1js';
import { AsnConvert } from '@peculiar/asn1-schema';
import {
  AuthorityKeyIdentifier, BasicConstraints, Certificate, SubjectKeyIdentifier, id_ce_authorityKeyIdentifier, id_ce_basicConstraints,
  id_ce_subjectKeyIdentifier,
} from '@peculiar/asn1-x509';
import { Name } from '../x509/x509.js';
import type { KeyAlgorithm } from '../keys/types.js';
import { bytes, sha256Hex, type Der } from '../x509/der.js';
import { keyIdentifierOf } from './extensions.js';

export interface CertificateInfo {
  der: Der;
  /** RFC 4514 text. */
  subject: string;
  issuer: string;
  /** The subject Name exactly as encoded in the certificate: the issuer name of what it signs. */
  subjectNameDer: Der;
  spkiDer: Der;
  /** Lowercase hex of the serial's value (no sign octet). */
  serialHex: string;
  fingerprintSha256: string;
  subjectKeyId: Buffer;
  authorityKeyId: Buffer | null;
  notBefore: Date;
  notAfter: Date;
  isCa: boolean;
  pathLen: number | undefined;
  keyAlgorithm: KeyAlgorithm | null;
  publicKey: KeyObject;
  x509: X509Certificate;
}

/** The algorithm of a public key, as profiles and CaKeys name them; null when the service does not support it. */
export function keyAlgorithmOf(key: KeyObject): KeyAlgorithm | null {
  const details = key.asymmetricKeyDetails ?? {};
  switch (key.asymmetricKeyType) {
    case 'ec':
      return details.namedCurve === 'prime256v1' ? 'ecdsa-p256' : details.namedCurve === 'secp384r1' ? 'ecdsa-p384' : null;
    case 'rsa': {
      const bits = details.modulusLength;
      return bits === 2048 ? 'rsa-2048' : bits === 3072 ? 'rsa-3072' : bits === 4096 ? 'rsa-4096' : null;
    }
    case 'ed25519':
      return 'ed25519';
    default:
      return null;
  }
}

/** The parsed certificate; throws a plain Error naming `what` when it is not one. */
export function readCertificate(der: Der, what: string): CertificateInfo {
  let x509: X509Certificate;
  let cert: Certificate;
  try {
    x509 = new X509Certificate(der);
    cert = AsnConvert.parse(der, Certificate);
  } catch (err) {
    throw new Error(`${what} is not an X.509 certificate: ${(err as Error).message}`);
  }
  // The exact encodings: the subject is reused as the issuer of what this certificate signs.
  const tree = asn1js.fromBER(der).result as asn1js.Sequence;
  const tbs = tree.valueBlock.value[0] as asn1js.Sequence;
  const fields = tbs.valueBlock.value;
  const offset = fields[0]?.idBlock.tagClass === 3 ? 1 : 0;
  const subjectNameDer = bytes((fields[offset + 4] as asn1js.AsnType).valueBeforeDecodeView);
  const spkiDer = bytes((fields[offset + 5] as asn1js.AsnType).valueBeforeDecodeView);

  const extensions = cert.tbsCertificate.extensions ?? [];
  const ext = (oid: string) => extensions.find((e) => e.extnID === oid);
  const basic = ext(id_ce_basicConstraints);
  const constraints = basic ? AsnConvert.parse(basic.extnValue, BasicConstraints) : undefined;
  const skiExt = ext(id_ce_subjectKeyIdentifier);
  const subjectPublicKey = bytes(cert.tbsCertificate.subjectPublicKeyInfo.subjectPublicKey);
  const subjectKeyId = skiExt ? bytes(AsnConvert.parse(skiExt.extnValue, SubjectKeyIdentifier).buffer) : keyIdentifierOf(subjectPublicKey);
  const akiExt = ext(id_ce_authorityKeyIdentifier);
  const akiId = akiExt ? AsnConvert.parse(akiExt.extnValue, AuthorityKeyIdentifier).keyIdentifier : undefined;
  const publicKey = createPublicKey({ key: spkiDer, format: 'der', type: 'spki' });
  return {
    der,
    subject: new Name(cert.tbsCertificate.subject).toString(),
    issuer: new Name(cert.tbsCertificate.issuer).toString(),
    subjectNameDer,
    spkiDer,
    serialHex: x509.serialNumber.toLowerCase().replace(/^0+(?=.)/, ''),
    fingerprintSha256: sha256Hex(der),
    subjectKeyId,
    authorityKeyId: akiId ? bytes(akiId.buffer) : null,
    notBefore: cert.tbsCertificate.validity.notBefore.getTime(),
    notAfter: cert.tbsCertificate.validity.notAfter.getTime(),
    isCa: constraints?.cA === true,
    pathLen: constraints?.pathLenConstraint,
    keyAlgorithm: keyAlgorithmOf(publicKey),
    publicKey,
    x509,
  };
}
