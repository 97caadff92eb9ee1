// Assigning a role to a subject (an entity or a principal group): the one check every assignment passes
// (role and subject tenant rules, who may grant a platform role, guardrails) and the insert, inside the
// caller's transaction: createRoleAssignment, addTenantMember and accepting an invitation alike.
import type { Principal } from '../auth/principal.js';
import type { AuthzService, GuardrailResult } from '../authz/index.js';
import type { Queryable } from '../db/client.js';
import { forbidden, invalidInput, notFound } from '../errors.js';
import { createAccessGuard } from '../access/guard.js';
import { loadSubject, lockPrincipalGroup, requireSubjectInTenant, ROLE_READ } from '../policies/index.js';
import * as q from './assignment-queries.js';

export interface AssignRoleTo {
  tenantId: string | null;
  subject: { kind: 'entity' | 'group'; id: string };
  roleId: string;
  /**
   * Who grants: a platform role needs a platform administrator, and only a platform administrator's
   * request passes a guardrail requiring an override. For an accepted invitation, the inviter.
   */
  actor: Principal;
  operation: string;
  requestId?: string | null;
}

export interface AssignRole {
  tenantId: string | null;
  entityId: string;
  roleId: string;
  actor: Principal;
  operation: string;
  requestId?: string | null;
}

export interface Assigned {
  id: string;
  /** false: the subject already held the role in this tenant (nothing changed). */
  created: boolean;
  role: q.RoleRef;
  /** Overrides to audit (authz.recordOverrides) once the transaction committed. */
  guard: GuardrailResult;
}

/**
 * The half of the check that needs no subject (an invitation is checked with it when it is created, and
 * in full when accepted): a live role of the assignment's tenant, or a platform role granted by a platform
 * administrator. Locks the role FOR SHARE. The message never names the role.
 */
export async function grantableRole(tx: Queryable, authz: AuthzService, a: { tenantId: string | null; roleId: string; actor: Principal }): Promise<q.RoleRef> {
  const role = await q.lockRole(tx, a.roleId);
  const foreign = role?.tenant_id != null && role.tenant_id !== a.tenantId;
  const guard = createAccessGuard({ sql: tx, authz });
  // Another tenant's role the actor may not read reads as a missing one in this tenant (guard.missing).
  if (!role || role.deleted_at || (foreign && !(await guard.canRead(a.actor, { kind: 'role', id: role.id }, ROLE_READ)))) {
    throw await guard.missing(a.actor, 'role', 'role', { tenantId: a.tenantId, actions: ROLE_READ });
  }
  if (foreign) throw invalidInput('role assignment tenantId must match role tenantId');
  if ((role.tenant_id === null || a.tenantId === null) && !(await authz.isPlatformAdmin(a.actor))) throw forbidden();
  return role;
}

/**
 * The role's tenant must match the assignment's, and the subject must live in that tenant or be global
 * (cross-tenant only for platform roles, which only a platform administrator grants); the grant must
 * pass the guardrails for every entity kind it reaches. The role is locked FOR SHARE (a concurrent change
 * of its blocks waits, or has committed and is judged here), and so is a principal group subject: a
 * concurrent addGroupMember locks it FOR UPDATE first, so a newcomer is either seen here or judged there.
 */
export async function assignRole(tx: Queryable, authz: AuthzService, a: AssignRoleTo): Promise<Assigned> {
  const role = await grantableRole(tx, authz, a);
  requireSubjectInTenant(await loadSubject(tx, a.subject.kind, a.subject.id), a.tenantId, role.tenant_id === null);
  if (a.subject.kind === 'group' && !(await lockPrincipalGroup(tx, a.subject.id))) throw notFound('subject group');
  const guard = await authz.checkGrant(tx, {
    tenantId: a.tenantId,
    subject: a.subject,
    blocks: await q.roleBlockIds(tx, role.id),
    actor: a.actor,
    operation: a.operation,
    requestId: a.requestId ?? null,
  });
  const { id, created } = await q.insertRoleAssignment(tx, {
    tenantId: a.tenantId, subjectKind: a.subject.kind, subjectId: a.subject.id, roleId: role.id, by: a.actor.entityId,
  });
  return { id, created, role, guard };
}

/** Tenant membership's entry point (adding a member with a role, accepting an invitation with one). */
export function assignRoleToEntity(tx: Queryable, authz: AuthzService, a: AssignRole): Promise<Assigned> {
  return assignRole(tx, authz, {
    tenantId: a.tenantId, subject: { kind: 'entity', id: a.entityId }, roleId: a.roleId, actor: a.actor, operation: a.operation, requestId: a.requestId ?? null,
  });
}
