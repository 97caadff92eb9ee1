// The tenant-creation hook: the tenant-owned tenant-admin role with exactly SPEC.md's grants, bound to
// the creator, checked by the guardrails like any other grant.
import type { AuditWriter } from '../audit/writer.js';
import type { Queryable } from '../db/client.js';
import { compileCatalog } from './compile.js';
import { checkGrant, type BlockSpec, type GuardrailDeps } from './guardrails.js';
import { selectActionCatalog } from './queries.js';
import { insertEntityAssignment, insertRole, insertRoleBlock } from './tenant-admin-queries.js';
import type { Invalidation } from './types.js';

export const TENANT_ADMIN_ROLE = 'tenant-admin';
export const TENANT_ADMIN_DESCRIPTION = 'Default tenant administration role';

/**
 * SPEC.md "Tenant": tenant-scoped manage, read, policy.manage and role.manage, plus read on audit_log and
 * manage on credential within the tenant. Deliberately no platform-scoped manage on tenant: the tenant
 * scope contains the tenant object itself, but rename/freeze/delete are gated at platform scope.
 */
export function tenantAdminBlocks(tenantId: string): (BlockSpec & { objectKind: string | null })[] {
  return [
    { scopeMode: 'tenant', tenantId, objectKind: null, actions: ['manage', 'read', 'policy.manage', 'role.manage'], effect: 'allow' },
    { scopeMode: 'object_kind', tenantId, objectKind: 'audit_log', actions: ['read'], effect: 'allow' },
    { scopeMode: 'object_kind', tenantId, objectKind: 'credential', actions: ['manage'], effect: 'allow' },
  ];
}

export interface TenantAdminRole {
  roleId: string;
  assignmentId: string;
  blockIds: string[];
  /** Pass to authz.invalidate() after the transaction commits: the creator's cached grants are now short. */
  invalidation: Invalidation;
}

/**
 * Runs inside the caller's createTenant transaction. The caller must call authz.invalidate(result.invalidation)
 * once that transaction has committed (invalidating earlier would let a concurrent load re-cache the old grants).
 */
export async function createTenantAdminRole(
  tx: Queryable,
  input: { tenantId: string; creatorEntityId: string },
  options: { audit?: AuditWriter; requestId?: string | null } = {},
): Promise<TenantAdminRole> {
  const specs = tenantAdminBlocks(input.tenantId);
  const deps: GuardrailDeps = {
    catalog: async (sql) => compileCatalog(await selectActionCatalog(sql)),
    // The creator receives a standard grant; nothing here may rely on an override.
    isPlatformAdmin: async () => false,
    recordRejection: (check, entityKind, pair, verdict) => options.audit?.record({
      event: 'guardrail.rejected', outcome: 'deny', actorEntityId: input.creatorEntityId, tenantId: input.tenantId,
      targetKind: 'role', targetId: null, requestId: options.requestId ?? null,
      details: { operation: check.operation, entity_kind: entityKind, action: pair.action, object_kind: pair.objectKind, object_type: pair.objectType, rule: verdict.step },
    }),
  };
  await checkGrant(tx, deps, {
    tenantId: input.tenantId, subject: { kind: 'entity', id: input.creatorEntityId }, blocks: specs, actor: null,
    operation: 'tenant_admin_role.create', requestId: options.requestId ?? null,
  });
  const roleId = await insertRole(tx, { name: TENANT_ADMIN_ROLE, tenantId: input.tenantId, description: TENANT_ADMIN_DESCRIPTION, createdBy: input.creatorEntityId });
  const blockIds: string[] = [];
  for (const spec of specs) {
    blockIds.push(await insertRoleBlock(tx, {
      roleId, tenantId: input.tenantId, scopeMode: spec.scopeMode, objectKind: spec.objectKind, actions: spec.actions, createdBy: input.creatorEntityId,
    }));
  }
  const assignmentId = await insertEntityAssignment(tx, { tenantId: input.tenantId, entityId: input.creatorEntityId, roleId, createdBy: input.creatorEntityId });
  // Only the new tenant's part of the creator's grants is new: an operator that created thousands of
  // tenants does not read all their roles again for the next one.
  return { roleId, assignmentId, blockIds, invalidation: { kind: 'tenantGrants', entityIds: [input.creatorEntityId], tenantIds: [input.tenantId] } };
}
