// SQL of permission blocks: rows with their actions, listings, links, and the objects and groups they scope.
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import { selectPage, type ListResult, type Page } from '../db/paging.js';
import { actionJson, type ActionRow } from './action-queries.js';

export interface BlockRow {
  id: string;
  tenant_id: string | null;
  scope_mode: string;
  object_kind: string | null;
  object_type: string | null;
  object_id: string | null;
  group_id: string | null;
  effect: 'allow' | 'deny';
  conditions: Record<string, unknown>;
  all_actions: boolean;
  created_at: string | Date;
  updated_at: string | Date | null;
  actions: ActionRow[];
}

/** The block's actions (alias `b`); a system block covering every action lists every action. */
function blockActions(sql: Queryable) {
  return sql`coalesce((
    select json_agg(${actionJson(sql)} order by a.name) from actions a
    where b.all_actions or exists (select 1 from permission_block_actions pba where pba.block_id = b.id and pba.action_id = a.id)
  ), '[]'::json)`;
}

function columns(sql: Queryable) {
  return sql`b.id, b.tenant_id, b.scope_mode, b.object_kind, b.object_type, b.object_id, b.group_id, b.effect, b.conditions,
    b.all_actions, b.created_at, b.updated_at, ${blockActions(sql)} as actions`;
}

/** One block as JSON (alias `b`), for roles and direct policies that embed theirs: no query per item. */
export function blockJson(sql: Queryable) {
  return sql`json_build_object(
    'id', b.id, 'tenant_id', b.tenant_id, 'scope_mode', b.scope_mode, 'object_kind', b.object_kind,
    'object_type', b.object_type, 'object_id', b.object_id, 'group_id', b.group_id, 'effect', b.effect,
    'conditions', b.conditions, 'all_actions', b.all_actions, 'created_at', b.created_at, 'updated_at', b.updated_at,
    'actions', ${blockActions(sql)})`;
}

export async function findBlock(sql: Queryable, id: string): Promise<BlockRow | undefined> {
  const [row] = await sql<BlockRow[]>`select ${columns(sql)} from permission_blocks b where b.id = ${id}`;
  return row;
}

export interface NewBlock {
  tenantId: string | null;
  scopeMode: string;
  objectKind: string | null;
  objectType: string | null;
  objectId: string | null;
  groupId: string | null;
  effect: 'allow' | 'deny';
  conditions: Record<string, unknown>;
  actionIds: string[];
  createdBy: string;
}

export async function insertBlock(sql: Queryable, b: NewBlock): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into permission_blocks (tenant_id, scope_mode, object_kind, object_type, object_id, group_id, effect, conditions, created_by)
    values (${b.tenantId}, ${b.scopeMode}, ${b.objectKind}, ${b.objectType}, ${b.objectId}, ${b.groupId}, ${b.effect},
            ${sql.json(b.conditions as postgres.JSONValue)}, ${b.createdBy})
    returning id`;
  await sql`
    insert into permission_block_actions (block_id, action_id)
    select ${row.id}, unnest(${b.actionIds}::uuid[]) on conflict do nothing`;
  return row.id;
}

export interface BlockFilter {
  tenantId?: string;
  readableTenantIds: string[] | null;
  scopeMode?: string;
}

export async function listBlocks(sql: Queryable, f: BlockFilter, page: Page): Promise<ListResult<BlockRow>> {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (f.tenantId) conds.push(sql`b.tenant_id = ${f.tenantId}`);
  if (f.readableTenantIds !== null) conds.push(sql`b.tenant_id = any(${f.readableTenantIds}::uuid[])`);
  if (f.scopeMode) conds.push(sql`b.scope_mode = ${f.scopeMode}`);
  const where = conds.length ? conds.reduce((x, c) => sql`${x} and ${c}`) : sql`true`;
  return selectPage<BlockRow>(sql, {
    columns: columns(sql),
    from: sql`from permission_blocks b where ${where}`,
    order: sql`b.created_at, b.id`,
  }, page);
}

/** How many roles and direct policies hold the block (a linked block cannot be deleted). */
export async function blockLinks(sql: Queryable, id: string): Promise<{ roles: number; policies: number }> {
  const [row] = await sql<[{ roles: number; policies: number }]>`
    select (select count(*)::int from role_permission_blocks where block_id = ${id}) as roles,
           (select count(*)::int from direct_policies where block_id = ${id}) as policies`;
  return row;
}

/** Locks the block so a concurrent link cannot slip in between the link count and the delete. */
export async function lockBlock(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`select id from permission_blocks where id = ${id} for update`;
  return rows.length === 1;
}

export async function deleteBlock(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`delete from permission_blocks where id = ${id} returning id`;
  return rows.length === 1;
}

export interface ScopedObject {
  kind: string;
  type: string | null;
  tenant_id: string | null;
}

/**
 * The live object an exact-object scope names: its kind (searched across kinds when not given), its type
 * (entities and resources have sub-kinds) and its tenant (a tenant's tenant is itself).
 */
export async function resolveObject(sql: Queryable, kind: string | null, id: string): Promise<ScopedObject[]> {
  const want = (k: string) => kind === null || kind === k;
  const parts: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (want('entity')) parts.push(sql`select 'entity' as kind, 'entity:' || kind as type, tenant_id from entities where id = ${id} and deleted_at is null`);
  if (want('resource')) parts.push(sql`select 'resource', 'resource:' || kind, tenant_id from resources where id = ${id} and deleted_at is null`);
  if (want('group')) parts.push(sql`select 'group', null, tenant_id from groups where id = ${id} and deleted_at is null`);
  if (want('tenant')) parts.push(sql`select 'tenant', null, id from tenants where id = ${id} and deleted_at is null`);
  if (want('role')) parts.push(sql`select 'role', null, tenant_id from roles where id = ${id} and deleted_at is null`);
  if (want('credential')) {
    parts.push(sql`select 'credential', null, e.tenant_id from credentials c join entities e on e.id = c.entity_id where c.id = ${id}`);
  }
  if (want('policy')) {
    parts.push(sql`select 'policy', null, tenant_id from permission_blocks where id = ${id}
      union all select 'policy', null, tenant_id from direct_policies where id = ${id}
      union all select 'policy', null, tenant_id from role_assignments where id = ${id}`);
  }
  if (want('audit_log')) parts.push(sql`select 'audit_log', null, tenant_id from audit_log where id = ${id}`);
  if (parts.length === 0) return [];
  const union = parts.reduce((x, p) => sql`${x} union all ${p}`);
  return sql<ScopedObject[]>`select kind, type, tenant_id from (${union}) o(kind, type, tenant_id)`;
}

/** Custom endpoints live in a domain that may not be deployed yet: a missing table resolves nothing. */
export async function resolveEndpoint(sql: Queryable, id: string): Promise<ScopedObject[]> {
  const [reg] = await sql<[{ t: string | null }]>`select to_regclass('api_endpoints')::text as t`;
  if (!reg.t) return [];
  return sql<ScopedObject[]>`select 'api_endpoint' as kind, null as type, tenant_id from api_endpoints where id = ${id}`;
}
