// Authorization and tenant-state guards shared by the management domains (entities, resources, groups...).
import type { Principal } from '../auth/principal.js';
// authz/types, not authz/index: auth/authority imports missingAnswer, and authz/index reaches auth again
// through its gRPC handlers (an import circle).
import type { Authz, ObjectKind, ObjectRef } from '../authz/types.js';
import type { Queryable } from '../db/client.js';
import { forbidden, notFound, type AppError } from '../errors.js';
import { tenantStatus } from './queries.js';

export interface AccessGuard {
  /** Allowed when any of the actions is (e.g. write or manage for ordinary edits); FORBIDDEN otherwise. */
  requireAny(p: Principal, actions: readonly string[], object: ObjectRef): Promise<void>;
  /**
   * Management reads: a frozen tenant's data stays readable; what a deleted tenant owns is hidden at once,
   * answered exactly as a missing object is (`missing`: '<hiddenAs> not found', the object's kind by
   * default, to a platform reader; 'forbidden' to anyone else, its former members included).
   */
  requireRead(p: Principal, object: ObjectRef, hiddenAs?: string): Promise<void>;
  /**
   * A change inside `tenantId`: the grants first (so a caller without them learns nothing about the
   * tenant), then the tenant state, so an authorized caller reads 'tenant is frozen' rather than a bare
   * 'forbidden'. Inactive and deleted tenants are refused by the engine itself.
   */
  requireWrite(p: Principal, actions: readonly string[], object: ObjectRef, tenantId: string | null): Promise<void>;
  requirePlatformAdmin(p: Principal): Promise<void>;
  /**
   * The answer to an id that names no live object, to throw (issue 35.1): NOT_FOUND ('<what> not found')
   * only to a caller who could have read such an object had it existed, FORBIDDEN ('forbidden')
   * otherwise, so a caller refused on another tenant's real object cannot tell it from an id that never
   * existed. "Could have read": one of `actions` (read by default) on the kind at platform scope, or
   * across `tenantId` when the operation names the tenant (or the row, deleted, still does). `what` is
   * the kind's name in 'not found', or the whole answer such a caller gets (an input naming a missing
   * reference answers BAD_REQUEST, say).
   */
  missing(p: Principal, kind: ObjectKind, what: string | AppError, scope?: MissingScope): Promise<AppError>;
  /** Whether the caller may read the object (frozen tenants stay readable): for pair checks across tenants. */
  canRead(p: Principal, object: ObjectRef, actions?: readonly string[]): Promise<boolean>;
}

export interface MissingScope {
  /** The tenant the operation (or a soft-deleted row) places the object in; absent: platform scope only. */
  tenantId?: string | null;
  /** The actions that read the kind (roles: read or role.manage...); default read. */
  actions?: readonly string[];
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
      if (decision.details?.tenant_status === 'deleted') throw await missingAnswer(authz, p, object.kind, hiddenAs ?? object.kind);
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
    missing: (p, kind, what, scope) => missingAnswer(authz, p, kind, what, scope),
    canRead: (p, object, actions = ['read']) => anyAllowed(p, actions, object, true),
  };
}

/** AccessGuard.missing, for the domains that hold the engine only (credentials). */
export async function missingAnswer(authz: Pick<Authz, 'decide'>, p: Principal, kind: ObjectKind, what: string | AppError, scope: MissingScope = {}): Promise<AppError> {
  const scopes = [null, ...(scope.tenantId ? [scope.tenantId] : [])];
  for (const tenantId of scopes) {
    for (const action of scope.actions ?? ['read']) {
      if ((await authz.decide(p, action, { kind, id: null, tenantId }, { readingFrozenTenant: true })).allowed) {
        return typeof what === 'string' ? notFound(what) : what;
      }
    }
  }
  return forbidden();
}
