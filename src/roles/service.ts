// Roles: named collections of permission blocks, tenant-owned (platform roles need platform administration);
// replacing a role's blocks passes the guardrails for every current holder.
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import type { AuthzService, Invalidation } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import { pageOf, type ListResult } from '../db/paging.js';
import { invalidInput, notFound } from '../errors.js';
import { createModelGate, lockPrincipalGroups, MEMBER_INVALIDATION_CAP, POLICY_READ, requireSubjectInTenant, ROLE_READ } from '../policies/index.js';
import * as v from '../validate.js';
import { roleBlockIds } from './assignment-queries.js';
import * as q from './queries.js';

export interface RoleDeps {
  sql: Sql;
  authz: AuthzService;
  audit: AuditWriter;
  invalidate: (change: Invalidation) => Promise<void>;
  lists: { defaultLimit: number; maxLimit: number };
}

type Paged = Record<string, unknown> & { limit?: number | null; offset?: number | null };
const given = (args: Record<string, unknown>, key: string) => args[key] !== undefined && args[key] !== null;
const MAX_ROLE_BLOCKS = 100;

/** empty: no blocks; simple: one block; composite: several (documented in the README). */
export function derivedKindOf(row: q.RoleRow): q.DerivedKind {
  const n = row.permission_blocks.length;
  return n === 0 ? 'empty' : n === 1 ? 'simple' : 'composite';
}

export function createRoleService(deps: RoleDeps) {
  const { sql, authz, audit } = deps;
  const gate = createModelGate({ sql, authz });

  async function load(id: unknown, includeDeleted = false, field = 'id'): Promise<q.RoleRow> {
    const row = await q.findRoleRow(sql, v.uuid(field, id));
    if (!row || (row.deleted_at && !includeDeleted)) throw notFound('role');
    return row;
  }

  /** A live role by id for an operation of `p`; none answers as guard.missing says. */
  async function lookup(p: Principal, id: unknown, field = 'id'): Promise<q.RoleRow> {
    const row = await q.findRoleRow(sql, v.uuid(field, id));
    if (!row || row.deleted_at) throw await gate.missing(p, 'role', 'role', { tenantId: row?.tenant_id, actions: ROLE_READ });
    return row;
  }

  /** role.manage on the role (a platform role: at platform scope), refused while its tenant is not active. */
  async function requireManage(p: Principal, row: q.RoleRow): Promise<void> {
    await gate.writeAny(p, ['role.manage'], { kind: 'role', id: row.id }, row.tenant_id);
  }

  /** The seeded platform roles keep the platform working: they are not edited through the API. */
  function notSystem(row: q.RoleRow): void {
    if (row.is_system) throw invalidInput(`system role '${row.name}' cannot be changed`);
  }

  function record(p: Principal, event: string, row: { id: string; tenant_id: string | null }, requestId: string | null, details: Record<string, unknown> = {}) {
    audit.record({ event, outcome: 'allow', actorEntityId: p.entityId, tenantId: row.tenant_id, targetKind: 'role', targetId: row.id, requestId, details });
  }

  /**
   * Holders whose cached grants did not mention the role (it was empty or deleted when they were loaded)
   * are named one by one; beyond the cap everything is dropped.
   */
  async function holdersChanged(roleId: string): Promise<void> {
    const ids = await q.holderEntityIds(sql, roleId, MEMBER_INVALIDATION_CAP);
    if (ids.length > MEMBER_INVALIDATION_CAP) return deps.invalidate({ kind: 'all' });
    await deps.invalidate({ kind: 'roles', roleIds: [roleId] });
    if (ids.length) await deps.invalidate({ kind: 'subjects', entityIds: ids });
  }

  return {
    async list(p: Principal, args: Paged): Promise<ListResult<q.RoleRow>> {
      const deleted = given(args, 'deleted') ? v.oneOf('deleted', args.deleted, v.DELETED_FILTERS) : 'live';
      if (deleted !== 'live') await gate.requirePlatformAdmin(p);
      const tenantId = given(args, 'tenantId') ? v.uuid('tenantId', args.tenantId) : undefined;
      const filter: q.RoleFilter = { tenantId, deleted, readableTenantIds: await gate.readableTenants(p, ROLE_READ, 'role', tenantId) };
      if (given(args, 'derivedKind')) filter.derivedKind = v.oneOf('derivedKind', args.derivedKind, q.DERIVED_KINDS);
      if (typeof args.q === 'string' && args.q.trim()) filter.q = args.q.trim();
      return q.listRoles(sql, filter, pageOf(args, deps.lists));
    },

    async get(p: Principal, id: unknown): Promise<q.RoleRow> {
      const row = await q.findRoleRow(sql, v.uuid('id', id));
      if (!row) throw await gate.missing(p, 'role', 'role', { actions: ROLE_READ });
      if (row.deleted_at) await gate.requirePlatformAdmin(p);
      else await gate.readAny(p, ROLE_READ, { kind: 'role', id: row.id });
      return row;
    },

    async create(p: Principal, input: Record<string, unknown>, requestId: string | null = null): Promise<q.RoleRow> {
      const name = v.name('name', input.name);
      const tenantId = v.optionalUuid('tenantId', input.tenantId);
      const description = v.optionalText('description', input.description);
      if (tenantId === null) await gate.requirePlatformAdmin(p);
      else await gate.writeAny(p, ['role.manage'], { kind: 'role', id: null, tenantId }, tenantId);
      const id = await q.insertRole(sql, { name, tenantId, description, by: p.entityId });
      record(p, 'role.create', { id, tenant_id: tenantId }, requestId, { name });
      await deps.invalidate({ kind: 'roles', roleIds: [id] });
      return load(id);
    },

    async update(p: Principal, id: unknown, input: Record<string, unknown>, requestId: string | null = null): Promise<q.RoleRow> {
      const row = await lookup(p, id);
      const changes: { name?: string; description?: string | null } = {};
      if (v.given(input, 'name')) changes.name = v.name('name', input.name);
      if ('description' in input) changes.description = v.optionalText('description', input.description);
      await requireManage(p, row);
      notSystem(row);
      if (!(await q.updateRole(sql, row.id, changes))) throw notFound('role');
      record(p, 'role.update', row, requestId, { fields: Object.keys(changes) });
      // Deny reasons name the role: compiled grants holding it are rebuilt.
      await deps.invalidate({ kind: 'roles', roleIds: [row.id] });
      return load(row.id);
    },

    async replaceBlocks(p: Principal, roleId: unknown, blockIds: unknown, requestId: string | null = null): Promise<boolean> {
      const row = await lookup(p, roleId, 'roleId');
      await requireManage(p, row);
      if (!Array.isArray(blockIds)) throw invalidInput('permissionBlockIds must be a list of ids');
      const ids = [...new Set(blockIds.map((b, i) => v.uuid(`permissionBlockIds[${i}]`, b)))];
      if (ids.length > MAX_ROLE_BLOCKS) throw invalidInput(`a role holds at most ${MAX_ROLE_BLOCKS} permission blocks`);
      notSystem(row);
      const blocks = await q.blockTenants(sql, ids);
      // Another tenant's block the caller may not read reads as a missing one (in the role's tenant).
      for (const id of ids) {
        const block = blocks.find((b) => b.id === id);
        if (block && (block.tenant_id === row.tenant_id || (await gate.canRead(p, { kind: 'policy', id }, POLICY_READ)))) continue;
        throw await gate.missing(p, 'policy', invalidInput(`permission block ${id} not found`), { tenantId: row.tenant_id, actions: POLICY_READ });
      }
      if (blocks.some((b) => b.tenant_id !== row.tenant_id)) {
        throw invalidInput(row.tenant_id === null ? 'a platform role holds only platform-wide permission blocks' : "permission blocks must belong to the role's tenant");
      }
      const operation = 'role.permission_blocks.replace';
      const outcome = await sql.begin(async (tx) => {
        if (!(await q.lockRoleForUpdate(tx, row.id))) throw notFound('role');
        // Holders through groups are pinned: a member joining now waits, then is judged against the new blocks.
        await lockPrincipalGroups(tx, await q.assignedGroupIds(tx, row.id));
        const before = await roleBlockIds(tx, row.id);
        // Only what is added is a new grant; removing blocks narrows access and always passes.
        const added = ids.filter((id) => !before.includes(id));
        const guards = [];
        if (added.length) {
          for (const holders of await q.holderKindsByTenant(tx, row.id)) {
            guards.push({ tenantId: holders.tenant_id, guard: await authz.checkGrant(tx, {
              tenantId: holders.tenant_id, subject: { kind: 'entity_kinds', kinds: holders.kinds }, blocks: added, actor: p, operation, requestId,
            }) });
          }
        }
        const change = await q.replaceRoleBlocks(tx, row.id, ids);
        return { change, guards, hadBlocks: before.length > 0 };
      });
      for (const g of outcome.guards) {
        authz.recordOverrides(g.guard, { actor: p, tenantId: g.tenantId, operation, targetKind: 'role', targetId: row.id, requestId });
      }
      record(p, operation, row, requestId, { permission_block_ids: ids, added: outcome.change.added, removed: outcome.change.removed });
      if (outcome.hadBlocks) await deps.invalidate({ kind: 'roles', roleIds: [row.id] });
      else await holdersChanged(row.id);
      return true;
    },

    async remove(p: Principal, id: unknown, requestId: string | null = null): Promise<boolean> {
      const row = await lookup(p, id);
      await requireManage(p, row);
      notSystem(row);
      if (!(await q.softDeleteRole(sql, row.id, p.entityId))) throw notFound('role');
      record(p, 'role.delete', row, requestId);
      await deps.invalidate({ kind: 'roles', roleIds: [row.id] });
      return true;
    },

    async restore(p: Principal, id: unknown, requestId: string | null = null): Promise<boolean> {
      await gate.requirePlatformAdmin(p);
      const row = await load(id, true);
      if (!row.deleted_at) throw invalidInput('role is not deleted');
      const operation = 'role.restore';
      // Restoring gives every holder the role's blocks again: a grant change, judged by today's guardrails.
      const guards = await sql.begin(async (tx) => {
        if (!(await q.lockRoleForUpdate(tx, row.id, true))) throw invalidInput('role is not deleted');
        await lockPrincipalGroups(tx, await q.assignedGroupIds(tx, row.id));
        // Every assignment revived passes the assignment rule (src/roles/assign.ts) as a new one would:
        // the subject tenant rule here, the guardrails below, per tenant and entity kind.
        const stray = await q.strayHolder(tx, row.id);
        if (stray) requireSubjectInTenant(stray.subject, stray.grant_tenant_id, false);
        const blocks = await roleBlockIds(tx, row.id);
        const judged = [];
        if (blocks.length) {
          for (const holders of await q.holderKindsByTenant(tx, row.id)) {
            judged.push({ tenantId: holders.tenant_id, guard: await authz.checkGrant(tx, {
              tenantId: holders.tenant_id, subject: { kind: 'entity_kinds', kinds: holders.kinds }, blocks, actor: p, operation, requestId,
            }) });
          }
        }
        if (!(await q.restoreRole(tx, row.id))) throw notFound('role');
        return judged;
      });
      for (const g of guards) {
        authz.recordOverrides(g.guard, { actor: p, tenantId: g.tenantId, operation, targetKind: 'role', targetId: row.id, requestId });
      }
      record(p, operation, row, requestId);
      // Grants loaded while it was deleted do not mention it: its holders are named.
      await holdersChanged(row.id);
      return true;
    },

    async purge(p: Principal, id: unknown, requestId: string | null = null): Promise<boolean> {
      await gate.requirePlatformAdmin(p);
      const row = await load(id, true);
      if (!row.deleted_at) throw invalidInput('only a deleted role can be purged; delete it first');
      if (!(await q.purgeRole(sql, row.id))) throw notFound('role');
      record(p, 'role.purge', row, requestId);
      await deps.invalidate({ kind: 'roles', roleIds: [row.id] });
      return true;
    },
  };
}

export type RoleService = ReturnType<typeof createRoleService>;
