// Direct policies: a subject bound to one permission block. Created only through the trusted flow SPEC.md
// names (policy.manage on the tenant, or on the platform for platform-wide blocks), guardrailed, and
// always audited in the same transaction as the change.
import type { AuditWriter } from '../audit/writer.js';
import { insertAuditEvents } from '../audit/index.js';
import type { Principal } from '../auth/principal.js';
import type { AuthzService, Invalidation } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import { pageOf, type ListResult } from '../db/paging.js';
import { invalidInput, notFound } from '../errors.js';
import * as v from '../validate.js';
import { findBlock } from './block-queries.js';
import { objectKind, objectType } from './block-spec.js';
import * as q from './direct-policy-queries.js';
import { createModelGate, POLICY_READ } from './gate.js';
import { lockPrincipalGroup } from './subject-queries.js';
import { lookupSubject, reachOf, reachOfRemoved, requireSubjectInTenant, SUBJECT_KINDS } from './subjects.js';

export interface DirectPolicyDeps {
  sql: Sql;
  authz: AuthzService;
  audit: AuditWriter;
  invalidate: (change: Invalidation) => Promise<void>;
  lists: { defaultLimit: number; maxLimit: number };
}

type Paged = Record<string, unknown> & { limit?: number | null; offset?: number | null };
const given = (args: Record<string, unknown>, key: string) => args[key] !== undefined && args[key] !== null;

export function createDirectPolicyService(deps: DirectPolicyDeps) {
  const { sql, authz } = deps;
  const gate = createModelGate({ sql, authz });

  async function load(id: unknown): Promise<q.DirectPolicyRow> {
    const row = await q.findDirectPolicy(sql, v.uuid('id', id));
    if (!row) throw notFound('direct policy');
    return row;
  }

  /** A direct policy by id for an operation of `p`; none answers as guard.missing says. */
  async function lookup(p: Principal, id: unknown): Promise<q.DirectPolicyRow> {
    const row = await q.findDirectPolicy(sql, v.uuid('id', id));
    if (!row) throw await gate.missing(p, 'policy', 'direct policy', { actions: POLICY_READ });
    return row;
  }

  return {
    async list(p: Principal, args: Paged): Promise<ListResult<q.DirectPolicyRow>> {
      const tenantId = given(args, 'tenantId') ? v.uuid('tenantId', args.tenantId) : undefined;
      const filter: q.DirectPolicyFilter = { tenantId, readableTenantIds: await gate.readableTenants(p, POLICY_READ, 'policy', tenantId) };
      if (given(args, 'subjectKind')) filter.subjectKind = v.oneOf('subjectKind', args.subjectKind, SUBJECT_KINDS);
      if (given(args, 'subjectId')) filter.subjectId = v.uuid('subjectId', args.subjectId);
      if (given(args, 'permissionBlockId')) filter.blockId = v.uuid('permissionBlockId', args.permissionBlockId);
      if ((given(args, 'objectKind') || given(args, 'objectType')) && !given(args, 'objectId')) {
        throw invalidInput('objectKind and objectType filters require objectId');
      }
      if (given(args, 'objectId')) filter.objectId = v.uuid('objectId', args.objectId);
      if (given(args, 'objectKind')) filter.objectKind = objectKind('objectKind', args.objectKind);
      if (given(args, 'objectType')) filter.objectType = objectType('objectType', args.objectType, filter.objectKind ?? null);
      return q.listDirectPolicies(sql, filter, pageOf(args, deps.lists));
    },

    async create(p: Principal, input: Record<string, unknown>, requestId: string | null = null): Promise<q.DirectPolicyRow> {
      const tenantId = v.optionalUuid('tenantId', input.tenantId);
      const blockId = v.uuid('permissionBlockId', input.permissionBlockId);
      // A platform-wide block reaches across tenants: only a platform administrator attaches one. The grant
      // comes before the subject and block are looked up: a refused caller learns nothing about either.
      if (tenantId === null) await gate.requirePlatformAdmin(p);
      await gate.writeAny(p, ['policy.manage'], { kind: 'policy', id: null, tenantId }, tenantId);
      const subject = await lookupSubject(sql, gate, p, input.subjectKind, input.subjectId, tenantId);
      const block = await findBlock(sql, blockId);
      // Another tenant's block the caller may not read reads as a missing one in this tenant.
      if (!block || (block.tenant_id !== tenantId && !(await gate.canRead(p, { kind: 'policy', id: block.id }, POLICY_READ)))) {
        throw await gate.missing(p, 'policy', 'permission block', { tenantId, actions: POLICY_READ });
      }
      if (block.tenant_id !== tenantId) throw invalidInput('direct policy tenantId must match the permission block tenantId');
      requireSubjectInTenant(subject, tenantId, tenantId === null);
      const operation = 'direct_policy.create';
      const { id, guard } = await sql.begin(async (tx) => {
        if (subject.kind === 'group' && !(await lockPrincipalGroup(tx, subject.id))) throw notFound('subject group');
        const guard = await authz.checkGrant(tx, {
          tenantId, subject: { kind: subject.kind, id: subject.id }, blocks: [block.id], actor: p, operation, requestId,
        });
        const id = await q.insertDirectPolicy(tx, { tenantId, subjectKind: subject.kind, subjectId: subject.id, blockId: block.id, by: p.entityId });
        await insertAuditEvents(tx, [{
          event: operation, outcome: 'allow', actorEntityId: p.entityId, tenantId, targetKind: 'policy', targetId: id, requestId,
          details: { subject_kind: subject.kind, subject_id: subject.id, permission_block_id: block.id, overrides: guard.overrides.length },
        }]);
        return { id, guard };
      });
      authz.recordOverrides(guard, { actor: p, tenantId, operation, targetKind: 'policy', targetId: id, requestId });
      await deps.invalidate(await reachOf(sql, subject, tenantId));
      return load(id);
    },

    async remove(p: Principal, id: unknown, requestId: string | null = null): Promise<boolean> {
      const row = await lookup(p, id);
      await gate.writeAny(p, ['policy.manage'], { kind: 'policy', id: null, tenantId: row.tenant_id }, row.tenant_id);
      const removed = await sql.begin(async (tx) => {
        const deleted = await q.deleteDirectPolicy(tx, row.id);
        if (!deleted) return null;
        await insertAuditEvents(tx, [{
          event: 'direct_policy.delete', outcome: 'allow', actorEntityId: p.entityId, tenantId: row.tenant_id, targetKind: 'policy', targetId: row.id,
          requestId, details: {
            subject_kind: row.subject_kind, subject_id: row.subject_id, permission_block_id: row.block_id,
            ...(deleted.targetingBlockIds.length > 0 ? { deleted_targeting_block_ids: deleted.targetingBlockIds } : {}),
          },
        }]);
        return deleted;
      });
      if (!removed) throw notFound('direct policy');
      // Blocks naming this policy went with it, and the grants compiled from them with them.
      if (removed.targetingBlockIds.length > 0) await deps.invalidate({ kind: 'blocks', blockIds: removed.targetingBlockIds });
      await deps.invalidate(reachOfRemoved({ kind: row.subject_kind, id: row.subject_id }, row.tenant_id));
      return true;
    },
  };
}

export type DirectPolicyService = ReturnType<typeof createDirectPolicyService>;
