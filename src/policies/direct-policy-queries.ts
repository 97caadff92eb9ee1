// SQL of direct policies (subject → one permission block) and the subjects grants are given to.
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import { selectPage, type ListResult, type Page } from '../db/paging.js';
import { blockJson, type BlockRow } from './block-queries.js';

export interface DirectPolicyRow {
  id: string;
  tenant_id: string | null;
  subject_kind: 'entity' | 'group';
  subject_id: string;
  block_id: string;
  created_at: string | Date;
  block: BlockRow;
}

function columns(sql: Queryable) {
  return sql`dp.id, dp.tenant_id, dp.subject_kind, coalesce(dp.entity_id, dp.group_id) as subject_id, dp.block_id, dp.created_at,
    (select ${blockJson(sql)} from permission_blocks b where b.id = dp.block_id) as block`;
}

export async function findDirectPolicy(sql: Queryable, id: string): Promise<DirectPolicyRow | undefined> {
  const [row] = await sql<DirectPolicyRow[]>`select ${columns(sql)} from direct_policies dp where dp.id = ${id}`;
  return row;
}

export async function insertDirectPolicy(sql: Queryable, d: {
  tenantId: string | null; subjectKind: 'entity' | 'group'; subjectId: string; blockId: string; by: string;
}): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into direct_policies (tenant_id, subject_kind, entity_id, group_id, block_id, created_by)
    values (${d.tenantId}, ${d.subjectKind}, ${d.subjectKind === 'entity' ? d.subjectId : null}, ${d.subjectKind === 'group' ? d.subjectId : null},
            ${d.blockId}, ${d.by})
    returning id`;
  return row.id;
}

/**
 * Deletes the policy; null when there was none. The blocks naming it (scope object, kind policy) go with
 * it (trigger, sql/0081): their ids are returned, so the caller drops the grants compiled from them.
 */
export async function deleteDirectPolicy(sql: Queryable, id: string): Promise<{ targetingBlockIds: string[] } | null> {
  const [row] = await sql<{ deleted: number; block_ids: string[] }[]>`
    with targeting as (select id from permission_blocks where object_kind = 'policy' and object_id = ${id}),
    gone as (delete from direct_policies where id = ${id} returning id)
    select (select count(*) from gone)::int as deleted, coalesce((select json_agg(id) from targeting), '[]'::json) as block_ids`;
  return row && row.deleted === 1 ? { targetingBlockIds: row.block_ids } : null;
}

export interface DirectPolicyFilter {
  tenantId?: string;
  readableTenantIds: string[] | null;
  subjectKind?: 'entity' | 'group';
  subjectId?: string;
  blockId?: string;
  objectId?: string;
  objectKind?: string;
  objectType?: string;
}

/**
 * Blocks that name the object (upstream's "who is this object shared with"): exact-object blocks, the group
 * itself, group containment (direct or below) and group hierarchy scopes. Blocks that reach the object
 * without naming it (platform, tenant, kind, type) are not part of the answer.
 */
function namingObject(sql: Queryable, f: DirectPolicyFilter) {
  const id = f.objectId as string;
  const kindIs = (k: string) => (f.objectKind === undefined || f.objectKind === k ? sql`true` : sql`false`);
  const typeOk = f.objectType === undefined ? sql`true` : sql`(b.object_type is null or b.object_type = ${f.objectType})`;
  const kindOk = f.objectKind === undefined ? sql`true` : sql`b.object_kind = ${f.objectKind}`;
  return sql`dp.block_id in (
    with recursive direct(id) as (
      select group_id from object_group_entities where entity_id = ${id}
      union select group_id from object_group_resources where resource_id = ${id}
    ), containing(id, depth) as (
      select id, 0 from direct
      union select g.parent_id, c.depth + 1 from groups g join containing c on g.id = c.id where g.parent_id is not null and c.depth < 64
    ), above(id, depth) as (
      select parent_id, 0 from groups where id = ${id} and parent_id is not null
      union select g.parent_id, a.depth + 1 from groups g join above a on g.id = a.id where g.parent_id is not null and a.depth < 64
    )
    select b.id from permission_blocks b where
      (b.scope_mode = 'object' and b.object_id = ${id} and ${kindOk} and ${typeOk})
      or (b.scope_mode = 'group' and b.group_id = ${id} and ${kindIs('group')})
      or (b.scope_mode = 'group_direct_objects' and b.group_id in (select id from direct) and ${kindOk} and ${typeOk})
      or (b.scope_mode = 'group_descendant_objects' and b.group_id in (select id from containing) and ${kindOk} and ${typeOk})
      or (b.scope_mode = 'group_child_groups' and b.group_id = (select parent_id from groups where id = ${id}) and ${kindIs('group')})
      or (b.scope_mode = 'group_descendant_groups' and b.group_id in (select id from above) and ${kindIs('group')}))`;
}

export async function listDirectPolicies(sql: Queryable, f: DirectPolicyFilter, page: Page): Promise<ListResult<DirectPolicyRow>> {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (f.tenantId) conds.push(sql`dp.tenant_id = ${f.tenantId}`);
  if (f.readableTenantIds !== null) conds.push(sql`dp.tenant_id = any(${f.readableTenantIds}::uuid[])`);
  if (f.subjectKind) conds.push(sql`dp.subject_kind = ${f.subjectKind}`);
  if (f.subjectId) conds.push(sql`coalesce(dp.entity_id, dp.group_id) = ${f.subjectId}`);
  if (f.blockId) conds.push(sql`dp.block_id = ${f.blockId}`);
  if (f.objectId) conds.push(namingObject(sql, f));
  const where = conds.length ? conds.reduce((x, c) => sql`${x} and ${c}`) : sql`true`;
  return selectPage<DirectPolicyRow>(sql, {
    columns: columns(sql),
    from: sql`from direct_policies dp where ${where}`,
    order: sql`dp.created_at, dp.id`,
  }, page);
}
