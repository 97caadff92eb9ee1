// The issuers that publish CRLs and answer OCSP (leaf issuers, retired versions included), with what
// publication needs of each encoded once: responder id, the certificates a response carries, and the
// name and key hashes OCSP CertIDs are matched against. Built from the registry's issuer contexts, which
// drop on authority changes (pki.changed) on every instance.
import { isUuid } from '../validate.js';
import { pemBlocks, type Der } from './der.js';
import type { StoredKeyRef } from './keys/types.js';
import { issuerHashes, responderIdByKey, responseCertsDer, subjectPublicKeyBits } from './ocsp-der.js';
import type { IssuerContext, Registry } from './registry.js';

/**
 * The leaf issuers publish their leaves' revocation; the platform intermediate publishes that of the
 * authorities it signed (tenant intermediates, the platform leaf issuer), so a relying party can check the
 * whole chain. The root's CRL is the operator's, made offline: its key never enters the service.
 */
const PUBLISHING_KINDS = new Set(['platform_intermediate', 'platform_leaf_issuer', 'tenant_intermediate']);
const PUBLISHING_STATUSES = new Set(['active', 'retiring', 'retired']);

export interface PublishingIssuer {
  id: string;
  context: IssuerContext;
  keyRef: StoredKeyRef;
  signatureAlgorithm: Der;
  issuerName: Der;
  subjectKeyId: Buffer;
  responderId: Der;
  /** [0] certs of a BasicOCSPResponse: the issuer and its parents up to (without) the root. */
  responseCerts: Der;
  /** Whether a CertID names this issuer, for the digest the client used. */
  matches(hash: string, nameHash: Buffer, keyHash: Buffer): boolean;
}

function build(id: string, context: IssuerContext): PublishingIssuer | null {
  const row = context.authority;
  if (!PUBLISHING_KINDS.has(row.kind) || !PUBLISHING_STATUSES.has(row.status) || !row.key_ref) return null;
  const keyBits = subjectPublicKeyBits(context.info.spkiDer);
  const hashes = new Map<string, { name: Buffer; key: Buffer }>();
  const chain = pemBlocks(context.chainPem, ['CERTIFICATE']);
  return {
    id,
    context,
    keyRef: row.key_ref,
    signatureAlgorithm: context.signatureAlgorithm,
    issuerName: context.info.subjectNameDer,
    subjectKeyId: context.info.subjectKeyId,
    responderId: responderIdByKey(keyBits),
    responseCerts: responseCertsDer(chain.length ? chain : [context.info.der]),
    matches(hash, nameHash, keyHash) {
      let h = hashes.get(hash);
      if (!h) hashes.set(hash, (h = issuerHashes(hash, context.info.subjectNameDer, keyBits)));
      return h.name.equals(nameHash) && h.key.equals(keyHash);
    },
  };
}

export function createPublishingIssuers(registry: Registry) {
  const built = new WeakMap<IssuerContext, PublishingIssuer | null>();
  return {
    /** The publishing issuer `id` names, or null (not a UUID, unknown, a root or intermediate, pending or failed). */
    async get(id: string): Promise<PublishingIssuer | null> {
      if (!isUuid(id)) return null;
      const context = await registry.issuer(id);
      if (!context) return null;
      let issuer = built.get(context);
      if (issuer === undefined) built.set(context, (issuer = build(id, context)));
      return issuer;
    },
  };
}

export type PublishingIssuers = ReturnType<typeof createPublishingIssuers>;
