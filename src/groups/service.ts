// Groups (object groups nest within a tenant, principal groups are flat): SPEC.md "Group" and its operations.
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import type { Authz, Invalidation } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import { listingSql, pageOf, type ListResult } from '../db/paging.js';
import { invalidInput, notFound } from '../errors.js';
import { readableTenants } from '../access/readable-scope.js';
import * as v from '../validate.js';
import { createAccessGuard } from '../access/guard.js';
import * as q from './queries.js';

export const GROUP_TYPES = ['object', 'principal'] as const;
export const GROUP_STATUSES = ['active', 'inactive', 'suspended'] as const;
export type GroupType = (typeof GROUP_TYPES)[number];
export type GroupStatus = (typeof GROUP_STATUSES)[number];

export interface GroupDeps {
  sql: Sql;
  /** Generic-plan connections for plain list pages (db/paging.ts listingSql); absent: the shared pool. */
  pages?: Sql;
  authz: Authz;
  audit: AuditWriter;
  /** Drops every cache that may hold the changed facts; call after the write committed. */
  invalidate: (change: Invalidation) => Promise<void>;
  lists: { defaultLimit: number; maxLimit: number };
  /** Bounds of the JSON documents it stores and of the JSON filters it takes. */
  documents: v.JsonBounds;
}

export type GroupListArgs = Record<string, unknown> & { limit?: number | null; offset?: number | null };

const STATUS_EVENTS: Record<GroupStatus, string> = { active: 'group.enable', inactive: 'group.disable', suspended: 'group.suspend' };

const optional = (args: Record<string, unknown>, key: string) => args[key] !== undefined && args[key] !== null;

export function createGroupService(deps: GroupDeps) {
  const { sql, authz, audit } = deps;
  const guard = createAccessGuard({ sql, authz });

  async function load(id: unknown, includeDeleted = false, field = 'id'): Promise<q.GroupRow> {
    const row = await q.findGroup(sql, v.uuid(field, id));
    if (!row || (row.deleted_at && !includeDeleted)) throw notFound('group');
    return row;
  }

  /** A live group by id for an operation of `p`; no such group answers as guard.missing says. */
  async function lookup(p: Principal, id: unknown, field = 'id'): Promise<q.GroupRow> {
    const row = await q.findGroup(sql, v.uuid(field, id));
    if (!row || row.deleted_at) throw await guard.missing(p, 'group', 'group', { tenantId: row?.tenant_id });
    return row;
  }

  const ref = (row: q.GroupRow) => ({ kind: 'group' as const, id: row.id });

  function record(p: Principal, event: string, row: { id: string; tenant_id: string | null }, details: Record<string, unknown> = {}) {
    audit.record({ event, outcome: 'allow', actorEntityId: p.entityId, tenantId: row.tenant_id, targetKind: 'group', targetId: row.id, details });
  }

  /** Status, attributes, nesting and deletion feed decisions: grants through the group and objects below it. */
  async function changed(id: string): Promise<q.GroupRow> {
    await deps.invalidate({ kind: 'groups', groupIds: [id] });
    return load(id, true);
  }

  /**
   * A principal group that was inactive or deleted left no trace in its members' cached grants, so turning
   * it back on must reach the members themselves, not only entries that name the group.
   */
  async function membersChanged(row: q.GroupRow): Promise<void> {
    if (row.group_type !== 'principal') return;
    const members = await q.principalMemberIds(sql, row.id);
    if (members.length) await deps.invalidate({ kind: 'subjects', entityIds: members });
  }

  async function list(p: Principal, args: GroupListArgs, fixed: { groupType?: GroupType; parentId?: string } = {}): Promise<ListResult<q.GroupRow>> {
    const tenantId = optional(args, 'tenantId') ? v.uuid('tenantId', args.tenantId) : undefined;
    const deleted = optional(args, 'deleted') ? v.oneOf('deleted', args.deleted, v.DELETED_FILTERS) : 'live';
    if (deleted !== 'live') await guard.requirePlatformAdmin(p);
    const filter: q.GroupFilter = {
      tenantId,
      readableTenantIds: await readableTenants({ authz }, p, 'read', 'group', tenantId),
      deleted,
      order: optional(args, 'order') ? v.oneOf('order', args.order, Object.keys(q.GROUP_ORDER) as (keyof typeof q.GROUP_ORDER)[]) : 'created_at',
      dir: optional(args, 'dir') ? v.oneOf('dir', args.dir, v.SORT_DIRS) : 'asc',
    };
    if (fixed.groupType) filter.groupType = fixed.groupType;
    else if (optional(args, 'groupType')) filter.groupType = v.oneOf('groupType', args.groupType, GROUP_TYPES);
    if (typeof args.q === 'string' && args.q.trim()) filter.q = args.q.trim();
    if (optional(args, 'status')) filter.status = v.oneOf('status', args.status, GROUP_STATUSES);
    if (fixed.parentId) filter.parentId = fixed.parentId;
    else if (optional(args, 'parentId')) filter.parentId = v.uuid('parentId', args.parentId);
    if (optional(args, 'attributesContains')) filter.attributesContains = v.jsonDocument('attributesContains', args.attributesContains, deps.documents);
    return q.listGroups(listingSql(sql, deps.pages, q.plainGroupListing(filter)), filter, pageOf(args, deps.lists));
  }

  /**
   * Both groups must be live object groups of one tenant; the caller manages both. The grants come first,
   * so another tenant's group is refused exactly like a missing one before types or tenants are compared.
   */
  async function nestable(p: Principal, child: q.GroupRow, parent: q.GroupRow): Promise<string> {
    await guard.requireWrite(p, ['manage'], ref(child), child.tenant_id);
    await guard.requireWrite(p, ['manage'], ref(parent), parent.tenant_id);
    if (child.group_type !== 'object' || parent.group_type !== 'object') {
      throw invalidInput('principal groups are flat: only object groups nest');
    }
    if (child.id === parent.id) throw invalidInput('a group cannot be its own parent');
    if (child.tenant_id !== parent.tenant_id) throw invalidInput('object groups nest only within one tenant');
    return child.tenant_id as string;
  }

  return {
    async create(p: Principal, input: Record<string, unknown>, forcedType?: GroupType): Promise<q.GroupRow> {
      const asked = optional(input, 'groupType') ? v.oneOf('groupType', input.groupType, GROUP_TYPES) : undefined;
      if (forcedType && asked && asked !== forcedType) throw invalidInput(`groupType must be ${forcedType} here (or omitted)`);
      const groupType = forcedType ?? asked ?? 'object';
      const group: q.NewGroup = {
        id: v.optionalUuid('id', input.id),
        name: v.name('name', input.name),
        tenantId: v.optionalUuid('tenantId', input.tenantId),
        groupType,
        description: v.optionalText('description', input.description),
        attributes: v.jsonDocument('attributes', input.attributes, deps.documents),
      };
      // Object groups are tenant boundaries; only principal groups may be platform-wide.
      if (groupType === 'object' && !group.tenantId) throw invalidInput('tenantId is required for an object group');
      await guard.requireWrite(p, ['manage'], { kind: 'group', id: null, tenantId: group.tenantId }, group.tenantId);
      const id = await q.insertGroup(sql, group);
      record(p, 'group.create', { id, tenant_id: group.tenantId }, { groupType, name: group.name });
      return load(id);
    },

    async get(p: Principal, id: unknown): Promise<q.GroupRow> {
      // A soft-deleted object is missing to live reads, whoever asks: lists show it with deleted: deleted
      // or all, and restore and purge still take its id.
      const row = await lookup(p, id);
      await guard.requireRead(p, ref(row));
      return row;
    },

    list,

    async childGroups(p: Principal, args: GroupListArgs): Promise<ListResult<q.GroupRow>> {
      const parent = await lookup(p, args.parentId, 'parentId');
      await guard.requireRead(p, ref(parent));
      return list(p, { limit: args.limit, offset: args.offset }, { parentId: parent.id });
    },

    async update(p: Principal, id: unknown, input: Record<string, unknown>): Promise<q.GroupRow> {
      const row = await lookup(p, id);
      const changes: q.GroupChanges = {};
      if (v.given(input, 'name')) changes.name = v.name('name', input.name);
      // description: omitted keeps it, null clears it; attributes replace the whole object.
      if ('description' in input) changes.description = v.optionalText('description', input.description);
      if (v.given(input, 'attributes')) changes.attributes = v.jsonDocument('attributes', input.attributes, deps.documents);
      await guard.requireWrite(p, ['write', 'manage'], ref(row), row.tenant_id);
      if (!(await q.updateGroup(sql, row.id, changes))) throw notFound('group');
      record(p, 'group.update', row, { fields: Object.keys(changes) });
      return changed(row.id);
    },

    async setStatus(p: Principal, id: unknown, status: GroupStatus): Promise<q.GroupRow> {
      const row = await lookup(p, id);
      await guard.requireWrite(p, ['manage'], ref(row), row.tenant_id);
      if (!(await q.updateGroup(sql, row.id, { status }))) throw notFound('group');
      record(p, STATUS_EVENTS[status], row, { previousStatus: row.status });
      await membersChanged(row);
      return changed(row.id);
    },

    async setParent(p: Principal, id: unknown, parentId: unknown, fields = { id: 'id', parentId: 'parentId' }): Promise<q.GroupRow> {
      const child = await lookup(p, id, fields.id);
      const parent = await lookup(p, parentId, fields.parentId);
      const tenantId = await nestable(p, child, parent);
      const moved = await sql.begin(async (tx) => {
        const locked = await q.lockHierarchy(tx, tenantId, [child.id, parent.id]);
        if (locked.length !== 2 || locked.some((g) => g.deleted_at)) throw notFound('group');
        if (locked.find((g) => g.id === child.id)?.parent_id === parent.id) return false;
        const nesting = await q.nestingOf(tx, child.id, parent.id);
        if (nesting.cycle) throw invalidInput('parentId would create a cycle: the parent is the group itself or one of its descendants');
        if (nesting.levels > q.MAX_NESTING) throw invalidInput(`object groups nest at most ${q.MAX_NESTING} levels deep`);
        await q.setGroupParent(tx, child.id, parent.id);
        return true;
      });
      if (!moved) return child;
      record(p, 'group.parent.set', child, { parentId: parent.id, previousParentId: child.parent_id });
      return changed(child.id);
    },

    async removeParent(p: Principal, id: unknown, field = 'id'): Promise<boolean> {
      const child = await lookup(p, id, field);
      await guard.requireWrite(p, ['manage'], ref(child), child.tenant_id);
      if (child.group_type !== 'object') throw invalidInput('principal groups are flat: they have no parent');
      if (!child.parent_id) return true;
      const previous = await q.findGroup(sql, child.parent_id);
      // Taking a subtree out narrows what grants on the old parent reach: that is the parent's business too.
      if (previous && !previous.deleted_at) await guard.requireAny(p, ['manage'], ref(previous));
      await sql.begin(async (tx) => {
        await q.lockHierarchy(tx, child.tenant_id as string, [child.id]);
        await q.setGroupParent(tx, child.id, null);
      });
      record(p, 'group.parent.remove', child, { previousParentId: child.parent_id });
      await changed(child.id);
      return true;
    },

    async remove(p: Principal, id: unknown): Promise<boolean> {
      const row = await lookup(p, id);
      await guard.requireWrite(p, ['manage', 'delete'], ref(row), row.tenant_id);
      if (!(await q.softDeleteGroup(sql, row.id, p.entityId))) throw notFound('group');
      record(p, 'group.delete', row);
      await changed(row.id);
      return true;
    },

    async restore(p: Principal, id: unknown): Promise<boolean> {
      await guard.requirePlatformAdmin(p);
      const row = await load(id, true);
      if (!row.deleted_at) throw invalidInput('group is not deleted');
      await q.restoreGroup(sql, row.id);
      record(p, 'group.restore', row);
      // Facts built while it was deleted name neither the group nor what hangs below it: start afresh (rare).
      await deps.invalidate({ kind: 'all' });
      return true;
    },

    async purge(p: Principal, id: unknown): Promise<boolean> {
      await guard.requirePlatformAdmin(p);
      const row = await load(id, true);
      if (!row.deleted_at) throw invalidInput('only a deleted group can be purged; delete it first');
      await q.purgeGroup(sql, row.id);
      record(p, 'group.purge', row);
      await deps.invalidate({ kind: 'groups', groupIds: [row.id] });
      return true;
    },
  };
}

export type GroupService = ReturnType<typeof createGroupService>;
