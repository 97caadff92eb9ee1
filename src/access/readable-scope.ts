// Grants applied before paging: which tenants' objects of a kind a caller may list.
import type { Principal } from '../auth/principal.js';
import type { Authz, ObjectKind } from '../authz/types.js';

/** null = every tenant (a platform-wide grant); otherwise the tenants whose whole kind is readable. */
export type ReadableTenants = string[] | null;

/**
 * A caller with the action on the kind at platform scope lists everything. Otherwise each candidate
 * tenant (the one asked for, or every tenant the caller is connected to) is kept only when the caller
 * holds the action on the kind across that tenant. The engine applies scoped-token ceilings to each
 * question, so listings never widen what a token may see.
 */
export async function readableTenants(
  deps: { authz: Authz },
  principal: Principal,
  action: string,
  kind: ObjectKind,
  requestedTenantId?: string | null,
): Promise<ReadableTenants> {
  // Frozen tenants stay readable through the management API.
  const options = action === 'read' ? { readingFrozenTenant: true } : {};
  const platform = await deps.authz.decide(principal, action, { kind, id: null, tenantId: null }, options);
  if (platform.allowed) return null;
  const candidates = requestedTenantId ? [requestedTenantId] : await deps.authz.connectedTenants(principal);
  const decisions = await Promise.all(
    candidates.map((tenantId) => deps.authz.decide(principal, action, { kind, id: null, tenantId }, options)),
  );
  return candidates.filter((_, i) => decisions[i]?.allowed);
}
