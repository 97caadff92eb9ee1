// Group membership: entities contained by object groups, members of principal groups (guardrailed grants).
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import type { Authz, AuthzService, Invalidation } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import { invalidInput, notFound } from '../errors.js';
import type { EntityRow } from '../identity/index.js';
import * as v from '../validate.js';
import { createAccessGuard } from '../access/guard.js';
import * as m from './membership-queries.js';
import * as q from './queries.js';

export interface MembershipDeps {
  sql: Sql;
  /** The engine: decisions, plus the guardrail check a principal-group membership change must pass. */
  authz: Authz & Pick<AuthzService, 'checkMembership' | 'recordOverrides'>;
  audit: AuditWriter;
  invalidate: (change: Invalidation) => Promise<void>;
}

/** Actions that administer a principal group's membership (who receives what the group holds). */
const MEMBERSHIP_ACTIONS = ['manage', 'policy.manage'] as const;

export function createMembershipService(deps: MembershipDeps) {
  const { sql, authz, audit } = deps;
  const guard = createAccessGuard({ sql, authz });

  async function loadEntity(id: unknown, field = 'entityId'): Promise<EntityRow> {
    const row = await m.findEntity(sql, v.uuid(field, id));
    if (!row || row.deleted_at) throw notFound('entity');
    return row;
  }

  /** A live entity or group named by an operation of `p`; none answers as guard.missing says. */
  async function lookupEntity(p: Principal, id: unknown, field = 'entityId'): Promise<EntityRow> {
    const row = await m.findEntity(sql, v.uuid(field, id));
    if (!row || row.deleted_at) throw await guard.missing(p, 'entity', 'entity', { tenantId: row?.tenant_id });
    return row;
  }

  async function lookupGroup(p: Principal, id: unknown, field: string): Promise<q.GroupRow> {
    const row = await q.findGroup(sql, v.uuid(field, id));
    if (!row || row.deleted_at) throw await guard.missing(p, 'group', 'group', { tenantId: row?.tenant_id });
    return row;
  }

  /** Checked once the caller is authorized on the group, so the type tells a refused caller nothing. */
  function ofType(row: q.GroupRow, type: 'object' | 'principal', field: string): q.GroupRow {
    if (row.group_type !== type) throw invalidInput(`${field} must be ${type === 'object' ? 'an object' : 'a principal'} group`);
    return row;
  }

  /**
   * Object groups are tenant boundaries: only the tenant's own entities go in (never global or foreign
   * ones). Checked after the caller's grants on both, so another tenant's object is refused like a
   * missing one before its tenant is compared.
   */
  function sameTenant(entity: EntityRow, group: q.GroupRow): void {
    if (entity.tenant_id !== group.tenant_id) throw invalidInput('the entity and the object group belong to different tenants');
  }

  async function requireContainment(p: Principal, entity: EntityRow, group: q.GroupRow): Promise<void> {
    await guard.requireWrite(p, ['manage'], { kind: 'entity', id: entity.id }, entity.tenant_id);
    await guard.requireWrite(p, ['manage'], { kind: 'group', id: group.id }, group.tenant_id);
  }

  function record(p: Principal, event: string, group: { id: string; tenant_id: string | null }, details: Record<string, unknown>) {
    audit.record({ event, outcome: 'allow', actorEntityId: p.entityId, tenantId: group.tenant_id, targetKind: 'group', targetId: group.id, details });
  }

  /** Containment is an object fact (group-scoped grants reach the entity through it). */
  async function containmentChanged(entityId: string): Promise<EntityRow> {
    await deps.invalidate({ kind: 'objects', objectIds: [entityId] });
    return loadEntity(entityId);
  }

  return {
    async addEntityToObjectGroup(p: Principal, entityId: unknown, groupId: unknown): Promise<EntityRow> {
      const entity = await lookupEntity(p, entityId);
      const group = await lookupGroup(p, groupId, 'objectGroupId');
      await requireContainment(p, entity, group);
      ofType(group, 'object', 'objectGroupId');
      sameTenant(entity, group);
      // Adding twice is a no-op: nothing changed, nothing to audit or invalidate.
      if (!(await m.insertObjectGroupEntity(sql, group.id, entity.id))) return entity;
      record(p, 'group.entity.add', group, { entityId: entity.id });
      return containmentChanged(entity.id);
    },

    async removeEntityFromObjectGroup(p: Principal, entityId: unknown, groupId: unknown): Promise<EntityRow> {
      const entity = await lookupEntity(p, entityId);
      const group = await lookupGroup(p, groupId, 'objectGroupId');
      await requireContainment(p, entity, group);
      ofType(group, 'object', 'objectGroupId');
      sameTenant(entity, group);
      if (!(await m.deleteObjectGroupEntity(sql, group.id, entity.id))) return entity;
      record(p, 'group.entity.remove', group, { entityId: entity.id });
      return containmentChanged(entity.id);
    },

    async clearEntityObjectGroups(p: Principal, entityId: unknown): Promise<EntityRow> {
      const entity = await lookupEntity(p, entityId);
      await guard.requireWrite(p, ['manage'], { kind: 'entity', id: entity.id }, entity.tenant_id);
      const groups = await m.entityObjectGroups(sql, entity.id);
      for (const g of groups) await guard.requireAny(p, ['manage'], { kind: 'group', id: g.id });
      if (groups.length === 0) return entity;
      await m.deleteObjectGroupEntities(sql, entity.id, groups.map((g) => g.id));
      for (const g of groups) record(p, 'group.entity.remove', g, { entityId: entity.id, cleared: true });
      return containmentChanged(entity.id);
    },

    /**
     * The new member receives what the group holds, so the guardrails judge its entity kind against the
     * group's roles and direct policies first (require_override only for a platform administrator).
     */
    async addGroupMember(p: Principal, groupId: unknown, entityId: unknown, requestId: string | null = null): Promise<boolean> {
      const group = await lookupGroup(p, groupId, 'groupId');
      await guard.requireWrite(p, MEMBERSHIP_ACTIONS, { kind: 'group', id: group.id }, group.tenant_id);
      ofType(group, 'principal', 'groupId');
      const entity = await lookupEntity(p, entityId);
      // Global entities may join any principal group; a tenant's entities only its own tenant's (or platform)
      // groups. Another tenant's entity is refused like a missing one unless the caller may read it.
      if (entity.tenant_id && group.tenant_id && entity.tenant_id !== group.tenant_id) {
        await guard.requireRead(p, { kind: 'entity', id: entity.id });
        throw invalidInput('the entity and the principal group belong to different tenants');
      }
      const outcome = await sql.begin(async (tx) => {
        // Pins the group (and its deletion or status) while its grants are judged against the newcomer.
        if (!(await q.lockGroup(tx, group.id))) throw notFound('group');
        if (await m.isPrincipalMember(tx, group.id, entity.id)) return null;
        const verdict = await authz.checkMembership(tx, { groupId: group.id, entityId: entity.id, actor: p, requestId });
        await m.insertPrincipalMember(tx, group.id, entity.id);
        return verdict;
      });
      if (!outcome) return true;
      authz.recordOverrides(outcome, {
        actor: p, tenantId: group.tenant_id, operation: 'principal_group_member.add', targetKind: 'group', targetId: group.id, requestId,
      });
      record(p, 'group.member.add', group, { entityId: entity.id, entityKind: entity.kind, overrides: outcome.overrides.length });
      await deps.invalidate({ kind: 'subjects', entityIds: [entity.id] });
      return true;
    },

    async removeGroupMember(p: Principal, groupId: unknown, entityId: unknown): Promise<boolean> {
      const group = await lookupGroup(p, groupId, 'groupId');
      const member = v.uuid('entityId', entityId);
      await guard.requireWrite(p, MEMBERSHIP_ACTIONS, { kind: 'group', id: group.id }, group.tenant_id);
      ofType(group, 'principal', 'groupId');
      const removed = await m.deletePrincipalMember(sql, group.id, member);
      if (!removed) return false;
      record(p, 'group.member.remove', group, { entityId: member });
      await deps.invalidate({ kind: 'subjects', entityIds: [member] });
      return true;
    },

    async groupMembers(p: Principal, groupId: unknown): Promise<EntityRow[]> {
      const row = await lookupGroup(p, groupId, 'groupId');
      await guard.requireRead(p, { kind: 'group', id: row.id });
      return m.listGroupMembers(sql, row.id, row.group_type);
    },

    async entityGroups(p: Principal, entityId: unknown): Promise<string[]> {
      const entity = await lookupEntity(p, entityId);
      await guard.requireRead(p, { kind: 'entity', id: entity.id });
      return m.entityGroupIds(sql, entity.id);
    },
  };
}

export type MembershipService = ReturnType<typeof createMembershipService>;
