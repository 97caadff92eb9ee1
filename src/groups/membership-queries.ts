// SQL of group membership: entities contained by object groups and members of principal groups.
import type { Queryable } from '../db/client.js';
import type { EntityRow } from '../identity/index.js';

/** The Entity row shape of the identity domain (toEntity maps it), object groups in the same statement. */
function entityColumns(sql: Queryable) {
  return sql`
    e.id, e.kind, e.name, e.external_id, e.alias, e.tenant_id, e.profile_id, e.profile_version_id, e.status,
    e.attributes, e.created_at, e.updated_at, e.deleted_at, e.deleted_by,
    array(select oge.group_id from object_group_entities oge join groups g on g.id = oge.group_id
          where oge.entity_id = e.id and g.deleted_at is null order by oge.created_at, oge.group_id) as object_group_ids`;
}

export async function findEntity(sql: Queryable, id: string): Promise<EntityRow | undefined> {
  const [row] = await sql<EntityRow[]>`select ${entityColumns(sql)} from entities e where e.id = ${id}`;
  return row;
}

/** true when the row was added; adding twice is a no-op. */
export async function insertObjectGroupEntity(sql: Queryable, groupId: string, entityId: string): Promise<boolean> {
  const rows = await sql`
    insert into object_group_entities (group_id, entity_id) values (${groupId}, ${entityId})
    on conflict do nothing returning group_id`;
  return rows.length === 1;
}

export async function deleteObjectGroupEntity(sql: Queryable, groupId: string, entityId: string): Promise<boolean> {
  const rows = await sql`delete from object_group_entities where group_id = ${groupId} and entity_id = ${entityId} returning group_id`;
  return rows.length === 1;
}

/** Live object groups containing the entity, with their tenant (clearing needs manage on each). */
export async function entityObjectGroups(sql: Queryable, entityId: string): Promise<{ id: string; tenant_id: string | null }[]> {
  return sql<{ id: string; tenant_id: string | null }[]>`
    select g.id, g.tenant_id from object_group_entities oge join groups g on g.id = oge.group_id
    where oge.entity_id = ${entityId} and g.deleted_at is null order by oge.created_at, g.id`;
}

export async function deleteObjectGroupEntities(sql: Queryable, entityId: string, groupIds: string[]): Promise<number> {
  const rows = await sql`
    delete from object_group_entities where entity_id = ${entityId} and group_id = any(${groupIds}::uuid[]) returning group_id`;
  return rows.length;
}

export async function insertPrincipalMember(sql: Queryable, groupId: string, entityId: string): Promise<boolean> {
  const rows = await sql`
    insert into principal_group_members (group_id, entity_id) values (${groupId}, ${entityId})
    on conflict do nothing returning group_id`;
  return rows.length === 1;
}

export async function deletePrincipalMember(sql: Queryable, groupId: string, entityId: string): Promise<boolean> {
  const rows = await sql`delete from principal_group_members where group_id = ${groupId} and entity_id = ${entityId} returning group_id`;
  return rows.length === 1;
}

export async function isPrincipalMember(sql: Queryable, groupId: string, entityId: string): Promise<boolean> {
  const [row] = await sql<[{ member: boolean }]>`
    select exists(select 1 from principal_group_members where group_id = ${groupId} and entity_id = ${entityId}) as member`;
  return row.member;
}

/** Live members of a principal group, or live entities an object group contains directly. */
export async function listGroupMembers(sql: Queryable, groupId: string, groupType: 'object' | 'principal'): Promise<EntityRow[]> {
  const membership = groupType === 'principal'
    ? sql`select entity_id, created_at from principal_group_members where group_id = ${groupId}`
    : sql`select entity_id, created_at from object_group_entities where group_id = ${groupId}`;
  return sql<EntityRow[]>`
    select ${entityColumns(sql)} from (${membership}) m join entities e on e.id = m.entity_id
    where e.deleted_at is null order by m.created_at, e.id`;
}

/** Live groups holding the entity: object groups containing it first, then principal groups it belongs to. */
export async function entityGroupIds(sql: Queryable, entityId: string): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    select id from (
      select g.id, 0 as part, m.created_at from object_group_entities m join groups g on g.id = m.group_id
      where m.entity_id = ${entityId} and g.deleted_at is null
      union all
      select g.id, 1 as part, m.created_at from principal_group_members m join groups g on g.id = m.group_id
      where m.entity_id = ${entityId} and g.deleted_at is null
    ) x order by part, created_at, id`;
  return rows.map((r) => r.id);
}
