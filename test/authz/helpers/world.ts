// Seeds a described world (tenants, entities, resources, groups, blocks, roles, grants, token ceilings)
// into a database with plain SQL, giving every named thing a fresh UUID; tests then speak in names.
import { randomUUID } from 'node:crypto';
import type postgres from 'postgres';

export interface BlockDef {
  scope: string;
  tenant?: string | null;
  objectKind?: string;
  objectType?: string;
  object?: string;
  group?: string;
  effect?: 'allow' | 'deny';
  actions?: string[];
  allActions?: boolean;
  conditions?: Record<string, unknown>;
}

export interface LimitDef {
  actions: string[];
  scope: 'platform' | 'tenant' | 'object_kind' | 'object_type' | 'object';
  tenant?: string;
  objectKind?: string;
  objectType?: string;
  object?: string;
  conditions?: Record<string, unknown>;
}

export interface World {
  tenants: Record<string, { status?: string; attributes?: Record<string, unknown> }>;
  entities: Record<string, { kind: string; tenant?: string | null; status?: string; deleted?: boolean; attributes?: Record<string, unknown>; id?: string }>;
  resources: Record<string, { kind: string; tenant?: string | null; deleted?: boolean; attributes?: Record<string, unknown> }>;
  groups: Record<string, { type: 'object' | 'principal'; tenant?: string | null; parent?: string; status?: string }>;
  objectMembers: [group: string, member: string][];
  principalMembers: [group: string, entity: string][];
  blocks: Record<string, BlockDef>;
  roles: Record<string, { tenant?: string | null; blocks: string[]; deleted?: boolean }>;
  assignments: { role: string; entity?: string; group?: string; tenant?: string | null }[];
  policies: { block: string; entity?: string; group?: string; tenant?: string | null }[];
  credentials: Record<string, { entity: string; scoped?: boolean; status?: 'active' | 'revoked'; limits?: LimitDef[]; expired?: boolean }>;
}

export type Ids = Record<string, string>;

export async function seedWorld(sql: postgres.Sql, w: World): Promise<Ids> {
  const ids: Ids = {};
  const id = (name: string | null | undefined): string | null => {
    if (name === null || name === undefined) return null;
    const v = ids[name];
    if (!v) throw new Error(`fixture refers to unknown name '${name}'`);
    return v;
  };
  const name = (n: string) => {
    if (ids[n]) throw new Error(`fixture name '${n}' is used twice`);
    return (ids[n] = randomUUID());
  };

  for (const [n, t] of Object.entries(w.tenants)) {
    const status = t.status ?? 'active';
    await sql`insert into tenants (id, name, status, attributes, deleted_at)
      values (${name(n)}, ${n}, ${status}, ${sql.json((t.attributes ?? {}) as never)}, ${status === 'deleted' ? new Date() : null})`;
  }
  for (const [n, e] of Object.entries(w.entities)) {
    if (e.id) {
      ids[n] = e.id;
      continue; // a seeded entity (the platform administrator)
    }
    name(n);
    await sql`insert into entities (id, kind, name, tenant_id, status, attributes, deleted_at)
      values (${ids[n] as string}, ${e.kind}, ${n}, ${id(e.tenant)}, ${e.status ?? 'active'}, ${sql.json((e.attributes ?? {}) as never)}, ${e.deleted ? new Date() : null})`;
  }
  for (const [n, r] of Object.entries(w.resources)) {
    await sql`insert into resources (id, kind, name, tenant_id, attributes, deleted_at)
      values (${name(n)}, ${r.kind}, ${n}, ${id(r.tenant)}, ${sql.json((r.attributes ?? {}) as never)}, ${r.deleted ? new Date() : null})`;
  }
  for (const [n, g] of Object.entries(w.groups)) {
    await sql`insert into groups (id, name, tenant_id, group_type, status) values (${name(n)}, ${n}, ${id(g.tenant)}, ${g.type}, ${g.status ?? 'active'})`;
  }
  for (const [n, g] of Object.entries(w.groups)) {
    if (g.parent) await sql`update groups set parent_id = ${id(g.parent)} where id = ${id(n)}`;
  }
  for (const [g, m] of w.objectMembers) {
    if (w.resources[m]) await sql`insert into object_group_resources (group_id, resource_id) values (${id(g)}, ${id(m)})`;
    else await sql`insert into object_group_entities (group_id, entity_id) values (${id(g)}, ${id(m)})`;
  }
  for (const [g, m] of w.principalMembers) await sql`insert into principal_group_members (group_id, entity_id) values (${id(g)}, ${id(m)})`;
  for (const [n, b] of Object.entries(w.blocks)) {
    const objectKind = b.objectKind ?? (b.object ? (w.resources[b.object] ? 'resource' : w.entities[b.object] ? 'entity' : 'group') : null);
    await sql`insert into permission_blocks (id, tenant_id, scope_mode, object_kind, object_type, object_id, group_id, effect, conditions, all_actions)
      values (${name(n)}, ${id(b.tenant)}, ${b.scope}, ${objectKind}, ${b.objectType ?? null}, ${id(b.object)}, ${id(b.group)},
              ${b.effect ?? 'allow'}, ${sql.json((b.conditions ?? {}) as never)}, ${b.allActions ?? false})`;
    if (b.actions?.length) {
      await sql`insert into permission_block_actions (block_id, action_id) select ${id(n)}, id from actions where name = any(${b.actions})`;
    }
  }
  for (const [n, r] of Object.entries(w.roles)) {
    await sql`insert into roles (id, name, tenant_id, deleted_at) values (${name(n)}, ${n}, ${id(r.tenant)}, ${r.deleted ? new Date() : null})`;
    for (const b of r.blocks) await sql`insert into role_permission_blocks (role_id, block_id) values (${id(n)}, ${id(b)})`;
  }
  for (const a of w.assignments) {
    await sql`insert into role_assignments (tenant_id, subject_kind, entity_id, group_id, role_id)
      values (${id(a.tenant)}, ${a.group ? 'group' : 'entity'}, ${id(a.entity)}, ${id(a.group)}, ${id(a.role)})`;
  }
  for (const p of w.policies) {
    await sql`insert into direct_policies (tenant_id, subject_kind, entity_id, group_id, block_id)
      values (${id(p.tenant)}, ${p.group ? 'group' : 'entity'}, ${id(p.entity)}, ${id(p.group)}, ${id(p.block)})`;
  }
  for (const [n, c] of Object.entries(w.credentials)) {
    const status = c.status ?? 'active';
    await sql`insert into credentials (id, entity_id, kind, scoped, status, revoked_at, expires_at, name)
      values (${name(n)}, ${id(c.entity)}, 'access_token', ${c.scoped ?? true}, ${status}, ${status === 'revoked' ? new Date() : null},
              ${c.expired ? new Date(Date.now() - 1000) : null}, ${n})`;
    let position = 0;
    for (const l of c.limits ?? []) {
      await sql`insert into credential_permission_limits (credential_id, actions, scope_mode, tenant_id, object_kind, object_type, object_id, conditions, position)
        values (${id(n)}, ${l.actions}, ${l.scope}, ${id(l.tenant)}, ${l.objectKind ?? (l.object ? (w.resources[l.object] ? 'resource' : 'entity') : null)},
                ${l.objectType ?? null}, ${id(l.object)}, ${sql.json((l.conditions ?? {}) as never)}, ${position++})`;
    }
  }
  return ids;
}
