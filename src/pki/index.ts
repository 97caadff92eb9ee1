// The certificate authority's public surface: the only module other domains and the composition root
// import. createPki wires authorities, profiles, issuance, revocation and their GraphQL; the returned
// object also carries the service API for the other entry points (enrollment, EST, gRPC, publication).
import type { AuditWriter } from '../audit/index.js';
import type { Authz } from '../authz/index.js';
import type { Queryable, Sql } from '../db/client.js';
import type { NotifyHub } from '../db/notify-hub.js';
import type { GraphqlModule } from '../graphql/schema.js';
import type { Logger } from '../log.js';
import type { ResolvedCertificate } from './issuance/certificates.js';
import { createPkiAccess } from './authorities/access.js';
import { createAuthorities } from './authorities/authorities.js';
import { createAuthorityRevocation } from './authorities/authority-revocation.js';
import { bootstrapFromConfig, checkStoredKeys } from './authorities/authority-bootstrap.js';
import { createProvisioning } from './authorities/authority-provisioning.js';
import { selectLiveAuthorities } from './authorities/authority-queries.js';
import { createCertificateReads } from './issuance/certificates.js';
import { createChains } from './authorities/chains.js';
import { createClientCertificates } from './resolution/client-certificates.js';
import { createIssuance } from './issuance/issuance.js';
import { createIssuanceWriter } from './issuance/issuance-writer.js';
import { createCsrReader } from './issuance/csr-reader.js';
import type { WorkerPool } from '../worker-pool.js';
import { queuedKeys } from './keys/key-queue.js';
import type { CaKeys, KeyAlgorithm, KeyBackendKind } from './keys/types.js';
import { createProfiles } from './profiles/profiles.js';
import { createRegistry } from './authorities/registry.js';
import { pkiGraphqlModule } from './resolvers.js';
import { selectIssuerLedger } from './revocation/revocation-queries.js';
import { createRevocation } from './revocation/revocation.js';
import { createPublication, type PublicationSettings } from './publication/publication.js';
import { createPublicationBase, type PublicationBase } from './publication/publication-base.js';
import type { HttpServer } from '../http/server.js';
import type { RateLimitConfig, RateLimiter } from '../http/rate-limit.js';

export type { CaKeys, GeneratedKey, KeyAlgorithm, KeyBackendKind, StoredKeyRef } from './keys/types.js';
export { KEY_ALGORITHMS } from './keys/types.js';
export type { Caller, IssueInput, RenewInput, IssuedCertificate } from './issuance/issuance.js';
export type { RevokeInput, Revocation, BulkInput } from './revocation/revocation.js';
export type { ResolvedCertificate, CertificateStatus } from './issuance/certificates.js';
export type { IssuerContext } from './authorities/registry.js';
export type { LedgerRow } from './revocation/revocation-queries.js';
export type { AuthorityRow, AuthorityKind, AuthorityStatus } from './authorities/authority-queries.js';
export type { CertificateRow } from './issuance/certificate-queries.js';
export { REVOKED_TOPIC, type RevokedNotice } from './revocation/revocation-events.js';
export { CHANGED_TOPIC, type Change as AuthorityChange } from './authorities/registry.js';
export { identityUri } from './issuance/leaf-builder.js';
export { readCsr, readCsrDer, type CsrRequest } from './issuance/csr.js';
export { derToPem, pemBlocks, sha256Hex, signatureAlgorithmDer, REVOCATION_REASONS, REASON_CODES, type RevocationReason } from './x509/der.js';
export { publicationUrls } from './issuance/extensions.js';
export { listenerBaseUrl, type PublicationBase } from './publication/publication-base.js';
export { createCertificateResolution, type CertificateResolution } from './resolution/resolution.js';
export type { ClientCertificates, ClientCertificateVerdict, PresentedCertificate, VerifyOptions } from './resolution/client-certificates.js';
export { certificateGrpcService } from './resolution/grpc.js';
export { prepareDevCa, ensureDevCaFiles } from './dev-ca/dev-ca.js';

export interface PkiSettings {
  /** SVC_PKI_PUBLICATION_BASE_URL; null: the address given to followPublicationAddress (a bound listener). */
  publicationBaseUrl: string | null;
  rootCertPath: string | undefined;
  platformIntermediateCertPath: string | undefined;
  platformIntermediateKeyPath: string | undefined;
  caKeyBackend: KeyBackendKind;
  authorityKeyAlgorithm: KeyAlgorithm;
  authorityTtlSecs: number;
  maxCsrBytes: number;
  generatedKeyIssuance: boolean;
  /** SVC_PKI_PROFILE_EXTENDED_KEY_USAGES_ENABLED: profiles may widen leaves beyond clientAuth. */
  profileExtendedKeyUsages: boolean;
  /** SVC_PKI_PKCS11_MAX_IN_FLIGHT: token operations of this service beyond it wait for a slot. */
  pkcs11MaxInFlight: number;
  lists: { defaultLimit: number; maxLimit: number };
  /** CRL and OCSP validity (SVC_PKI_CRL_VALIDITY_SECS, SVC_PKI_OCSP_VALIDITY_SECS). */
  publication: PublicationSettings;
}

export interface PkiDeps {
  sql: Sql;
  /**
   * The same pool through a statement scope (db/statement-scope.ts), for the services a custom endpoint
   * call may run and abandon: issuance, revocation, profiles, authorities. Registry, publication and the
   * batched writes keep `sql`: what they load or write is shared between callers. Defaults to `sql`.
   */
  scopedSql?: Sql;
  hub: NotifyHub;
  authz: Authz;
  audit: AuditWriter;
  keys: CaKeys;
  /** The worker pool: CSRs are read and verified there. */
  workers: WorkerPool;
  log: Logger;
  settings: PkiSettings;
}

export function createPki(deps: PkiDeps) {
  const { sql, hub, authz, audit, log, settings } = deps;
  const scopedSql = deps.scopedSql ?? sql;
  const keys = queuedKeys(deps.keys, { pkcs11InFlight: settings.pkcs11MaxInFlight, maxWaiting: settings.pkcs11MaxInFlight * 128 });
  const access = createPkiAccess({ sql, authz });
  // Read at every issuance; a new base drops this instance's issuer contexts (their cached leaf extensions).
  const publicationBase = createPublicationBase(settings.publicationBaseUrl, () => registry.dropLocal({ all: true }));
  const registry = createRegistry({ sql, hub, log, publicationBase, extendedKeyUsagesEnabled: settings.profileExtendedKeyUsages });
  const provisioning = createProvisioning({
    sql, keys, registry, log,
    settings: {
      backend: settings.caKeyBackend, algorithm: settings.authorityKeyAlgorithm, ttlSecs: settings.authorityTtlSecs,
      publicationUrlsOf: (issuerId) => (publicationBase.known() ? publicationBase.urlsFor(issuerId) : null),
    },
  });
  const writer = createIssuanceWriter({ sql, hub });
  const csrs = createCsrReader({ workers: deps.workers, maxBytes: settings.maxCsrBytes });
  const issuance = createIssuance({
    sql: scopedSql, keys, registry, provisioning, access, writer, audit, csrs, settings: { generatedKeyIssuance: settings.generatedKeyIssuance },
  });
  const certificates = createCertificateReads({ sql, access, lists: settings.lists });
  const publication = createPublication({ sql, hub, keys, registry, certificates, log, settings: settings.publication });
  // Revocations move the publication caches of this instance before the revoking call returns.
  const revocation = createRevocation({ sql: scopedSql, hub, access, audit, published: publication.coherence });
  const profiles = createProfiles({
    sql: scopedSql, access, audit, changed: (id) => registry.changed({ profiles: [id], all: true }), extendedKeyUsagesEnabled: settings.profileExtendedKeyUsages,
  });
  const authorities = createAuthorities({ sql: scopedSql, access, provisioning, registry });
  const authorityRevocation = createAuthorityRevocation({ sql: scopedSql, access, registry, revocation });
  const chains = createChains({ sql, hub });
  let stopping = false;
  let reconciling: Promise<unknown> | undefined;

  return {
    /**
     * Start: refuses stored keys this configuration cannot use (naming the authority), loads root and
     * platform intermediate from configuration, makes the platform leaf issuer, then provisions tenants
     * that still lack an issuer in the background.
     */
    async init(): Promise<void> {
      checkStoredKeys(keys, await selectLiveAuthorities(sql));
      const changed = await bootstrapFromConfig({ sql, keys, log }, settings);
      if (changed.length) await registry.changed({ all: true });
      await provisioning.ensurePlatformLeafIssuer();
      reconciling = provisioning.reconcileTenants({ pageSize: 100, isStopping: () => stopping })
        .then((made) => { if (made) log.info('tenant authorities provisioned', { count: made }); })
        .catch((err: unknown) => log.warn('provisioning tenant authorities failed; retried at next start or first issuance', { err: String(err) }));
    },

    graphqlModule(): GraphqlModule {
      return pkiGraphqlModule({ authorities, profiles, certificates, issuance, revocation, publicationBase, authorityRevocation });
    },

    /** For the tenants domain (wired in the composition root). */
    tenantHooks: {
      /** After a tenant is created: its intermediate, when a platform intermediate is active. Never throws. */
      async created(tenantId: string, actorEntityId: string | null): Promise<void> {
        try {
          await provisioning.ensureTenantIssuer(tenantId, { entityId: actorEntityId });
        } catch (err) {
          log.warn('provisioning the authority of a new tenant failed; retried at first issuance', { tenant_id: tenantId, err: String(err) });
        }
      },
      /** Inside the tenant's deletion transaction: its entities' certificates are revoked (and stay so on restore). */
      deleting: (tx: Queryable, tenantId: string, actorEntityId: string) => revocation.revokeTenant(tx, tenantId, actorEntityId),
    },
    /** For the identity domain: inside an entity's deletion transaction. */
    entityHooks: {
      deleting: (tx: Queryable, entityId: string, actorEntityId: string) => revocation.revokeEntityDeleted(tx, entityId, actorEntityId),
    },

    /** Issuance and renewal for every entry point (same rules, same transaction as GraphQL). */
    issuance,
    /** Revocation for every entry point. */
    revocation,
    /** Lookups: byIssuerSerial, byFingerprint, byDer, byIssuerFingerprintSerial, record, trustBundle. */
    certificates,
    /** For CRL and OCSP publication: an issuer's certificate, key reference and encodings; its ledger pages. */
    publication: {
      issuer: (issuerId: string) => registry.issuer(issuerId),
      ledger: (issuerId: string, afterId = '0', limit = 10_000, notAfterFrom: Date | null = null) => selectIssuerLedger(sql, issuerId, afterId, limit, notAfterFrom),
    },
    /** For EST csrattrs: the key algorithms the default certificate profile accepts (a tenant's issuer's, given its profile id). */
    defaultProfile: (profileId: string | null = null) => registry.profile(profileId).then((p) => p?.profile ?? null),
    /** Chains O(1) in tenants: active roots, the platform chain, a tenant's chain by EST label (alias or id). */
    chains,
    /**
     * The client-certificate verifier of the TLS listeners (enrollment, MQTT over TLS, gRPC mTLS), over the
     * resolution cache the composition root creates once (src/pki/resolution.ts).
     */
    clientCertificates: (resolution: { certificate: (der: Uint8Array) => Promise<ResolvedCertificate | null> }) =>
      createClientCertificates({ sql, hub, registry, chains, resolve: resolution.certificate }),
    /** The public routes (trust bundle, issuer certificates, CRLs, OCSP) on the management listener. */
    registerPublicRoutes: (server: HttpServer, limiter: RateLimiter) => publication.registerRoutes(server, limiter),
    /** The same routes on their own node:http listener (SVC_PKI_PUBLICATION_ADDR), for HTTP/1.0 clients. */
    publicationListener: (limiter: RateLimiter, rateLimits: RateLimitConfig) => publication.listener(limiter, rateLimits),
    /**
     * The base of the URLs certificates embed (`urlsFor(issuerId)` at issuance, for any issuer). Without
     * SVC_PKI_PUBLICATION_BASE_URL it follows the address the composition root gives once a listener is bound.
     */
    publicationBase: publicationBase as PublicationBase,
    followPublicationAddress: (url: string) => publicationBase.follow(url),
    /** CRL and OCSP services and their cache coherence (tests, health). */
    publishing: publication,
    /** Authorities changed (drops this instance's caches and NOTIFYs the others). */
    authoritiesChanged: registry.changed,

    async close(): Promise<void> {
      stopping = true;
      chains.close();
      await reconciling;
      await csrs.close();
    },
  };
}

export type Pki = ReturnType<typeof createPki>;
