// Certificates of the authorities the service makes itself (platform leaf issuer, tenant intermediates):
// a fresh key in the configured backend, a CSR it signs (proof of possession, kept on the record), and
// a CA certificate signed by the parent's key. Nothing here sees private key material.
import { randomUUID } from 'node:crypto';
import { AsnConvert } from '@peculiar/asn1-schema';
import { CertificationRequest, CertificationRequestInfo } from '@peculiar/asn1-csr';
import { AlgorithmIdentifier, Name as AsnName, SubjectPublicKeyInfo } from '@peculiar/asn1-x509';
import { Name } from '../x509/x509.js';
import type { AuthorityRow, NewAuthority } from './authority-queries.js';
import { readCertificate } from '../issuance/certificate-info.js';
import { bytes, certificateDer, derToPem, randomSerial, signatureAlgorithmDer, tbsCertificateDer } from '../x509/der.js';
import {
  authorityInfoAccess, authorityKeyIdentifier, caBasicConstraints, caKeyUsage, crlDistributionPoints, keyIdentifierOf, subjectKeyIdentifier,
  type PublicationUrls,
} from '../issuance/extensions.js';
import type { CaKeys, KeyAlgorithm, KeyBackendKind } from '../keys/types.js';

export interface AuthoritySettings {
  backend: KeyBackendKind;
  algorithm: KeyAlgorithm;
  ttlSecs: number;
  /**
   * Where the parent publishes revocation (publication-base.ts, read now): the CDP and AIA of the new
   * authority's certificate. null while no publication address is known (the management listener not yet
   * bound, publication listener off): the certificate then names none.
   */
  publicationUrlsOf: (issuerId: string) => PublicationUrls | null;
}

/** Clock skew allowance: certificates are valid from a few minutes before they were made. */
export const BACKDATE_MS = 5 * 60 * 1000;

export interface MadeAuthority {
  id: string;
  fields: NewAuthority;
}

/**
 * Generates the key, the CSR and the parent-signed certificate of a new issuing authority. The caller
 * inserts `fields` (status chosen by the caller) in its transaction.
 */
export async function makeIssuingAuthority(
  keys: CaKeys,
  settings: AuthoritySettings,
  parent: AuthorityRow,
  spec: { kind: 'platform_leaf_issuer' | 'tenant_intermediate'; tenantId: string | null; version: number; mode: 'automatic' | 'manual'; createdBy: string | null; defaultProfileId: string },
  subjectOf: (id: string) => string,
): Promise<MadeAuthority> {
  if (!parent.key_ref || !parent.certificate_der || !parent.key_algorithm) throw new Error(`authority ${parent.id} cannot sign: it has no key`);
  const id = randomUUID();
  const generated = await keys.generate(settings.backend, settings.algorithm, `svc-ca-${spec.kind}-${id}`);
  const spki = AsnConvert.parse(generated.spki, SubjectPublicKeyInfo);
  const subjectName = new Name(subjectOf(id));
  const subjectNameDer = bytes(subjectName.toArrayBuffer());
  const ownAlgorithm = signatureAlgorithmDer(generated.ref.algorithm);

  // Proof of possession: the new key signs its own request, as an external CA would have required.
  const info = new CertificationRequestInfo({ subject: AsnConvert.parse(subjectNameDer, AsnName), subjectPKInfo: spki });
  const infoDer = bytes(AsnConvert.serialize(info));
  const csrSignature = await keys.sign(generated.ref, infoDer);
  const csr = new CertificationRequest({
    certificationRequestInfo: info,
    signatureAlgorithm: AsnConvert.parse(ownAlgorithm, AlgorithmIdentifier),
    signature: csrSignature.buffer.slice(csrSignature.byteOffset, csrSignature.byteOffset + csrSignature.byteLength) as ArrayBuffer,
  });
  const csrPem = derToPem(bytes(AsnConvert.serialize(csr)), 'CERTIFICATE REQUEST');

  const parentInfo = readCertificate(parent.certificate_der, `authority ${parent.id}`);
  const now = Date.now();
  const notBefore = new Date(now - BACKDATE_MS);
  const notAfter = new Date(Math.min(now + settings.ttlSecs * 1000, parentInfo.notAfter.getTime()));
  if (notAfter.getTime() <= now) throw new Error(`the parent authority ${parent.id} has expired`);
  const keyId = keyIdentifierOf(bytes(spki.subjectPublicKey));
  const serial = randomSerial();
  const parentAlgorithm = signatureAlgorithmDer(parent.key_algorithm);
  const parentUrls = settings.publicationUrlsOf(parent.id);
  const tbs = tbsCertificateDer({
    serial, signatureAlgorithm: parentAlgorithm, issuerName: parentInfo.subjectNameDer, notBefore, notAfter, subjectName: subjectNameDer,
    subjectPublicKeyInfo: generated.spki,
    // The parent (the platform intermediate) publishes this certificate's revocation: its CRL, OCSP and certificate.
    extensions: [
      caBasicConstraints(0), caKeyUsage(), subjectKeyIdentifier(keyId), authorityKeyIdentifier(parentInfo.subjectKeyId),
      ...(parentUrls ? [authorityInfoAccess(parentUrls), crlDistributionPoints(parentUrls)] : []),
    ],
  });
  const signature = await keys.sign(parent.key_ref, tbs);
  const der = certificateDer(tbs, parentAlgorithm, signature);
  const made = readCertificate(der, 'the new authority certificate');
  return {
    id,
    fields: {
      tenantId: spec.tenantId, parentId: parent.id, kind: spec.kind, version: spec.version, status: 'pending', issuanceEnabled: false,
      subject: made.subject, serialNumber: made.serialHex, fingerprintSha256: made.fingerprintSha256, subjectKeyId: made.subjectKeyId.toString('hex'),
      authorityKeyId: made.authorityKeyId?.toString('hex') ?? null, certificateDer: der, csrPem, keyBackend: generated.ref.backend,
      keyRef: generated.ref, keyAlgorithm: generated.ref.algorithm, provisioningMode: spec.mode, failureReason: null,
      // No stored URLs: leaves embed the publication base current when they are built (publication-base.ts).
      defaultProfileId: spec.defaultProfileId, urls: null, notBefore: made.notBefore, notAfter: made.notAfter, createdBy: spec.createdBy,
    },
  };
}
