// The X.509 extensions the CA writes, encoded with @peculiar/asn1-x509: constraints and usages of leaves
// and authorities, names, key identifiers, and the publication URLs (OCSP, CA issuers, CRL).
import { AsnConvert } from '@peculiar/asn1-schema';
import {
  AccessDescription, AuthorityInfoAccessSyntax, AuthorityKeyIdentifier, BasicConstraints, CRLDistributionPoints, DistributionPoint,
  DistributionPointName, ExtendedKeyUsage, GeneralName, KeyIdentifier, KeyUsage, KeyUsageFlags, SubjectAlternativeName,
  SubjectKeyIdentifier, id_ad_caIssuers, id_ad_ocsp, id_ce_authorityKeyIdentifier, id_ce_basicConstraints, id_ce_cRLDistributionPoints,
  id_ce_extKeyUsage, id_ce_keyUsage, id_ce_subjectAltName, id_ce_subjectKeyIdentifier, id_pe_authorityInfoAccess,
} from '@peculiar/asn1-x509';
import { bytes, extensionDer, extensionDerFast, sha1, type Der } from '../x509/der.js';

/** Extended key usages a profile may grant (clientAuth is always among them). */
export const EKU_OIDS = {
  client_auth: '1.3.6.1.5.5.7.3.2',
  server_auth: '1.3.6.1.5.5.7.3.1',
  code_signing: '1.3.6.1.5.5.7.3.3',
  email_protection: '1.3.6.1.5.5.7.3.4',
  time_stamping: '1.3.6.1.5.5.7.3.8',
} as const;
export type ExtendedKeyUsageName = keyof typeof EKU_OIDS;
export const EKU_NAMES = Object.keys(EKU_OIDS) as ExtendedKeyUsageName[];

/** RFC 5280 4.2.1.2 method 1: SHA-1 of the subjectPublicKey BIT STRING contents. */
export function keyIdentifierOf(subjectPublicKey: Uint8Array): Buffer {
  return sha1(subjectPublicKey);
}

/** Leaves: never a CA, whatever the CSR asked. */
export const leafBasicConstraints = (): Der => extensionDer(id_ce_basicConstraints, true, AsnConvert.serialize(new BasicConstraints({ cA: false })));
export const leafKeyUsage = (): Der => extensionDer(id_ce_keyUsage, true, AsnConvert.serialize(new KeyUsage(KeyUsageFlags.digitalSignature)));

/** Issuing authorities: CA, at most `pathLen` intermediates below (0 for leaf issuers), certificate and CRL signing. */
export function caBasicConstraints(pathLen: number | undefined): Der {
  return extensionDer(id_ce_basicConstraints, true, AsnConvert.serialize(new BasicConstraints({ cA: true, ...(pathLen === undefined ? {} : { pathLenConstraint: pathLen }) })));
}
export function caKeyUsage(): Der {
  // digitalSignature too: the issuer signs its own OCSP responses (RFC 6960 4.2.2.2, no delegated responder).
  return extensionDer(id_ce_keyUsage, true, AsnConvert.serialize(new KeyUsage(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign | KeyUsageFlags.digitalSignature)));
}

export function extendedKeyUsage(names: readonly ExtendedKeyUsageName[]): Der {
  return extensionDer(id_ce_extKeyUsage, false, AsnConvert.serialize(new ExtendedKeyUsage(names.map((n) => EKU_OIDS[n]))));
}

export function subjectKeyIdentifier(keyId: Uint8Array): Der {
  return extensionDerFast(id_ce_subjectKeyIdentifier, false, bytes(AsnConvert.serialize(new SubjectKeyIdentifier(keyId))));
}

export function authorityKeyIdentifier(keyId: Uint8Array): Der {
  return extensionDer(id_ce_authorityKeyIdentifier, false, AsnConvert.serialize(new AuthorityKeyIdentifier({ keyIdentifier: new KeyIdentifier(keyId) })));
}

export interface SubjectAltNames {
  uris: string[];
  dnsNames: string[];
  ipAddresses: string[];
}

/** SAN: the identity URI first, then the DNS names and IP addresses the profile let through. */
export function subjectAltName(names: SubjectAltNames): Der {
  const general = [
    ...names.uris.map((u) => new GeneralName({ uniformResourceIdentifier: u })),
    ...names.dnsNames.map((d) => new GeneralName({ dNSName: d })),
    ...names.ipAddresses.map((ip) => new GeneralName({ iPAddress: ip })),
  ];
  return extensionDerFast(id_ce_subjectAltName, false, bytes(AsnConvert.serialize(new SubjectAlternativeName(general))));
}

export interface PublicationUrls {
  ocspUrl: string;
  caIssuersUrl: string;
  crlDistributionPointUrl: string;
}

/**
 * The public routes an issuer's certificates point at (served by the publication routes under /certs),
 * under a publication base (SVC_PKI_PUBLICATION_BASE_URL or the publication listener): call it through
 * PublicationBase.urlsFor at issuance, so the base is the current one.
 */
export function publicationUrls(publicationBaseUrl: string, issuerId: string): PublicationUrls {
  const base = `${publicationBaseUrl.replace(/\/+$/, '')}/certs/issuers/${issuerId}`;
  return { ocspUrl: `${base}/ocsp`, caIssuersUrl: `${base}/ca.crt`, crlDistributionPointUrl: `${base}/crl` };
}

export function authorityInfoAccess(urls: PublicationUrls): Der {
  return extensionDer(id_pe_authorityInfoAccess, false, AsnConvert.serialize(new AuthorityInfoAccessSyntax([
    new AccessDescription({ accessMethod: id_ad_ocsp, accessLocation: new GeneralName({ uniformResourceIdentifier: urls.ocspUrl }) }),
    new AccessDescription({ accessMethod: id_ad_caIssuers, accessLocation: new GeneralName({ uniformResourceIdentifier: urls.caIssuersUrl }) }),
  ])));
}

export function crlDistributionPoints(urls: PublicationUrls): Der {
  return extensionDer(id_ce_cRLDistributionPoints, false, AsnConvert.serialize(new CRLDistributionPoints([
    new DistributionPoint({ distributionPoint: new DistributionPointName({ fullName: [new GeneralName({ uniformResourceIdentifier: urls.crlDistributionPointUrl })] }) }),
  ])));
}
