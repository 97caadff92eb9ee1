// Resources (channels and other protected objects): the rules of SPEC.md "Resource (channel)" and its operations.
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import type { Authz, Invalidation } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import { listingSql, pageOf, type ListResult } from '../db/paging.js';
import { invalidInput, notFound } from '../errors.js';
import { createAccessGuard } from '../access/guard.js';
import { findGroup, type GroupRow } from '../groups/index.js';
import { readableTenants } from '../access/readable-scope.js';
import * as v from '../validate.js';
import * as q from './queries.js';

/** Free-form, but it becomes the object type `resource:<kind>`: lowercase, no spaces (resources__kind_format). */
const KIND = /^[a-z0-9][a-z0-9_.-]{0,62}$/;

export interface ResourceDeps {
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

export type ResourceListArgs = Record<string, unknown> & { limit?: number | null; offset?: number | null };

const optional = (args: Record<string, unknown>, key: string) => args[key] !== undefined && args[key] !== null;

function kindOf(field: string, value: unknown): string {
  if (typeof value !== 'string' || !KIND.test(value)) {
    throw invalidInput(`${field} must be 1-63 lowercase letters, digits, '_', '.' or '-', starting with a letter or digit (for example channel)`);
  }
  return value;
}

export function createResourceService(deps: ResourceDeps) {
  const { sql, authz, audit } = deps;
  const guard = createAccessGuard({ sql, authz });

  async function load(id: unknown, includeDeleted = false, field = 'id'): Promise<q.ResourceRow> {
    const row = await q.findResource(sql, v.uuid(field, id));
    if (!row || (row.deleted_at && !includeDeleted)) throw notFound('resource');
    return row;
  }

  /** A live resource or group named by an operation of `p`; none answers as guard.missing says. */
  async function lookup(p: Principal, id: unknown, field = 'id'): Promise<q.ResourceRow> {
    const row = await q.findResource(sql, v.uuid(field, id));
    if (!row || row.deleted_at) throw await guard.missing(p, 'resource', 'resource', { tenantId: row?.tenant_id });
    return row;
  }

  async function lookupObjectGroup(p: Principal, id: unknown): Promise<GroupRow> {
    const row = await findGroup(sql, v.uuid('objectGroupId', id));
    if (!row || row.deleted_at) throw await guard.missing(p, 'group', 'group', { tenantId: row?.tenant_id });
    return row;
  }

  const ref = (row: q.ResourceRow) => ({ kind: 'resource' as const, id: row.id });

  function record(p: Principal, event: string, row: { id: string; tenant_id: string | null }, details: Record<string, unknown> = {}) {
    audit.record({ event, outcome: 'allow', actorEntityId: p.entityId, tenantId: row.tenant_id, targetKind: 'resource', targetId: row.id, details });
  }

  /** Attributes (ABAC), containment and deletion feed decisions on the resource. */
  async function changed(id: string): Promise<q.ResourceRow> {
    await deps.invalidate({ kind: 'objects', objectIds: [id] });
    return load(id, true);
  }

  /**
   * Containment changes need manage on the resource and on the object group, both of one tenant. The
   * grants come first: another tenant's object is refused like a missing one before tenants are compared.
   */
  async function requireContainment(p: Principal, resource: q.ResourceRow, group: GroupRow): Promise<void> {
    await guard.requireWrite(p, ['manage'], ref(resource), resource.tenant_id);
    await guard.requireWrite(p, ['manage'], { kind: 'group', id: group.id }, group.tenant_id);
    if (group.group_type !== 'object') throw invalidInput('objectGroupId must be an object group');
    if (resource.tenant_id !== group.tenant_id) throw invalidInput('the resource and the object group belong to different tenants');
  }

  return {
    async create(p: Principal, input: Record<string, unknown>): Promise<q.ResourceRow> {
      const resource: q.NewResource = {
        kind: kindOf('kind', input.kind),
        name: v.name('name', input.name),
        alias: v.alias('alias', input.alias),
        tenantId: v.optionalUuid('tenantId', input.tenantId),
        ownerId: v.optionalUuid('ownerId', input.ownerId),
        attributes: v.jsonDocument('attributes', input.attributes, deps.documents),
      };
      await guard.requireWrite(p, ['manage', 'write'], { kind: 'resource', id: null, tenantId: resource.tenantId }, resource.tenantId);
      if (resource.ownerId) {
        const owner = await q.findOwner(sql, resource.ownerId);
        // A global owner (a person) may own a tenant's resource; another tenant's entity may not, and one the
        // caller may not read is answered exactly as a missing one.
        const foreign = !!owner?.tenant_id && owner.tenant_id !== resource.tenantId;
        if (!owner || (foreign && !(await guard.canRead(p, { kind: 'entity', id: owner.id })))) {
          throw await guard.missing(p, 'entity', invalidInput('ownerId must be a live entity'), { tenantId: resource.tenantId });
        }
        if (foreign) throw invalidInput('ownerId belongs to another tenant');
      }
      const id = await q.insertResource(sql, resource);
      record(p, 'resource.create', { id, tenant_id: resource.tenantId }, { kind: resource.kind, name: resource.name });
      return load(id);
    },

    async get(p: Principal, id: unknown): Promise<q.ResourceRow> {
      // A soft-deleted object is missing to live reads, whoever asks: lists show it with deleted: deleted
      // or all, and restore and purge still take its id.
      const row = await lookup(p, id);
      await guard.requireRead(p, ref(row));
      return row;
    },

    /** include.groups: whether the items need their object groups (a GraphQL list that shows them). */
    async list(p: Principal, args: ResourceListArgs, include = { groups: true }): Promise<ListResult<q.ResourceRow>> {
      const tenantId = optional(args, 'tenantId') ? v.uuid('tenantId', args.tenantId) : undefined;
      const deleted = optional(args, 'deleted') ? v.oneOf('deleted', args.deleted, v.DELETED_FILTERS) : 'live';
      if (deleted !== 'live') await guard.requirePlatformAdmin(p);
      const filter: q.ResourceFilter = {
        tenantId,
        readableTenantIds: await readableTenants({ authz }, p, 'read', 'resource', tenantId),
        deleted,
        order: optional(args, 'order') ? v.oneOf('order', args.order, Object.keys(q.RESOURCE_ORDER) as (keyof typeof q.RESOURCE_ORDER)[]) : 'created_at',
        dir: optional(args, 'dir') ? v.oneOf('dir', args.dir, v.SORT_DIRS) : 'asc',
      };
      if (optional(args, 'kind')) filter.kind = kindOf('kind', args.kind);
      if (typeof args.q === 'string' && args.q.trim()) filter.q = args.q.trim();
      if (optional(args, 'attributesContains')) filter.attributesContains = v.jsonDocument('attributesContains', args.attributesContains, deps.documents);
      if (optional(args, 'parentGroupId')) {
        filter.parentGroupId = v.uuid('parentGroupId', args.parentGroupId);
        filter.includeDescendants = args.includeDescendants === true;
      }
      return q.listResources(listingSql(sql, deps.pages, q.plainResourceListing(filter)), filter, pageOf(args, deps.lists), include);
    },

    async kinds(p: Principal, tenantIdArg: unknown): Promise<string[]> {
      const tenantId = tenantIdArg === undefined || tenantIdArg === null ? undefined : v.uuid('tenantId', tenantIdArg);
      const readable = await readableTenants({ authz }, p, 'read', 'resource', tenantId);
      return q.listResourceKinds(sql, { tenantId, readableTenantIds: readable });
    },

    async update(p: Principal, id: unknown, input: Record<string, unknown>): Promise<q.ResourceRow> {
      const row = await lookup(p, id);
      const changes: q.ResourceChanges = {};
      if (v.given(input, 'name')) changes.name = v.name('name', input.name);
      // Replaced, not merged; attributes.status is a display convention the engine never reads.
      if (v.given(input, 'attributes')) changes.attributes = v.jsonDocument('attributes', input.attributes, deps.documents);
      if ('alias' in input) changes.alias = v.alias('alias', input.alias);
      await guard.requireWrite(p, ['write', 'manage'], ref(row), row.tenant_id);
      if (!(await q.updateResource(sql, row.id, changes))) throw notFound('resource');
      record(p, 'resource.update', row, { fields: Object.keys(changes) });
      return changed(row.id);
    },

    async remove(p: Principal, id: unknown): Promise<boolean> {
      const row = await lookup(p, id);
      await guard.requireWrite(p, ['manage', 'delete'], ref(row), row.tenant_id);
      if (!(await q.softDeleteResource(sql, row.id, p.entityId))) throw notFound('resource');
      record(p, 'resource.delete', row);
      await changed(row.id);
      return true;
    },

    async restore(p: Principal, id: unknown): Promise<boolean> {
      await guard.requirePlatformAdmin(p);
      const row = await load(id, true);
      if (!row.deleted_at) throw invalidInput('resource is not deleted');
      await q.restoreResource(sql, row.id);
      record(p, 'resource.restore', row);
      await changed(row.id);
      return true;
    },

    async purge(p: Principal, id: unknown): Promise<boolean> {
      await guard.requirePlatformAdmin(p);
      const row = await load(id, true);
      if (!row.deleted_at) throw invalidInput('only a deleted resource can be purged; delete it first');
      await q.purgeResource(sql, row.id);
      record(p, 'resource.purge', row);
      await deps.invalidate({ kind: 'objects', objectIds: [row.id] });
      return true;
    },

    async addToObjectGroup(p: Principal, resourceId: unknown, groupId: unknown): Promise<q.ResourceRow> {
      const row = await lookup(p, resourceId, 'resourceId');
      const group = await lookupObjectGroup(p, groupId);
      await requireContainment(p, row, group);
      // Adding twice is a no-op: nothing changed, nothing to audit or invalidate.
      if (!(await q.insertResourceGroup(sql, group.id, row.id))) return row;
      record(p, 'resource.group.add', row, { objectGroupId: group.id });
      return changed(row.id);
    },

    async removeFromObjectGroup(p: Principal, resourceId: unknown, groupId: unknown): Promise<q.ResourceRow> {
      const row = await lookup(p, resourceId, 'resourceId');
      const group = await lookupObjectGroup(p, groupId);
      await requireContainment(p, row, group);
      if (!(await q.deleteResourceGroup(sql, group.id, row.id))) return row;
      record(p, 'resource.group.remove', row, { objectGroupId: group.id });
      return changed(row.id);
    },

    async clearObjectGroups(p: Principal, resourceId: unknown): Promise<q.ResourceRow> {
      const row = await lookup(p, resourceId, 'resourceId');
      await guard.requireWrite(p, ['manage'], ref(row), row.tenant_id);
      const groups = await q.resourceGroups(sql, row.id);
      for (const g of groups) await guard.requireAny(p, ['manage'], { kind: 'group', id: g.id });
      if (groups.length === 0) return row;
      await q.deleteResourceGroups(sql, row.id, groups.map((g) => g.id));
      record(p, 'resource.group.clear', row, { objectGroupIds: groups.map((g) => g.id) });
      return changed(row.id);
    },
  };
}

export type ResourceService = ReturnType<typeof createResourceService>;
