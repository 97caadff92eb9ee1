// SQL of tenant memberships, assignable users, a caller's roles in a tenant, and invitations.
import type { Queryable } from '../db/client.js';
import { selectPage, type ListResult, type Page } from '../db/paging.js';
import { entityColumns, type EntityRow } from '../identity/index.js';

function like(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export async function listMembers(sql: Queryable, tenantId: string, q: string | undefined, page: Page): Promise<ListResult<EntityRow>> {
  const text = q ? sql`and (e.name ilike ${like(q)} or m.local_name ilike ${like(q)}
    or exists (select 1 from entity_emails x where x.entity_id = e.id and x.email ilike ${like(q)}))` : sql``;
  return selectPage<EntityRow>(sql, {
    columns: entityColumns(sql),
    from: sql`from tenant_memberships m join entities e on e.id = m.entity_id
      where m.tenant_id = ${tenantId} and m.status = 'active' and e.deleted_at is null
        and (e.tenant_id is null or e.tenant_id = m.tenant_id) ${text}`,
    order: sql`m.created_at, e.id`,
  }, page);
}

/** Live humans matching the search who are not active members yet. */
export async function listAssignable(sql: Queryable, tenantId: string, q: string, page: Page): Promise<ListResult<EntityRow>> {
  return selectPage<EntityRow>(sql, {
    columns: entityColumns(sql),
    from: sql`from entities e
      where e.kind = 'human' and e.deleted_at is null and e.tenant_id is null and e.status = 'active'
      and not exists (select 1 from tenant_memberships m where m.tenant_id = ${tenantId} and m.entity_id = e.id and m.status = 'active')
      and (e.name ilike ${like(q)} or e.alias ilike ${like(q)}
        or exists (select 1 from entity_emails x where x.entity_id = e.id and x.email ilike ${like(q)}))`,
    order: sql`e.name, e.id`,
  }, page);
}

export async function upsertMembership(sql: Queryable, tenantId: string, entityId: string): Promise<void> {
  await sql`
    insert into tenant_memberships (tenant_id, entity_id, status) values (${tenantId}, ${entityId}, 'active')
    on conflict (tenant_id, entity_id) do update set status = 'active'`;
}

export async function leaveMembership(sql: Queryable, tenantId: string, entityId: string): Promise<boolean> {
  const rows = await sql`
    update tenant_memberships set status = 'left' where tenant_id = ${tenantId} and entity_id = ${entityId} and status <> 'left'
    returning entity_id`;
  return rows.length === 1;
}

export interface TenantRoleRow {
  role_id: string;
  role_name: string;
  actions: string[];
  paths: string[];
}

/** The caller's live roles in a tenant, with how each reaches it: directly or through a principal group. */
export async function rolesInTenant(sql: Queryable, tenantId: string, entityId: string): Promise<TenantRoleRow[]> {
  return sql<TenantRoleRow[]>`
    with reach as (
      select ra.role_id, 'direct' as path from role_assignments ra where ra.entity_id = ${entityId} and ra.tenant_id = ${tenantId}
      union all
      select ra.role_id, 'group:' || g.name from role_assignments ra
      join principal_group_members pgm on pgm.group_id = ra.group_id and pgm.entity_id = ${entityId}
      join groups g on g.id = ra.group_id and g.deleted_at is null
      where ra.tenant_id = ${tenantId}
    )
    select r.id as role_id, r.name as role_name,
      array(select distinct a.name from role_permission_blocks rpb
            join permission_blocks b on b.id = rpb.block_id
            join permission_block_actions pba on pba.block_id = b.id
            join actions a on a.id = pba.action_id
            where rpb.role_id = r.id and b.effect = 'allow' order by a.name) as actions,
      array_agg(distinct reach.path order by reach.path) as paths
    from reach join roles r on r.id = reach.role_id and r.deleted_at is null
    group by r.id, r.name order by r.name, r.id`;
}

export interface InvitationRow {
  id: string;
  tenant_id: string;
  invitee_user_id: string | null;
  invitee_name: string | null;
  invitee_email: string | null;
  invited_by: string | null;
  role_id: string | null;
  role_name: string | null;
  state: string;
  expires_at: string | Date;
  accepted_at: string | Date | null;
  rejected_at: string | Date | null;
  revoked_at: string | Date | null;
  created_at: string | Date;
  updated_at: string | Date | null;
}

const invitationColumns = (sql: Queryable) => sql`
  i.id, i.tenant_id, i.invitee_user_id, u.name as invitee_name, i.invitee_email, i.invited_by, i.role_id, r.name as role_name,
  i.state, i.expires_at, i.accepted_at, i.rejected_at, i.revoked_at, i.created_at, i.updated_at`;
const invitationFrom = (sql: Queryable) => sql`
  tenant_invitations i left join entities u on u.id = i.invitee_user_id left join roles r on r.id = i.role_id`;

export async function insertInvitation(sql: Queryable, i: {
  tenantId: string; inviteeUserId: string | null; inviteeEmail: string | null; roleId: string | null;
  invitedBy: string; tokenHash: string | null; redirectUrl: string | null; expiresAt: Date;
}): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into tenant_invitations (tenant_id, invitee_user_id, invitee_email, role_id, invited_by, token_hash, redirect_url, expires_at)
    values (${i.tenantId}, ${i.inviteeUserId}, ${i.inviteeEmail}, ${i.roleId}, ${i.invitedBy}, ${i.tokenHash}, ${i.redirectUrl}, ${i.expiresAt})
    returning id`;
  return row.id;
}

export async function findInvitation(sql: Queryable, id: string): Promise<InvitationRow | undefined> {
  const [row] = await sql<InvitationRow[]>`select ${invitationColumns(sql)} from ${invitationFrom(sql)} where i.id = ${id}`;
  return row;
}

export async function findPendingInvitationByToken(sql: Queryable, tokenHash: string): Promise<InvitationRow | undefined> {
  const [row] = await sql<InvitationRow[]>`
    select ${invitationColumns(sql)} from ${invitationFrom(sql)} where i.token_hash = ${tokenHash} and i.state = 'pending' for update of i`;
  return row;
}

/** The caller's pending invitation to a tenant, addressed to its user id or to its email. */
export async function findPendingInvitationFor(sql: Queryable, tenantId: string, entityId: string): Promise<InvitationRow | undefined> {
  const [row] = await sql<InvitationRow[]>`
    select ${invitationColumns(sql)} from ${invitationFrom(sql)}
    where i.tenant_id = ${tenantId} and i.state = 'pending' and (i.invitee_user_id = ${entityId}
      or i.invitee_email = (select email from entity_emails where entity_id = ${entityId}))
    order by i.created_at desc limit 1 for update of i`;
  return row;
}

export async function setInvitationState(sql: Queryable, id: string, state: 'accepted' | 'rejected' | 'revoked', userId?: string): Promise<void> {
  await sql`
    update tenant_invitations set state = ${state}, updated_at = now(),
      invitee_user_id = coalesce(invitee_user_id, ${userId ?? null}),
      accepted_at = case when ${state} = 'accepted' then now() else accepted_at end,
      rejected_at = case when ${state} = 'rejected' then now() else rejected_at end,
      revoked_at = case when ${state} = 'revoked' then now() else revoked_at end
    where id = ${id}`;
}

export async function listInvitations(sql: Queryable, filter: { tenantId?: string; entityId?: string; state: string }, page: Page): Promise<ListResult<InvitationRow>> {
  const who = filter.tenantId
    ? sql`i.tenant_id = ${filter.tenantId}`
    : sql`(i.invitee_user_id = ${filter.entityId ?? null} or i.invitee_email = (select email from entity_emails where entity_id = ${filter.entityId ?? null}))`;
  return selectPage<InvitationRow>(sql, {
    columns: invitationColumns(sql),
    from: sql`from ${invitationFrom(sql)} where ${who} and i.state = ${filter.state}
      and (i.state <> 'pending' or i.expires_at > now())`,
    order: sql`i.created_at desc, i.id`,
  }, page);
}

export async function emailOf(sql: Queryable, entityId: string): Promise<string | undefined> {
  const [row] = await sql<{ email: string }[]>`select email from entity_emails where entity_id = ${entityId}`;
  return row?.email;
}

export async function findEntityKind(sql: Queryable, id: string) {
  const [row] = await sql<{ id: string; kind: string; tenant_id: string | null; deleted_at: Date | null }[]>`
    select id, kind, tenant_id, deleted_at from entities where id = ${id}`;
  return row;
}

export async function revokePendingInvitations(sql: Queryable, tenantId: string, userId: string | null, email: string | null): Promise<void> {
  await sql`
    update tenant_invitations set state = 'revoked', revoked_at = now(), updated_at = now()
    where tenant_id = ${tenantId} and state = 'pending' and (invitee_user_id = ${userId} or invitee_email = ${email})`;
}
