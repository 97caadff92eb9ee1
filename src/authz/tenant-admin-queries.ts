// SQL of the tenant-creation hook: the tenant-admin role, its blocks and the creator's assignment.
import type { Queryable } from '../db/client.js';

export async function insertRole(sql: Queryable, r: { name: string; tenantId: string; description: string; createdBy: string | null }): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into roles (name, tenant_id, description, created_by)
    values (${r.name}, ${r.tenantId}, ${r.description}, ${r.createdBy}) returning id`;
  return (row as { id: string }).id;
}

export async function insertRoleBlock(sql: Queryable, b: {
  roleId: string; tenantId: string; scopeMode: string; objectKind: string | null; actions: string[]; createdBy: string | null;
}): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    with block as (
      insert into permission_blocks (tenant_id, scope_mode, object_kind, effect, created_by)
      values (${b.tenantId}, ${b.scopeMode}, ${b.objectKind}, 'allow', ${b.createdBy}) returning id
    ), acts as (
      insert into permission_block_actions (block_id, action_id)
      select block.id, a.id from block, actions a where a.name = any(${b.actions})
    ), link as (
      insert into role_permission_blocks (role_id, block_id) select ${b.roleId}, id from block
    )
    select id from block`;
  return (row as { id: string }).id;
}

export async function insertEntityAssignment(sql: Queryable, a: { tenantId: string; entityId: string; roleId: string; createdBy: string | null }): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into role_assignments (tenant_id, subject_kind, entity_id, role_id, created_by)
    values (${a.tenantId}, 'entity', ${a.entityId}, ${a.roleId}, ${a.createdBy}) returning id`;
  return (row as { id: string }).id;
}
