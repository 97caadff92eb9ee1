// DER of a CRL (RFC 5280 5.1) around revoked entries encoded once, at revocation: the TBSCertList is the
// envelope (version, algorithm, issuer, thisUpdate, nextUpdate, CRL number and AKI extensions) with the
// stored entries placed verbatim inside it, so building a CRL of 100,000 entries costs one concatenation,
// not 100,000 schema encodings (@peculiar/x509's generator is quadratic; pkijs 20x OpenSSL).
import * as asn1js from 'asn1js';
import { certificateDer, extensionDer, raw, timeOf, type Der } from '../x509/der.js';
import { authorityKeyIdentifier } from '../issuance/extensions.js';

const ID_CE_CRL_NUMBER = '2.5.29.20';

export interface CrlParts {
  /** signatureAlgorithmDer() of the issuer's key. */
  signatureAlgorithm: Uint8Array;
  /** The issuer certificate's subject Name, exactly as encoded there. */
  issuerName: Uint8Array;
  /** The issuer's subject key identifier (the CRL's AKI, RFC 5280 5.2.1). */
  issuerKeyId: Uint8Array;
  thisUpdate: Date;
  nextUpdate: Date;
  crlNumber: bigint;
  /** revokedCertificates elements, DER, concatenated (may be empty). */
  entries: Uint8Array;
}

/** CRLNumber (RFC 5280 5.2.3): a non-negative INTEGER, at most 20 octets. */
function crlNumberExtension(n: bigint): Der {
  let hex = n.toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  if (/^[89a-f]/.test(hex)) hex = `00${hex}`;
  return extensionDer(ID_CE_CRL_NUMBER, false, new asn1js.Integer({ valueHex: Buffer.from(hex, 'hex') }).toBER());
}

/** DER TBSCertList, v2. */
export function tbsCertListDer(p: CrlParts): Der {
  const items: asn1js.AsnType[] = [
    new asn1js.Integer({ value: 1 }),
    raw(p.signatureAlgorithm),
    raw(p.issuerName),
    timeOf(p.thisUpdate),
    timeOf(p.nextUpdate),
  ];
  // RFC 5280 5.1.2.6: with no revoked certificates the list is absent, not empty.
  if (p.entries.length > 0) items.push(new asn1js.Sequence({ value: [raw(p.entries)] }));
  items.push(new asn1js.Constructed({
    idBlock: { tagClass: 3, tagNumber: 0 },
    value: [new asn1js.Sequence({ value: [raw(authorityKeyIdentifier(p.issuerKeyId)), raw(crlNumberExtension(p.crlNumber))] })],
  }));
  return Buffer.from(new asn1js.Sequence({ value: items }).toBER());
}

/** The signed CertificateList: the TBS, the algorithm and the signature `sign` makes over the TBS. */
export async function crlDer(p: CrlParts, sign: (tbs: Buffer) => Promise<Buffer>): Promise<Der> {
  const tbs = tbsCertListDer(p);
  return certificateDer(tbs, p.signatureAlgorithm, await sign(tbs));
}
