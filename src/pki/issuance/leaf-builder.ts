// Building a leaf certificate: the subject and identity URI of an entity, the TTL against the profile and
// issuer bounds, the to-be-signed structure with every extension SPEC.md requires, generated key pairs,
// and the credential metadata of the result. Signing is the caller's (CaKeys); this module only encodes.
import { generateKeyPair, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { AsnConvert } from '@peculiar/asn1-schema';
import { AttributeTypeAndValue, AttributeValue, Name, RelativeDistinguishedName, SubjectPublicKeyInfo } from '@peculiar/asn1-x509';
import { invalidInput } from '../../errors.js';
import { BACKDATE_MS } from '../authorities/authority-certs.js';
import type { CertificateMetadata } from './certificate-queries.js';
import { bytes, certificateDer, derToPem, randomSerial, sha256Hex, tbsCertificateDer, type Der } from '../x509/der.js';
import { keyIdentifierOf, subjectAltName, subjectKeyIdentifier } from './extensions.js';
import type { KeyAlgorithm } from '../keys/types.js';
import type { ProfileContext, IssuerContext } from '../authorities/registry.js';

const generate = promisify(generateKeyPair);

/** The URI SAN naming the entity a leaf belongs to (ResolveCertificateV2 and re-enrollment map it back). */
export function identityUri(tenantId: string | null, entityId: string): string {
  return tenantId === null ? `urn:svc:platform:entity:${entityId}` : `urn:svc:tenant:${tenantId}:entity:${entityId}`;
}

const OID_CN = '2.5.4.3';
const OID_O = '2.5.4.10';

function rdn(type: string, value: string): RelativeDistinguishedName {
  return new RelativeDistinguishedName([new AttributeTypeAndValue({ type, value: new AttributeValue({ utf8String: value }) })]);
}

/** Subject of a leaf: O = owning tenant (absent for global entities), CN = entity id. Nothing from the CSR. */
export function leafSubject(tenantId: string | null, entityId: string): { der: Der; json: Record<string, string> } {
  const rdns = tenantId === null ? [rdn(OID_CN, entityId)] : [rdn(OID_O, tenantId), rdn(OID_CN, entityId)];
  const json: Record<string, string> = { common_name: entityId };
  if (tenantId !== null) json.organization = tenantId;
  return { der: bytes(AsnConvert.serialize(new Name(rdns))), json };
}

/** notAfter for `ttlSecs` (or the profile default), refused above the profile maximum or past the issuer. */
export function validityFor(ttlSecs: unknown, profile: ProfileContext['profile'], issuer: IssuerContext, now: number) {
  let ttl = profile.default_ttl_secs;
  if (ttlSecs !== undefined && ttlSecs !== null) {
    if (!Number.isInteger(ttlSecs) || (ttlSecs as number) <= 0) throw invalidInput('ttlSecs must be a positive whole number of seconds');
    ttl = ttlSecs as number;
  }
  if (ttl > profile.max_ttl_secs) {
    throw invalidInput(`ttlSecs ${ttl} exceeds the maximum of ${profile.max_ttl_secs} seconds of certificate profile '${profile.name}'`);
  }
  if (ttl < profile.min_ttl_secs) {
    throw invalidInput(`ttlSecs ${ttl} is below the minimum of ${profile.min_ttl_secs} seconds of certificate profile '${profile.name}'`);
  }
  const issuerEnd = issuer.info.notAfter.getTime();
  if (now + ttl * 1000 > issuerEnd) {
    throw invalidInput(`ttlSecs ${ttl} exceeds the issuer bound: issuer ${issuer.authority.id} expires at ${issuer.info.notAfter.toISOString()}, `
      + `at most ${Math.max(0, Math.floor((issuerEnd - now) / 1000))} seconds from now`);
  }
  // Whole seconds, as the certificate states them: expires_at must equal the notAfter exactly.
  const second = (ms: number) => new Date(Math.floor(ms / 1000) * 1000);
  return { ttl, notBefore: second(now - BACKDATE_MS), notAfter: second(now + ttl * 1000) };
}

export interface LeafKey {
  spkiDer: Uint8Array;
  subjectPublicKey: Uint8Array;
  keyAlgorithm: KeyAlgorithm;
}

export interface GeneratedLeafKey extends LeafKey {
  privateKeyPem: string;
}

const KEY_PARAMS: Record<KeyAlgorithm, [string, Record<string, unknown>]> = {
  'ecdsa-p256': ['ec', { namedCurve: 'prime256v1' }],
  'ecdsa-p384': ['ec', { namedCurve: 'secp384r1' }],
  'rsa-2048': ['rsa', { modulusLength: 2048 }],
  'rsa-3072': ['rsa', { modulusLength: 3072 }],
  'rsa-4096': ['rsa', { modulusLength: 4096 }],
  ed25519: ['ed25519', {}],
};

/** A leaf key pair made for issueGeneratedCertificateV2: the private key leaves once, as PKCS#8 PEM, never stored. */
export async function generateLeafKey(profile: ProfileContext['profile']): Promise<GeneratedLeafKey> {
  const algorithm = profile.key_algorithms.includes('ecdsa-p256') ? 'ecdsa-p256' : (profile.key_algorithms[0] as KeyAlgorithm);
  const [type, params] = KEY_PARAMS[algorithm];
  const pair = (await (generate as (t: string, o: unknown) => Promise<{ publicKey: KeyObject; privateKey: KeyObject }>)(type, params));
  const spkiDer = pair.publicKey.export({ format: 'der', type: 'spki' });
  const spki = AsnConvert.parse(spkiDer, SubjectPublicKeyInfo);
  return {
    spkiDer, subjectPublicKey: bytes(spki.subjectPublicKey), keyAlgorithm: algorithm,
    privateKeyPem: pair.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string,
  };
}

export interface LeafPlan {
  serialHex: string;
  tbs: Der;
  notBefore: Date;
  notAfter: Date;
  subjectJson: Record<string, string>;
  identityUri: string;
  subjectKeyId: string;
  names: { dnsNames: string[]; ipAddresses: string[] };
}

/** The TBSCertificate of a leaf for `entity`: non-CA, digitalSignature, the profile's EKUs (clientAuth always). */
export function planLeaf(
  issuer: IssuerContext, profile: ProfileContext, entity: { id: string; tenant_id: string | null }, key: LeafKey,
  names: { dnsNames: string[]; ipAddresses: string[] }, validity: { notBefore: Date; notAfter: Date },
): LeafPlan {
  const serial = randomSerial();
  const subject = leafSubject(entity.tenant_id, entity.id);
  const uri = identityUri(entity.tenant_id, entity.id);
  const keyId = keyIdentifierOf(key.subjectPublicKey);
  const tbs = tbsCertificateDer({
    serial, signatureAlgorithm: issuer.signatureAlgorithm, issuerName: issuer.info.subjectNameDer, notBefore: validity.notBefore,
    notAfter: validity.notAfter, subjectName: subject.der, subjectPublicKeyInfo: key.spkiDer,
    extensions: [...issuer.leafExtensions, profile.extendedKeyUsage, subjectAltName({ uris: [uri], ...names }), subjectKeyIdentifier(keyId)],
  });
  return {
    serialHex: serial.toString('hex'), tbs, notBefore: validity.notBefore, notAfter: validity.notAfter, subjectJson: subject.json,
    identityUri: uri, subjectKeyId: keyId.toString('hex'), names,
  };
}

export interface SignedLeaf {
  der: Der;
  pem: string;
  fingerprintSha256: string;
}

export function assembleLeaf(issuer: IssuerContext, plan: LeafPlan, signature: Buffer): SignedLeaf {
  const der = certificateDer(plan.tbs, issuer.signatureAlgorithm, signature);
  return { der, pem: derToPem(der, 'CERTIFICATE'), fingerprintSha256: sha256Hex(der) };
}

/** The credential metadata SPEC.md "Credentials" lists, plus what renewal and listings need. */
export function leafMetadata(
  issuer: IssuerContext, profile: ProfileContext['profile'], plan: LeafPlan, leaf: SignedLeaf, key: LeafKey,
  tenantId: string | null, keyMode: 'csr' | 'generated', renewedFrom: string | null,
): CertificateMetadata {
  const window = profile.renewal_window_secs * 1000;
  const dueAt = new Date(Math.max(plan.notBefore.getTime(), plan.notAfter.getTime() - window));
  return {
    certificate_pem: leaf.pem, subject: plan.subjectJson, dns_names: plan.names.dnsNames, ip_addresses: plan.names.ipAddresses,
    fingerprint_sha256: leaf.fingerprintSha256, subject_key_id: plan.subjectKeyId, issuer_fingerprint_sha256: issuer.info.fingerprintSha256,
    profile_id: profile.id, profile_name: profile.name, identity_uri: plan.identityUri, tenant_id: tenantId, key_algorithm: key.keyAlgorithm,
    key_mode: keyMode, not_before: plan.notBefore.toISOString(), not_after: plan.notAfter.toISOString(),
    renewal_threshold_seconds: profile.renewal_window_secs, renewal_due_at: dueAt.toISOString(), renewed_from_credential_id: renewedFrom,
  };
}
