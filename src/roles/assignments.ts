// Role assignments: a subject (entity or principal group) holds a role in a tenant (or at platform level).
// policy.manage on the tenant; platform roles and platform-level assignments need a platform administrator.
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import type { AuthzService, Invalidation } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import { pageOf, type ListResult } from '../db/paging.js';
import { invalidInput, notFound } from '../errors.js';
import { createModelGate, lookupSubject, POLICY_READ, reachOf, reachOfRemoved, ROLE_READ, SUBJECT_KINDS } from '../policies/index.js';
import * as v from '../validate.js';
import { assignRole } from './assign.js';
import * as q from './assignment-queries.js';
import { findRoleRow } from './queries.js';

export interface AssignmentDeps {
  sql: Sql;
  authz: AuthzService;
  audit: AuditWriter;
  invalidate: (change: Invalidation) => Promise<void>;
  lists: { defaultLimit: number; maxLimit: number };
}

type Paged = Record<string, unknown> & { limit?: number | null; offset?: number | null };
const given = (args: Record<string, unknown>, key: string) => args[key] !== undefined && args[key] !== null;

export function createAssignmentService(deps: AssignmentDeps) {
  const { sql, authz, audit } = deps;
  const gate = createModelGate({ sql, authz });

  async function load(id: unknown): Promise<q.AssignmentRow> {
    const row = await q.findAssignment(sql, v.uuid('id', id));
    if (!row) throw notFound('role assignment');
    return row;
  }

  /** A role assignment by id for an operation of `p`; none answers as guard.missing says. */
  async function lookup(p: Principal, id: unknown): Promise<q.AssignmentRow> {
    const row = await q.findAssignment(sql, v.uuid('id', id));
    if (!row) throw await gate.missing(p, 'policy', 'role assignment', { actions: POLICY_READ });
    return row;
  }

  /** Platform roles reach across tenants: only a platform administrator grants or revokes them. */
  async function requireGrantAuthority(p: Principal, tenantId: string | null, platformRole: boolean): Promise<void> {
    if (platformRole || tenantId === null) await gate.requirePlatformAdmin(p);
    await gate.writeAny(p, ['policy.manage'], { kind: 'policy', id: null, tenantId }, tenantId);
  }

  return {
    async list(p: Principal, args: Paged): Promise<ListResult<q.AssignmentRow>> {
      const tenantId = given(args, 'tenantId') ? v.uuid('tenantId', args.tenantId) : undefined;
      const filter: q.AssignmentFilter = { tenantId, readableTenantIds: await gate.readableTenants(p, POLICY_READ, 'policy', tenantId) };
      if (given(args, 'subjectKind')) filter.subjectKind = v.oneOf('subjectKind', args.subjectKind, SUBJECT_KINDS);
      if (given(args, 'subjectId')) filter.subjectId = v.uuid('subjectId', args.subjectId);
      if (given(args, 'roleId')) filter.roleId = v.uuid('roleId', args.roleId);
      return q.listAssignments(sql, filter, pageOf(args, deps.lists));
    },

    async create(p: Principal, input: Record<string, unknown>, requestId: string | null = null): Promise<q.AssignmentRow> {
      const tenantId = v.optionalUuid('tenantId', input.tenantId);
      const roleId = v.uuid('roleId', input.roleId);
      // The grant in the tenant first: a refused caller learns nothing about the subject or the role.
      await requireGrantAuthority(p, tenantId, false);
      const subject = await lookupSubject(sql, gate, p, input.subjectKind, input.subjectId, tenantId);
      const role = await findRoleRow(sql, roleId);
      const foreign = role?.tenant_id != null && role.tenant_id !== tenantId;
      // Another tenant's role the caller may not read reads as a missing one in this tenant.
      if (!role || role.deleted_at || (foreign && !(await gate.canRead(p, { kind: 'role', id: role.id }, ROLE_READ)))) {
        throw await gate.missing(p, 'role', 'role', { tenantId, actions: ROLE_READ });
      }
      if (foreign) throw invalidInput('role assignment tenantId must match role tenantId');
      const platformRole = role.tenant_id === null;
      if (platformRole) await requireGrantAuthority(p, tenantId, platformRole);
      // assignRole holds the rest of the rule (subject tenant, guardrails), as for every other path.
      const operation = 'role_assignment.create';
      const assigned = await sql.begin((tx) => assignRole(tx, authz, {
        tenantId, subject: { kind: subject.kind, id: subject.id }, roleId: role.id, actor: p, operation, requestId,
      }));
      authz.recordOverrides(assigned.guard, { actor: p, tenantId, operation, targetKind: 'policy', targetId: assigned.id, requestId });
      if (assigned.created) {
        audit.record({
          event: operation, outcome: 'allow', actorEntityId: p.entityId, tenantId, targetKind: 'policy', targetId: assigned.id, requestId,
          details: { subject_kind: subject.kind, subject_id: subject.id, role_id: role.id, role_name: role.name, overrides: assigned.guard.overrides.length },
        });
        await deps.invalidate(await reachOf(sql, subject, tenantId));
      }
      return load(assigned.id);
    },

    async remove(p: Principal, id: unknown, requestId: string | null = null): Promise<boolean> {
      const row = await lookup(p, id);
      await requireGrantAuthority(p, row.tenant_id, row.role.tenant_id === null);
      const deleted = await q.deleteAssignment(sql, row.id);
      if (!deleted) throw notFound('role assignment');
      // Blocks naming this assignment went with it, and the grants compiled from them with them.
      if (deleted.targetingBlockIds.length > 0) await deps.invalidate({ kind: 'blocks', blockIds: deleted.targetingBlockIds });
      audit.record({
        event: 'role_assignment.delete', outcome: 'allow', actorEntityId: p.entityId, tenantId: row.tenant_id, targetKind: 'policy', targetId: row.id, requestId,
        details: {
          subject_kind: row.subject_kind, subject_id: row.subject_id, role_id: row.role_id, role_name: row.role.name,
          ...(deleted.targetingBlockIds.length > 0 ? { deleted_targeting_block_ids: deleted.targetingBlockIds } : {}),
        },
      });
      await deps.invalidate(reachOfRemoved({ kind: row.subject_kind, id: row.subject_id }, row.tenant_id));
      return true;
    },
  };
}

export type AssignmentService = ReturnType<typeof createAssignmentService>;
