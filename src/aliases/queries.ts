// SQL of alias resolution: live tenants by id or alias, live entities and resources by alias within a
// tenant or the global namespace (tenant_id null). Aliases are matched case-folded, as the unique
// indexes (tenants__alias_live, entities__tenant_alias_live, resources__tenant_alias_live) compare them.
import type { Queryable } from '../db/client.js';

export async function selectLiveTenant(sql: Queryable, by: { id: string } | { alias: string }): Promise<{ id: string } | null> {
  const [row] = 'id' in by
    ? await sql<{ id: string }[]>`select id from tenants where id = ${by.id} and deleted_at is null`
    : await sql<{ id: string }[]>`select id from tenants where lower(alias) = ${by.alias.toLowerCase()} and deleted_at is null`;
  return row ?? null;
}

export async function selectObjectByAlias(sql: Queryable, kind: 'entity' | 'resource', tenantId: string | null, alias: string): Promise<string | null> {
  // Spelled out per namespace (no `is not distinct from`) so the partial unique indexes serve the lookup.
  const owner = tenantId === null ? sql`tenant_id is null` : sql`tenant_id = ${tenantId}`;
  const match = sql`${owner} and lower(alias) = ${alias.toLowerCase()} and alias is not null and deleted_at is null`;
  const [row] = kind === 'entity'
    ? await sql<{ id: string }[]>`select id from entities where ${match}`
    : await sql<{ id: string }[]>`select id from resources where ${match}`;
  return row?.id ?? null;
}
