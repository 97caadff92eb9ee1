// GraphQL of the certificate authority (V2 only): authorities, profiles, certificates, issuance, renewal
// and revocation, mapped from rows to the shapes of INTERFACES.md 1.9.
import { iso } from '../graphql/mapping.js';
import { authed, type Args } from '../graphql/resolve.js';
import { readSdl, type GraphqlModule } from '../graphql/schema.js';
import type { Authorities } from './authorities/authorities.js';
import type { AuthorityRevocation } from './authorities/authority-revocation.js';
import type { AuthorityRow } from './authorities/authority-queries.js';
import type { CertificateRow } from './issuance/certificate-queries.js';
import { statusOf, type CertificateReads } from './issuance/certificates.js';
import { derToPem } from './x509/der.js';
import type { Issuance, IssuedCertificate } from './issuance/issuance.js';
import type { PublicationUrls } from './issuance/extensions.js';
import { fromKeyAlgorithm, type ProfileRow, type Profiles } from './profiles/profiles.js';
import { PUBLISHING_KINDS, type PublicationBase } from './publication/publication-base.js';
import type { Revocation, RevocationService } from './revocation/revocation.js';

export function toCertificate(r: CertificateRow) {
  const m = r.metadata;
  return {
    credentialId: r.id, entityId: r.entity_id, issuerId: r.issuer_id, tenantId: r.tenant_id, serialNumber: r.identifier, status: statusOf(r),
    certificatePem: m.certificate_pem, pem: m.certificate_pem, subject: m.subject ?? {}, dnsNames: m.dns_names ?? [], ipAddresses: m.ip_addresses ?? [],
    fingerprintSha256: m.fingerprint_sha256, subjectKeyId: m.subject_key_id ?? null, issuerFingerprintSha256: m.issuer_fingerprint_sha256 ?? null,
    profileId: m.profile_id ?? null, profileName: m.profile_name ?? null, identityUri: m.identity_uri ?? null, keyAlgorithm: m.key_algorithm ?? null,
    renewedFromCredentialId: m.renewed_from_credential_id ?? null, renewalDueAt: m.renewal_due_at ?? null, notBefore: m.not_before ?? null,
    notAfter: iso(r.expires_at), expiresAt: iso(r.expires_at), createdAt: iso(r.created_at), revokedAt: iso(r.revoked_at),
    revocationReason: r.revocation_reason,
  };
}

function toAuthority(r: AuthorityRow, chainPem: string | null, urls: PublicationUrls | null) {
  return {
    id: r.id, tenantId: r.tenant_id, parentId: r.parent_id, kind: r.kind, version: r.version, status: r.status, issuanceEnabled: r.issuance_enabled,
    subject: r.subject, serialNumber: r.serial_number, fingerprintSha256: r.fingerprint_sha256, subjectKeyId: r.subject_key_id,
    authorityKeyId: r.authority_key_id, certificatePem: r.certificate_der ? derToPem(r.certificate_der, 'CERTIFICATE') : null, chainPem,
    csrPem: r.csr_pem, keyBackend: r.key_backend, keyAlgorithm: r.key_algorithm, provisioningMode: r.provisioning_mode,
    managedBy: r.provisioning_mode === 'config' ? 'config' : null, failureReason: r.failure_reason, defaultProfileId: r.default_profile_id,
    notBefore: iso(r.not_before), notAfter: iso(r.not_after), createdAt: iso(r.created_at), activatedAt: iso(r.activated_at),
    retiringAt: iso(r.retiring_at), retiredAt: iso(r.retired_at), updatedAt: iso(r.updated_at),
    ocspUrl: urls?.ocspUrl ?? null, caIssuersUrl: urls?.caIssuersUrl ?? null, crlDistributionPointUrl: urls?.crlDistributionPointUrl ?? null, revokedAt: iso(r.revoked_at),
    revocationReason: r.revocation_reason,
  };
}

function toProfile(r: ProfileRow) {
  return {
    id: r.id, tenantId: r.tenant_id, name: r.name, description: r.description, keyAlgorithms: r.key_algorithms.map(fromKeyAlgorithm),
    minTtlSecs: r.min_ttl_secs, defaultTtlSecs: r.default_ttl_secs, maxTtlSecs: r.max_ttl_secs, extendedKeyUsages: r.extended_key_usages,
    sanRules: { allowDnsNames: r.allow_dns_names, allowIpAddresses: r.allow_ip_addresses, dnsSuffixes: r.dns_suffixes, maxNames: r.max_san_names },
    renewalWindowSecs: r.renewal_window_secs, isSystem: r.is_system, createdAt: iso(r.created_at), updatedAt: iso(r.updated_at),
  };
}

const toIssued = (r: IssuedCertificate) => ({
  certificate: toCertificate(r.certificate), privateKeyPem: r.privateKeyPem, chainPem: r.chainPem, idempotentReplay: r.idempotentReplay,
});

const toRevocation = (r: Revocation) => ({
  certificate: toCertificate(r.certificate), reason: r.reason, actorEntityId: r.actorEntityId, revokedAt: iso(r.revokedAt), idempotentReplay: r.idempotentReplay,
});

export function pkiGraphqlModule(s: {
  authorities: Authorities; profiles: Profiles; certificates: CertificateReads; issuance: Issuance; revocation: RevocationService; publicationBase: PublicationBase;
  authorityRevocation: AuthorityRevocation;
}): GraphqlModule {
  // The URLs its leaves get if issued now (the stored ocsp_url etc. are the base at creation, history only).
  const urlsOf = (row: AuthorityRow) => (PUBLISHING_KINDS.has(row.kind) && s.publicationBase.known() ? s.publicationBase.urlsFor(row.id) : null);
  const authority = async (row: AuthorityRow) => toAuthority(row, await s.authorities.chainPem(row), urlsOf(row));
  const caller = (principal: Parameters<Parameters<typeof authed>[0]>[0], requestId: string) => ({ kind: 'principal' as const, principal, requestId });
  return {
    name: 'pki',
    sdl: readSdl('pki'),
    resolvers: {
      Query: {
        pkiAuthority: authed(async (p, a) => authority(await s.authorities.get(p, a.id))),
        pkiAuthorities: authed(async (p, a) => Promise.all((await s.authorities.list(p, a.tenantId)).map(authority))),
        certificate: authed(async (p, a) => toCertificate(await s.certificates.find(p, a))),
        certificates: authed(async (p, a) => {
          const page = await s.certificates.list(p, a);
          return { total: page.total, items: page.items.map(toCertificate) };
        }),
        certificateProfiles: authed(async (p, a) => (await s.profiles.list(p, a.tenantId)).map(toProfile)),
        certificateProfile: authed(async (p, a) => toProfile(await s.profiles.get(p, a.id))),
      },
      Mutation: {
        beginTenantAuthorityProvisioning: authed(async (p, a, ctx) => authority(await s.authorities.beginProvisioning(p, a.tenantId, ctx.requestId))),
        provisionTenantAuthorityAutomatically: authed(async (p, a, ctx) => {
          const r = await s.authorities.provisionAutomatically(p, a.tenantId, ctx.requestId);
          return { ...r, authority: r.authority ? await authority(r.authority) : null };
        }),
        beginAuthorityRetirement: authed(async (p, a, ctx) => authority(await s.authorities.beginRetirement(p, a.authorityId, ctx.requestId))),
        completeAuthorityRetirement: authed(async (p, a, ctx) => authority(await s.authorities.completeRetirement(p, a.authorityId, ctx.requestId))),
        revokeAuthority: authed(async (p, a, ctx) => authority(await s.authorityRevocation.revoke(p, a.authorityId, a.reason, ctx.requestId))),
        transitionRetirement: authed(async (p, a, ctx) => authority(await s.authorities.transition(p, a.authorityId, ctx.requestId))),
        setAuthorityDefaultProfile: authed(async (p, a) => authority(await s.authorities.get(p, await s.profiles.setDefault(p, a.authorityId, a.profileId)))),
        createCertificateProfile: authed(async (p, a) => toProfile(await s.profiles.create(p, a.input as Args))),
        updateCertificateProfile: authed(async (p, a) => toProfile(await s.profiles.update(p, a.id, a.input as Args))),
        deleteCertificateProfile: authed((p, a) => s.profiles.remove(p, a.id)),
        issueCertificateFromCsrV2: authed(async (p, a, ctx) => toIssued(await s.issuance.issueFromCsr(caller(p, ctx.requestId), a.input as Args))),
        issueGeneratedCertificateV2: authed(async (p, a, ctx) => toIssued(await s.issuance.issueGenerated(caller(p, ctx.requestId), a.input as Args))),
        renewCertificateFromCsrV2: authed(async (p, a, ctx) => toIssued(await s.issuance.renewFromCsr(caller(p, ctx.requestId), a.input as Args))),
        renewGeneratedCertificateV2: authed(async (p, a, ctx) => toIssued(await s.issuance.renewGenerated(caller(p, ctx.requestId), a.input as Args))),
        revokeCertificateV2: authed(async (p, a, ctx) => toRevocation(await s.revocation.revoke(caller(p, ctx.requestId), a.input as Args))),
        revokeEntityCertificates: authed((p, a, ctx) => s.revocation.revokeEntity(caller(p, ctx.requestId), a.entityId, a.reason)),
        bulkRevokeCertificates: authed((p, a, ctx) => s.revocation.bulk(p, a.input as Args, ctx.requestId)),
      },
    },
  };
}
