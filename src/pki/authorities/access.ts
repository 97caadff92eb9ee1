// Who may do what in the CA (SPEC.md "Authentication" 10): certificates follow credential-management
// authority over the entity (the auth domain's rule, reused), or the exact credential's rotate/revoke/read;
// authorities and profiles need pki.provision on the tenant (platform scope for platform ones), the
// automatic flow pki.provision_automated on the platform too; reading authorities needs read.
import { createCredentialAuthority, type Principal } from '../../auth/index.js';
import type { Authz, ObjectRef } from '../../authz/index.js';
import { forbidden, type AppError } from '../../errors.js';
import { missingAnswer } from '../../access/guard.js';
import { readableTenants } from '../../access/readable-scope.js';
import type { Queryable } from '../../db/client.js';

export interface SubjectEntity {
  id: string;
  kind: 'human' | 'device' | 'service' | 'workload' | 'application';
  name: string;
  tenant_id: string | null;
  status: string;
  deleted: boolean;
}

const tenantRef = (tenantId: string | null): ObjectRef =>
  tenantId === null ? { kind: 'tenant', id: null, tenantId: null } : { kind: 'tenant', id: tenantId };

export function createPkiAccess(deps: { sql: Queryable; authz: Authz }) {
  const { authz } = deps;
  const credentials = createCredentialAuthority(authz);

  const exact = (p: Principal, action: string, credentialId: string) =>
    authz.decide(p, action, { kind: 'credential', id: credentialId }).then((d) => d.allowed);

  /** credential.manage on the entity: the issuing right. Never the entity itself (it enrolls through /pki/enroll). */
  const mayManage = (p: Principal, entity: SubjectEntity) => credentials.allowed(p, entity, 'manage', false);

  return {
    mayManage,
    async requireIssue(p: Principal, entity: SubjectEntity): Promise<void> {
      if (!(await mayManage(p, entity))) throw forbidden();
    },
    /** Renewal: manage on the entity, or rotate on the exact credential. */
    async requireRotate(p: Principal, entity: SubjectEntity, credentialId: string): Promise<void> {
      if (await mayManage(p, entity)) return;
      if (p.scoped || !(await exact(p, 'rotate', credentialId))) throw forbidden();
    },
    /** Revocation: manage on the entity, or revoke on the exact credential. */
    async mayRevoke(p: Principal, entity: SubjectEntity, credentialId: string): Promise<boolean> {
      if (await mayManage(p, entity)) return true;
      return !p.scoped && (await exact(p, 'revoke', credentialId));
    },
    /** Listing one entity's certificates: credential read or manage over it, or the entity itself. */
    mayReadEntity: (p: Principal, entity: SubjectEntity) => credentials.allowed(p, entity, 'read', true),
    /** Reading a certificate: credential read or manage over the entity, or any of read/rotate/revoke on it. */
    async mayRead(p: Principal, entity: SubjectEntity, credentialId: string): Promise<boolean> {
      if (await credentials.allowed(p, entity, 'read', true)) return true;
      if (p.scoped) return false;
      for (const action of ['read', 'rotate', 'revoke']) if (await exact(p, action, credentialId)) return true;
      return false;
    },
    /**
     * Tenants whose certificates the caller may list (grants applied before paging): null = all (credential
     * read or manage at platform scope); otherwise the tenants where it holds either on credentials.
     */
    async listableTenants(p: Principal, requested: string | null | undefined): Promise<string[] | null> {
      if (p.scoped) return [];
      const viaManage = await readableTenants(deps, p, 'manage', 'credential', requested);
      if (viaManage === null) return null;
      const viaRead = await readableTenants(deps, p, 'read', 'credential', requested);
      if (viaRead === null) return null;
      return [...new Set([...viaManage, ...viaRead])];
    },
    /** Bulk revocation: manage on credentials across the tenant (platform scope for null). */
    async requireScopeManage(p: Principal, tenantId: string | null): Promise<void> {
      if (p.scoped) throw forbidden();
      await authz.require(p, 'manage', { kind: 'credential', id: null, tenantId });
    },
    /** pki.provision on the tenant, or at platform scope for the platform's authorities and profiles. */
    async requireProvision(p: Principal, tenantId: string | null): Promise<void> {
      await authz.require(p, 'pki.provision', tenantRef(tenantId));
    },
    /** The automatic flow: pki.provision on the tenant and pki.provision_automated on the platform. */
    async requireAutomatedProvision(p: Principal, tenantId: string): Promise<void> {
      await authz.require(p, 'pki.provision', tenantRef(tenantId));
      await authz.require(p, 'pki.provision_automated', tenantRef(null));
    },
    /** Reading a tenant's authorities or profiles: read on that tenant, or read at platform scope. */
    async mayReadTenant(p: Principal, tenantId: string): Promise<boolean> {
      const options = { readingFrozenTenant: true };
      if ((await authz.decide(p, 'read', tenantRef(null), options)).allowed) return true;
      return (await authz.decide(p, 'read', tenantRef(tenantId), options)).allowed
        || (await authz.decide(p, 'pki.provision', tenantRef(tenantId))).allowed;
    },
    /** null: every tenant (platform read); otherwise the tenants the caller may read. */
    async readableTenantIds(p: Principal): Promise<string[] | null> {
      return readableTenants(deps, p, 'read', 'tenant');
    },
    /**
     * The answer to an authority or certificate profile id that names nothing (guard.missing): NOT_FOUND
     * to a caller reading or provisioning authorities at platform scope, FORBIDDEN to anyone else, who is
     * refused on another tenant's authority that same way.
     */
    missingAuthority: (p: Principal, what: string, tenantId?: string | null): Promise<AppError> =>
      missingAnswer(authz, p, 'tenant', what, { tenantId, actions: ['read', 'pki.provision'] }),
    /** The answer to a certificate (or its entity) that names nothing: NOT_FOUND only to platform credential readers. */
    missingCertificate: (p: Principal, what = 'certificate', tenantId?: string | null): Promise<AppError> =>
      missingAnswer(authz, p, 'credential', what, { tenantId, actions: ['read', 'manage'] }),
    async isPlatformReader(p: Principal): Promise<boolean> {
      return (await authz.decide(p, 'read', tenantRef(null), { readingFrozenTenant: true })).allowed;
    },
  };
}

export type PkiAccess = ReturnType<typeof createPkiAccess>;
