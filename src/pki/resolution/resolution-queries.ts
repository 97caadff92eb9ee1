// SQL of certificate resolution for the runtime API: the tenant an entity belongs to, to decide whether a
// caller may revoke its certificates before the revocation service is asked.
import type { Queryable } from '../../db/client.js';

export async function selectEntityTenant(sql: Queryable, entityId: string): Promise<{ tenant_id: string | null } | undefined> {
  const [row] = await sql<{ tenant_id: string | null }[]>`select tenant_id from entities where id = ${entityId} and deleted_at is null`;
  return row;
}
