// The issuers that publish CRLs and answer OCSP (leaf issuers, retired versions included), with what
// publication needs of each encoded once: responder id, the certificates a response carries, and the
// name and key hashes OCSP CertIDs are matched against. Built from the registry's issuer contexts, which
// drop on authority changes (pki.changed) on every instance.
import { isUuid } from '../../validate.js';
import { pemBlocks, type Der } from '../x509/der.js';
import type { StoredKeyRef } from '../keys/types.js';
import { issuerHashes, responderIdByKey, responseCertsDer, subjectPublicKeyBits } from './ocsp-der.js';
import { PUBLISHING_KINDS } from './publication-base.js';
import type { IssuerContext, Registry } from '../authorities/registry.js';

/**
 * The leaf issuers publish their leaves' revocation; the platform intermediate publishes that of the
 * authorities it signed (tenant intermediates, the platform leaf issuer), so a relying party can check the
 * whole chain. The root's CRL is the operator's, made offline: its key never enters the service.
 */
const REVOCATION_PUBLISHERS: ReadonlySet<string> = new Set([...PUBLISHING_KINDS, 'platform_intermediate']);
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
  if (!REVOCATION_PUBLISHERS.has(row.kind) || !PUBLISHING_STATUSES.has(row.status) || !row.key_ref) return null;
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
  // What each of the registry's loads gave, once settled: peek() answers without a promise while the
  // registry still holds that load (it drops it on an authority change).
  const settled = new WeakMap<Promise<IssuerContext | null>, PublishingIssuer | null>();
  return {
    /** The publishing issuer `id` names, or null (not a UUID, unknown, a root or intermediate, pending or failed). */
    async get(id: string): Promise<PublishingIssuer | null> {
      if (!isUuid(id)) return null;
      const load = registry.issuer(id);
      const context = await load;
      let issuer: PublishingIssuer | null = null;
      if (context) {
        issuer = built.get(context) ?? null;
        if (!built.has(context)) built.set(context, (issuer = build(id, context)));
      }
      settled.set(load, issuer);
      return issuer;
    },
    /** What get() would answer, when known without waiting; undefined when it is not (call get()). */
    peek(id: string): PublishingIssuer | null | undefined {
      const load = registry.peekIssuer(id);
      return load ? settled.get(load) : undefined;
    },
  };
}

export type PublishingIssuers = ReturnType<typeof createPublishingIssuers>;
