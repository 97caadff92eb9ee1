// SQL of role assignments (subject → role).
import type { Queryable } from '../db/client.js';

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

export async function insertEntityRoleAssignment(sql: Queryable, a: { tenantId: string | null; entityId: string; roleId: string; by: string }): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into role_assignments (tenant_id, subject_kind, entity_id, role_id, created_by)
    values (${a.tenantId}, 'entity', ${a.entityId}, ${a.roleId}, ${a.by})
    on conflict do nothing returning id`;
  if (row) return row.id;
  const [existing] = await sql<[{ id: string }]>`
    select id from role_assignments where entity_id = ${a.entityId} and role_id = ${a.roleId}
    and tenant_id is not distinct from ${a.tenantId}`;
  return existing.id;
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
