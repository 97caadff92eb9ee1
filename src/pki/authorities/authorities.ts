// The authorities over the management API: reading them (read on the tenant or the platform) and the
// provisioning and retirement operations (pki.provision; the automatic flow also pki.provision_automated).
import type { Principal } from '../../auth/index.js';
import type { Sql } from '../../db/client.js';
import { forbidden, isAppError } from '../../errors.js';
import * as v from '../../validate.js';
import type { PkiAccess } from './access.js';
import { ProvisioningRefused, type Provisioning } from './authority-provisioning.js';
import * as q from './authority-queries.js';
import { derToPem } from '../x509/der.js';
import type { Registry } from './registry.js';

/** A failure of the key backend or the service, not an answer to the request: kept as a failed authority. */
const backendFailure = (err: unknown) => !isAppError(err) || err.kind === 'UNAVAILABLE' || err.kind === 'INTERNAL' || err.kind === 'RATE_LIMITED';

export function createAuthorities(deps: { sql: Sql; access: PkiAccess; provisioning: Provisioning; registry: Registry }) {
  const { sql, access, provisioning } = deps;

  /**
   * The platform's authorities need platform read; a tenant's need read on it. Their certificates are public
   * anyway (the trust bundle, and a tenant authority's chain), but not their records: key backend, state,
   * pending CSRs.
   */
  async function mayRead(p: Principal, row: q.AuthorityRow): Promise<boolean> {
    return row.tenant_id === null ? access.isPlatformReader(p) : access.mayReadTenant(p, row.tenant_id);
  }

  /** An authority by id for an operation of `p`; none answers as access.missingAuthority says. */
  async function lookup(p: Principal, id: unknown): Promise<q.AuthorityRow> {
    const row = await q.selectAuthority(sql, v.uuid('id', id));
    if (!row) throw await access.missingAuthority(p, 'authority');
    return row;
  }

  /** Loads an authority for a provisioning operation: pki.provision on its tenant (platform scope for platform ones). */
  async function forChange(p: Principal, id: unknown): Promise<q.AuthorityRow> {
    const row = await lookup(p, id);
    await access.requireProvision(p, row.tenant_id);
    return row;
  }

  return {
    async get(p: Principal, id: unknown): Promise<q.AuthorityRow> {
      const row = await lookup(p, id);
      if (!(await mayRead(p, row))) throw forbidden();
      return row;
    },

    async list(p: Principal, tenantId: unknown): Promise<q.AuthorityRow[]> {
      const tenant = v.optionalUuid('tenantId', tenantId);
      if (tenant !== null) {
        if (!(await access.mayReadTenant(p, tenant))) throw forbidden();
        return q.listAuthorities(sql, tenant, null);
      }
      const readable = await access.readableTenantIds(p);
      if (readable === null) return q.listAuthorities(sql, undefined, null);
      return q.listAuthorities(sql, undefined, readable);
    },

    async chainPem(row: q.AuthorityRow): Promise<string | null> {
      if (!row.certificate_der) return null;
      if (row.kind === 'root') return derToPem(row.certificate_der, 'CERTIFICATE');
      const issuer = await deps.registry.issuer(row.id);
      return issuer?.chainPem ?? null;
    },

    async beginProvisioning(p: Principal, tenantId: unknown, requestId: string | null): Promise<q.AuthorityRow> {
      const tenant = v.uuid('tenantId', tenantId);
      await access.requireProvision(p, tenant);
      const actor = { entityId: p.entityId, requestId };
      try {
        return (await provisioning.provision('tenant_intermediate', tenant, { when: 'always', activate: false, mode: 'manual', actor })).authority;
      } catch (err) {
        if (backendFailure(err)) await provisioning.recordFailure('tenant_intermediate', tenant, actor, err);
        throw err;
      }
    },

    async provisionAutomatically(p: Principal, tenantId: unknown, requestId: string | null) {
      const tenant = v.uuid('tenantId', tenantId);
      await access.requireAutomatedProvision(p, tenant);
      const actor = { entityId: p.entityId, requestId };
      try {
        const done = await provisioning.provision('tenant_intermediate', tenant, { when: 'always', activate: true, mode: 'automatic', actor });
        return { authority: done.authority, succeeded: true, validationError: null, replacedAuthorityIds: done.replaced };
      } catch (err) {
        if (err instanceof ProvisioningRefused) return { authority: null, succeeded: false, validationError: err.message, replacedAuthorityIds: [] };
        if (backendFailure(err)) await provisioning.recordFailure('tenant_intermediate', tenant, actor, err);
        throw err;
      }
    },

    async transition(p: Principal, id: unknown, requestId: string | null) {
      const row = await forChange(p, id);
      return provisioning.transition(row.id, { entityId: p.entityId, requestId });
    },
    async beginRetirement(p: Principal, id: unknown, requestId: string | null) {
      const row = await forChange(p, id);
      return provisioning.beginRetirement(row.id, { entityId: p.entityId, requestId });
    },
    async completeRetirement(p: Principal, id: unknown, requestId: string | null) {
      const row = await forChange(p, id);
      return provisioning.completeRetirement(row.id, { entityId: p.entityId, requestId });
    },
  };
}

export type Authorities = ReturnType<typeof createAuthorities>;
