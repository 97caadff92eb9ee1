// SQL of the access helpers: the tenants a caller is connected to, and a tenant's state.
import type { Queryable } from '../db/client.js';

/**
 * Tenants a subject reaches: its home tenant, tenants of its role assignments (direct or through its
 * principal groups), and tenants it is an active member of. Only live tenants.
 */
export async function connectedTenantIds(sql: Queryable, entityId: string): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    select t.id from tenants t
    where t.deleted_at is null and (
      t.id = (select e.tenant_id from entities e where e.id = ${entityId})
      or t.id in (select ra.tenant_id from role_assignments ra where ra.entity_id = ${entityId} and ra.tenant_id is not null)
      or t.id in (select ra.tenant_id from role_assignments ra
                  join principal_group_members pgm on pgm.group_id = ra.group_id
                  where pgm.entity_id = ${entityId} and ra.tenant_id is not null)
      or t.id in (select m.tenant_id from tenant_memberships m where m.entity_id = ${entityId} and m.status = 'active'))
    order by t.created_at, t.id`;
  return rows.map((r) => r.id);
}

export async function tenantStatus(sql: Queryable, tenantId: string): Promise<string | undefined> {
  const [row] = await sql<{ status: string }[]>`select status from tenants where id = ${tenantId}`;
  return row?.status;
}

/** The object group and every live object group nested below it (listing filters with includeDescendants). */
export function descendantGroups(sql: Queryable, groupId: string) {
  return sql`
    with recursive tree(id) as (
      select id from groups where id = ${groupId} and deleted_at is null and group_type = 'object'
      union
      select g.id from groups g join tree t on g.parent_id = t.id where g.deleted_at is null and g.group_type = 'object'
    ) select id from tree`;
}
