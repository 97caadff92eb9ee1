// SQL of roles: rows with their permission blocks, listings, the block set, and who holds a role.
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import type { SubjectRow } from '../policies/index.js';
import { selectPage, type ListResult, type Page } from '../db/paging.js';
import { blockJson, type BlockRow } from '../policies/index.js';
import type { DeletedFilter } from '../validate.js';

export interface RoleRow {
  id: string;
  name: string;
  tenant_id: string | null;
  description: string | null;
  is_system: boolean;
  created_at: string | Date;
  updated_at: string | Date | null;
  deleted_at: string | Date | null;
  deleted_by: string | null;
  permission_blocks: BlockRow[];
}

/** The role's blocks (alias `r`), with their actions: one statement however many roles are listed. */
function roleBlocks(sql: Queryable) {
  return sql`coalesce((
    select json_agg(${blockJson(sql)} order by b.created_at, b.id)
    from role_permission_blocks rpb join permission_blocks b on b.id = rpb.block_id where rpb.role_id = r.id
  ), '[]'::json)`;
}

function columns(sql: Queryable) {
  return sql`r.id, r.name, r.tenant_id, r.description, r.is_system, r.created_at, r.updated_at, r.deleted_at, r.deleted_by,
    ${roleBlocks(sql)} as permission_blocks`;
}

/** One role as JSON (alias `r`), for assignments that embed theirs. */
export function roleJson(sql: Queryable) {
  return sql`json_build_object(
    'id', r.id, 'name', r.name, 'tenant_id', r.tenant_id, 'description', r.description, 'is_system', r.is_system,
    'created_at', r.created_at, 'updated_at', r.updated_at, 'deleted_at', r.deleted_at, 'deleted_by', r.deleted_by,
    'permission_blocks', ${roleBlocks(sql)})`;
}

export async function findRoleRow(sql: Queryable, id: string): Promise<RoleRow | undefined> {
  const [row] = await sql<RoleRow[]>`select ${columns(sql)} from roles r where r.id = ${id}`;
  return row;
}

export async function insertRole(sql: Queryable, r: { name: string; tenantId: string | null; description: string | null; by: string }): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into roles (name, tenant_id, description, created_by) values (${r.name}, ${r.tenantId}, ${r.description}, ${r.by}) returning id`;
  return row.id;
}

export async function updateRole(sql: Queryable, id: string, c: { name?: string; description?: string | null }): Promise<boolean> {
  const rows = await sql`
    update roles set
      name = ${c.name === undefined ? sql`name` : sql`${c.name}`},
      description = ${c.description === undefined ? sql`description` : sql`${c.description}`},
      updated_at = now()
    where id = ${id} and deleted_at is null returning id`;
  return rows.length === 1;
}

export async function softDeleteRole(sql: Queryable, id: string, by: string): Promise<boolean> {
  const rows = await sql`update roles set deleted_at = now(), deleted_by = ${by}, updated_at = now() where id = ${id} and deleted_at is null returning id`;
  return rows.length === 1;
}

export async function restoreRole(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`update roles set deleted_at = null, deleted_by = null, updated_at = now() where id = ${id} and deleted_at is not null returning id`;
  return rows.length === 1;
}

/** Removes the role and the permission blocks only it held (blocks shared with a role or policy stay). */
export async function purgeRole(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`
    with doomed as (delete from roles where id = ${id} and deleted_at is not null returning id),
    held as (select block_id from role_permission_blocks where role_id in (select id from doomed)),
    orphans as (
      delete from permission_blocks b where b.id in (select block_id from held)
        and not exists (select 1 from role_permission_blocks o where o.block_id = b.id and o.role_id <> ${id})
        and not exists (select 1 from direct_policies d where d.block_id = b.id)
      returning b.id)
    select (select count(*)::int from doomed) as purged, (select count(*)::int from orphans) as blocks`;
  return (rows[0] as { purged: number }).purged === 1;
}

export const DERIVED_KINDS = ['empty', 'simple', 'composite'] as const;
export type DerivedKind = (typeof DERIVED_KINDS)[number];

export interface RoleFilter {
  tenantId?: string;
  readableTenantIds: string[] | null;
  derivedKind?: DerivedKind;
  q?: string;
  deleted: DeletedFilter;
}

export async function listRoles(sql: Queryable, f: RoleFilter, page: Page): Promise<ListResult<RoleRow>> {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (f.deleted === 'live') conds.push(sql`r.deleted_at is null`);
  if (f.deleted === 'deleted') conds.push(sql`r.deleted_at is not null`);
  if (f.tenantId) conds.push(sql`r.tenant_id = ${f.tenantId}`);
  if (f.readableTenantIds !== null) conds.push(sql`r.tenant_id = any(${f.readableTenantIds}::uuid[])`);
  if (f.q) {
    const like = `%${f.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    conds.push(sql`(r.name ilike ${like} or r.description ilike ${like})`);
  }
  if (f.derivedKind) {
    const count = sql`(select count(*) from role_permission_blocks x where x.role_id = r.id)`;
    conds.push(f.derivedKind === 'empty' ? sql`${count} = 0` : f.derivedKind === 'simple' ? sql`${count} = 1` : sql`${count} > 1`);
  }
  const where = conds.length ? conds.reduce((x, c) => sql`${x} and ${c}`) : sql`true`;
  return selectPage<RoleRow>(sql, {
    columns: columns(sql),
    from: sql`from roles r where ${where}`,
    order: sql`r.tenant_id nulls first, r.name, r.id`,
  }, page);
}

/** Pins a live (or, to restore it, a deleted) role against concurrent assignments (they take it FOR SHARE). */
export async function lockRoleForUpdate(tx: Queryable, id: string, deleted = false): Promise<boolean> {
  const rows = await tx`select id from roles where id = ${id} and (deleted_at is not null) = ${deleted} for update`;
  return rows.length === 1;
}

export async function blockTenants(sql: Queryable, ids: string[]): Promise<{ id: string; tenant_id: string | null }[]> {
  return sql<{ id: string; tenant_id: string | null }[]>`select id, tenant_id from permission_blocks where id = any(${ids}::uuid[])`;
}

/** Sets the role's blocks to exactly `ids`; returns what was added and removed. */
export async function replaceRoleBlocks(tx: Queryable, roleId: string, ids: string[]): Promise<{ added: string[]; removed: string[] }> {
  const removed = await tx<{ block_id: string }[]>`
    delete from role_permission_blocks where role_id = ${roleId} and not (block_id = any(${ids}::uuid[])) returning block_id`;
  const added = await tx<{ block_id: string }[]>`
    insert into role_permission_blocks (role_id, block_id) select ${roleId}, unnest(${ids}::uuid[])
    on conflict do nothing returning block_id`;
  await tx`update roles set updated_at = now() where id = ${roleId}`;
  return { added: added.map((r) => r.block_id), removed: removed.map((r) => r.block_id) };
}

export async function assignedGroupIds(sql: Queryable, roleId: string): Promise<string[]> {
  const rows = await sql<{ group_id: string }[]>`select distinct group_id from role_assignments where role_id = ${roleId} and group_id is not null`;
  return rows.map((r) => r.group_id);
}

/**
 * A holder of a tenant's role outside the assignment's tenant, if any (the subject rule of
 * src/policies/subjects.ts, for every assignment of the role at once): reviving the role must not
 * revive such a grant. Soft-deleted subjects count, since restoring them revives the grant too.
 */
export async function strayHolder(sql: Queryable, roleId: string): Promise<{ grant_tenant_id: string | null; subject: SubjectRow } | undefined> {
  const [row] = await sql<{ grant_tenant_id: string | null; kind: 'entity' | 'group'; id: string; tenant_id: string | null; sub_kind: string }[]>`
    select ra.tenant_id as grant_tenant_id, ra.subject_kind as kind, coalesce(e.id, g.id) as id,
      coalesce(e.tenant_id, g.tenant_id) as tenant_id, coalesce(e.kind, g.group_type) as sub_kind
    from role_assignments ra join roles r on r.id = ra.role_id
    left join entities e on e.id = ra.entity_id left join groups g on g.id = ra.group_id
    where ra.role_id = ${roleId} and r.tenant_id is not null
      and ((e.id is not null and e.tenant_id is not null and e.tenant_id is distinct from ra.tenant_id)
        or (g.id is not null and g.tenant_id is distinct from ra.tenant_id))
    limit 1`;
  return row && { grant_tenant_id: row.grant_tenant_id, subject: { kind: row.kind, id: row.id, tenant_id: row.tenant_id, sub_kind: row.sub_kind, deleted: false } };
}

/** The entity kinds holding the role, per assignment tenant (each tenant's rules judge its own grants). */
export async function holderKindsByTenant(sql: Queryable, roleId: string): Promise<{ tenant_id: string | null; kinds: string[] }[]> {
  return sql<{ tenant_id: string | null; kinds: string[] }[]>`
    select tenant_id, array_agg(distinct kind order by kind) as kinds from (
      select ra.tenant_id, e.kind from role_assignments ra join entities e on e.id = ra.entity_id
      where ra.role_id = ${roleId} and e.deleted_at is null
      union all
      select ra.tenant_id, e.kind from role_assignments ra
        join principal_group_members m on m.group_id = ra.group_id join entities e on e.id = m.entity_id
      where ra.role_id = ${roleId} and e.deleted_at is null
    ) h group by tenant_id`;
}

/** Entities holding the role directly or through a principal group (at most `cap` + 1). */
export async function holderEntityIds(sql: Queryable, roleId: string, cap: number): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    select entity_id as id from role_assignments where role_id = ${roleId} and entity_id is not null
    union
    select m.entity_id from role_assignments ra join principal_group_members m on m.group_id = ra.group_id where ra.role_id = ${roleId}
    limit ${cap + 1}`;
  return rows.map((r) => r.id);
}
