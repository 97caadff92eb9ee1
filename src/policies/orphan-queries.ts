// SQL of orphanPolicies: direct policies and role assignments that can no longer grant what they were
// made for, because their subject, role or the target of their block is gone or deleted.
import type { Queryable } from '../db/client.js';

export interface OrphanRow {
  id: string;
  tenant_id: string | null;
  source_kind: 'direct_policy' | 'role_assignment';
  subject_kind: 'entity' | 'group';
  subject_id: string;
  role_id: string | null;
  permission_block_id: string | null;
  orphan_reason: string;
  created_at: string;
}

/**
 * orphan_reason, the first that applies: subject_not_found / subject_deleted (the entity or group);
 * role_not_found / role_deleted (assignments); permission_block_not_found, block_target_not_found /
 * block_target_deleted (direct policies: the object or group the block names). Foreign keys cascade on
 * physical deletion, so in practice the reasons are the soft-deleted ones and exact-object blocks whose
 * object id (which has no foreign key) names nothing.
 */
export async function listOrphans(sql: Queryable, page: { limit: number; offset: number }): Promise<OrphanRow[]> {
  return sql<OrphanRow[]>`
    with subjects as (
      select 'direct_policy'::text as source_kind, d.id, d.tenant_id, d.subject_kind, coalesce(d.entity_id, d.group_id) as subject_id,
        null::uuid as role_id, d.block_id as permission_block_id, d.created_at, d.entity_id, d.group_id
      from direct_policies d
      union all
      select 'role_assignment', a.id, a.tenant_id, a.subject_kind, coalesce(a.entity_id, a.group_id), a.role_id, null, a.created_at, a.entity_id, a.group_id
      from role_assignments a
    ), judged as (
      select s.*, case
        when s.entity_id is not null and e.id is null then 'subject_not_found'
        when s.group_id is not null and g.id is null then 'subject_not_found'
        when e.deleted_at is not null or g.deleted_at is not null then 'subject_deleted'
        when s.source_kind = 'role_assignment' and r.id is null then 'role_not_found'
        when r.deleted_at is not null then 'role_deleted'
        when s.source_kind = 'direct_policy' and b.id is null then 'permission_block_not_found'
        when b.scope_mode = 'object' then target.reason
        when b.group_id is not null and bg.deleted_at is not null then 'block_target_deleted'
      end as orphan_reason
      from subjects s
      left join entities e on e.id = s.entity_id
      left join groups g on g.id = s.group_id
      left join roles r on r.id = s.role_id
      left join permission_blocks b on b.id = s.permission_block_id
      left join groups bg on bg.id = b.group_id
      left join lateral (select ${objectState(sql)} as reason) target on b.scope_mode = 'object'
    )
    select id, tenant_id, source_kind, subject_kind, subject_id, role_id, permission_block_id, orphan_reason, created_at
    from judged where orphan_reason is not null
    order by created_at desc, id
    limit ${page.limit} offset ${page.offset}`;
}

/**
 * For an exact-object block b: 'block_target_not_found', 'block_target_deleted', or null while it names a
 * live object. Kinds whose tables belong to later features (api_endpoint, audit_log, signing_key) are not
 * judged.
 */
function objectState(sql: Queryable) {
  const state = (table: string) => sql`(select case when x.deleted_at is null then 'live' else 'block_target_deleted' end
    from ${sql(table)} x where x.id = b.object_id)`;
  return sql`nullif(coalesce(case b.object_kind
    when 'entity' then ${state('entities')}
    when 'resource' then ${state('resources')}
    when 'group' then ${state('groups')}
    when 'tenant' then ${state('tenants')}
    when 'role' then ${state('roles')}
    when 'credential' then (select 'live' from credentials x where x.id = b.object_id)
    when 'policy' then (select 'live' where exists (select 1 from direct_policies x where x.id = b.object_id)
      or exists (select 1 from role_assignments x where x.id = b.object_id) or exists (select 1 from permission_blocks x where x.id = b.object_id))
    else 'live' end, 'block_target_not_found'), 'live')`;
}
