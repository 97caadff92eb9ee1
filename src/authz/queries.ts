// SQL of the authorization engine: subjects and their grants, object and tenant facts, ceilings, catalog.
import type { Queryable } from '../db/client.js';
import { isUuid } from '../validate.js';

export interface SubjectRow {
  id: string;
  kind: string;
  name: string;
  tenant_id: string | null;
  status: string;
  attributes: Record<string, unknown>;
}

/** A live entity whose home tenant (if any) is not deleted: deleted entities and tenants are "not found". */
export async function selectSubject(sql: Queryable, id: string): Promise<SubjectRow | undefined> {
  const [row] = await sql<SubjectRow[]>`
    select e.id, e.kind, e.name, e.tenant_id, e.status, e.attributes
    from entities e left join tenants t on t.id = e.tenant_id
    where e.id = ${id} and e.deleted_at is null and (e.tenant_id is null or t.status <> 'deleted')`;
  return row;
}

/** One grant reaching a subject, with the blocks it brings that are not hidden (sorted by id). */
export interface GrantRow {
  grant_kind: 'role' | 'capability';
  grant_id: string;
  grant_tenant_id: string | null;
  role_id: string | null;
  role_name: string | null;
  role_tenant_id: string | null;
  via: string;
  via_group_id: string | null;
  block_ids: string[];
}

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
  actions: string[];
}

/** A (grant, block) pair: what a compiled policy is built from. */
export type BindingRow = Omit<GrantRow, 'block_ids'> & Omit<BlockRow, 'id'> & { block_id: string };

/**
 * Every grant reaching the subject: its role assignments and direct policies, and those of the live,
 * active principal groups it belongs to, each with the ids of its blocks. Soft-deleted roles and
 * anything owned by a deleted tenant (the assignment, the role, the block or the group) are hidden.
 * Block contents are not read here: a subject whose grants come to a policy already compiled (most
 * subjects share their role's) needs none of them.
 */
export async function selectGrants(sql: Queryable, entityId: string): Promise<GrantRow[]> {
  return grantsQuery(sql, entityId, null);
}

/**
 * The grants of selectGrants that live in these tenants (assignments and direct policies whose tenant_id
 * is one of them): a part reload (loaders.ts) reads those alone, each an index lookup by (entity, tenant)
 * (sql/0350), so it costs what the subject holds there, not everywhere.
 */
export async function selectGrantsInTenants(sql: Queryable, entityId: string, tenantIds: string[]): Promise<GrantRow[]> {
  if (tenantIds.length === 0) return [];
  return grantsQuery(sql, entityId, tenantIds);
}

function grantsQuery(sql: Queryable, entityId: string, tenantIds: string[] | null): Promise<GrantRow[]> {
  // Two statements, each planned for what it reads: the filter sits inside every branch so it is part of
  // the index lookup, not applied to all the subject's grants after it.
  const ra = tenantIds === null ? sql`` : sql`and ra.tenant_id = any(${tenantIds}::uuid[])`;
  const dp = tenantIds === null ? sql`` : sql`and dp.tenant_id = any(${tenantIds}::uuid[])`;
  return sql<GrantRow[]>`
    with pg as (
      select g.id, g.name
      from principal_group_members m
      join groups g on g.id = m.group_id
      left join tenants gt on gt.id = g.tenant_id
      where m.entity_id = ${entityId} and g.group_type = 'principal' and g.deleted_at is null and g.status = 'active'
        and (g.tenant_id is null or gt.status <> 'deleted')
    ),
    -- One branch per path, each an index lookup (an OR across entity and group ids defeats the indexes).
    grants as (
      select 'role'::text as grant_kind, ra.id as grant_id, ra.tenant_id as grant_tenant_id,
             r.id as role_id, r.name as role_name, r.tenant_id as role_tenant_id,
             'direct'::text as via, null::uuid as via_group_id, rpb.block_id
      from role_assignments ra
      join roles r on r.id = ra.role_id and r.deleted_at is null
      join role_permission_blocks rpb on rpb.role_id = r.id
      where ra.entity_id = ${entityId} ${ra}
      union all
      select 'role', ra.id, ra.tenant_id, r.id, r.name, r.tenant_id, 'group:' || pg.name, pg.id, rpb.block_id
      from pg
      join role_assignments ra on ra.group_id = pg.id ${ra}
      join roles r on r.id = ra.role_id and r.deleted_at is null
      join role_permission_blocks rpb on rpb.role_id = r.id
      union all
      select 'capability', dp.id, dp.tenant_id, null, null, null, 'direct', null, dp.block_id
      from direct_policies dp where dp.entity_id = ${entityId} ${dp}
      union all
      select 'capability', dp.id, dp.tenant_id, null, null, null, 'group:' || pg.name, pg.id, dp.block_id
      from pg join direct_policies dp on dp.group_id = pg.id ${dp}
    )
    select g.grant_kind, g.grant_id, g.grant_tenant_id, g.role_id, g.role_name, g.role_tenant_id, g.via, g.via_group_id,
           array_agg(g.block_id order by g.block_id) as block_ids
    from grants g
    -- Deleted tenants are found through an index of them alone (usually empty). A block's own tenant is
    -- looked up by the block's key, and only when some tenant is deleted at all: a reload costs what the
    -- subject holds, not what the platform holds. (OFFSET 0 keeps that a lookup per block: without it
    -- PostgreSQL may hash every block of the deleted tenants instead.)
    where not exists (select 1 from tenants t where t.status = 'deleted' and t.id in (g.grant_tenant_id, g.role_tenant_id))
      and (not exists (select 1 from tenants where status = 'deleted')
           or not exists (
             select 1 from permission_blocks b join tenants t on t.id = b.tenant_id
             where b.id = g.block_id and t.status = 'deleted' offset 0))
    group by g.grant_kind, g.grant_id, g.grant_tenant_id, g.role_id, g.role_name, g.role_tenant_id, g.via, g.via_group_id
    order by g.grant_kind, g.grant_id`;
}

/** The blocks with these ids, each with its action names (sorted); ids no longer there are left out. */
export async function selectBlocks(sql: Queryable, ids: string[]): Promise<BlockRow[]> {
  if (ids.length === 0) return [];
  // Each by its key, as in selectGrants: `b.id = any(...)` is planned as a scan of every block once the
  // list is a percent of the platform's.
  return sql<BlockRow[]>`
    select b.id, b.tenant_id, b.scope_mode, b.object_kind, b.object_type, b.object_id, b.group_id, b.effect,
           b.conditions, b.all_actions,
           array(select a.name from permission_block_actions pba join actions a on a.id = pba.action_id
                 where pba.block_id = b.id order by a.name) as actions
    from unnest(${ids}::uuid[]) as wanted(id)
    cross join lateral (select * from permission_blocks b where b.id = wanted.id limit 1) b`;
}

export interface ObjectRow {
  id: string;
  kind: string;
  type: string | null;
  sub_kind: string | null;
  name: string | null;
  tenant_id: string | null;
  parent_id: string | null;
  attributes: Record<string, unknown> | null;
  direct_groups: string[];
  all_groups: string[];
  ancestors: string[];
}

// Group chains are acyclic by the API's rules; the depth cap keeps a corrupted chain from looping.
const MAX_DEPTH = 64;

async function selectEntityObject(sql: Queryable, id: string): Promise<ObjectRow | undefined> {
  const [row] = await sql<ObjectRow[]>`
    with recursive direct as (
      select m.group_id from object_group_entities m join groups g on g.id = m.group_id and g.deleted_at is null
      where m.entity_id = ${id}
    ), up(id, parent_id, depth) as (
      select g.id, g.parent_id, 0 from groups g where g.id in (select group_id from direct)
      union all
      select g.id, g.parent_id, up.depth + 1 from groups g join up on g.id = up.parent_id
      where g.deleted_at is null and up.depth < ${MAX_DEPTH}
    )
    select e.id, 'entity' as kind, 'entity:' || e.kind as type, e.kind as sub_kind, e.name, e.tenant_id,
           null::uuid as parent_id, e.attributes,
           array(select group_id from direct) as direct_groups, array(select distinct id from up) as all_groups,
           '{}'::uuid[] as ancestors
    from entities e where e.id = ${id} and e.deleted_at is null`;
  return row;
}

async function selectResourceObject(sql: Queryable, id: string): Promise<ObjectRow | undefined> {
  const [row] = await sql<ObjectRow[]>`
    with recursive direct as (
      select m.group_id from object_group_resources m join groups g on g.id = m.group_id and g.deleted_at is null
      where m.resource_id = ${id}
    ), up(id, parent_id, depth) as (
      select g.id, g.parent_id, 0 from groups g where g.id in (select group_id from direct)
      union all
      select g.id, g.parent_id, up.depth + 1 from groups g join up on g.id = up.parent_id
      where g.deleted_at is null and up.depth < ${MAX_DEPTH}
    )
    select r.id, 'resource' as kind, 'resource:' || r.kind as type, r.kind as sub_kind, r.name, r.tenant_id,
           null::uuid as parent_id, r.attributes,
           array(select group_id from direct) as direct_groups, array(select distinct id from up) as all_groups,
           '{}'::uuid[] as ancestors
    from resources r where r.id = ${id} and r.deleted_at is null`;
  return row;
}

async function selectGroupObject(sql: Queryable, id: string): Promise<ObjectRow | undefined> {
  const [row] = await sql<ObjectRow[]>`
    with recursive up(id, parent_id, depth) as (
      select g.id, g.parent_id, 0 from groups g
      where g.id = (select parent_id from groups where id = ${id}) and g.deleted_at is null
      union all
      select g.id, g.parent_id, up.depth + 1 from groups g join up on g.id = up.parent_id
      where g.deleted_at is null and up.depth < ${MAX_DEPTH}
    )
    select g.id, 'group' as kind, null as type, g.group_type as sub_kind, g.name, g.tenant_id, g.parent_id, g.attributes,
           '{}'::uuid[] as direct_groups, '{}'::uuid[] as all_groups, array(select distinct id from up) as ancestors
    from groups g where g.id = ${id} and g.deleted_at is null`;
  return row;
}

/** Kinds without group containment: only identity, tenant and attributes matter. */
async function selectSimpleObject(sql: Queryable, kind: string, id: string): Promise<ObjectRow | undefined> {
  const simple = (rows: { tenant_id: string | null; name: string | null; attributes?: Record<string, unknown> | null }[]) => {
    const r = rows[0];
    return r && ({ id, kind, type: null, sub_kind: null, name: r.name, tenant_id: r.tenant_id, parent_id: null,
      attributes: r.attributes ?? null, direct_groups: [], all_groups: [], ancestors: [] } satisfies ObjectRow);
  };
  switch (kind) {
    case 'tenant':
      // A tenant in any state is found: its state is what the decision reports.
      return simple(await sql`select id as tenant_id, name, attributes from tenants where id = ${id}`);
    case 'role':
      return simple(await sql`select tenant_id, name from roles where id = ${id} and deleted_at is null`);
    case 'policy':
      return simple(await sql`
        select tenant_id, null as name from permission_blocks where id = ${id}
        union all select tenant_id, null from direct_policies where id = ${id}
        union all select tenant_id, null from role_assignments where id = ${id}
        limit 1`);
    case 'credential':
      // Credential authority follows the owning entity's tenant (SPEC.md "Authentication" 10).
      return simple(await sql`
        select e.tenant_id, c.name from credentials c join entities e on e.id = c.entity_id where c.id = ${id}`);
    case 'audit_log':
      return simple(await sql`select tenant_id, event as name from audit_log where id = ${id}`);
    case 'api_endpoint':
      try {
        return simple(await sql`select tenant_id, name from api_endpoints where id = ${id}`);
      } catch (err) {
        // The custom-endpoint domain's table may not exist yet in this deployment's schema.
        if ((err as { code?: string }).code === '42P01') return undefined;
        throw err;
      }
    default:
      return undefined;
  }
}

export async function selectObject(sql: Queryable, kind: string, id: string): Promise<ObjectRow | undefined> {
  if (kind === 'signing_key') {
    const [row] = await sql<{ kid: string }[]>`select kid from signing_keys where kid = ${id}`;
    return row && { id, kind, type: null, sub_kind: null, name: row.kid, tenant_id: null, parent_id: null, attributes: null,
      direct_groups: [], all_groups: [], ancestors: [] };
  }
  if (!isUuid(id)) return undefined;
  if (kind === 'entity') return selectEntityObject(sql, id);
  if (kind === 'resource') return selectResourceObject(sql, id);
  if (kind === 'group') return selectGroupObject(sql, id);
  return selectSimpleObject(sql, kind, id);
}

export interface TenantRow {
  id: string;
  status: string;
  attributes: Record<string, unknown>;
}

export async function selectTenant(sql: Queryable, id: string): Promise<TenantRow | undefined> {
  if (!isUuid(id)) return undefined;
  const [row] = await sql<TenantRow[]>`select id, status, attributes from tenants where id = ${id}`;
  return row;
}

export interface ConnectedTenantRow {
  id: string;
  deleted: boolean;
}

/**
 * Tenants a subject reaches: its home tenant, tenants of its role assignments (direct or through its
 * principal groups), and tenants it is an active member of, deleted ones flagged, in creation order. One
 * branch per path, each an index lookup (an OR of the four across the tenants table scanned every tenant).
 */
export async function selectConnectedTenants(sql: Queryable, entityId: string): Promise<ConnectedTenantRow[]> {
  return sql<ConnectedTenantRow[]>`
    select t.id, t.deleted_at is not null as deleted from tenants t
    where t.id in (
      select e.tenant_id from entities e where e.id = ${entityId}
      union select ra.tenant_id from role_assignments ra where ra.entity_id = ${entityId}
      union select ra.tenant_id from principal_group_members pgm join role_assignments ra on ra.group_id = pgm.group_id
            where pgm.entity_id = ${entityId}
      union select m.tenant_id from tenant_memberships m where m.entity_id = ${entityId} and m.status = 'active')
    order by t.created_at, t.id`;
}

export interface CeilingRow {
  id: string;
  entity_id: string;
  kind: string;
  status: string;
  scoped: boolean;
  expires_at: Date | null;
  limits: {
    actions: string[];
    scope_mode: string;
    tenant_id: string | null;
    object_kind: string | null;
    object_type: string | null;
    object_id: string | null;
    conditions: Record<string, unknown>;
  }[];
}

export async function selectCeiling(sql: Queryable, credentialId: string): Promise<CeilingRow | undefined> {
  if (!isUuid(credentialId)) return undefined;
  const [row] = await sql<CeilingRow[]>`
    select c.id, c.entity_id, c.kind, c.status, c.scoped, c.expires_at,
           coalesce((select json_agg(json_build_object(
             'actions', l.actions, 'scope_mode', l.scope_mode, 'tenant_id', l.tenant_id, 'object_kind', l.object_kind,
             'object_type', l.object_type, 'object_id', l.object_id, 'conditions', l.conditions) order by l.position, l.created_at)
             from credential_permission_limits l where l.credential_id = c.id), '[]'::json) as limits
    from credentials c where c.id = ${credentialId}`;
  return row;
}

export interface ActionRow {
  id: string;
  name: string;
  applicability: { kind: string; type: string | null }[];
}

export async function selectActionCatalog(sql: Queryable): Promise<ActionRow[]> {
  return sql<ActionRow[]>`
    select a.id, a.name,
           coalesce(json_agg(json_build_object('kind', ap.object_kind, 'type', ap.object_type))
                    filter (where ap.id is not null), '[]'::json) as applicability
    from actions a left join action_applicability ap on ap.action_id = a.id
    group by a.id, a.name`;
}
