// Access checks of the access-model domains (roles, blocks, grants, actions, rules, audit): "any of these
// actions" for reads (frozen tenants stay readable), writes (tenant state after grants) and listings.
import type { Principal } from '../auth/principal.js';
import type { Authz, ObjectKind, ObjectRef } from '../authz/index.js';
import { createAccessGuard, type AccessGuard } from '../access/guard.js';
import { readableTenants } from '../access/readable-scope.js';
import type { Queryable } from '../db/client.js';
import { forbidden } from '../errors.js';

export interface ModelGate {
  /** FORBIDDEN unless one of the actions is allowed; frozen tenants stay readable. */
  readAny(p: Principal, actions: readonly string[], object: ObjectRef): Promise<void>;
  /** A change inside `tenantId` (null: a platform-level change): grants first, then the tenant's state. */
  writeAny(p: Principal, actions: readonly string[], object: ObjectRef, tenantId: string | null): Promise<void>;
  requirePlatformAdmin(p: Principal): Promise<void>;
  isPlatformAdmin(p: Principal): Promise<boolean>;
  /**
   * Grants applied before paging: null = every tenant (a platform-wide grant of one of the actions), else
   * the tenants where the caller holds one of them on the kind as a whole.
   */
  readableTenants(p: Principal, actions: readonly string[], kind: ObjectKind, tenantId?: string | null): Promise<string[] | null>;
  /** The answer to an id that names nothing (AccessGuard.missing): pass the kind's read actions. */
  missing: AccessGuard['missing'];
  canRead: AccessGuard['canRead'];
}

export function createModelGate(deps: { sql: Queryable; authz: Authz }): ModelGate {
  const { authz } = deps;
  const guard = createAccessGuard(deps);

  return {
    async readAny(p, actions, object) {
      for (const action of actions) {
        if ((await authz.decide(p, action, object, { readingFrozenTenant: true })).allowed) return;
      }
      throw forbidden();
    },
    writeAny: (p, actions, object, tenantId) => guard.requireWrite(p, actions, object, tenantId),
    requirePlatformAdmin: (p) => guard.requirePlatformAdmin(p),
    isPlatformAdmin: (p) => authz.isPlatformAdmin(p),
    missing: guard.missing,
    canRead: guard.canRead,
    async readableTenants(p, actions, kind, tenantId) {
      const seen = new Set<string>();
      for (const action of actions) {
        const tenants = await readableTenants(deps, p, action, kind, tenantId);
        if (tenants === null) return null;
        for (const t of tenants) seen.add(t);
      }
      return [...seen];
    },
  };
}

/** Actions that read the access model of a tenant (roles, blocks, assignments, policies, rules). */
export const POLICY_READ = ['read', 'policy.manage'] as const;
export const ROLE_READ = ['read', 'role.manage'] as const;
/** Whatever reads an object of any kind a grant may name (an action that cannot apply is simply denied). */
export const ANY_READ = ['read', 'manage', 'policy.manage', 'role.manage'] as const;
