// SQL of entities and ownerships.
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import { descendantGroups } from '../access/queries.js';
import { restrictsBeyondTenant, selectRows, type ListResult, type Page } from '../db/paging.js';
import type { DeletedFilter } from '../validate.js';

export interface EntityRow {
  id: string;
  kind: string;
  name: string;
  external_id: string | null;
  alias: string | null;
  tenant_id: string | null;
  profile_id: string | null;
  profile_version_id: string | null;
  status: string;
  attributes: Record<string, unknown>;
  object_group_ids: string[];
  created_at: string | Date;
  updated_at: string | Date | null;
  deleted_at: string | Date | null;
  deleted_by: string | null;
}

/**
 * Live object groups containing the entity come along in the same statement: no N+1 per list item. A
 * list that does not show them leaves the per-row subquery out (groups: false), which is most of a
 * plain page's cost in PostgreSQL; its rows then carry an empty list.
 */
export function entityColumns(sql: Queryable, include: { groups: boolean } = { groups: true }) {
  return sql`
    e.id, e.kind, e.name, e.external_id, e.alias, e.tenant_id, e.profile_id, e.profile_version_id, e.status,
    e.attributes, e.created_at, e.updated_at, e.deleted_at, e.deleted_by,
    ${include.groups ? sql`array(select oge.group_id from object_group_entities oge join groups g on g.id = oge.group_id
          where oge.entity_id = e.id and g.deleted_at is null order by oge.created_at, oge.group_id)` : sql`'{}'::uuid[]`} as object_group_ids`;
}

export async function findEntity(sql: Queryable, id: string): Promise<EntityRow | undefined> {
  const [row] = await sql<EntityRow[]>`select ${entityColumns(sql)} from entities e where e.id = ${id}`;
  return row;
}

export interface NewEntity {
  kind: string;
  name: string;
  externalId: string | null;
  alias: string | null;
  tenantId: string | null;
  profileId: string | null;
  profileVersionId: string | null;
  attributes: Record<string, unknown>;
}

export async function insertEntity(sql: Queryable, e: NewEntity): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into entities (kind, name, external_id, alias, tenant_id, profile_id, profile_version_id, attributes)
    values (${e.kind}, ${e.name}, ${e.externalId}, ${e.alias}, ${e.tenantId}, ${e.profileId}, ${e.profileVersionId},
            ${sql.json(e.attributes as postgres.JSONValue)})
    returning id`;
  return row.id;
}

export interface EntityChanges {
  name?: string;
  attributes?: Record<string, unknown>;
  status?: string;
  alias?: string | null;
  externalId?: string | null;
  profileId?: string | null;
  profileVersionId?: string | null;
}

export async function updateEntity(sql: Queryable, id: string, c: EntityChanges): Promise<boolean> {
  const rows = await sql`
    update entities set
      name = ${c.name === undefined ? sql`name` : sql`${c.name}`},
      attributes = ${c.attributes === undefined ? sql`attributes` : sql`${sql.json(c.attributes as postgres.JSONValue)}`},
      status = ${c.status === undefined ? sql`status` : sql`${c.status}`},
      alias = ${c.alias === undefined ? sql`alias` : sql`${c.alias}`},
      external_id = ${c.externalId === undefined ? sql`external_id` : sql`${c.externalId}`},
      profile_id = ${c.profileId === undefined ? sql`profile_id` : sql`${c.profileId}`},
      profile_version_id = ${c.profileVersionId === undefined ? sql`profile_version_id` : sql`${c.profileVersionId}`},
      updated_at = now()
    where id = ${id} and deleted_at is null
    returning id`;
  return rows.length === 1;
}

/**
 * Soft delete; the entity's credentials and sessions are revoked with it and stay revoked on restore.
 * Certificates are the certificate authority's to revoke (ledger, CRL entries), through its hook in the
 * same transaction.
 */
export async function softDeleteEntity(sql: Queryable, id: string, by: string): Promise<boolean> {
  const rows = await sql`
    update entities set deleted_at = now(), deleted_by = ${by}, updated_at = now()
    where id = ${id} and deleted_at is null returning id`;
  if (rows.length === 0) return false;
  // In id order, as every statement writing several credentials takes them (last-use batches): two such
  // statements in plan order could each hold a row the other waits on.
  await sql`
    with locked as materialized (
      select id from credentials where entity_id = ${id} and status = 'active' and kind <> 'certificate' order by id for update)
    update credentials c set status = 'revoked', revoked_at = now(), revoked_by = ${by}, revocation_reason = 'entity deleted'
    from locked where c.id = locked.id`;
  await sql`update sessions set revoked_at = now(), revoked_reason = 'entity deleted' where entity_id = ${id} and revoked_at is null`;
  return true;
}

export async function restoreEntity(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`
    update entities set deleted_at = null, deleted_by = null, updated_at = now()
    where id = ${id} and deleted_at is not null returning id`;
  return rows.length === 1;
}

export async function purgeEntity(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`delete from entities where id = ${id} and deleted_at is not null returning id`;
  return rows.length === 1;
}

export async function joinPrincipalGroup(sql: Queryable, groupId: string, entityId: string): Promise<void> {
  await sql`insert into principal_group_members (group_id, entity_id) values (${groupId}, ${entityId}) on conflict do nothing`;
}

export const ENTITY_ORDER = { created_at: 'created_at', updated_at: 'updated_at', name: 'name', kind: 'kind', status: 'status' } as const;

export interface EntityFilter {
  tenantId?: string | null;
  /** Grants applied before paging: null = no restriction, else only these tenants (and these objects). */
  readableTenantIds: string[] | null;
  readableIds?: string[];
  kind?: string;
  q?: string;
  status?: string;
  externalId?: string;
  profileId?: string;
  attributesContains?: Record<string, unknown>;
  parentGroupId?: string;
  includeDescendants?: boolean;
  deleted: DeletedFilter;
  order: keyof typeof ENTITY_ORDER;
  dir: 'asc' | 'desc';
}

/** A listing whose plan does not depend on the values bound (db/paging.ts listingSql). */
export function plainEntityListing(f: EntityFilter): boolean {
  return !f.q && !f.attributesContains && !restrictsBeyondTenant(f.readableTenantIds, f.tenantId);
}

/** include.groups: whether the page shows each entity's object groups (the answer asks for them). */
export async function listEntities(sql: Queryable, f: EntityFilter, page: Page, include = { groups: true }): Promise<ListResult<EntityRow>> {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (f.deleted === 'live') conds.push(sql`e.deleted_at is null`);
  if (f.deleted === 'deleted') conds.push(sql`e.deleted_at is not null`);
  if (f.tenantId !== undefined) conds.push(f.tenantId === null ? sql`e.tenant_id is null` : sql`e.tenant_id = ${f.tenantId}`);
  if (restrictsBeyondTenant(f.readableTenantIds, f.tenantId)) {
    conds.push(f.readableIds?.length
      ? sql`(e.tenant_id = any(${f.readableTenantIds}::uuid[]) or e.id = any(${f.readableIds}::uuid[]))`
      : sql`e.tenant_id = any(${f.readableTenantIds}::uuid[])`);
  }
  if (f.kind) conds.push(sql`e.kind = ${f.kind}`);
  if (f.status) conds.push(sql`e.status = ${f.status}`);
  if (f.externalId !== undefined) conds.push(sql`e.external_id = ${f.externalId}`);
  if (f.profileId) conds.push(sql`e.profile_id = ${f.profileId}`);
  if (f.attributesContains) conds.push(sql`e.attributes @> ${sql.json(f.attributesContains as postgres.JSONValue)}`);
  if (f.q) {
    const like = `%${f.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    conds.push(sql`(e.name ilike ${like} or e.external_id ilike ${like} or e.alias ilike ${like}
      or exists (select 1 from entity_emails m where m.entity_id = e.id and m.email ilike ${like}))`);
  }
  if (f.parentGroupId) {
    conds.push(f.includeDescendants
      ? sql`e.id in (select oge.entity_id from object_group_entities oge where oge.group_id in (${descendantGroups(sql, f.parentGroupId)}))`
      : sql`e.id in (select oge.entity_id from object_group_entities oge where oge.group_id = ${f.parentGroupId})`);
  }
  const where = conds.length ? conds.reduce((a, c) => sql`${a} and ${c}`) : sql`true`;
  const dir = f.dir === 'desc' ? sql`desc` : sql`asc`;
  return selectRows<EntityRow & Record<string, unknown>>(sql, {
    columns: entityColumns(sql, include),
    from: sql`from entities e where ${where}`,
    order: sql`${sql('e.' + ENTITY_ORDER[f.order])} ${dir} nulls last, e.id ${dir}`,
    total: keptTotal(sql, f),
  }, page);
}

/**
 * "All live entities of one readable tenant" is the admin UI's default listing and the expensive count
 * on large fleets: the trigger-kept counter answers it exactly. Any other filter counts the rows.
 */
function keptTotal(sql: Queryable, f: EntityFilter) {
  const onlyTenant = f.tenantId !== undefined && f.deleted === 'live' && !f.kind && !f.q && !f.status
    && f.externalId === undefined && !f.profileId && !f.attributesContains && !f.parentGroupId;
  if (!onlyTenant) return undefined;
  const key = f.tenantId ?? NIL_UUID;
  if (f.readableTenantIds !== null && !f.readableTenantIds.includes(key)) return undefined;
  return sql`select coalesce((select live::int from entity_counts where tenant_id = ${key}), 0)`;
}

const NIL_UUID = '00000000-0000-0000-0000-000000000000';


export async function insertOwnership(sql: Queryable, ownerId: string, ownedId: string, relation: string) {
  const [row] = await sql<[{ owner_id: string; owned_id: string; relation: string; created_at: Date }]>`
    insert into ownerships (owner_id, owned_id, relation) values (${ownerId}, ${ownedId}, ${relation})
    on conflict (owner_id, owned_id) do update set relation = excluded.relation
    returning owner_id, owned_id, relation, created_at`;
  return row;
}

export async function deleteOwnership(sql: Queryable, ownerId: string, ownedId: string): Promise<boolean> {
  const rows = await sql`delete from ownerships where owner_id = ${ownerId} and owned_id = ${ownedId} returning owner_id`;
  return rows.length === 1;
}

export async function listOwnedEntities(sql: Queryable, ownerId: string): Promise<EntityRow[]> {
  return sql<EntityRow[]>`
    select ${entityColumns(sql)} from entities e join ownerships o on o.owned_id = e.id
    where o.owner_id = ${ownerId} and e.deleted_at is null order by o.created_at, e.id`;
}

