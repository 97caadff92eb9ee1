// Authorization and tenant-state guards shared by the management domains (entities, resources, groups...).
import type { Principal } from '../auth/principal.js';
import type { Authz, ObjectRef } from '../authz/index.js';
import type { Queryable } from '../db/client.js';
import { forbidden, notFound } from '../errors.js';
import { tenantStatus } from './queries.js';

export interface AccessGuard {
  /** Allowed when any of the actions is (e.g. write or manage for ordinary edits); FORBIDDEN otherwise. */
  requireAny(p: Principal, actions: readonly string[], object: ObjectRef): Promise<void>;
  /**
   * Management reads: a frozen tenant's data stays readable; what a deleted tenant owns is hidden at once,
   * answered NOT_FOUND ('<hiddenAs> not found', the object's kind by default) as a missing object is.
   */
  requireRead(p: Principal, object: ObjectRef, hiddenAs?: string): Promise<void>;
  /**
   * A change inside `tenantId`: the grants first (so a caller without them learns nothing about the
   * tenant), then the tenant state, so an authorized caller reads 'tenant is frozen' rather than a bare
   * 'forbidden'. Inactive and deleted tenants are refused by the engine itself.
   */
  requireWrite(p: Principal, actions: readonly string[], object: ObjectRef, tenantId: string | null): Promise<void>;
  requirePlatformAdmin(p: Principal): Promise<void>;
}

export function createAccessGuard(deps: { sql: Queryable; authz: Authz }): AccessGuard {
  const { sql, authz } = deps;

  async function anyAllowed(p: Principal, actions: readonly string[], object: ObjectRef, readingFrozenTenant: boolean) {
    for (const action of actions) {
      if ((await authz.decide(p, action, object, { readingFrozenTenant })).allowed) return true;
    }
    return false;
  }

  return {
    async requireAny(p, actions, object) {
      if (!(await anyAllowed(p, actions, object, false))) throw forbidden();
    },
    async requireRead(p, object, hiddenAs) {
      const decision = await authz.decide(p, 'read', object, { readingFrozenTenant: true });
      if (decision.allowed) return;
      if (decision.details?.tenant_status === 'deleted') throw notFound(hiddenAs ?? object.kind);
      throw forbidden();
    },
    async requireWrite(p, actions, object, tenantId) {
      // Grants are evaluated as for a read of a frozen tenant; the state check below then refuses the write.
      if (!(await anyAllowed(p, actions, object, true))) throw forbidden();
      if (!tenantId) return;
      const status = await tenantStatus(sql, tenantId);
      if (status === undefined) throw notFound('tenant');
      if (status !== 'active') throw forbidden(`tenant is ${status}`);
    },
    async requirePlatformAdmin(p) {
      if (!(await authz.isPlatformAdmin(p))) throw forbidden();
    },
  };
}
