// SQL of tenants (workspaces) and their lifecycle.
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import { selectRows, type ListResult, type Page } from '../db/paging.js';
import type { DeletedFilter } from '../validate.js';

export interface TenantRow {
  id: string;
  name: string;
  alias: string | null;
  status: string;
  tags: string[];
  attributes: Record<string, unknown>;
  created_by: string | null;
  created_at: string | Date;
  updated_at: string | Date | null;
  deleted_at: string | Date | null;
  deleted_by: string | null;
}

const columns = (sql: Queryable) =>
  sql`t.id, t.name, t.alias, t.status, t.tags, t.attributes, t.created_by, t.created_at, t.updated_at, t.deleted_at, t.deleted_by`;

export async function findTenant(sql: Queryable, id: string): Promise<TenantRow | undefined> {
  const [row] = await sql<TenantRow[]>`select ${columns(sql)} from tenants t where t.id = ${id}`;
  return row;
}

export async function findTenantForUpdate(sql: Queryable, id: string): Promise<TenantRow | undefined> {
  const [row] = await sql<TenantRow[]>`select ${columns(sql)} from tenants t where t.id = ${id} for update`;
  return row;
}

export interface NewTenant {
  name: string;
  alias: string | null;
  tags: string[];
  attributes: Record<string, unknown>;
  createdBy: string;
}

export async function insertTenant(sql: Queryable, t: NewTenant): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into tenants (name, alias, tags, attributes, created_by)
    values (${t.name}, ${t.alias}, ${t.tags}, ${sql.json(t.attributes as postgres.JSONValue)}, ${t.createdBy})
    returning id`;
  return row.id;
}

export interface TenantChanges {
  name?: string;
  alias?: string | null;
  tags?: string[];
  attributes?: Record<string, unknown>;
}

export async function updateTenant(sql: Queryable, id: string, c: TenantChanges): Promise<void> {
  await sql`
    update tenants set
      name = ${c.name === undefined ? sql`name` : sql`${c.name}`},
      alias = ${c.alias === undefined ? sql`alias` : sql`${c.alias}`},
      tags = ${c.tags === undefined ? sql`tags` : sql`${c.tags}`},
      attributes = ${c.attributes === undefined ? sql`attributes` : sql`${sql.json(c.attributes as postgres.JSONValue)}`},
      updated_at = now()
    where id = ${id}`;
}

export async function setTenantStatus(sql: Queryable, id: string, status: 'active' | 'inactive' | 'frozen'): Promise<void> {
  await sql`update tenants set status = ${status}, updated_at = now() where id = ${id} and deleted_at is null`;
}

/**
 * Soft delete: the tenant's sessions are revoked in the same transaction. Its entities' certificates are
 * the certificate authority's to revoke (ledger, CRL entries): the service calls its hook in this transaction.
 */
export async function softDeleteTenant(sql: Queryable, id: string, by: string): Promise<{ sessions: number }> {
  await sql`update tenants set status = 'deleted', deleted_at = now(), deleted_by = ${by}, updated_at = now() where id = ${id}`;
  const sessions = await sql`
    update sessions set revoked_at = now(), revoked_reason = 'tenant deleted'
    where revoked_at is null and (tenant_id = ${id} or entity_id in (select e.id from entities e where e.tenant_id = ${id}))
    returning id`;
  return { sessions: sessions.length };
}

export async function restoreTenant(sql: Queryable, id: string): Promise<void> {
  await sql`update tenants set status = 'active', deleted_at = null, deleted_by = null, updated_at = now() where id = ${id}`;
}

export async function purgeTenant(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`delete from tenants where id = ${id} and deleted_at is not null returning id`;
  return rows.length === 1;
}

export async function insertMembership(sql: Queryable, tenantId: string, entityId: string): Promise<void> {
  await sql`
    insert into tenant_memberships (tenant_id, entity_id, status) values (${tenantId}, ${entityId}, 'active')
    on conflict (tenant_id, entity_id) do update set status = 'active'`;
}

export const TENANT_ORDER = { created_at: 'created_at', updated_at: 'updated_at', name: 'name', alias: 'alias', status: 'status' } as const;

export interface TenantFilter {
  /** null = every tenant; else only these (grants applied before paging). */
  readableIds: string[] | null;
  q?: string;
  name?: string;
  alias?: string;
  status?: string;
  deleted: DeletedFilter;
  order: keyof typeof TENANT_ORDER;
  dir: 'asc' | 'desc';
}

/**
 * A listing whose plan does not depend on the values bound (db/paging.ts listingSql). A readable set is
 * one: it is read by key, one index probe per readable tenant (below), whatever its size.
 */
export function plainTenantListing(f: TenantFilter): boolean {
  return !f.q;
}

export async function listTenants(sql: Queryable, f: TenantFilter, page: Page): Promise<ListResult<TenantRow>> {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (f.deleted === 'live') conds.push(sql`t.deleted_at is null`);
  if (f.deleted === 'deleted') conds.push(sql`t.deleted_at is not null`);
  if (f.name) conds.push(sql`t.name = ${f.name}`);
  if (f.alias) conds.push(sql`lower(t.alias) = lower(${f.alias})`);
  if (f.status) conds.push(sql`t.status = ${f.status}`);
  if (f.q) {
    const like = `%${f.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    conds.push(sql`(t.name ilike ${like} or t.alias ilike ${like})`);
  }
  const where = conds.length ? conds.reduce((a, c) => sql`${a} and ${c}`) : sql`true`;
  const dir = f.dir === 'desc' ? sql`desc` : sql`asc`;
  // The readable tenants (a caller without a platform-wide grant) are probed by key: `t.id = any($n)`
  // planned generically costs the array at a default size and scans every tenant; the fence (offset 0)
  // keeps the probe a lookup per readable id instead of a join the planner may turn into a scan.
  const tenants = f.readableIds === null
    ? sql`tenants t`
    : sql`unnest(${f.readableIds}::uuid[]) readable(id) cross join lateral (select * from tenants where id = readable.id offset 0) t`;
  return selectRows<TenantRow & Record<string, unknown>>(sql, {
    columns: columns(sql),
    from: sql`from ${tenants} where ${where}`,
    order: sql`${sql('t.' + TENANT_ORDER[f.order])} ${dir} nulls last, t.id ${dir}`,
  }, page);
}
