// SQL of grant subjects (entities and principal groups): lookups, locks, and who a grant change reaches.
import type { Queryable } from '../db/client.js';

export interface SubjectRow {
  kind: 'entity' | 'group';
  id: string;
  tenant_id: string | null;
  /** Entity kind, or group type for groups. */
  sub_kind: string;
  deleted: boolean;
}

export async function findSubject(sql: Queryable, kind: 'entity' | 'group', id: string): Promise<SubjectRow | undefined> {
  const [row] = kind === 'entity'
    ? await sql<SubjectRow[]>`select 'entity' as kind, id, tenant_id, kind as sub_kind, deleted_at is not null as deleted from entities where id = ${id}`
    : await sql<SubjectRow[]>`select 'group' as kind, id, tenant_id, group_type as sub_kind, deleted_at is not null as deleted from groups where id = ${id}`;
  return row;
}

/**
 * A principal group is pinned while a grant to it is judged: membership changes lock the row FOR UPDATE
 * before their own guardrail check, so a newcomer either is seen here or sees the new grant there.
 */
export async function lockPrincipalGroup(tx: Queryable, id: string): Promise<boolean> {
  const rows = await tx`select id from groups where id = ${id} and group_type = 'principal' and deleted_at is null for share`;
  return rows.length === 1;
}

/** Several groups, in id order (one order everywhere, so two lockers never wait on each other crosswise). */
export async function lockPrincipalGroups(tx: Queryable, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await tx`select id from groups where id = any(${ids}::uuid[]) order by id for share`;
}

/** Live members of a principal group: the entities a grant to the group reaches (at most `cap` + 1). */
export async function memberIds(sql: Queryable, groupIds: string[], cap: number): Promise<string[]> {
  if (groupIds.length === 0) return [];
  const rows = await sql<{ entity_id: string }[]>`
    select distinct m.entity_id from principal_group_members m join entities e on e.id = m.entity_id
    where m.group_id = any(${groupIds}::uuid[]) and e.deleted_at is null limit ${cap + 1}`;
  return rows.map((r) => r.entity_id);
}
