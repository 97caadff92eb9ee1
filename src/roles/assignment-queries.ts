// SQL of role assignments (subject → role).
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import { selectPage, type ListResult, type Page } from '../db/paging.js';
import { roleJson, type RoleRow } from './queries.js';

export interface RoleRef {
  id: string;
  name: string;
  tenant_id: string | null;
  deleted_at: Date | null;
}

export async function findRole(sql: Queryable, id: string): Promise<RoleRef | undefined> {
  const [row] = await sql<RoleRef[]>`select id, name, tenant_id, deleted_at from roles where id = ${id}`;
  return row;
}

/** Every assignment and direct policy an entity holds in a tenant (removing a member removes its access). */
export async function deleteEntityGrantsInTenant(sql: Queryable, tenantId: string, entityId: string): Promise<number> {
  const a = await sql`delete from role_assignments where entity_id = ${entityId} and tenant_id = ${tenantId} returning id`;
  const d = await sql`delete from direct_policies where entity_id = ${entityId} and tenant_id = ${tenantId} returning id`;
  return a.length + d.length;
}

export async function roleBlockIds(sql: Queryable, roleId: string): Promise<string[]> {
  const rows = await sql<{ block_id: string }[]>`select block_id from role_permission_blocks where role_id = ${roleId}`;
  return rows.map((r) => r.block_id);
}

/** Pins a live role while a grant of it is judged: a concurrent block change (FOR UPDATE) waits, or is seen. */
export async function lockRole(sql: Queryable, id: string): Promise<RoleRef | undefined> {
  const [row] = await sql<RoleRef[]>`select id, name, tenant_id, deleted_at from roles where id = ${id} for share`;
  return row;
}

/** Idempotent: assigning a held role again returns the existing assignment (created false). */
export async function insertRoleAssignment(sql: Queryable, a: {
  tenantId: string | null; subjectKind: 'entity' | 'group'; subjectId: string; roleId: string; by: string;
}): Promise<{ id: string; created: boolean }> {
  const entityId = a.subjectKind === 'entity' ? a.subjectId : null;
  const groupId = a.subjectKind === 'group' ? a.subjectId : null;
  const [row] = await sql<{ id: string }[]>`
    insert into role_assignments (tenant_id, subject_kind, entity_id, group_id, role_id, created_by)
    values (${a.tenantId}, ${a.subjectKind}, ${entityId}, ${groupId}, ${a.roleId}, ${a.by})
    on conflict do nothing returning id`;
  if (row) return { id: row.id, created: true };
  const [existing] = await sql<[{ id: string }]>`
    select id from role_assignments where coalesce(entity_id, group_id) = ${a.subjectId} and role_id = ${a.roleId}
    and tenant_id is not distinct from ${a.tenantId}`;
  return { id: existing.id, created: false };
}

export interface AssignmentRow {
  id: string;
  tenant_id: string | null;
  subject_kind: 'entity' | 'group';
  subject_id: string;
  role_id: string;
  created_at: string | Date;
  role: RoleRow;
}

function assignmentColumns(sql: Queryable) {
  return sql`ra.id, ra.tenant_id, ra.subject_kind, coalesce(ra.entity_id, ra.group_id) as subject_id, ra.role_id, ra.created_at,
    (select ${roleJson(sql)} from roles r where r.id = ra.role_id) as role`;
}

export async function findAssignment(sql: Queryable, id: string): Promise<AssignmentRow | undefined> {
  const [row] = await sql<AssignmentRow[]>`select ${assignmentColumns(sql)} from role_assignments ra where ra.id = ${id}`;
  return row;
}

/** Deletes the assignment; null when there was none. As deleteDirectPolicy: the ids of the blocks naming it, deleted with it. */
export async function deleteAssignment(sql: Queryable, id: string): Promise<{ targetingBlockIds: string[] } | null> {
  const [row] = await sql<{ deleted: number; block_ids: string[] }[]>`
    with targeting as (select id from permission_blocks where object_kind = 'policy' and object_id = ${id}),
    gone as (delete from role_assignments where id = ${id} returning id)
    select (select count(*) from gone)::int as deleted, coalesce((select json_agg(id) from targeting), '[]'::json) as block_ids`;
  return row && row.deleted === 1 ? { targetingBlockIds: row.block_ids } : null;
}

export interface AssignmentFilter {
  tenantId?: string;
  readableTenantIds: string[] | null;
  subjectKind?: 'entity' | 'group';
  subjectId?: string;
  roleId?: string;
}

export async function listAssignments(sql: Queryable, f: AssignmentFilter, page: Page): Promise<ListResult<AssignmentRow>> {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (f.tenantId) conds.push(sql`ra.tenant_id = ${f.tenantId}`);
  if (f.readableTenantIds !== null) conds.push(sql`ra.tenant_id = any(${f.readableTenantIds}::uuid[])`);
  if (f.subjectKind) conds.push(sql`ra.subject_kind = ${f.subjectKind}`);
  if (f.subjectId) conds.push(f.subjectKind === 'group' ? sql`ra.group_id = ${f.subjectId}` : f.subjectKind === 'entity'
    ? sql`ra.entity_id = ${f.subjectId}` : sql`(ra.entity_id = ${f.subjectId} or ra.group_id = ${f.subjectId})`);
  if (f.roleId) conds.push(sql`ra.role_id = ${f.roleId}`);
  const where = conds.length ? conds.reduce((x, c) => sql`${x} and ${c}`) : sql`true`;
  return selectPage<AssignmentRow>(sql, {
    columns: assignmentColumns(sql),
    from: sql`from role_assignments ra where ${where}`,
    order: sql`ra.created_at, ra.id`,
  }, page);
}
