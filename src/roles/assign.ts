// Assigning a role to an entity: the tenant rule, guardrails, the insert and its audit, in one place.
import type { Principal } from '../auth/principal.js';
import type { AuthzService } from '../authz/index.js';
import type { Queryable } from '../db/client.js';
import { invalidInput, notFound } from '../errors.js';
import * as q from './assignment-queries.js';

export interface AssignRole {
  tenantId: string | null;
  entityId: string;
  roleId: string;
  actor: Principal;
  operation: string;
  requestId?: string | null;
}

/**
 * Inside the caller's transaction. The role's tenant must match the assignment's tenant (cross-tenant
 * only for platform roles), and the grant must pass the guardrails for the entity's kind. Returns the
 * assignment id and the overrides to audit once the transaction committed.
 */
export async function assignRoleToEntity(tx: Queryable, authz: AuthzService, a: AssignRole) {
  const role = await q.findRole(tx, a.roleId);
  if (!role || role.deleted_at) throw notFound('role');
  if (role.tenant_id !== null && role.tenant_id !== a.tenantId) {
    throw invalidInput('role assignment tenantId must match role tenantId');
  }
  const guard = await authz.checkGrant(tx, {
    tenantId: a.tenantId,
    subject: { kind: 'entity', id: a.entityId },
    blocks: await q.roleBlockIds(tx, role.id),
    actor: a.actor,
    operation: a.operation,
    requestId: a.requestId ?? null,
  });
  const id = await q.insertEntityRoleAssignment(tx, { tenantId: a.tenantId, entityId: a.entityId, roleId: role.id, by: a.actor.entityId });
  return { id, role, guard };
}
