// SQL of groups: rows, listings, the object-group hierarchy and the tenant state writes depend on.
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import { restrictsBeyondTenant, selectRows, type ListResult, type Page } from '../db/paging.js';
import type { DeletedFilter } from '../validate.js';

export interface GroupRow {
  id: string;
  name: string;
  tenant_id: string | null;
  group_type: 'object' | 'principal';
  description: string | null;
  parent_id: string | null;
  status: string;
  attributes: Record<string, unknown>;
  created_at: string | Date;
  updated_at: string | Date | null;
  deleted_at: string | Date | null;
  deleted_by: string | null;
}

/** Levels of object-group nesting; the engine walks at most this many ancestors. */
export const MAX_NESTING = 64;

function columns(sql: Queryable) {
  return sql`g.id, g.name, g.tenant_id, g.group_type, g.description, g.parent_id, g.status, g.attributes,
    g.created_at, g.updated_at, g.deleted_at, g.deleted_by`;
}

export async function findGroup(sql: Queryable, id: string): Promise<GroupRow | undefined> {
  const [row] = await sql<GroupRow[]>`select ${columns(sql)} from groups g where g.id = ${id}`;
  return row;
}


export interface NewGroup {
  id: string | null;
  name: string;
  tenantId: string | null;
  groupType: 'object' | 'principal';
  description: string | null;
  attributes: Record<string, unknown>;
}

export async function insertGroup(sql: Queryable, g: NewGroup): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into groups (id, name, tenant_id, group_type, description, attributes)
    values (${g.id === null ? sql`gen_random_uuid()` : sql`${g.id}`}, ${g.name}, ${g.tenantId}, ${g.groupType},
            ${g.description}, ${sql.json(g.attributes as postgres.JSONValue)})
    returning id`;
  return row.id;
}

export interface GroupChanges {
  name?: string;
  description?: string | null;
  attributes?: Record<string, unknown>;
  status?: string;
}

export async function updateGroup(sql: Queryable, id: string, c: GroupChanges): Promise<boolean> {
  const rows = await sql`
    update groups set
      name = ${c.name === undefined ? sql`name` : sql`${c.name}`},
      description = ${c.description === undefined ? sql`description` : sql`${c.description}`},
      attributes = ${c.attributes === undefined ? sql`attributes` : sql`${sql.json(c.attributes as postgres.JSONValue)}`},
      status = ${c.status === undefined ? sql`status` : sql`${c.status}`},
      updated_at = now()
    where id = ${id} and deleted_at is null
    returning id`;
  return rows.length === 1;
}

/**
 * Hierarchy changes of one tenant take turns: two concurrent moves that are each acyclic can close a
 * cycle together, and they need not touch the same rows. The row locks then pin the two groups.
 */
export async function lockHierarchy(tx: Queryable, tenantId: string, groupIds: string[]): Promise<GroupRow[]> {
  await tx`select pg_advisory_xact_lock(hashtextextended(${'groups.hierarchy:' + tenantId}, 0))`;
  return tx<GroupRow[]>`select ${columns(tx)} from groups g where g.id = any(${groupIds}::uuid[]) order by g.id for update`;
}

/** Locks a live group row for the rest of the transaction; false when it is gone or deleted. */
export async function lockGroup(tx: Queryable, id: string): Promise<boolean> {
  const rows = await tx`select id from groups where id = ${id} and deleted_at is null for update`;
  return rows.length === 1;
}

/** Would `childId` under `parentId` close a cycle, and how many levels would the deepest chain have? */
export async function nestingOf(tx: Queryable, childId: string, parentId: string): Promise<{ cycle: boolean; levels: number }> {
  const [row] = await tx<[{ cycle: boolean; above: number; below: number }]>`
    with recursive up(id, parent_id, depth) as (
      select id, parent_id, 1 from groups where id = ${parentId}
      union
      select g.id, g.parent_id, up.depth + 1 from groups g join up on g.id = up.parent_id where up.depth <= ${MAX_NESTING}
    ), down(id, depth) as (
      select id, 1 from groups where id = ${childId}
      union
      select g.id, down.depth + 1 from groups g join down on g.parent_id = down.id where down.depth <= ${MAX_NESTING}
    )
    select exists(select 1 from up where id = ${childId}) as cycle,
           coalesce((select max(depth) from up), 0)::int as above,
           coalesce((select max(depth) from down), 0)::int as below`;
  return { cycle: row.cycle, levels: row.above + row.below };
}

/** Members of a principal group: their cached grants may predate a status change and not name the group. */
export async function principalMemberIds(sql: Queryable, groupId: string): Promise<string[]> {
  const rows = await sql<{ entity_id: string }[]>`select entity_id from principal_group_members where group_id = ${groupId}`;
  return rows.map((r) => r.entity_id);
}

export async function setGroupParent(sql: Queryable, id: string, parentId: string | null): Promise<void> {
  await sql`update groups set parent_id = ${parentId}, updated_at = now() where id = ${id}`;
}

export async function softDeleteGroup(sql: Queryable, id: string, by: string): Promise<boolean> {
  const rows = await sql`
    update groups set deleted_at = now(), deleted_by = ${by}, updated_at = now()
    where id = ${id} and deleted_at is null returning id`;
  return rows.length === 1;
}

export async function restoreGroup(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`
    update groups set deleted_at = null, deleted_by = null, updated_at = now()
    where id = ${id} and deleted_at is not null returning id`;
  return rows.length === 1;
}

/** Children become roots (parent_id on delete set null); containment, assignments and group blocks go with it. */
export async function purgeGroup(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`delete from groups where id = ${id} and deleted_at is not null returning id`;
  return rows.length === 1;
}

export const GROUP_ORDER = { created_at: 'created_at', updated_at: 'updated_at', name: 'name', status: 'status' } as const;

export interface GroupFilter {
  tenantId?: string | null;
  /** Grants applied before paging: null = no restriction, else only these tenants. */
  readableTenantIds: string[] | null;
  groupType?: 'object' | 'principal';
  q?: string;
  status?: string;
  attributesContains?: Record<string, unknown>;
  parentId?: string;
  deleted: DeletedFilter;
  order: keyof typeof GROUP_ORDER;
  dir: 'asc' | 'desc';
}

/** A listing whose plan does not depend on the values bound (db/paging.ts listingSql). */
export function plainGroupListing(f: GroupFilter): boolean {
  return !f.q && !f.attributesContains && !restrictsBeyondTenant(f.readableTenantIds, f.tenantId);
}

export async function listGroups(sql: Queryable, f: GroupFilter, page: Page): Promise<ListResult<GroupRow>> {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (f.deleted === 'live') conds.push(sql`g.deleted_at is null`);
  if (f.deleted === 'deleted') conds.push(sql`g.deleted_at is not null`);
  if (f.tenantId !== undefined) conds.push(f.tenantId === null ? sql`g.tenant_id is null` : sql`g.tenant_id = ${f.tenantId}`);
  if (restrictsBeyondTenant(f.readableTenantIds, f.tenantId)) conds.push(sql`g.tenant_id = any(${f.readableTenantIds}::uuid[])`);
  if (f.groupType) conds.push(sql`g.group_type = ${f.groupType}`);
  if (f.status) conds.push(sql`g.status = ${f.status}`);
  if (f.parentId) conds.push(sql`g.parent_id = ${f.parentId}`);
  if (f.attributesContains) conds.push(sql`g.attributes @> ${sql.json(f.attributesContains as postgres.JSONValue)}`);
  if (f.q) {
    const like = `%${f.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    conds.push(sql`(g.name ilike ${like} or g.description ilike ${like})`);
  }
  const where = conds.length ? conds.reduce((a, c) => sql`${a} and ${c}`) : sql`true`;
  const dir = f.dir === 'desc' ? sql`desc` : sql`asc`;
  return selectRows<GroupRow & Record<string, unknown>>(sql, {
    columns: columns(sql),
    from: sql`from groups g where ${where}`,
    order: sql`${sql('g.' + GROUP_ORDER[f.order])} ${dir} nulls last, g.id ${dir}`,
  }, page);
}

