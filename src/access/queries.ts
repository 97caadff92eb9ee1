// SQL of the access helpers: a tenant's state, an object group's subtree. (The tenants a caller is
// connected to are the authorization engine's: cached with its grants, authz/queries.ts.)
import type { Queryable } from '../db/client.js';

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
