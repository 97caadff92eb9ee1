// SQL the guardrails need: rules in force, the kinds a subject reaches, existing blocks, object types.
import type { Queryable } from '../db/client.js';
import { isUuid } from '../validate.js';

export interface RuleRow {
  id: string;
  tenant_id: string | null;
  entity_kind: string;
  action_name: string;
  object_kind: string;
  object_type: string | null;
  decision: 'allow' | 'deny' | 'require_override';
  is_absolute: boolean;
}

/** Global rules plus the grant tenant's own, for the kinds and actions in question. */
export async function selectRules(sql: Queryable, tenantId: string | null, kinds: string[], actions: string[]): Promise<RuleRow[]> {
  return sql<RuleRow[]>`
    select id, tenant_id, entity_kind, action_name, object_kind, object_type, decision, is_absolute
    from action_assignment_rules
    where entity_kind = any(${kinds}) and action_name = any(${actions})
      and (tenant_id is null or tenant_id is not distinct from ${tenantId})`;
}

export async function selectEntityKind(sql: Queryable, entityId: string): Promise<string | undefined> {
  if (!isUuid(entityId)) return undefined;
  const [row] = await sql<{ kind: string }[]>`select kind from entities where id = ${entityId} and deleted_at is null`;
  return row?.kind;
}

/** A principal group reaches the kinds of its live members. */
export async function selectGroupMemberKinds(sql: Queryable, groupId: string): Promise<{ exists: boolean; kinds: string[] }> {
  if (!isUuid(groupId)) return { exists: false, kinds: [] };
  const [row] = await sql<{ exists: boolean; kinds: string[] }[]>`
    select exists(select 1 from groups where id = ${groupId} and group_type = 'principal' and deleted_at is null) as exists,
           array(select distinct e.kind from principal_group_members m join entities e on e.id = m.entity_id
                 where m.group_id = ${groupId} and e.deleted_at is null order by 1) as kinds`;
  return row ?? { exists: false, kinds: [] };
}

export interface BlockSpecRow {
  id: string;
  tenant_id: string | null;
  scope_mode: string;
  object_kind: string | null;
  object_type: string | null;
  object_id: string | null;
  group_id: string | null;
  effect: 'allow' | 'deny';
  all_actions: boolean;
  actions: string[];
}

export async function selectBlocks(sql: Queryable, ids: string[]): Promise<BlockSpecRow[]> {
  const valid = ids.filter(isUuid);
  if (valid.length === 0) return [];
  return sql<BlockSpecRow[]>`
    select b.id, b.tenant_id, b.scope_mode, b.object_kind, b.object_type, b.object_id, b.group_id, b.effect, b.all_actions,
           array(select a.name from permission_block_actions pba join actions a on a.id = pba.action_id where pba.block_id = b.id) as actions
    from permission_blocks b where b.id = any(${valid})`;
}

/** Blocks a principal group holds through its role assignments and direct policies (membership checks). */
export async function selectGroupBlockIds(sql: Queryable, groupId: string): Promise<{ tenant_id: string | null; block_id: string }[]> {
  return sql<{ tenant_id: string | null; block_id: string }[]>`
    select ra.tenant_id, rpb.block_id from role_assignments ra
      join roles r on r.id = ra.role_id and r.deleted_at is null
      join role_permission_blocks rpb on rpb.role_id = r.id
    where ra.group_id = ${groupId}
    union
    select dp.tenant_id, dp.block_id from direct_policies dp where dp.group_id = ${groupId}`;
}

/** The type of an exact object, so an object-scoped grant is judged by what the object is. */
export async function selectObjectType(sql: Queryable, kind: string, id: string): Promise<string | null> {
  if (!isUuid(id)) return null;
  if (kind === 'entity') {
    const [row] = await sql<{ type: string }[]>`select 'entity:' || kind as type from entities where id = ${id}`;
    return row?.type ?? null;
  }
  if (kind === 'resource') {
    const [row] = await sql<{ type: string }[]>`select 'resource:' || kind as type from resources where id = ${id}`;
    return row?.type ?? null;
  }
  return null;
}
