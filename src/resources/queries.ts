// SQL of resources (channels and other protected application objects) and their object-group containment.
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import { restrictsBeyondTenant, selectRows, type ListResult, type Page } from '../db/paging.js';
import { descendantGroups } from '../access/queries.js';
import type { DeletedFilter } from '../validate.js';

export interface ResourceRow {
  id: string;
  kind: string;
  name: string;
  alias: string | null;
  tenant_id: string | null;
  owner_id: string | null;
  attributes: Record<string, unknown>;
  object_group_ids: string[];
  created_at: string | Date;
  updated_at: string | Date | null;
  deleted_at: string | Date | null;
  deleted_by: string | null;
}

/**
 * Live object groups containing the resource come along in the same statement: no N+1 per list item. A
 * list that does not show them leaves the per-row subquery out (groups: false); its rows carry an empty list.
 */
function columns(sql: Queryable, include: { groups: boolean } = { groups: true }) {
  return sql`
    r.id, r.kind, r.name, r.alias, r.tenant_id, r.owner_id, r.attributes, r.created_at, r.updated_at, r.deleted_at, r.deleted_by,
    ${include.groups ? sql`array(select ogr.group_id from object_group_resources ogr join groups g on g.id = ogr.group_id
          where ogr.resource_id = r.id and g.deleted_at is null order by ogr.created_at, ogr.group_id)` : sql`'{}'::uuid[]`} as object_group_ids`;
}

export async function findResource(sql: Queryable, id: string): Promise<ResourceRow | undefined> {
  const [row] = await sql<ResourceRow[]>`select ${columns(sql)} from resources r where r.id = ${id}`;
  return row;
}

export interface NewResource {
  kind: string;
  name: string;
  alias: string | null;
  tenantId: string | null;
  ownerId: string | null;
  attributes: Record<string, unknown>;
}

export async function insertResource(sql: Queryable, r: NewResource): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into resources (kind, name, alias, tenant_id, owner_id, attributes)
    values (${r.kind}, ${r.name}, ${r.alias}, ${r.tenantId}, ${r.ownerId}, ${sql.json(r.attributes as postgres.JSONValue)})
    returning id`;
  return row.id;
}

export interface ResourceChanges {
  name?: string;
  attributes?: Record<string, unknown>;
  alias?: string | null;
}

export async function updateResource(sql: Queryable, id: string, c: ResourceChanges): Promise<boolean> {
  const rows = await sql`
    update resources set
      name = ${c.name === undefined ? sql`name` : sql`${c.name}`},
      attributes = ${c.attributes === undefined ? sql`attributes` : sql`${sql.json(c.attributes as postgres.JSONValue)}`},
      alias = ${c.alias === undefined ? sql`alias` : sql`${c.alias}`},
      updated_at = now()
    where id = ${id} and deleted_at is null
    returning id`;
  return rows.length === 1;
}

export async function softDeleteResource(sql: Queryable, id: string, by: string): Promise<boolean> {
  const rows = await sql`
    update resources set deleted_at = now(), deleted_by = ${by}, updated_at = now()
    where id = ${id} and deleted_at is null returning id`;
  return rows.length === 1;
}

export async function restoreResource(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`
    update resources set deleted_at = null, deleted_by = null, updated_at = now()
    where id = ${id} and deleted_at is not null returning id`;
  return rows.length === 1;
}

export async function purgeResource(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`delete from resources where id = ${id} and deleted_at is not null returning id`;
  return rows.length === 1;
}

/** The owner must be a live entity; its tenant decides whether it may own a resource of this tenant. */
export async function findOwner(sql: Queryable, id: string): Promise<{ id: string; tenant_id: string | null } | undefined> {
  const [row] = await sql<{ id: string; tenant_id: string | null }[]>`
    select id, tenant_id from entities where id = ${id} and deleted_at is null`;
  return row;
}

export const RESOURCE_ORDER = { created_at: 'created_at', updated_at: 'updated_at', name: 'name', kind: 'kind' } as const;

export interface ResourceFilter {
  tenantId?: string | null;
  /** Grants applied before paging: null = no restriction, else only these tenants. */
  readableTenantIds: string[] | null;
  kind?: string;
  q?: string;
  attributesContains?: Record<string, unknown>;
  parentGroupId?: string;
  includeDescendants?: boolean;
  deleted: DeletedFilter;
  order: keyof typeof RESOURCE_ORDER;
  dir: 'asc' | 'desc';
}

function whereOf(sql: Queryable, f: Omit<ResourceFilter, 'order' | 'dir'>) {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (f.deleted === 'live') conds.push(sql`r.deleted_at is null`);
  if (f.deleted === 'deleted') conds.push(sql`r.deleted_at is not null`);
  if (f.tenantId !== undefined) conds.push(f.tenantId === null ? sql`r.tenant_id is null` : sql`r.tenant_id = ${f.tenantId}`);
  if (restrictsBeyondTenant(f.readableTenantIds, f.tenantId)) conds.push(sql`r.tenant_id = any(${f.readableTenantIds}::uuid[])`);
  if (f.kind) conds.push(sql`r.kind = ${f.kind}`);
  if (f.attributesContains) conds.push(sql`r.attributes @> ${sql.json(f.attributesContains as postgres.JSONValue)}`);
  if (f.q) {
    const like = `%${f.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    conds.push(sql`(r.name ilike ${like} or r.alias ilike ${like})`);
  }
  if (f.parentGroupId) {
    conds.push(f.includeDescendants
      ? sql`r.id in (select ogr.resource_id from object_group_resources ogr where ogr.group_id in (${descendantGroups(sql, f.parentGroupId)}))`
      : sql`r.id in (select ogr.resource_id from object_group_resources ogr where ogr.group_id = ${f.parentGroupId})`);
  }
  return conds.length ? conds.reduce((a, c) => sql`${a} and ${c}`) : sql`true`;
}

/** A listing whose plan does not depend on the values bound (db/paging.ts listingSql). */
export function plainResourceListing(f: ResourceFilter): boolean {
  return !f.q && !f.attributesContains && !restrictsBeyondTenant(f.readableTenantIds, f.tenantId);
}

/** include.groups: whether the page shows each resource's object groups (the answer asks for them). */
export async function listResources(sql: Queryable, f: ResourceFilter, page: Page, include = { groups: true }): Promise<ListResult<ResourceRow>> {
  const dir = f.dir === 'desc' ? sql`desc` : sql`asc`;
  return selectRows<ResourceRow & Record<string, unknown>>(sql, {
    columns: columns(sql, include),
    from: sql`from resources r where ${whereOf(sql, f)}`,
    order: sql`${sql('r.' + RESOURCE_ORDER[f.order])} ${dir} nulls last, r.id ${dir}`,
  }, page);
}

/** Kinds in use among the live resources the caller may read. */
export async function listResourceKinds(sql: Queryable, f: { tenantId?: string; readableTenantIds: string[] | null }): Promise<string[]> {
  const rows = await sql<{ kind: string }[]>`
    select distinct r.kind from resources r where ${whereOf(sql, { ...f, deleted: 'live' })} order by r.kind`;
  return rows.map((r) => r.kind);
}

/** true when the row was added; adding twice is a no-op. */
export async function insertResourceGroup(sql: Queryable, groupId: string, resourceId: string): Promise<boolean> {
  const rows = await sql`
    insert into object_group_resources (group_id, resource_id) values (${groupId}, ${resourceId})
    on conflict do nothing returning group_id`;
  return rows.length === 1;
}

export async function deleteResourceGroup(sql: Queryable, groupId: string, resourceId: string): Promise<boolean> {
  const rows = await sql`delete from object_group_resources where group_id = ${groupId} and resource_id = ${resourceId} returning group_id`;
  return rows.length === 1;
}

/** Live object groups containing the resource, with their tenant (clearing needs manage on each). */
export async function resourceGroups(sql: Queryable, resourceId: string): Promise<{ id: string; tenant_id: string | null }[]> {
  return sql<{ id: string; tenant_id: string | null }[]>`
    select g.id, g.tenant_id from object_group_resources ogr join groups g on g.id = ogr.group_id
    where ogr.resource_id = ${resourceId} and g.deleted_at is null order by ogr.created_at, g.id`;
}

export async function deleteResourceGroups(sql: Queryable, resourceId: string, groupIds: string[]): Promise<number> {
  const rows = await sql`
    delete from object_group_resources where resource_id = ${resourceId} and group_id = any(${groupIds}::uuid[]) returning group_id`;
  return rows.length;
}
